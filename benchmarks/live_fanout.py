"""Fan-out of live brokers: one publisher at the root of an m-ary tree, a subscriber on every
leaf, deliveries per second.

    python benchmarks/live_fanout.py                      # 3-ary, 5 levels: 121 brokers, 81 leaves
    python benchmarks/live_fanout.py --levels 4 --repeat 5

Every leaf's subscriber subscribes `class == 0` at its leaf broker; the publisher at b0 (the
root) writes a PublishStream of requests of --batch notifications (class 0), closed-loop: at
most --outstanding notifications published and not yet received by the slowest subscriber.
Each notification crosses every link of the tree once and is delivered once per leaf, so
deliveries/s = notifications/s x leaves. Links and subscribe streams batch what is waiting
(up to --batch), with zero linger.

Reported: notifications/s and deliveries/s (median of --repeat rounds after a warm-up round),
the time to start the tree, and the load average. No raw baseline: the relays of
live_throughput.py are chains.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import channel, median, table, testbed
from live_throughput import PublishStream, Sink, requests

from weeble.orchestrator.testbed import Testbed


async def rounds(bed: Testbed, leaves: list[str], batch: int, count: int, repeat: int,
                 outstanding: int) -> list[float]:
    channels = [channel(bed.address(b).listen) for b in leaves]
    pub_ch = channel(bed.address("b0").listen)
    try:
        sinks = [Sink() for _ in leaves]
        await asyncio.gather(*(s.start(ch, batch) for s, ch in zip(sinks, channels, strict=True)))
        for _ in range(400):  # every leaf's subscription has reached the root
            snap = await bed.snapshot("b0")
            if sum(e["filter"] == "class == 0" for t in snap["core"]["tables"] for e in t) \
                    >= len(bed.configs["b0"].neighbors):
                break
            await asyncio.sleep(0.05)
        stream: PublishStream | None = None
        rates = []
        try:
            for r in range(repeat + 1):  # round 0 warms up
                reqs = requests(count, 1 + r * count, batch)
                if stream is None:
                    # opened once its first requests are built: a broker ends a stream whose
                    # first request does not come within its hello timeout (5 s)
                    stream = PublishStream(pub_ch)
                base = min(s.received for s in sinks)
                t0 = time.perf_counter()
                sent = 0
                for req in reqs:
                    while sent - (min(s.received for s in sinks) - base) > outstanding:
                        await asyncio.sleep(0.001)
                    await stream.call.write(req)
                    sent += batch
                async with asyncio.timeout(300):
                    while min(s.received for s in sinks) < base + count:
                        await asyncio.sleep(0.005)
                if r:
                    rates.append(count / (time.perf_counter() - t0))
        finally:
            if stream is not None:
                await stream.close()
        return rates
    finally:
        for ch in [*channels, pub_ch]:
            await ch.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=3, help="children per broker (default 3)")
    parser.add_argument("--levels", type=int, default=5, help="levels (default 5: 121 brokers)")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--count", type=int, default=5_000, help="notifications per round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--outstanding", type=int, default=2_000)
    args = parser.parse_args()
    n = sum(args.m ** level for level in range(args.levels))
    first_leaf = n - args.m ** (args.levels - 1)
    leaves = [f"b{i}" for i in range(first_leaf, n)]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    bed = testbed({"kind": "kary", "m": args.m, "levels": args.levels},
                  name=f"bench-tree{n}", link_batch=args.batch, startup_timeout=600)
    started = time.perf_counter() - t0
    try:
        rates = asyncio.run(rounds(bed, leaves, args.batch, args.count, args.repeat,
                                   args.outstanding))
    finally:
        bed.close()
    rate = median(rates)
    print(f"\nfan-out, {args.m}-ary tree of {n} brokers ({len(leaves)} leaf subscribers), batch"
          f" {args.batch}, median of {args.repeat} rounds of {args.count:,}; tree started in"
          f" {started:.0f} s; load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
          f" ({os.cpu_count()} cores)")
    print(table([{"brokers": n, "leaves": len(leaves), "notifications/s": rate,
                  "deliveries/s": rate * len(leaves)}],
                ["brokers", "leaves", "notifications/s", "deliveries/s"]))


if __name__ == "__main__":
    main()
