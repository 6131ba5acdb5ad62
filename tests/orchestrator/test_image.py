"""The broker image handed to a cluster, for real against the local Docker engine: a release
tag, an archive `kind load image-archive` / `k3d image import` / `ctr images import` read (the
`docker save` format), and a push to a real registry (Debian's docker-registry, on loopback)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from weeble.cli import main
from weeble.orchestrator.backend import BackendError
from weeble.orchestrator.backends import image


@pytest.fixture
def release() -> Iterator[str]:
    """A release name of this test's own; its tags are removed after."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    yield name
    client = image._client()
    refs = {ref for img in client.images.list() for ref in img.tags if ref.endswith(f":{name}")}
    for ref in refs:
        client.images.remove(ref, noprune=True)


def test_save_writes_an_archive_naming_the_release(release: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "weeble.tar"
    assert main(["image", "save", str(out), "--release", release]) == 0
    assert f"{image.NAME}:{release}" in capsys.readouterr().out
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        (entry,) = manifest
        assert entry["RepoTags"] == [f"{image.NAME}:{release}"]
        config = json.load(tar.extractfile(entry["Config"]))  # type: ignore[arg-type]
    # what the pods need of it: the fixed non-root user, and the orchestrator's client
    assert config["config"]["Labels"]["weeble.uid"] == str(image.UID)
    content = image._client().images.get(image.broker_tag())
    assert content.id == image._client().images.get(f"{image.NAME}:{release}").id
    run = image._client().containers.run(
        image.broker_tag(), ["sh", "-c", f"getent passwd {image.UID}; {image.PYTHON} -c"
                             " 'import kubernetes, weeble.orchestrator.backends.kubernetes'"],
        user=str(image.UID), remove=True, network_mode="none")
    assert run.decode().startswith(f"weeble:x:{image.UID}:{image.UID}:")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """Debian's docker-registry on loopback (the engine trusts 127.0.0.0/8 without TLS)."""
    binary = shutil.which("docker-registry")
    assert binary, "docker-registry is missing: bash scripts/setup.sh installs it (Debian)"
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(json.dumps({
        "version": 0.1, "log": {"level": "error"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "store")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "docker-registry exited"
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_push_puts_both_tags_in_the_registry(release: str, registry: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image", "push", "--registry", registry, "--release", release]) == 0
    content = image.broker_tag().split(":")[1]
    printed = capsys.readouterr().out
    assert f"pushed {registry}/{image.NAME}:{release}" in printed
    with urllib.request.urlopen(f"http://{registry}/v2/{image.NAME}/tags/list") as r:
        assert sorted(json.load(r)["tags"]) == sorted([content, release])
    client = image._client()
    for tag in (content, release):
        client.images.remove(f"{registry}/{image.NAME}:{tag}", noprune=True)


@pytest.mark.parametrize("bad", ["latest", "-x", "a b", ""])
def test_a_bad_release_name_is_said(bad: str) -> None:
    with pytest.raises(BackendError, match="release"):
        image.release_tag(bad)


def test_a_bad_registry_is_said() -> None:
    with pytest.raises(BackendError, match="host\\[:port\\]"):
        image.push_target("http://x", "weeble-broker:1")
    assert image.push_target("localhost:5000/", "weeble-broker:1") == \
        "localhost:5000/weeble-broker:1"


def test_an_image_build_stage_says_its_time_and_beats_while_it_runs() -> None:
    # The build's stages (wheelhouse, debootstrap, docker import, ...) run for minutes on a
    # first build with nothing printed: each says its elapsed time when done, and a line
    # every heartbeat while it runs. The stage waits for its first heartbeat (no timing).
    lines: list[str] = []
    beat = threading.Event()

    def say(line: str) -> None:
        lines.append(line)
        if "so far" in line:
            beat.set()

    with image.stage(say, "debootstrap bookworm", heartbeat=0.05):
        assert beat.wait(60), "no heartbeat while the stage ran"
    assert lines[0].startswith("  debootstrap bookworm: ") and lines[0].endswith(" s so far ...")
    assert lines[-1].startswith("  debootstrap bookworm: ") and lines[-1].endswith(" s")
    assert "so far" not in lines[-1]
    done = len(lines)
    time.sleep(0.2)  # the heartbeat ended with the stage: nothing more is said
    assert len(lines) == done
    # a quick stage (a cached build's) says one line, and a failed one none: its error says
    quick: list[str] = []
    with image.stage(quick.append, "weeble wheel"):
        pass
    assert len(quick) == 1 and quick[0].startswith("  weeble wheel: ")
    failed: list[str] = []
    with pytest.raises(BackendError), image.stage(failed.append, "docker build"):
        raise BackendError("image: building failed")
    assert failed == []
