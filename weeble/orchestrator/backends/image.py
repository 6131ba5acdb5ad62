"""The broker image of the Docker backend, built offline from parts this machine can make.

Two images, each cached by what goes into it, so a code change rebuilds seconds, not minutes:

    weeble-base:<hash of the suite and the pinned runtime wheels>
        a Debian rootfs from `debootstrap --variant=minbase` (python3 and venv only), with a
        venv at /opt/weeble holding the broker's runtime libraries, installed from a local
        wheelhouse (pip --no-index); `docker import`ed: no registry is involved anywhere.
    weeble-broker:<hash of the weeble package's files>
        FROM weeble-base, the weeble wheel installed from the same wheelhouse, checked by
        importing the broker's entry point; with the Kubernetes client (`ORCHESTRATOR`), so
        the same image runs the in-cluster orchestrator (`weeble run --backend k8s`), and a
        user of fixed non-root UID `UID` (the pods run as it; the Docker backend's containers
        keep root, since they write into the run directory of the host user).

The content tag names exactly what is in the image; `build(release=...)` also tags it with a
release name (the k8s/ overlays name `weeble-broker:<VERSION>` through kustomize's `images:`),
`push` copies it to a registry, `save` writes an archive for `kind load image-archive`,
`k3d image import` or `ctr images import`.

The wheelhouse is filled on the host with `pip download`/`pip wheel` from the package index
the host reaches (the same pins as the venv runs), so the container runs the same library
versions as a local broker. Only the broker's runtime libraries go in: not the analytics
(PySpark, pandas), which run in the orchestrator.

    weeble image build [--release NAME]     # build if missing; print the tags
    weeble image push --registry R [--release NAME]
    weeble image save FILE [--release NAME]
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from weeble.orchestrator.backend import BackendError

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VENV = "/opt/weeble"
PYTHON = f"{VENV}/bin/python"
# What `python -m weeble.runtime` imports (checked in the image at build time).
RUNTIME = ("grpcio", "grpcio-health-checking", "grpcio-reflection", "protobuf", "pydantic",
           "pyyaml", "orjson", "tenacity", "prometheus-client", "cryptography", "rich",
           "mmh3", "numpy")  # the core's Bloom filters (sketch) and the optimizer (optimize)
# What the in-cluster orchestrator adds to it (the broker's own libraries are in the base).
ORCHESTRATOR = ("kubernetes",)
NAME = "weeble-broker"
UID = 10001  # the image's user `weeble` (and its group): a pod's runAsUser
REPO = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("WEEBLE_CACHE", Path.home() / ".cache" / "weeble"))


def _pins(names: tuple[str, ...] = RUNTIME) -> list[str]:
    """These libraries at the versions this Python runs."""
    try:
        return [f"{name}=={metadata.version(name)}" for name in names]
    except metadata.PackageNotFoundError as e:
        raise BackendError(f"image: {e.name} is not installed here (bash scripts/setup.sh)"
                           ) from None


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def _source_files() -> list[Path]:
    # what the wheel holds: not the compiled build's extensions and stamp (scripts/compile.py),
    # which pip leaves out and which would change the tag at every rebuild
    root = REPO / "weeble"
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix != ".so" and not p.name.startswith("_compiled.json"))


def base_tag() -> str:
    return "weeble-base:" + _digest(SUITE.encode(), MIRROR.encode(),
                                    "\n".join(_pins()).encode())


def broker_tag() -> str:
    """The content tag: the base, the orchestrator's pins, the package's files."""
    parts = [base_tag().encode(), "\n".join(_pins(ORCHESTRATOR)).encode(),
             str(UID).encode(), (REPO / "pyproject.toml").read_bytes()]
    parts += [str(p.relative_to(REPO)).encode() + p.read_bytes() for p in _source_files()]
    return "weeble-broker:" + _digest(*parts)


# A stage that runs longer than this says it is still at work, every HEARTBEAT_S (debootstrap
# and the wheelhouse can take minutes on a first build, with nothing else printed).
HEARTBEAT_S = 20.0


@contextmanager
def stage(say: Callable[[str], None], what: str, heartbeat: float = HEARTBEAT_S
          ) -> Iterator[None]:
    """One line when the stage is done, with its elapsed time; while it runs, a line every
    `heartbeat` seconds (from a thread: the stage itself blocks in a subprocess or the Docker
    engine). Nothing else, so a cached build stays quiet."""
    t0 = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(heartbeat):
            say(f"  {what}: {time.monotonic() - t0:.0f} s so far ...")

    thread = threading.Thread(target=beat, name=f"heartbeat: {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    say(f"  {what}: {time.monotonic() - t0:.0f} s")


def _run(cmd: list[str], what: str, **kw: Any) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if result.returncode != 0:
        raise BackendError(f"image: {what} failed ({' '.join(cmd[:3])} ...):\n"
                           f"{(result.stdout + result.stderr)[-2000:]}")


def _wheelhouse(pins: list[str] | None = None, name: str = "wheelhouse") -> Path:
    """These wheels (default: the runtime's) at the pinned versions, with what they need
    (downloaded once, kept in the cache folder `name`)."""
    house = CACHE / name
    house.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d",
          str(house), *(pins or _pins())], "pip download of the image's wheels")
    return house


def _project_wheel(dest: Path) -> Path:
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(dest), str(REPO)], "pip wheel of weeble")
    (wheel,) = dest.glob("weeble-*.whl")
    return wheel


def _client() -> Any:
    try:
        import docker
    except ImportError as e:
        raise BackendError(f"docker backend: the docker SDK is missing ({e})") from None
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as e:
        raise BackendError(f"docker backend: no Docker engine answers ({e}); start dockerd"
                           " (scripts/setup.sh starts it as root)") from None
    return client


def _has(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_base(client: Any, tag: str, log: Callable[[str], None]) -> None:
    if os.geteuid() != 0:
        raise BackendError("image: debootstrap needs root")
    t0 = time.monotonic()
    with stage(log, "wheelhouse (pip download of the runtime's wheels)"):
        house = _wheelhouse()
    with tempfile.TemporaryDirectory(prefix="weeble-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        with stage(log, f"debootstrap {SUITE}"):
            _run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv",
                  SUITE, str(rootfs), MIRROR], "debootstrap")
        with stage(log, "venv and runtime wheels in the rootfs"):
            inside = rootfs / "tmp" / "wheelhouse"
            _run(["cp", "-r", str(house), str(inside)], "copying the wheelhouse")
            _run(["chroot", str(rootfs), "python3", "-m", "venv", VENV], "venv in the rootfs")
            _run(["chroot", str(rootfs), f"{VENV}/bin/pip", "install", "-q", "--no-index",
                  "--find-links", "/tmp/wheelhouse", *_pins()], "pip install in the rootfs")
            _run(["rm", "-rf", str(inside), str(rootfs / "var" / "cache" / "apt" / "archives")],
                 "trimming the rootfs")
        archive = Path(tmp) / "rootfs.tar"
        with stage(log, "docker import of the rootfs"):
            _run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], "tar of the rootfs")
            repo, version = tag.split(":")
            client.api.import_image_from_file(
                str(archive), repository=repo, tag=version,
                changes=[f'ENV PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin',
                         'ENV PYTHONUNBUFFERED=1'])
    log(f"  base image {tag}: {time.monotonic() - t0:.0f} s in all")


def build_broker(client: Any, base: str, tag: str,
                 log: Callable[[str], None] = lambda _msg: None) -> None:
    extra = _pins(ORCHESTRATOR)
    # a folder of its own: the build context (and a layer of the image) holds only these
    with stage(log, "wheelhouse (the orchestrator's wheels)"):
        house = _wheelhouse(extra, "wheelhouse-orchestrator")
    with tempfile.TemporaryDirectory(prefix="weeble-image-") as tmp:
        with stage(log, "weeble wheel"):
            wheel = _project_wheel(Path(tmp))
        dockerfile = (f"FROM {base}\n"
                      f"COPY {wheel.name} /tmp/\n"
                      "COPY wheelhouse /tmp/wheelhouse\n"
                      f"RUN {VENV}/bin/pip install -q --no-index --no-deps /tmp/{wheel.name}"
                      f" && {VENV}/bin/pip install -q --no-index --find-links /tmp/wheelhouse"
                      f" {' '.join(extra)}"
                      f" && rm -rf /tmp/{wheel.name} /tmp/wheelhouse"
                      # the pods' user: fixed ids, so runAsUser/fsGroup can name them
                      f" && echo 'weeble:x:{UID}:{UID}:weeble:/var/lib/weeble:/usr/sbin/nologin'"
                      " >> /etc/passwd"
                      f" && echo 'weeble:x:{UID}:' >> /etc/group"
                      f" && mkdir -p /var/lib/weeble/traces"
                      f" && chown -R {UID}:{UID} /var/lib/weeble"
                      f" && {PYTHON} -c 'import weeble.runtime.__main__, kubernetes'"
                      f" && {PYTHON} -m weeble.orchestrator.backends.podinit --check\n"
                      # a read-only root file system: no bytecode written at run time
                      "ENV PYTHONDONTWRITEBYTECODE=1\n"
                      f'LABEL weeble.image="broker" weeble.uid="{UID}"\n')
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            data = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            tar.add(wheel, arcname=wheel.name)
            tar.add(house, arcname="wheelhouse")
        context.seek(0)
        try:
            with stage(log, f"docker build {tag}"):
                client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                    forcerm=True, network_mode="none")
        except Exception as e:
            raise BackendError(f"image: building {tag} failed: {e}") from None


def ensure_image(log: Callable[[str], None] | None = None) -> str:
    """The broker image's tag, built (base and all) if this engine lacks it."""
    say = log or (lambda _msg: None)
    client = _client()
    base, tag = base_tag(), broker_tag()
    if _has(client, tag):
        return tag
    t0 = time.monotonic()
    if not _has(client, base):
        say(f"building {base} (debootstrap, once per set of runtime libraries)")
        build_base(client, base, say)
    say(f"building {tag} (the weeble package on {base})")
    build_broker(client, base, tag, say)
    say(f"built {tag} in {time.monotonic() - t0:.0f} s")
    return tag


_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_REGISTRY = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*")


def release_tag(release: str) -> str:
    """`weeble-broker:<release>`; a bad name is said."""
    if not _TAG.fullmatch(release) or release == "latest":
        raise BackendError(f"image: release {release!r}: a tag is letters, digits, '_', '.',"
                           " '-' (at most 128, not starting with '.' or '-'), and not"
                           " 'latest' (a manifest names what it runs)")
    return f"{NAME}:{release}"


def build(release: str | None = None, log: Any = None) -> list[str]:
    """Build the image if this engine lacks it; its tags: the content tag, and the release's
    when one is given."""
    tags = [ensure_image(log)]
    if release is not None:
        target = release_tag(release)
        _client().images.get(tags[0]).tag(NAME, release.split(":")[-1])
        tags.append(target)
    return tags


def push_target(registry: str, tag: str) -> str:
    """Where `push` puts `tag` in `registry` (host[:port][/path])."""
    registry = registry.rstrip("/")
    if not _REGISTRY.fullmatch(registry):
        raise BackendError(f"image: registry {registry!r}: host[:port][/path] expected"
                           " (e.g. localhost:5000 or ghcr.io/me)")
    return f"{registry}/{tag}"


def push(registry: str, release: str | None = None, log: Any = None) -> list[str]:
    """Build if need be, tag each of the image's tags under `registry`, push them; the pushed
    references."""
    client = _client()
    pushed = []
    for tag in build(release, log):
        target = push_target(registry, tag)
        repo, version = target.rsplit(":", 1)
        client.images.get(tag).tag(repo, version)
        errors = [line.get("error") or line.get("errorDetail", {}).get("message")
                  for line in client.images.push(repo, version, stream=True, decode=True)
                  if "error" in line or "errorDetail" in line]
        if errors:
            raise BackendError(f"image: push of {target} failed: {errors[-1]}")
        pushed.append(target)
    return pushed


def save(path: Path | str, release: str | None = None, log: Any = None) -> str:
    """Build if need be and write the image as a `docker save` archive (what `kind load
    image-archive`, `k3d image import` and `ctr images import` read) naming the release tag
    if given, else the content tag; the tag it names."""
    tags = build(release, log)
    named = tags[-1]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    try:
        with tmp.open("wb") as out:
            for chunk in _client().images.get(named).save(named=named):
                out.write(chunk)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return named


def main() -> int:
    """`python -m weeble.orchestrator.backends.image`: `weeble image build`."""
    t0 = time.monotonic()
    try:
        tags = build(log=lambda m: print(m, file=sys.stderr))
    except BackendError as e:
        print(f"weeble image: {e}", file=sys.stderr)
        return 1
    print(f"{tags[0]} ready in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
