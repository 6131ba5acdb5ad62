"""Issue 12, finding 7: a broker killed (SIGKILL) and restarted by chaos loses notifications;
the losses must not be silent. A chain b0 - b1 - b2, a publisher at b0 (200/s), alice at b2;
chaos kills b1 for 1 s. The ground truth is what the clients saw (every acknowledged
publication, every notification alice received); the reference checker must find every
notification lost (and the Spark job the same as the checker), the crashed broker's neighbour
must count and trace what it wrote into the dead process, and no `send` record claims more than
that the message was queued.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.analytics.test_differential import compare
from tests.runtime.livebed import scenario, start
from weeble.chaos.runner import ChaosRunner
from weeble.check.history import check_run
from weeble.orchestrator.workload import LiveWorkload
from weeble.trace.reader import read_trace

DURATION = 8.0
CRASH_AT, CRASH_FOR = 3.0, 1.0
LINK_DELAY_MS = 200
# b1 is frozen (SIGSTOP) this long before the kill: it acknowledges nothing meanwhile, so b0
# always holds written, unacknowledged messages when b1 dies (measured: 23 and 31). Unfrozen,
# a kill just after b1's acknowledgement (every 0.1 s) found none (5 to 23 in 3 runs, 0 in one
# CI run), and the counter check below had nothing to count. Longer freezes lose publications
# older than D before the kill, which the verdict rightly does not give to the crash.
FREEZE_FOR = 0.05


def _records(trace_dir: Path, node: str) -> list[dict[str, Any]]:
    return list(read_trace(trace_dir / f"{node}.jsonl"))


def test_a_crash_s_losses_appear_in_the_analysis_and_in_counters(spark: Any,
                                                                 tmp_path: Path) -> None:
    # Every link delays its messages 200 ms, so b1 always holds what it received in the last
    # 200 ms and has not sent on: the kill loses those, whatever the order in which b1's links
    # come back (without the delay, b0 kept the down link's notifications and sent them after
    # b2 had told the restarted b1 of alice's subscription, and the crash cost nothing in 2 of 2
    # CI runs). δmax 0.3 s holds the delayed hops (identity: π > ρ + d·δmax).
    s = scenario(
        topology={"kind": "chain", "brokers": 3}, duration=DURATION, seed=3,
        delta_max=0.3, live={"links": {"delay_ms": LINK_DELAY_MS}},
        workload={"filter_classes": 1, "subscriptions": 0, "mean_lifetime": 600,
                  "publish_rate": 200, "publisher_placement": "root"},
        subscriptions=[{"client": "alice", "broker": "b2", "filter": "class == 0"}],
        chaos={"faults": [{"name": "crash", "kind": "crash", "target": "b1", "at": CRASH_AT,
                           "duration": CRASH_FOR}]})
    assert s.chaos is not None
    bed = start(s, tmp_path)
    try:
        addresses = {b: a.listen for b, a in bed.addresses().items()}
        workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token)
        runner = ChaosRunner(bed, s.chaos, until=DURATION, clients=workload)

        async def freeze_b1() -> None:
            await asyncio.sleep(CRASH_AT - FREEZE_FOR)
            assert bed.backend.pause_broker("b1").paused  # the kill then ends the frozen b1

        async def drive() -> None:
            chaos = asyncio.create_task(runner.run())
            freeze = asyncio.create_task(freeze_b1())
            await workload.run(DURATION)
            await chaos
            await freeze

        asyncio.run(drive())
        assert [o.took_effect for o in runner.results()] == [True]
        bed.down()
    finally:
        bed.close()
    trace = bed.trace_dir

    # the ground truth, from the clients' own records
    clients = [json.loads(line) for f in trace.glob("*.jsonl") if f.stem not in bed.brokers
               and f.stem not in ("run", "chaos") for line in f.read_text().splitlines()
               if line.strip()]
    published = {r["nid"]: r["t"] / 1e9 for r in clients if r["kind"] == "client_publish"}
    received = {r["nid"] for r in clients if r["kind"] == "client_deliver"
                and r["client"] == "alice"}
    lost = set(published) - received
    assert len(published) > 500 and lost, "the crash must cost something for this test"

    # the reference checker finds every lost one among the publications it expects alice to
    # get, and no more (alice's broker b2 was not killed: its deliver records are complete).
    # Which ones it expects is R2/R3 over the trace's own times: published (b0's `publish`)
    # at least A after alice's subscription began (b2's `subscribe`) and D before the run's
    # end. (The window once counted from the first publication instead: under load alice's
    # subscription began later, and 9 publications inside her activation window were
    # counted as lost: 208 against the checker's 199.)
    report = check_run(bed.run_dir)
    d = report["deliveries"]
    origin = next(r["t"] for r in _records(trace, "run") if r["kind"] == "run")
    start_at = next(r["t"] for r in _records(trace, "b2")
                    if r["kind"] == "subscribe" and r["client"] == "alice")
    a, dd, end = (report["run"][k] for k in ("activation", "deactivation", "end"))
    t_p = {r["nid"]: (r["t"] - origin) / 1e9 for r in _records(trace, "b0")
           if r["kind"] == "publish"}
    begun = (start_at - origin) / 1e9
    judged_lost = {n for n in lost
                   if n in t_p and t_p[n] >= begun + a - 1e-9 and t_p[n] + dd <= end + 1e-9}
    assert len(judged_lost) <= d["missing"] <= len(lost), (len(judged_lost), d, len(lost))
    row = next(r for r in report["verdict"]["faults"] if r["fault_id"] == "crash")
    # the kill loses what b1 held, published up to D before the fault began: the episode's row
    # counts the losses from its begin − D (R14), where the fault-free prefix ends, so every
    # loss is in one of the two and each judged loss is the fault's
    assert judged_lost and all(t_p[n] >= row["begin"] - dd - 1e-9 for n in judged_lost), (
        row, sorted(t_p[n] for n in judged_lost)[:3])
    assert row["lost"] + report["verdict"]["before_first_fault"]["missing"] == d["missing"]
    assert row["lost"] >= len(judged_lost), row
    _, theirs = compare(spark, bed.run_dir)  # the Spark job: the same counts and verdict
    assert theirs["deliveries"]["missing"] == d["missing"]

    # the counters: b0 wrote into b1's dead process what b1 never acknowledged; each is a
    # drop record (reason unacked) and counted, and no send record claims `sent`
    b0 = _records(trace, "b0")
    unacked = [r for r in b0 if r["kind"] == "drop" and r.get("reason") == "unacked"
               and r["to"] == "b1"]
    stop = next(r for r in reversed(b0) if r["kind"] == "stop")
    assert stop["counters"].get("dropped_unacked", 0) == len(unacked) > 0
    assert {r["fate"] for r in b0 if r["kind"] == "send"} <= {"queued"}
    # what b0 could not vouch for and alice never got is among the losses the checker counts
    assert {r["nid"] for r in unacked if r.get("nid") not in received} <= lost
