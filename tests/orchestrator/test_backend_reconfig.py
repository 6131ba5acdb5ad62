"""Live reconfiguration on the backends with a network of their own, for real (issue 10):
Mininet hosts and Docker containers whose tree is reshaped under a steady publish load.

A run that reconfigures gets a peer network beside its links (peernet.py): the brokers dial
the exchange's new link a and its out-of-band channels from their address books over it.
Here, on each backend: a coordinated link exchange (FIFO), a leaf add (a new host or container,
and a subscriber there that gets what it should) and a leaf removal (its host or container
goes once it has left the tree), judged by the one checker (weeble/check): 0 lost, 0
duplicated, 0 FIFO violations. A planned link the exchange removed is taken out of the network
(its veth or Docker network), the new one rides the peer network and is cut in user space.
These tests fail, never skip, where a backend cannot run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.livebed import scenario, under_load
from weeble.check.history import check_run
from weeble.core.reconfig.plan import AddLeaf, ExchangeLink, RemoveLeaf
from weeble.orchestrator.testbed import Testbed
from weeble.orchestrator.workload import LiveWorkload
from weeble.trace.reader import read_trace

KINDS = ["mininet", "docker"]


def _scenario(tls: bool = False) -> Any:
    # the local test's scenario (tests/runtime/test_live_reconfig.py): a 7-broker binary tree,
    # identity routing, stable subscriptions, 40 notifications/s; π = 6 s, so the late
    # refreshes of the workload's clients (the test's process, starved on a loaded machine)
    # do not let their leases expire and deliveries go missing
    return scenario(
        duration=10, pi=6.0, rho=1.0, delta_max=0.05,
        timing={"pi": 6.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.05, "d": 6},
        workload={"filter_classes": 3, "subscriptions": 8, "mean_lifetime": 1000,
                  "publish_rate": 40},
        reconfigurations={"ordering": "fifo"}, live={"startup_timeout": 60, "tls": tls})


# Mininet's run speaks TLS (live.tls): the new leaf gets a certificate from the run's CA that
# names it and the addresses its host was given
@pytest.mark.parametrize(("kind", "tls"), [("mininet", True), ("docker", False)])
def test_exchange_and_leaf_add_and_remove_under_load_lose_nothing(kind: str, tls: bool,
                                                                  tmp_path: Path) -> None:
    s = _scenario(tls)
    # the operations come from the test, not the scenario: ask for a reconfigurable run
    bed = Testbed.plan(s, runs_dir=tmp_path / "runs", any_ports=True, log_level="DEBUG",
                       backend=kind, reconfigurable=True)
    try:
        bed.up()
        assert bed.reconfigures
        backend = bed.backend
        planned = set(backend.links())

        async def steps(manager: Any, workload: LiveWorkload) -> list[Any]:
            await asyncio.sleep(2.0)  # subscriptions in place, traffic flowing
            # b3's subtree moves from b1 to b2: cycle b2 b0 b1 b3, out-of-band b2 -> b1
            done = [await manager.reconfigure(ExchangeLink(remove=("b1", "b3"),
                                                           add=("b2", "b3")))]
            done.append(await manager.reconfigure(AddLeaf("b7", "b5")))
            await workload.subscribe("zed", "b7", "class == 1")
            await asyncio.sleep(1.5)
            done.append(await manager.reconfigure(RemoveLeaf("b6")))
            return [done, await bed.snapshots()]

        (records, snaps), stats = asyncio.run(under_load(bed, s, steps))
        assert [r.outcome for r in records] == ["done"] * 3, [(r.rid, r.why) for r in records]
        assert stats.errors == 0, stats.last_error
        neighbors = {b: set(snap["core"]["neighbors"]) for b, snap in snaps.items()}
        assert neighbors["b3"] == {"b2"} and neighbors["b7"] == {"b5"}, neighbors
        assert "b6" not in neighbors and "b6" not in neighbors["b2"]
        # the network follows: b1-b3 (a planned link) is gone from it, b2-b3 and b5-b7 ride
        # the peer network (cut in user space), b2-b6 went with b6's host or container
        links = set(backend.links())
        assert ("b1", "b3") in planned and ("b1", "b3") not in links
        assert {("b2", "b3"), ("b5", "b7")} <= links and ("b2", "b6") not in links
        assert backend.link_state("b2", "b3").mechanism == "user-space"
        assert backend.link_state("b0", "b1").mechanism != "user-space"  # planned: the network
        assert backend.alive("b7") and "b6" not in backend.brokers()
        if tls:  # its own certificate, for its links and ports
            b7 = bed.configs["b7"]
            assert b7.link_tls is not None and b7.link_tls.cert.name == "broker-b7.crt"
        bed.down()
        report = check_run(bed.run_dir)
        d = report["deliveries"]
        assert d["expected"] > 100, d  # the load was there (fewer on a loaded machine)
        assert (d["missing"], d["duplicate"], d["spurious"], d["fifo"]) == (0, 0, 0, 0), d
        ops = report["operations"]
        assert [o["outcome"] for o in ops] == ["done"] * 3
        for o in ops:
            assert (o["lost"], o["duplicated"], o["reordered"]) == (0, 0, 0), o
        assert ops[0]["coordination"]["lock"] >= 4 and ops[0]["coordination"]["begin"] == 2
        deliveries = [r for r in read_trace(bed.trace_dir / "zed.jsonl")
                      if r["kind"] == "client_deliver"]
        assert len(deliveries) > 10  # the new leaf, in its own host or container, is linked
        opened = {r["peer"] for r in read_trace(bed.trace_dir / "b2.jsonl")
                  if r["kind"] == "link_open"}
        assert opened >= {"b3", "b1"}  # a, and the out-of-band channel, over the peer network
    finally:
        bed.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_optimizer_reshapes_a_tree_of_hosts_or_containers(kind: str,
                                                              tmp_path: Path) -> None:
    # a chain of 6 whose links are dear (c = 10), every other pair cheap: the brokers decide
    # exchanges themselves and link non-neighbours over the peer network
    n = 6
    chain = [(f"b{i}", f"b{i + 1}") for i in range(n - 1)]
    s = scenario(
        topology={"kind": "chain", "brokers": n}, algorithm="simple", duration=8,
        # π = 6 s: the workload's clients refresh from the test's process, late on a loaded
        # machine; a lease that expired for it would cost deliveries
        timing={"pi": 6.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.05, "d": n - 1},
        workload={"filter_classes": 3, "subscriptions": 8, "mean_lifetime": 1000,
                  "publish_rate": 30, "subscriber_placement": "all",
                  "publisher_placement": "all"},
        optimizer={"heuristic": "ci", "broadcast_interval": 0.5, "start": 1.0,
                   "cache_size": 256, "cost_every": 1.0,
                   "link_costs": {"model": "uniform", "max": 1.0,
                                  "links": [[a, b, 10.0] for a, b in chain]},
                   "processing_costs": {"model": "constant", "max": 1.0}},
        live={"startup_timeout": 60})
    bed = Testbed.plan(s, runs_dir=tmp_path / "runs", any_ports=True, log_level="DEBUG",
                       backend=kind)
    try:
        bed.up()

        async def run() -> Any:
            addresses = {b: a.listen for b, a in bed.addresses().items()}
            workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token)
            stats = await workload.run(s.duration)
            for _ in range(100):  # a quiet look: two collects that agree, no lock
                first, second = await bed.snapshots(), await bed.snapshots()
                views = [{tuple(sorted((b, x))) for b, snap in snaps.items()
                          for x in snap["core"]["neighbors"]} for snaps in (first, second)]
                if views[0] == views[1] and not any(
                        snap["core"]["exchange"]["locked"] for snap in second.values()):
                    return stats, views[1]
                await asyncio.sleep(0.1)
            raise AssertionError("no quiet look at the tree")

        stats, tree = asyncio.run(run())
        assert stats.errors == 0, stats.last_error
        bed.down()
    finally:
        bed.close()
    decided = [r for b in (f"b{i}" for i in range(n))
               for r in read_trace(bed.trace_dir / f"{b}.jsonl")
               if r["kind"] == "optimize" and r["phase"] == "decide"]
    assert decided
    assert len(tree) == n - 1 and tree != {tuple(sorted(e)) for e in chain}
    nodes, todo = {"b0"}, ["b0"]
    while todo:  # spanning: every broker reached from the root
        x = todo.pop()
        for e in tree:
            if x in e and (y := e[0] if e[1] == x else e[1]) not in nodes:
                nodes.add(y)
                todo.append(y)
    assert nodes == {f"b{i}" for i in range(n)}, tree
    d = check_run(bed.run_dir)["deliveries"]
    assert d["expected"] > 100, d
    assert (d["missing"], d["duplicate"], d["spurious"], d["fifo"]) == (0, 0, 0, 0), d
