"""The live clients carry out the same workload plan as the simulator (weeble/model/workload.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.live.livebed import scenario, start
from weeble.model.workload import Publish, Subscribe, workload_plan
from weeble.orchestrator.workload import LiveWorkload


def test_live_clients_carry_out_the_plan(tmp_path: Path) -> None:
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
        stats = asyncio.run(LiveWorkload(s, addresses, bed.trace_dir).run())
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
            planned.add(("client_crash" if a.crashes else "client_unsubscribe", a.sub_id,
                         a.broker))
    assert workload_subs > 8, "the test needs more planned subscriptions than the bound"

    records = [json.loads(line) for f in bed.trace_dir.glob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip()]
    done = {(r["kind"], r["sub_id"], r["broker"]) for r in records
            if r["kind"] in ("client_subscribe", "client_unsubscribe", "client_crash")}
    published = {(r["publisher"], r["seq"]) for r in records if r["kind"] == "client_publish"}
    assert done == planned
    assert published == planned_pubs and stats.errors == 0
