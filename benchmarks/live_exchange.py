"""Live: the time one coordinated link exchange takes against its cycle length, and the
notifications it holds in Qnot (issue 10, benchmarks; thesis 4.4.3 measured in simulation by
reconfig_443.py).

    python benchmarks/live_exchange.py                     # lengths 3..7, 3 repeats each way
    python benchmarks/live_exchange.py --repeat 5 --lengths 3 5 8 --link-delay-ms 5
    python benchmarks/live_exchange.py --link-delay-ms 10 --ordering causal --publish-rate 300
    python benchmarks/live_exchange.py --backend mininet    # or docker (as root): a host or
                                                            # container per broker

A chain of brokers b0 - b1 - ... (real processes on loopback, simple routing, FIFO ordering
by default)
under a steady load (publishers at every broker, subscribers everywhere). For cycle length L the
exchange adds b0 - b(L-1) and removes b(L-2) - b(L-1) (the cycle b0 ... b(L-1)), and the next
one puts the link back (the same cycle, the other way round), so each repeat measures two
exchanges of length L on the same tree. Duration: from the manager's request to the
initiator's `done` record (both in the run's trace). Qnot: the notifications the a-endpoints
held back for FIFO order (their `released` records; all the exchanges of a length together)
and how long they waited on average.
Printed: the median duration per length (and all runs), its ratio to the same run's median at
the shortest length (the baseline), and the Qnot figures; with --link-delay-ms each link hop
costs that much more, so the protocol's rounds show through loopback's sub-millisecond hops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import next_base_host, table

from weeble.core.reconfig.plan import ExchangeLink
from weeble.model.scenario import parse_scenario
from weeble.orchestrator.testbed import Testbed
from weeble.orchestrator.workload import LiveWorkload


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    ap.add_argument("--repeat", type=int, default=3, help="repeats per length (2 exchanges each)")
    ap.add_argument("--publish-rate", type=float, default=100.0)
    ap.add_argument("--link-delay-ms", type=float, default=0.0)
    ap.add_argument("--ordering", choices=["none", "fifo", "causal"], default="fifo")
    ap.add_argument("--backend", choices=["local", "mininet", "docker"], default="local",
                    help="where the brokers run (new links ride the peer network elsewhere)")
    args = ap.parse_args()
    if min(args.lengths) < 3:
        ap.error("--lengths: a cycle has at least 3 brokers")
    n = max(args.lengths)
    exchanges = len(args.lengths) * args.repeat * 2
    s = parse_scenario({
        "name": "bench-exchange", "seed": 1, "duration": 30 + exchanges * 1.5,
        "topology": {"kind": "chain", "brokers": n}, "routing": {"algorithm": "simple"},
        "timing": {"pi": 4.0, "rho": 2.0, "delta_min": 0.0, "delta_max": 0.05, "d": n},
        "workload": {"filter_classes": 4, "subscriptions": 2 * n, "mean_lifetime": 10_000,
                     "publish_rate": args.publish_rate},
        "reconfigurations": {"ordering": args.ordering},
        "live": {"base_host": next_base_host(), "metrics_port": None, "drain": 0.2,
                 "open_clients": True, "links": {"delay_ms": args.link_delay_ms}},
    }, source="<benchmark>")
    runs = Path(tempfile.mkdtemp(prefix="weeble-bench-"))
    bed = Testbed.plan(s, runs_dir=runs, any_ports=True, log_level="WARNING",
                       backend=args.backend, reconfigurable=True)
    try:
        bed.up()
        records = asyncio.run(_measure(bed, s, args.lengths, args.repeat))
        bed.down()
        held = _qnot(bed.trace_dir)
    finally:
        bed.close()
        shutil.rmtree(runs, ignore_errors=True)
    by_length: dict[int, list[float]] = defaultdict(list)
    qnot: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for length, record in records:
        if record.outcome != "done" or record.duration is None:
            print(f"weeble: warning: {record.rid} {record.outcome}: {record.why}",
                  file=sys.stderr)
            continue
        by_length[length].append(record.duration * 1000)
        qnot[length].append(held.get(record.rid, (0, 0.0)))
    base = statistics.median(by_length[min(by_length)])
    rows = []
    for length in sorted(by_length):
        ms = by_length[length]
        counts = [c for c, _ in qnot[length]]
        waits = [w / c * 1000 for c, w in qnot[length] if c]
        rows.append({"cycle length": length, "exchanges": len(ms),
                     "median ms": statistics.median(ms),
                     "ratio to length 3": statistics.median(ms) / base,
                     "min ms": min(ms), "max ms": max(ms),
                     "Qnot held (all)": sum(counts),
                     "Qnot mean wait ms": statistics.median(waits) if waits else None})
    print(f"live link exchange on a chain of {n} brokers ({args.backend}),"
          f" {args.publish_rate:g} publications/s,"
          f" link delay {args.link_delay_ms:g} ms, {args.ordering} ordering; baseline: length "
          f"{min(by_length)} (same run)")
    print(table(rows, list(rows[0])))
    print(json.dumps({str(k): [round(x, 2) for x in v] for k, v in sorted(by_length.items())}))
    return 0


async def _measure(bed: Testbed, s: Any, lengths: list[int],
                   repeat: int) -> list[tuple[int, Any]]:
    workload = LiveWorkload(s, {b: a.listen for b, a in bed.addresses().items()},
                            bed.trace_dir, tokens=bed.client_token)
    loop = asyncio.get_running_loop()
    out: list[tuple[int, Any]] = []
    async with bed.reconfigurer(clients=workload, t0=loop.time()) as manager:
        load = asyncio.create_task(workload.run(s.duration))
        await asyncio.sleep(3.0)  # subscriptions in place
        for _ in range(repeat):
            for length in lengths:
                far, near = f"b{length - 1}", f"b{length - 2}"
                there = ExchangeLink(remove=(near, far), add=("b0", far))
                back = ExchangeLink(remove=("b0", far), add=(near, far))
                for op in (there, back):
                    out.append((length, await manager.reconfigure(op)))
                    await asyncio.sleep(0.3)
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    return out


def _qnot(trace_dir: Path) -> dict[str, tuple[int, float]]:
    """Per rid: notifications released from Qnot and their summed wait (s)."""
    held: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for path in trace_dir.glob("b*.jsonl"):
        for line in path.read_text().splitlines():
            if '"released"' not in line:
                continue
            r = json.loads(line)
            if r.get("kind") == "reconfig" and r.get("phase") == "released":
                held[r["rid"]][0] += int(r.get("count", 0))
                held[r["rid"]][1] += float(r.get("waited", 0.0))
    return {rid: (int(c), w) for rid, (c, w) in held.items()}


if __name__ == "__main__":
    raise SystemExit(main())
