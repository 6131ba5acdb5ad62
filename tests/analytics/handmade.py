"""A hand-built run whose every answer is known: the edge cases of the analytics in one trace.

Timing: π = 5.1, ρ = 5, δ = 0.5, d = 2, identity routing. So D = d·δ_max = 1 s (deactivation),
A = D + ρ = 6 s (activation), Δ = 2π + D = 11.2 s, crash linger 2π + D = 11.2 s.

Clients: c1, c2, c4 at b1, c3 at b2. Publishers p1, p2 at b2 (they are clients of b2 too).

    c1 class == 1   0 ..            c2 class == 1  20 ..  (young until 26)
    c3 class == 2   0 .. 50 unsub   c4 class == 1   0 .. 60 crash

    p1#1  10  class 1  c1 c4                       correct
    p1#2  21  class 1  c1 c4 + c2 (activation)     correct, 1 in a window
    p1#3  23  class 1  c1 c4 (c2 young: no miss)   correct
    p1#4  30  class 1  c1 twice, c2, c4            duplicate 1
    p1#5  32  class 2  c3 + c1 (no such sub)       spurious 1
    p2#1  36  class 1  c2 c4, c1 after p2#2        reordered at c1
    p2#2  36.1 class 1 c1 c2 c4
    p1#6  34  class 1  c1 c4, not c2               missing 1
    ---- fault f1 at 40 (corrupt b1, evidence: state changed) ----
    p1#7  42  class 1  c1 c4, not c2               missing 1   (last bad: service 45 - 40 = 5)
    p1#8  45  class 1  c1 c2 c4                    correct
    p1#9  49.5 class 2 c3 at 50.2 (unsub at 50)    correct, 1 in a window (deactivation)
    p1#10 65  class 1  c1 c2 + c4 (crashed at 60)  correct, 1 in a window (lease lingers)
    p9#1  70  delivered to c1, never published     phantom
    ---- fault f2 at 80, never ends (drop on b1-b2) ----
    p1#11 99.5 class 1 (t + D > end: not judged)

Legitimacy: ok up to 40; not ok at 41, 43; ok from 44 on (state: 4 s); not ok at 85.
The last line of b1.jsonl is torn. c4.jsonl is the live workload client's own file (its crash
is recorded twice: by the simulator in b1's file and by the client itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PARAMS = {"pi": 5.1, "rho": 5.0, "delta_min": 0.5, "delta_max": 0.5, "d": 2}
BOUND = 2 * 5.1 + 1.0
END = 100.0
NS = 1_000_000_000


def rec(t: float, node: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"v": 2, "t": round(t * NS), "node": node, "kind": kind, **fields}


def deliver(t: float, client: str, publisher: str, seq: int, broker: str = "b1",
            sub_id: str | None = "auto") -> dict[str, Any]:
    # the subscription it matched: the client's own (c<n>/0), except where none matches
    if sub_id == "auto":
        sub_id = None if (client, publisher, seq) in NO_MATCH else f"{client}/0"
    return rec(t, broker, "deliver", client=client, broker=broker, nid=f"{publisher}#{seq}",
               publisher=publisher, seq=seq, **({"sub_id": sub_id} if sub_id else {}))


NO_MATCH = {("c1", "p1", 5), ("c1", "p9", 1)}


def publish(t: float, publisher: str, seq: int, cls: int) -> dict[str, Any]:
    return rec(t, "b2", "publish", client=publisher, broker="b2", nid=f"{publisher}#{seq}",
               publisher=publisher, seq=seq, attributes={"class": cls}, published_at=t)


def header() -> dict[str, Any]:
    return rec(0, "sim", "run", scenario="handmade", algorithm="identity", hierarchical=True,
               wrapper=False, options={}, **PARAMS, bound=BOUND,
               topology={"brokers": ["b1", "b2"], "links": [["b1", "b2"]], "root": "b1"},
               seed=0, backend="sim", clock="virtual", versions={"trace": "2"}, duration=END)


def build(run: Path) -> Path:
    b1: list[dict[str, Any]] = [
        rec(0, "b1", "subscribe", client="c1", broker="b1", sub_id="c1/0", filter="class == 1"),
        rec(0, "b1", "subscribe", client="c4", broker="b1", sub_id="c4/0", filter="class == 1"),
        rec(0.1, "b1", "send", to="b2", **{"from": "b1"}, msg="sub", sub_id="c1/0",
            filter="class == 1", tag=0),
        rec(20, "b1", "subscribe", client="c2", broker="b1", sub_id="c2/0", filter="class == 1"),
        rec(25, "b1", "refresh", client="c1", broker="b1", sub_id="c1/0"),
        rec(60, "c4", "crash", client="c4", broker="b1", sub_id="c4/0"),
        # the fault at 40, with the core's evidence between begin and end
        rec(40, "b1", "fault_begin", fault_id="f1", type="corrupt", target="b1",
            field="table.clear"),
        rec(40, "b1", "fault", field="table.clear", args={}, value=None,
            before={"entries": 3}, after={"entries": 0}),
        rec(40, "b1", "fault_end", fault_id="f1", type="corrupt", target="b1", field="table.clear"),
    ]
    deliveries = [
        (10.5, "c1", "p1", 1), (10.5, "c4", "p1", 1),
        (21.5, "c1", "p1", 2), (21.5, "c4", "p1", 2), (21.5, "c2", "p1", 2),
        (23.5, "c1", "p1", 3), (23.5, "c4", "p1", 3),
        (30.5, "c1", "p1", 4), (30.7, "c1", "p1", 4), (30.5, "c2", "p1", 4), (30.5, "c4", "p1", 4),
        (32.5, "c1", "p1", 5),
        (34.5, "c1", "p1", 6), (34.5, "c4", "p1", 6),
        (36.5, "c2", "p2", 1), (36.5, "c4", "p2", 1),
        (36.5, "c1", "p2", 2), (36.6, "c1", "p2", 1),
        (36.6, "c2", "p2", 2), (36.6, "c4", "p2", 2),
        (42.5, "c1", "p1", 7), (42.5, "c4", "p1", 7),
        (45.5, "c1", "p1", 8), (45.5, "c2", "p1", 8), (45.5, "c4", "p1", 8),
        (65.5, "c1", "p1", 10), (65.5, "c2", "p1", 10), (65.5, "c4", "p1", 10),
        (70, "c1", "p9", 1),
    ]
    b1 += [deliver(*d) for d in deliveries]
    b2: list[dict[str, Any]] = [
        rec(0, "b2", "subscribe", client="c3", broker="b2", sub_id="c3/0", filter="class == 2",
            rpc="subscribe"),
        rec(50, "b2", "unsubscribe", client="c3", broker="b2", sub_id="c3/0",
            filter="class == 2"),
        deliver(32.5, "c3", "p1", 5, broker="b2"),
        deliver(50.2, "c3", "p1", 9, broker="b2"),
        *(rec(t, "b2", "send", to="b1", lseq=seq, msg="notify", nid=f"p1#{seq}",
              publisher="p1", seq=seq, **{"from": "b2"}) for t, seq in
          ((10.2, 1), (21.2, 2), (23.2, 3))),
    ]
    pubs = [(10, "p1", 1, 1), (21, "p1", 2, 1), (23, "p1", 3, 1), (30, "p1", 4, 1),
            (32, "p1", 5, 2), (34, "p1", 6, 1), (36, "p2", 1, 1), (36.1, "p2", 2, 1),
            (42, "p1", 7, 1), (45, "p1", 8, 1), (49.5, "p1", 9, 2), (65, "p1", 10, 1),
            (99.5, "p1", 11, 1)]
    b2 += [publish(*p) for p in pubs]
    sim = [
        *(rec(t, "sim", "legitimacy", ok=True, problems=0, sample=[], required=3)
          for t in (5, 15, 25, 35)),
        *(rec(t, "sim", "legitimacy", ok=False, problems=2, sample=["b1: missing"], required=3)
          for t in (41, 43)),
        *(rec(t, "sim", "legitimacy", ok=True, problems=0, sample=[], required=3)
          for t in (44, 50, 60, 70)),
        rec(80, "sim", "fault_begin", fault_id="f2", type="drop", target="b1-b2",
            links=["b1-b2"]),
        rec(81, "b1", "drop", to="b2", **{"from": "b1"}, msg="notify", nid="p1#99",
            publisher="p1", seq=99),
        rec(85, "sim", "legitimacy", ok=False, problems=1, sample=["b1: x"], required=3),
    ]
    trace = run / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    write(trace / "run.jsonl", [header(), rec(END, "sim", "run_end", reason="end")])
    write(trace / "b1.jsonl", b1, torn='{"v":2,"t":99000000000,"node":"b1","ki')
    write(trace / "b2.jsonl", b2)
    write(trace / "sim.jsonl", sim)
    # c4's own file, as the live workload client writes it: its crash is known on both sides
    write(trace / "c4.jsonl", [
        rec(0, "c4", "client_start", broker="b1", address="127.0.0.2:5000"),
        rec(0, "c4", "client_subscribe", client="c4", sub_id="c4/0", broker="b1",
            filter="class == 1"),
        rec(60, "c4", "crash", client="c4", sub_id="c4/0", broker="b1"),
    ])
    return run


def write(path: Path, records: list[dict[str, Any]], torn: str | None = None) -> None:
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    path.write_text(text + (torn or ""), encoding="utf-8")
