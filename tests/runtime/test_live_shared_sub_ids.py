"""Sub ids are unique per client only (R1), live: real broker processes over gRPC, the client
library's clients. alice and carol at b0 and bob at b1 all subscribe as `s0`; alice
unsubscribes. Before the access broker qualified the id with its client
(`core.events.network_id`), alice's unsubscription removed carol's entries at b0 and
wherever it went, and b2 and b3, which learn both b0's and b1's `s0` from one neighbour, kept
one entry of the two (tests/sim/test_shared_sub_ids.py has the simulated twin)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.runtime.livebed import run_and_check

UNSUBSCRIBE = 4.0  # alice's end, s (run time)


def test_two_clients_same_sub_id_live(tmp_path: Path) -> None:
    subs = [{"client": c, "broker": b, "sub_id": "s0", "filter": f"class == {k}",
             **({"end": UNSUBSCRIBE} if c == "alice" else {})}
            for c, b, k in (("alice", "b0", 0), ("carol", "b0", 2), ("bob", "b1", 1))]
    data = {
        "name": "shared-sub-ids", "seed": 3, "duration": 14,
        "topology": {"kind": "chain", "brokers": 4}, "routing": {"algorithm": "identity"},
        # δmax = 0.5 s covers the hop delays of a loaded machine: the timing model must hold,
        # or the verdict is "assumptions violated"
        "timing": {"pi": 3.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.5},
        "subscriptions": subs,
        "publications": [{"at": 1 + i / 4, "broker": f"b{i % 4}",
                          "attributes": {"class": i % 3}} for i in range(48)],
        "trace": {"snapshots_every": 0.5},
    }
    run_dir, report = run_and_check(data, tmp_path, "shared")
    assert report["verdict"]["status"] == "pass", report["verdict"]["reasons"]
    d = report["deliveries"]
    assert d["expected"] == d["delivered"] > 15, d
    assert (d["missing"], d["spurious"], d["duplicate"]) == (0, 0, 0), d
    assert report["legitimacy"]["checks"] > 0 and report["legitimacy"]["illegitimate"] == 0
    records = [json.loads(line) for f in run_dir.rglob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip()]
    # carol and bob were served after alice left (the checker: every judged one, no other)
    (left,) = [r["t"] for r in records
               if r["kind"] == "client_unsubscribe" and r["client"] == "alice"]
    after = {r["client"] for r in records if r["kind"] == "client_deliver"
             and r["published_at"] * 1e9 > left}
    assert {"carol", "bob"} <= after, after
    # the tables held the three as network ids
    held = {e["sub_id"] for r in records if r["kind"] == "snapshot"
            for t in r.get("tables", ()) for e in t}
    assert {"alice/s0", "carol/s0", "bob/s0"} <= held, sorted(held)[:20]
