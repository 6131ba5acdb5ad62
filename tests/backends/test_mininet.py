"""The Mininet backend on real Mininet (Debian's package, as root): a link cut stops the
traffic at the network layer and heals; brokers and links come and go at run time; a crashed
orchestrator's network is removed by `weeble clean`; `weeble up/status/down` work. These tests
fail, never skip, where Mininet cannot run."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.livebed import REPO, scenario, wait_for, weeble
from weeble.broker.client import Subscriber
from weeble.orchestrator.backends.mininet import MininetBackend
from weeble.orchestrator.local import pid_alive
from weeble.orchestrator.testbed import Testbed

CHAIN = {"kind": "chain", "brokers": 3}  # b0 - b1 - b2


def mininet_bed(tmp_path: Path, **kw: Any) -> Testbed:
    s = scenario(topology=CHAIN, algorithm="identity", pi=2.0, rho=0.5, **kw)
    bed = Testbed.plan(s, runs_dir=tmp_path / "runs", any_ports=True, log_level="DEBUG",
                       backend="mininet")
    try:
        bed.up()
    except BaseException:
        bed.close()
        raise
    return bed


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Testbed]:
    testbed = mininet_bed(tmp_path)
    try:
        yield testbed
    finally:
        testbed.close()


def reachable(backend: MininetBackend, src: str, address: str, timeout: float = 1.0) -> bool:
    """Does a TCP connection from inside `src`'s host to `address` succeed?"""
    host, port = address.rsplit(":", 1)
    code = ("import socket, sys\n"
            f"try: socket.create_connection(({host!r}, {port}), timeout={timeout}).close()\n"
            "except OSError: sys.exit(1)\n")
    proc = backend.host(src).popen([sys.executable, "-c", code])
    return proc.wait(timeout + 10) == 0


async def _link(bed: Testbed, broker: str, neighbor: str) -> dict[str, Any]:
    snap = await bed.snapshot(broker)
    return next(x for x in snap["links"] if x["neighbor"] == neighbor)


def test_cut_stops_traffic_at_the_network_layer_and_heal_resumes_it(bed: Testbed) -> None:
    backend = bed.backend
    assert isinstance(backend, MininetBackend)
    b0_from_b1 = backend.peer_address("b0", "b1")  # b0's address on the b0-b1 link
    assert b0_from_b1 != bed.address("b0").listen  # a link address, not the management one
    assert reachable(backend, "b1", b0_from_b1)
    assert not reachable(backend, "b2", b0_from_b1)  # no link b2-b0: no way there

    async def go() -> None:
        # b1 refreshes its client's subscription toward b0 every rho: steady traffic b1 -> b0
        async with Subscriber(bed.address("b1").listen, "sue", rho=0.5) as sub:
            await sub.subscribe("class == 1")

            async def received() -> int:
                return int((await _link(bed, "b0", "b1"))["counters"].get("received", 0))

            start = await received()
            await wait_for(lambda: _more(received, start), 10, "refreshes reaching b0")

            await asyncio.to_thread(backend.cut_link, "b0", "b1")
            state = backend.link_state("b0", "b1")
            assert state.cut and state.mechanism == "interface"
            assert all(v.endswith(" down") for v in state.ends.values())
            assert not await asyncio.to_thread(reachable, backend, "b1", b0_from_b1)
            at_cut = await received()
            sent_at_cut = int((await _link(bed, "b1", "b0"))["counters"].get("sent", 0))
            await asyncio.sleep(3)
            # b1 went on sending (its shaper does not drop), b0 received nothing more: the
            # network stopped the traffic, not the brokers' user-space link
            b1_end = await _link(bed, "b1", "b0")
            assert int(b1_end["counters"].get("sent", 0)) > sent_at_cut
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
    assert isinstance(backend, MininetBackend)
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
    host_pid = backend.host("b3").pid

    # a new link between brokers that exist, then gone again
    backend.add_link("b0", "b2")
    assert reachable(backend, "b0", backend.peer_address("b2", "b0"))
    gone = backend.peer_address("b2", "b0")
    backend.remove_link("b0", "b2")
    assert ("b0", "b2") not in backend.links() and "b2" not in backend.config("b0").neighbors
    assert not reachable(backend, "b0", gone)

    # the leaf goes: its broker, its host (shell and namespace) and its link
    backend.remove_broker("b3")
    assert "b3" not in backend.brokers() and ("b2", "b3") not in backend.links()
    assert "b3" not in backend.config("b2").neighbors
    deadline = time.monotonic() + 5
    while Path(f"/proc/{host_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{host_pid}").exists()


_ORPHAN = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.backends.test_mininet import mininet_bed
bed = mininet_bed(Path({tmp!r}))
print("UP", bed.run_id, flush=True)
time.sleep(600)
"""


def test_weeble_clean_removes_what_a_killed_orchestrator_left(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN.format(repo=str(REPO),
                                                                  tmp=str(tmp_path))],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("UP"), line
    finally:
        proc.send_signal(signal.SIGKILL)  # no cleanup of its own: the crash case
        proc.wait()
    run_dir = next((tmp_path / "runs").iterdir())
    state = json.loads((run_dir / "testbed.json").read_text())
    tag = state["backend_state"]["tag"]
    # the dead run's brokers run on in their namespaces, its management veths are there...
    # (the host shells end with their owner: they read their commands from it)
    brokers = [i["pid"] for i in state["brokers"].values()]
    assert all(Path(f"/proc/{p}").exists() for p in brokers)
    interfaces = subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                                text=True).stdout
    assert interfaces.count(f" w{tag}m") == 3
    result = weeble("clean", "--runs-dir", str(tmp_path / "runs"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ended run" in result.stdout
    # ...and gone after `weeble clean` (the leak check looks at everything else)
    assert not any(pid_alive(p, "weeble.broker.runtime") for p in brokers), result.stdout
    interfaces = subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                                text=True).stdout
    assert f" w{tag}m" not in interfaces
    assert json.loads((run_dir / "testbed.json").read_text())["state"] == "down"


def test_weeble_up_status_down_on_mininet(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(json.dumps({
        "name": "mn-cli", "duration": 10, "backend": "mininet",
        "topology": CHAIN, "routing": {"algorithm": "identity"},
        "timing": {"pi": 2, "rho": 1, "delta_min": 0, "delta_max": 0.1},
        "live": {"metrics_port": None, "drain": 0.5}}))
    runs = str(tmp_path / "runs")
    up = weeble("up", str(path), "--runs-dir", runs, "--run-id", "m", timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "198.18." in up.stdout  # the brokers' management addresses
        status = weeble("status", "--runs-dir", runs, "m", "--json", timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        rows = json.loads(status.stdout)["brokers"]
        assert [r["alive"] for r in rows] == [True] * 3, rows
        assert all(r["address"].startswith("198.18.") for r in rows), rows
    finally:
        down = weeble("down", "--runs-dir", runs, "m", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "is down: stopped 3 broker(s)" in down.stdout
