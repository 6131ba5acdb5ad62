"""The backends with a network of their own, for real: Mininet (Debian's package, as root) and
Docker (the engine and the offline-built image). On each: a link cut stops the traffic at the
network layer and a heal resumes it; brokers and links come and go at run time; what a killed
orchestrator left is removed by `weeble clean`; `weeble up/status/down` work. These tests
fail, never skip, where a backend cannot run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.orchestrator.leaks import leaked, snapshot
from tests.runtime.livebed import REPO, scenario, wait_for, weeble
from weeble.orchestrator.backend import Backend
from weeble.orchestrator.backends.docker import DockerBackend
from weeble.orchestrator.backends.mininet import MininetBackend
from weeble.orchestrator.testbed import Testbed
from weeble.runtime.client import Subscriber

CHAIN = {"kind": "chain", "brokers": 3}  # b0 - b1 - b2
KINDS = ["mininet", "docker"]
MANAGEMENT = {"mininet": "198.18.", "docker": "198.19."}  # where the orchestrator reaches them


def network_bed(tmp_path: Path, kind: str, **kw: Any) -> Testbed:
    s = scenario(topology=CHAIN, algorithm="identity", pi=2.0, rho=0.5, **kw)
    bed = Testbed.plan(s, runs_dir=tmp_path / "runs", any_ports=True, log_level="DEBUG",
                       backend=kind)
    try:
        bed.up()
    except BaseException:
        bed.close()
        raise
    return bed


@pytest.fixture(params=KINDS)
def bed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Testbed]:
    testbed = network_bed(tmp_path, request.param)
    try:
        yield testbed
    finally:
        testbed.close()


def _inside(backend: Backend, broker: str) -> list[str]:
    """The command prefix that runs a host program in `broker`'s network namespace."""
    if isinstance(backend, MininetBackend):
        return ["mnexec", "-a", str(backend.host(broker).pid)]
    assert isinstance(backend, DockerBackend)
    container = backend.container(broker)
    container.reload()
    return ["nsenter", "-t", str(container.attrs["State"]["Pid"]), "-n"]


def reachable(backend: Backend, src: str, address: str, timeout: float = 1.0) -> bool:
    """Does a TCP connection from inside `src`'s namespace to `address` succeed?"""
    host, port = address.rsplit(":", 1)
    code = ("import socket, sys\n"
            f"try: socket.create_connection(({host!r}, {port}), timeout={timeout}).close()\n"
            "except OSError: sys.exit(1)\n")
    result = subprocess.run([*_inside(backend, src), sys.executable, "-c", code],
                            capture_output=True, timeout=timeout + 30, check=False)
    return result.returncode == 0


async def _link(bed: Testbed, broker: str, neighbor: str) -> dict[str, Any]:
    snap = await bed.snapshot(broker)
    return next(x for x in snap["links"] if x["neighbor"] == neighbor)


def test_cut_stops_traffic_at_the_network_layer_and_heal_resumes_it(bed: Testbed) -> None:
    backend = bed.backend
    b0_from_b1 = backend.peer_address("b0", "b1")  # b0's address on the b0-b1 link
    assert b0_from_b1 != bed.address("b0").listen  # a link address, not the management one
    assert reachable(backend, "b1", b0_from_b1)
    assert not reachable(backend, "b2", b0_from_b1)  # no link b2-b0: no way there

    async def go() -> None:
        # b1 refreshes its client's subscription toward b0 every rho: steady traffic b1 -> b0
        async with Subscriber(bed.address("b1").listen, "sue", rho=0.5,
                              token=bed.client_token("sue")) as sub:
            await sub.subscribe("class == 1")

            async def received() -> int:
                return int((await _link(bed, "b0", "b1"))["counters"].get("received", 0))

            start = await received()
            await wait_for(lambda: _more(received, start), 10, "refreshes reaching b0")

            await asyncio.to_thread(backend.cut_link, "b0", "b1")
            state = backend.link_state("b0", "b1")
            assert state.cut and state.mechanism in ("interface", "network")
            assert all(v.endswith(" down") or v.startswith("off ") for v in state.ends.values())
            assert not await asyncio.to_thread(reachable, backend, "b1", b0_from_b1)
            at_cut = await received()
            sent_at_cut = int((await _link(bed, "b1", "b0"))["counters"].get("queued", 0))
            await asyncio.sleep(3)
            # b1 went on sending (its shaper does not drop), b0 received nothing more: the
            # network stopped the traffic, not the brokers' user-space link
            b1_end = await _link(bed, "b1", "b0")
            assert int(b1_end["counters"].get("queued", 0)) > sent_at_cut
            assert not any(k.startswith("dropped_") and v for k, v in b1_end["counters"].items())
            assert b1_end["state"] != "cut" and (await _link(bed, "b0", "b1"))["state"] != "cut"
            assert await received() == at_cut

            await asyncio.to_thread(backend.heal_link, "b0", "b1")
            assert not backend.link_state("b0", "b1").cut
            assert await asyncio.to_thread(reachable, backend, "b1", b0_from_b1)
            await wait_for(lambda: _more(received, at_cut), 30, "traffic b1 -> b0 after heal")
            await asyncio.to_thread(backend.wait_healthy, "b1", 30, links=True)

    asyncio.run(asyncio.wait_for(go(), 120))


