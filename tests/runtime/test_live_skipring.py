"""Mode skip_ring live (seed 003): 15 broker processes, topics on supervised skip rings over
dynamic links (the address book), a member's whole overlay state corrupted and a broker crashed
and restarted with empty RAM; the reference checker's verdict over the trace passes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.runtime.livebed import next_base_host, start
from weeble.chaos.runner import ChaosRunner, Outcome
from weeble.check.history import check_run
from weeble.model.scenario import load_scenario
from weeble.orchestrator.workload import LiveWorkload

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "skipring-live.yaml"


def test_fifteen_brokers_on_skip_rings_pass_their_verdict(tmp_path: Path) -> None:
    s = load_scenario(SCENARIO)
    s = s.model_copy(update={"live": s.live.model_copy(update={
        "base_host": next_base_host(), "metrics_port": None, "drain": 0.5,
        "startup_timeout": 60})})
    assert s.chaos is not None and len(s.build_topology().brokers) == 15
    bed = start(s, tmp_path)
    try:
        addresses = {b: a.listen for b, a in bed.addresses().items()}
        workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token)
        runner = ChaosRunner(bed, s.chaos, until=s.duration, clients=workload)

        async def drive() -> list[Outcome]:
            chaos = asyncio.create_task(runner.run())
            await workload.run(s.duration)
            return await chaos

        outcomes = asyncio.run(drive())
        bed.down()
    finally:
        bed.close()
    assert [(o.kind, o.took_effect) for o in outcomes] == [("corrupt", True), ("crash", True)]
    report = check_run(bed.run_dir)
    verdict = report["verdict"]
    assert verdict["pass"], verdict["reasons"]
    for f in verdict["faults"]:  # legitimate again within the skip ring's bound, both levels
        assert f["state_time"] is not None and f["state_time"] <= f["bound"], f
        assert f["service_time"] is not None and f["service_time"] <= f["bound"], f
    d = report["deliveries"]
    assert d["expected"] > 300 and d["spurious"] == d["duplicate"] == 0
    assert d["missing"] <= d["expected"] // 20  # only what the crashed broker had in hand
    # the state was judged by the skip ring's legitimacy (spec seed23 §A.12) over admin snapshots
    legit = report["legitimacy"]
    assert legit["checks"] >= 10 and legit["legitimate"] >= legit["checks"] // 2
