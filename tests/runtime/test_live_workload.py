"""The live clients carry out the same workload plan as the simulator (weeble/model/workload.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tests.runtime.livebed import scenario, start
from weeble.chaos.runner import ChaosRunner, Outcome, in_simulation
from weeble.model.workload import Publish, Subscribe, workload_plan
from weeble.orchestrator.workload import LiveWorkload
from weeble.sim.run import simulate


def test_live_clients_carry_out_the_plan(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    s = scenario(
        topology={"kind": "chain", "brokers": 3}, duration=4.0, seed=11,
        workload={"filter_classes": 3, "subscriptions": 6, "mean_lifetime": 2.0,
                  "publish_rate": 6, "subscriber_placement": "all",
                  "publisher_placement": "all", "subscribers_crash": 0.4},
        subscriptions=[{"client": "alice", "broker": "b2", "filter": "class == 1", "start": 0.5,
                        "end": 3.0}],
        publications=[{"at": 1.0, "broker": "b0", "attributes": {"class": 1}}],
        live={"max_subscriptions": 8})
    bed = start(s, tmp_path)
    try:
        addresses = {b: a.listen for b, a in bed.addresses().items()}
        workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token)
        with caplog.at_level(logging.WARNING, logger="weeble.orchestrator.workload"):
            stats = asyncio.run(workload.run())
    finally:
        bed.close()

    planned: set[tuple[str, str, str]] = set()
    planned_pubs: set[tuple[str, int]] = set()
    workload_subs = 0
    for a in workload_plan(s):
        if isinstance(a, Publish):
            planned_pubs.add((a.publisher, a.seq))
            continue
        assert isinstance(a, Subscribe)
        if a.cls is not None:
            workload_subs += 1
            if workload_subs > 8:  # live.max_subscriptions: the rest is never started
                continue
        planned.add(("client_subscribe", a.sub_id, a.broker))
        if a.end <= s.duration:
            planned.add(("crash" if a.crashes else "client_unsubscribe", a.sub_id,
                         a.broker))
    assert workload_subs > 8, "the test needs more planned subscriptions than the bound"
    # the cut is said, naming the limit, once, and counted (issue 25: it was silent)
    assert stats.capped == {"live.max_subscriptions": workload_subs - 8}
    said = [r.getMessage() for r in caplog.records if "live.max_subscriptions" in r.getMessage()]
    assert len(said) == 1 and "= 8 cuts" in said[0], said

    records = [json.loads(line) for f in bed.trace_dir.glob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip()]
    done = {(r["kind"], r["sub_id"], r["broker"]) for r in records
            if r["kind"] in ("client_subscribe", "client_unsubscribe", "crash")}
    published = {(r["publisher"], r["seq"]) for r in records if r["kind"] == "client_publish"}
    assert done == planned
    assert published == planned_pubs and stats.errors == 0 and stats.unpublished == 0


def test_chaos_crashes_workload_subscribers_live(tmp_path: Path) -> None:
    """client_crash with `clients:` (one fault vocabulary for the simulator and live): the
    chosen subscribers of the running workload stop refreshing without unsubscribing."""
    s = scenario(
        topology={"kind": "chain", "brokers": 3}, duration=4.0, seed=5,
        workload={"filter_classes": 3, "subscriptions": 5, "mean_lifetime": 600,
                  "publish_rate": 0, "subscriber_placement": "all"},
        subscriptions=[{"client": "alice", "broker": "b2", "filter": "class == 1"}],
        chaos={"faults": [{"name": "two", "kind": "client_crash", "clients": {"random": 2},
                           "at": 1.5},
                          {"name": "alice", "kind": "client_crash", "clients": "alice",
                           "at": 2.0}]})
    assert s.chaos is not None
    bed = start(s, tmp_path)
    try:
        addresses = {b: a.listen for b, a in bed.addresses().items()}
        workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token)
        runner = ChaosRunner(bed, s.chaos, until=s.duration, clients=workload)

        async def drive() -> list[Outcome]:
            chaos = asyncio.create_task(runner.run())
            await workload.run()
            return await chaos

        outcomes = {o.fault_id: o for o in asyncio.run(drive())}
    finally:
        bed.close()
    assert all(o.took_effect for o in outcomes.values()), outcomes
    crashed = {*outcomes["two"].targets, *outcomes["alice"].targets}
    assert len(outcomes["two"].targets) == 2 and "alice" in crashed
    records = [json.loads(line) for f in bed.trace_dir.glob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip()]
    assert {r["client"] for r in records if r["kind"] == "crash"} == crashed
    assert not any(r["kind"] == "client_unsubscribe" for r in records)
    # the same experiment, simulated from the same seed, picks the same subscribers
    sim = simulate(s, tmp_path / "sim", progress=False, faults=in_simulation(s))
    assert {f["id"]: f["targets"] for f in sim.faults} == {
        i: o.targets for i, o in outcomes.items()}