async def _more(counter: Any, than: int) -> bool:
    return bool(await counter() > than)


def test_brokers_and_links_added_and_removed_at_run_time(bed: Testbed) -> None:
    backend = bed.backend
    # a new leaf b3 under b2: a new host, a new link, a broker that serves the orchestrator
    template = backend.config("b2")
    config = backend.add_broker(template.model_copy(update={
        "broker_id": "b3", "parent": "b2", "neighbors": {"b2": "?"}, "links": {},
        "trace_path": bed.trace_dir / "b3.jsonl"}))
    backend.wait_healthy("b3", 30)
    assert config.neighbors == {"b2": backend.peer_address("b2", "b3")}
    assert ("b2", "b3") in backend.links()
    assert backend.config("b2").neighbors["b3"] == backend.peer_address("b3", "b2")
    assert reachable(backend, "b3", backend.peer_address("b2", "b3"))
    assert reachable(backend, "b2", backend.peer_address("b3", "b2"))
    assert not reachable(backend, "b1", backend.peer_address("b3", "b2"))  # not linked
    before_removal = snapshot(str(bed.run_dir))

    # a new link between brokers that exist, then gone again
    backend.add_link("b0", "b2")
    assert reachable(backend, "b0", backend.peer_address("b2", "b0"))
    gone = backend.peer_address("b2", "b0")
    backend.remove_link("b0", "b2")
    assert ("b0", "b2") not in backend.links() and "b2" not in backend.config("b0").neighbors
    assert not reachable(backend, "b0", gone)

    # the leaf goes: its broker, its host or container, its namespace and its link
    backend.remove_broker("b3")
    assert "b3" not in backend.brokers() and ("b2", "b3") not in backend.links()
    assert "b3" not in backend.config("b2").neighbors
    after = _settled(lambda: snapshot(str(bed.run_dir)),
                     lambda s: bool(leaked(s, before_removal).get("namespaces")))
    gone = leaked(after, before_removal)  # what the snapshot before had and now lacks
    assert gone.get("namespaces") and (gone.get("containers") or gone.get("processes")), gone


