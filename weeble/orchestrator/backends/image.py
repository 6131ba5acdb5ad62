"""The broker image of the Docker backend, built offline from parts this machine can make.

Two images, each cached by what goes into it, so a code change rebuilds seconds, not minutes:

    weeble-base:<hash of the suite and the pinned runtime wheels>
        a Debian rootfs from `debootstrap --variant=minbase` (python3 and venv only), with a
        venv at /opt/weeble holding the broker's runtime libraries, installed from a local
        wheelhouse (pip --no-index); `docker import`ed: no registry is involved anywhere.
    weeble-broker:<hash of the weeble package's files>
        FROM weeble-base, the weeble wheel installed from the same wheelhouse, checked by
        importing the broker's entry point.

The wheelhouse is filled on the host with `pip download`/`pip wheel` from the package index
the host reaches (the same pins as the venv runs), so the container runs the same library
versions as a local broker. Only the broker's runtime libraries go in: not the analytics
(PySpark, pandas), which run in the orchestrator.

    python -m weeble.orchestrator.backends.image       # build if missing; print tag and time
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
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
REPO = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("WEEBLE_CACHE", Path.home() / ".cache" / "weeble"))


def _pins() -> list[str]:
    """The runtime libraries at the versions this Python runs."""
    return [f"{name}=={metadata.version(name)}" for name in RUNTIME]


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
    parts = [base_tag().encode(), (REPO / "pyproject.toml").read_bytes()]
    parts += [str(p.relative_to(REPO)).encode() + p.read_bytes() for p in _source_files()]
    return "weeble-broker:" + _digest(*parts)


def _run(cmd: list[str], what: str, **kw: Any) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if result.returncode != 0:
        raise BackendError(f"image: {what} failed ({' '.join(cmd[:3])} ...):\n"
                           f"{(result.stdout + result.stderr)[-2000:]}")


def _wheelhouse() -> Path:
    """The runtime wheels at the pinned versions (downloaded once, kept in the cache)."""
    house = CACHE / "wheelhouse"
    house.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d",
          str(house), *_pins()], "pip download of the runtime wheels")
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


def build_base(client: Any, tag: str, log: Any) -> None:
    if os.geteuid() != 0:
        raise BackendError("image: debootstrap needs root")
    house = _wheelhouse()
    with tempfile.TemporaryDirectory(prefix="weeble-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        t0 = time.monotonic()
        _run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv",
              SUITE, str(rootfs), MIRROR], "debootstrap")
        log(f"  debootstrap {SUITE}: {time.monotonic() - t0:.0f} s")
        inside = rootfs / "tmp" / "wheelhouse"
        _run(["cp", "-r", str(house), str(inside)], "copying the wheelhouse")
        _run(["chroot", str(rootfs), "python3", "-m", "venv", VENV], "venv in the rootfs")
        _run(["chroot", str(rootfs), f"{VENV}/bin/pip", "install", "-q", "--no-index",
              "--find-links", "/tmp/wheelhouse", *_pins()], "pip install in the rootfs")
        _run(["rm", "-rf", str(inside), str(rootfs / "var" / "cache" / "apt" / "archives")],
             "trimming the rootfs")
        archive = Path(tmp) / "rootfs.tar"
        _run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], "tar of the rootfs")
        repo, version = tag.split(":")
        client.api.import_image_from_file(
            str(archive), repository=repo, tag=version,
            changes=[f'ENV PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin',
                     'ENV PYTHONUNBUFFERED=1'])
        log(f"  base image {tag}: {time.monotonic() - t0:.0f} s in all")


def build_broker(client: Any, base: str, tag: str) -> None:
    with tempfile.TemporaryDirectory(prefix="weeble-image-") as tmp:
        wheel = _project_wheel(Path(tmp))
        dockerfile = (f"FROM {base}\n"
                      f"COPY {wheel.name} /tmp/\n"
                      f"RUN {VENV}/bin/pip install -q --no-index --no-deps /tmp/{wheel.name}"
                      f" && rm /tmp/{wheel.name}"
                      f" && {PYTHON} -c 'import weeble.runtime.__main__'\n"
                      f'LABEL weeble.image="broker"\n')
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            data = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            tar.add(wheel, arcname=wheel.name)
        context.seek(0)
        try:
            client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                forcerm=True, network_mode="none")
        except Exception as e:
            raise BackendError(f"image: building {tag} failed: {e}") from None


def ensure_image(log: Any = None) -> str:
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
    build_broker(client, base, tag)
    say(f"built {tag} in {time.monotonic() - t0:.0f} s")
    return tag


def main() -> int:
    t0 = time.monotonic()
    try:
        tag = ensure_image(log=lambda m: print(m, file=sys.stderr))
    except BackendError as e:
        print(f"weeble image: {e}", file=sys.stderr)
        return 1
    print(f"{tag} ready in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
