"""A broker that crashes after a live link exchange rejoins the tree as it is now (issue 28's
finding, live; the simulator's is tests/chaos/data/shrunk/crash-after-exchange-seed444.yaml).

Real broker processes on the local backend under a steady load: the exchange b0-b2 for b1-b2
(b2's parent moves from b0 to b1), then b1 crashes and restarts (its neighbour set changed),
then b2 (its parent changed). Each comes back with its neighbours and parent in the tree the
exchange made, from the backend's configs (Testbed.tree_changed), and the one checker
(weeble/check) passes the run: every delivery it expects arrives once the episode is over."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.runtime.livebed import scenario, start, under_load, wait_for
from weeble.chaos.runner import ChaosRunner
from weeble.check.history import check_run
from weeble.core.reconfig.plan import ExchangeLink
from weeble.model.experiment import parse_experiment
from weeble.orchestrator.testbed import Testbed
from weeble.orchestrator.workload import LiveWorkload

AFTER = {"b0": ({"b1"}, None), "b1": ({"b0", "b2"}, "b0"), "b2": ({"b1"}, "b1")}


def test_brokers_restarted_after_an_exchange_boot_with_the_tree_it_made(tmp_path: Path) -> None:
    # identity routing peer-to-peer (the coordinated exchange's precondition), a tree of 3:
    # b0 the root, b1 and b2 its children. δmax 0.5 s: on a loaded machine a hop took 0.39 s,
    # and a crash then lost notifications published more than d·δmax before it (with δmax
    # 0.05 s those counted against the fault-free prefix). 20 s: a restart took up to 8 s
    s = scenario(topology={"kind": "kary", "m": 2, "levels": 2}, duration=20, pi=2.5, rho=1.0,
                 delta_max=0.5,
                 workload={"filter_classes": 2, "subscriptions": 6, "mean_lifetime": 1000,
                           "publish_rate": 30},
                 reconfigurations={"ordering": "fifo"})
    bed = start(s, tmp_path / "runs")
    try:
        async def steps(manager: Any, workload: LiveWorkload) -> list[Any]:
            # both crashes are keyed on the exchange's end (the manager's `finished`), not on
            # a time: b1 at once, b2 2 s later (whether b1 is back by then or not)
            crashes = parse_experiment({"faults": [
                {"name": "b1-down", "kind": "crash", "target": "b1", "duration": 0.3,
                 "during": {"reconfiguration": 1, "phase": "finished"}},
                {"name": "b2-down", "kind": "crash", "target": "b2", "duration": 0.3,
                 "during": {"reconfiguration": 1, "phase": "finished", "delay": 2.0}}]})
            runner = ChaosRunner(bed, crashes, clients=workload)
            chaos = asyncio.ensure_future(runner.run())
            await asyncio.sleep(2.0)  # subscriptions in place, traffic flowing
            record = await manager.reconfigure(ExchangeLink(remove=("b0", "b2"),
                                                            add=("b1", "b2")))
            outcomes = await asyncio.wait_for(chaos, 60)

            async def rejoined() -> list[str]:
                snaps = await bed.snapshots()
                return [f"{b}: {snaps[b]['core']['neighbors']}, {snaps[b]['core']['parent']}"
                        for b, (neighbors, parent) in AFTER.items()
                        if (set(snaps[b]["core"]["neighbors"]), snaps[b]["core"]["parent"])
                        != (neighbors, parent)]

            await wait_for(rejoined, 30, "the restarted brokers in the tree the exchange made")
            return [record, outcomes]

        (record, outcomes), _stats = asyncio.run(under_load(bed, s, steps))
        assert record.outcome == "done", record.why
        assert [o.took_effect for o in outcomes] == [True, True], outcomes
        # (_stats.errors: the clients of b1 and b2 fail to reach them while they are down)
        # what a restart (by this process or another) boots each broker with
        for b, (neighbors, parent) in AFTER.items():
            config = bed.backend.config(b)
            assert (set(config.neighbors), config.parent) == (neighbors, parent), (b, config)
        assert Testbed.attach(bed.run_dir).configs["b2"].parent == "b1"  # the config file
        bed.down()
        report = check_run(bed.run_dir)
        d = report["deliveries"]
        assert d["expected"] > 100, d  # the load was there
        assert report["verdict"]["status"] == "pass", report["verdict"]
        # judged, not waved through: every episode's service and state were seen stabilizing
        assert report["episodes"], report
        assert None not in report["stabilization"].values(), report["stabilization"]
    finally:
        bed.close()