def _settled(take: Any, done: Any, timeout: float = 10) -> Any:
    """`take()` once `done` holds for it (the kernel and the engine finish a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        value = take()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


_ORPHAN = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.orchestrator.test_network_backends import network_bed
bed = network_bed(Path({tmp!r}), {kind!r})
print("UP", bed.run_id, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", KINDS)
def test_weeble_clean_removes_what_a_killed_orchestrator_left(kind: str, tmp_path: Path) -> None:
    before = snapshot(str(tmp_path))
    code = _ORPHAN.format(repo=str(REPO), tmp=str(tmp_path), kind=kind)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("UP"), line
    finally:
        proc.send_signal(signal.SIGKILL)  # no cleanup of its own: the crash case
        proc.wait()
    # the dead run's brokers run on, with their namespaces, veths or containers and networks
    left = leaked(before, snapshot(str(tmp_path)))
    brokers = [p for p in left.get("processes", [])
               if "weeble.runtime" in p and "docker-init" not in p]
    assert len(brokers) == 3 and len(left.get("namespaces", [])) == 3, left
    if kind == "docker":
        assert len(left.get("containers", [])) == 3 and left.get("networks"), left
    result = weeble("clean", "--runs-dir", str(tmp_path / "runs"), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ended run" in result.stdout
    after = _settled(lambda: snapshot(str(tmp_path)), lambda s: not leaked(before, s))
    assert not leaked(before, after), result.stdout  # all of it gone
    run_dir = next((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "testbed.json").read_text())["state"] == "down"


@pytest.mark.parametrize("kind", KINDS)
def test_weeble_up_status_down(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(json.dumps({
        "name": "cli", "duration": 10, "backend": kind,
        "topology": CHAIN, "routing": {"algorithm": "identity"},
        "timing": {"pi": 2, "rho": 1, "delta_min": 0, "delta_max": 0.1},
        "live": {"metrics_port": None, "drain": 0.5}}))
    runs = str(tmp_path / "runs")
    up = weeble("up", str(path), "--runs-dir", runs, "--run-id", "m", timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert MANAGEMENT[kind] in up.stdout  # the brokers' management addresses
        status = weeble("status", "--runs-dir", runs, "m", "--json", timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        rows = json.loads(status.stdout)["brokers"]
        assert [r["alive"] for r in rows] == [True] * 3, rows
        assert all(r["address"].startswith(MANAGEMENT[kind]) for r in rows), rows
        # `weeble up` plans a peer network: `weeble reconfigure` reshapes the tree from other
        # processes (the exchange's new link b0-b2 over it; a new leaf: a container, or on
        # Mininet a host made from the run's state, not by the process that built the network)
        moved = weeble("reconfigure", "exchange", "b1-b2", "b0-b2", "--runs-dir", runs,
                       "--run", "m", timeout=90)
        assert moved.returncode == 0 and "done" in moved.stdout, moved.stdout + moved.stderr
        added = weeble("reconfigure", "add-leaf", "b3", "b0", "--runs-dir", runs, "--run", "m",
                       timeout=90)
        assert added.returncode == 0 and "done" in added.stdout, added.stdout + added.stderr
        bed = Testbed.attach("m", runs_dir=runs)
        assert bed.backend.alive("b3")
        address = bed.addresses()["b3"].admin
        assert address.startswith(MANAGEMENT[kind]), address  # its own host or container
        snaps = asyncio.run(bed.snapshots())  # linked to b0 over the peer network
        assert snaps["b3"]["core"]["neighbors"] == ["b0"], snaps["b3"]["core"]
        deadline = time.monotonic() + 30
        while not _up(bed, "b3", "b0"):  # the link's session, over the peer network
            assert time.monotonic() < deadline, asyncio.run(bed.snapshot("b3"))["links"]
            time.sleep(0.2)
        removed = weeble("reconfigure", "remove-leaf", "b3", "--runs-dir", runs, "--run", "m",
                         timeout=90)
        assert removed.returncode == 0 and "done" in removed.stdout, \
            removed.stdout + removed.stderr
    finally:
        down = weeble("down", "--runs-dir", runs, "m", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "is down: stopped 3 broker(s)" in down.stdout


def _up(bed: Testbed, broker: str, neighbor: str) -> bool:
    snap = asyncio.run(bed.snapshot(broker))
    return any(x["neighbor"] == neighbor and x["state"] == "up" for x in snap["links"])


def test_a_runs_containers_go_before_its_networks(tmp_path: Path) -> None:
    """What tears a run down (`_remove_run`: a backend's teardown, `weeble clean`, the next
    Docker run) removes its containers first and its networks only once the engine lists none
    of them, so that no network removal overlaps a container's leaving it (what can deadlock
    Docker 20.10's network controller, backends/docker.py). A network a container is still on
    is not removed and raises nothing (`_remove_network` tries again for a while: a CI run once
    left a management network behind, the engine still counting an endpoint of a container
    just removed)."""
    from weeble.orchestrator.backends.docker import (
        LABEL,
        _remove_network,
        _remove_run,
        docker_client,
    )
    from weeble.orchestrator.backends.image import ensure_image

    client = docker_client()
    tag = f"t{time.monotonic_ns() % 0xffff:04x}"
    label = {"label": f"{LABEL}={tag}"}
    net = client.networks.create(f"weeble-{tag}-leftover", driver="bridge", internal=True,
                                 labels={LABEL: tag, "weeble.workdir": str(tmp_path)})
    box = None
    try:
        box = client.containers.run(ensure_image(), ["sleep", "60"], detach=True,
                                    network=net.name,
                                    labels={LABEL: tag, "weeble.workdir": str(tmp_path)})
        with pytest.raises(Exception, match="active endpoints"):
            net.remove()
        assert not _remove_network(net, timeout=0.5)  # its container is on it: it stays
        removed = _remove_run(client, tag)
        assert removed == [f"container {box.name}", f"network {net.name}"]
        assert not client.containers.list(all=True, filters=label)
        assert not client.networks.list(filters=label)
    finally:
        if box is not None:
            with contextlib.suppress(Exception):
                box.remove(force=True)
        with contextlib.suppress(Exception):
            net.remove()
