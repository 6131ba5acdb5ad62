"""Chaos during a live reconfiguration (issue 10, item 4, live): a fault scheduled `during` a
link exchange of a running testbed strikes while the broker it names holds the exchange's lock,
keyed on the phases the brokers write to the run's trace; the exchange still finishes. A link
fault after it is resolved against the tree the exchange made (issue 28)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.runtime.livebed import scenario, start
from weeble.chaos.evidence import TRACE_FILE, ChaosTrace
from weeble.chaos.live import LiveTarget
from weeble.chaos.runner import ChaosRunner
from weeble.core.reconfig.plan import ExchangeLink
from weeble.model.experiment import parse_experiment
from weeble.orchestrator.testbed import Testbed


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_fault_during_a_live_exchange_strikes_while_its_broker_holds_the_lock(
        tmp_path: Path) -> None:
    # 200 ms per hop: b0 holds r1's lock about 1.8 s, much longer than a trace flush and the
    # runner's admin call take, also on a loaded machine (at 100 ms, 0.9 s was the margin)
    bed = start(scenario(pi=3.0, delta_max=0.3, duration=60,
                         live={"links": {"delay_ms": 200}}),
                tmp_path)
    try:
        async def main() -> tuple[Any, Any]:
            exp = parse_experiment({"faults": [
                {"name": "in-r1", "kind": "clock", "target": "b0",
                 "during": {"reconfiguration": 1, "phase": "lock", "broker": "b0"}},
                # leaf b4's one link: b1-b4 before r1, b4-b5 after it
                {"name": "after-r1", "kind": "delay", "link": {"of": "b4"}, "delay_ms": 5,
                 "duration": 0.5, "during": {"reconfiguration": 1, "phase": "finished"}}]})
            runner = ChaosRunner(bed, exp)
            chaos = asyncio.ensure_future(runner.run())
            # `weeble chaos` in another process: the tree it resolves against comes from the
            # run's state file, which the manager rewrites
            other = Testbed.attach(bed.run_dir)
            try:
                elsewhere = LiveTarget(other, ChaosTrace(tmp_path / "elsewhere.jsonl"))
                assert ("b1", "b4") in {tuple(sorted(x)) for x in elsewhere.tree.links}
                await asyncio.sleep(0.3)
                # b1-b4 for b4-b5: the cycle b4 b1 b0 b2 b5
                record = await bed.reconfigure(ExchangeLink(remove=("b1", "b4"),
                                                            add=("b4", "b5")))
                links = {tuple(sorted(x)) for x in elsewhere.tree.links}
                assert ("b4", "b5") in links and ("b1", "b4") not in links, links
                elsewhere.trace.close()
            finally:
                other.backend.close()  # attached: closing leaves the brokers running
            outcomes = await asyncio.wait_for(chaos, 30)
            return record, outcomes

        record, outcomes = asyncio.run(main())
        assert record.outcome == "done", record.why
        fault, after = sorted(outcomes, key=lambda o: o.fault_id != "in-r1")
        assert fault.took_effect is True and fault.during == "r1 lock at b0"
        assert (after.targets, after.took_effect) == (["b4-b5"], True), after
    finally:
        bed.close()
    b0 = _records(bed.trace_dir / "b0.jsonl")
    lock, = [r["t"] for r in b0 if r["kind"] == "reconfig" and r["rid"] == "r1"
             and r["phase"] == "lock"]
    unlocked, = [r["t"] for r in b0 if r["kind"] == "reconfig" and r["rid"] == "r1"
                 and r["phase"] == "unlocked"]
    begin, = [r for r in _records(bed.trace_dir / TRACE_FILE) if r["kind"] == "fault_begin"
              and r["fault_id"] == "in-r1"]
    assert (begin["rid"], begin["phase"]) == ("r1", "lock")
    assert lock <= begin["t"] < unlocked, (lock, begin["t"], unlocked)
    assert {tuple(sorted(e)) for e in bed.edges} >= {("b4", "b5")}
