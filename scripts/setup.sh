#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: a virtualenv in .venv with weeble and its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Progress: each step that does work says its name and elapsed time when done, and a line every
# SETUP_HEARTBEAT seconds while it runs (pip, mypyc and the image take minutes the first time);
# steps with nothing to do say nothing.  step NAME COMMAND...
SETUP_HEARTBEAT=${SETUP_HEARTBEAT:-20}
setup_t0=$SECONDS
step() {
    local name=$1 t0=$SECONDS rc=0 beat
    shift
    ( while sleep "$SETUP_HEARTBEAT"; do
          echo "setup: $name: $((SECONDS - t0)) s so far ..."
      done ) &
    beat=$!
    "$@" || rc=$?
    kill "$beat" 2>/dev/null || true
    wait "$beat" 2>/dev/null || true
    if [ "$rc" = 0 ]; then
        echo "setup: $name: $((SECONDS - t0)) s"
    else
        echo "setup: $name failed after $((SECONDS - t0)) s (exit $rc)" >&2
    fi
    return "$rc"
}
apt_install() {  # apt_install PACKAGE...: quietly, as root (the callers check)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# The analytics run on PySpark, which needs Java 17 or newer.
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "apt: openjdk-17-jre-headless" apt_install openjdk-17-jre-headless
    else
        echo "setup: Java 17+ not found; install it (e.g. apt-get install openjdk-17-jre-headless)" >&2
    fi
fi
if [ ! -x .venv/bin/python ]; then
    step "venv (.venv)" "$PY" -m venv .venv
fi
stamp=.venv/.weeble-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    step "pip upgrade" .venv/bin/python -m pip install -q --upgrade pip
    step "packages (pip install -e .[test])" .venv/bin/python -m pip install -q -e '.[test]'
    touch "$stamp"
fi
# The simulator's hot path compiled with mypyc from the same source (scripts/compile.py: about
# 1.5x faster on seed000, the same runs event for event): the default. WEEBLE_COMPILE=0 opts out
# (pure Python: any build here is removed). A build that is current is kept; one whose sources
# changed (or whose MODULES did) is rebuilt. Without a C compiler and the Python headers (as
# root with apt they are installed) or if mypyc fails, set-up goes on, says so, and the pure
# Python modules run: they are the fallback and give the same results, slower.
if [ "${WEEBLE_COMPILE:-1}" = 0 ]; then
    .venv/bin/python scripts/compile.py --clean >/dev/null
    echo "setup: WEEBLE_COMPILE=0: the simulator runs pure Python (no compiled build)"
else
    pyinc=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    pyver=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    missing=""
    command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 || missing="gcc"
    [ -f "$pyinc/Python.h" ] || missing="$missing python$pyver-dev"
    if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        # shellcheck disable=SC2086  # a list of package names
        step "apt:$missing" apt_install $missing \
            || echo "setup: could not install $missing (the C build of the simulator needs it)" >&2
    fi
    # In the background while the rest of set-up runs (the system packages, dockerd, the broker
    # image, which holds no compiled module): mypyc and gcc keep one core busy for minutes, the
    # image build mostly waits on pip and Docker; together they take about as long as the
    # compile alone. Waited for below, before set-up says which build the tests get.
    ( if ! step "compile (mypyc, if the sources changed)" \
            .venv/bin/python scripts/compile.py --if-needed; then
        # what is left of an older build is not current: removed, so nothing warns about it
        .venv/bin/python scripts/compile.py --clean >/dev/null
        echo "setup: compiling the simulator failed (above); it runs pure Python, the same" \
             "results ~1.5x slower. Retry: python scripts/compile.py; opt out: WEEBLE_COMPILE=0" >&2
      fi ) &
    compiling=$!
    # a step failing below ends set-up: not before the build, which would go on writing here
    trap 'wait "$compiling" 2>/dev/null || true' EXIT
fi
# System packages the live tests use: a real Prometheus server scrapes the brokers
# (tests/runtime/test_prometheus.py). Only root with apt can install it; anyone else gets a hint,
# and that test fails (it is never skipped) until `prometheus` is on PATH.
if ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "apt: prometheus" apt_install prometheus
    else
        echo "setup: 'prometheus' is not on PATH; install it (Debian: apt-get install prometheus)" >&2
    fi
fi
# The Kubernetes tests render k8s/ with `kubectl kustomize` (no cluster is needed). A machine
# without kubectl gets Debian's kubernetes-client; the tests fail, never skip, without it.
if ! command -v kubectl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "apt: kubernetes-client" apt_install kubernetes-client
    else
        echo "setup: 'kubectl' is not on PATH; install it (Debian: apt-get install kubernetes-client)" >&2
    fi
fi
# report.html is checked in a real browser (tests/analytics/test_html_report.py renders it in
# headless Chromium and takes a screenshot): Debian's chromium. The test fails, never skips,
# without it.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "apt: chromium" apt_install chromium
    else
        echo "setup: 'chromium' is not on PATH; install it (Debian: apt-get install chromium)" >&2
    fi
fi
# The Mininet backend: Debian's mininet (mnexec, and its Python API for the system Python).
# Only its `mininet` package is made importable in .venv (a .pth naming a folder that holds
# just a link to it), so nothing else of the system's dist-packages shadows the venv's.
if ! command -v mnexec >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "apt: mininet" apt_install mininet
    else
        echo "setup: Mininet not found; install it (Debian: apt-get install mininet)" >&2
    fi
fi
if [ -d /usr/lib/python3/dist-packages/mininet ]; then
    mkdir -p .venv/debian-mininet
    ln -sfn /usr/lib/python3/dist-packages/mininet .venv/debian-mininet/mininet
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$PWD/.venv/debian-mininet" > "$site/debian-mininet.pth"
fi
# The Docker backend: Debian's docker.io (dockerd) and debootstrap (the broker image is built
# offline from a Debian rootfs). No init system starts dockerd here, so this does, once, with
# its log in /var/log/weeble-dockerd.log; then the broker image is built if missing (minutes
# the first time, cached after: python -m weeble.orchestrator.backends.image).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # docker-registry: `weeble image push` is tested against a real registry on loopback
    if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
            || ! command -v docker-registry >/dev/null 2>&1; then
        step "apt: docker.io debootstrap docker-registry" \
            apt_install docker.io debootstrap docker-registry
    fi
    if ! docker info >/dev/null 2>&1; then
        nohup dockerd >/var/log/weeble-dockerd.log 2>&1 &
        for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    fi
    # its own lines: a stage each (wheelhouse, debootstrap, docker import, ...) with a heartbeat
    .venv/bin/python -m weeble.orchestrator.backends.image
elif ! docker info >/dev/null 2>&1; then
    echo "setup: no Docker engine answers; the docker backend needs dockerd (as root:" \
         "apt-get install docker.io debootstrap; dockerd &)" >&2
fi
if [ -n "${compiling:-}" ]; then
    wait "$compiling"
fi
.venv/bin/python scripts/compile.py --status
echo "setup: done in $((SECONDS - setup_t0)) s"
