"""Latency per hop of live brokers, unbatched, at 1,000 notifications/s.

    python benchmarks/live_latency.py
    python benchmarks/live_latency.py --rate 1000 --seconds 5 --repeat 3

A publisher at b0 publishes one notification per RPC at a steady --rate (open loop); a
subscriber at the end of a chain of 1 or 3 brokers timestamps each arrival. End-to-end latency
= arrival - publish time (one machine, one clock). Its two client legs are the same in both
chains, so per broker-to-broker hop = (latency through 3 brokers - through 1) / 2, for p50 and
(as an estimate) for p99. Every table holds 10,000 subscriptions, as in the throughput
benchmark. Baseline, in the same run: the raw grpc.aio relay chain of live_throughput.py
(parse, re-serialize, forward; nothing else) measured the same way.

Reported: medians over --repeat rounds of each round's p50 and p99, in milliseconds.
Target: per-hop p50 under 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import chain, channel, fill_tables, median, percentile, table
from live_throughput import CONNECT, TABLE_SIZE, relays

from weeble.proto.v1 import client_pb2, client_pb2_grpc, link_pb2


class Stopwatch:
    """The subscriber side: arrival time minus publish time of every notification."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.late = 0
        self.task: asyncio.Task[None] | None = None

    async def start(self, ch: grpc.aio.Channel) -> None:
        call = client_pb2_grpc.ClientStub(ch).Subscribe(
            client_pb2.SubscribeRequest(client="sink", sub_id="sink.1", filter="class == 0"))
        first = await call.read()
        assert first.HasField("subscribed"), first
        self.task = asyncio.create_task(self._time(call))

    async def _time(self, call: Any) -> None:
        while (event := await call.read()) is not grpc.aio.EOF:
            self.latencies.append(time.time() - event.notification.published_at)

    async def round(self, send: Any, rate: float, count: int, seq: int) -> tuple[float, float]:
        """Publish `count` at `rate`/s, wait for them; (p50, p99) in ms."""
        self.latencies.clear()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        pending = set()
        for i in range(count):
            delay = t0 + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            n = client_pb2.Notification(publisher="src", seq=seq + i, published_at=time.time())
            n.attributes["class"].i = 0
            task = asyncio.create_task(_quiet(send(n)))
            pending.add(task)
            task.add_done_callback(pending.discard)
        # Past its capacity the system queues without bound: report what arrived within
        # 5 s of the last send and count the rest as late (a saturated round).
        deadline = loop.time() + 5
        while len(self.latencies) < count and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for task in list(pending):
            task.cancel()
        self.late = count - len(self.latencies)
        ms = sorted(x * 1000 for x in self.latencies)
        return percentile(ms, 50), percentile(ms, 99)


async def _quiet(coro: Any) -> None:
    """A send whose failure (cancelled at the end of a saturated round) is not news."""
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await coro


async def broker_chain(length: int, rate: float, count: int, repeat: int) -> list[tuple[float,
                                                                                       float]]:
    bed = chain(length, link_batch=1)
    try:
        await fill_tables(bed, bed.brokers[-1], TABLE_SIZE)
        async with channel(bed.address(bed.brokers[-1]).listen) as sink_ch, \
                channel(bed.address("b0").listen) as pub_ch:
            watch = Stopwatch()
            await watch.start(sink_ch)
            for _ in range(200):  # the subscription has reached the publisher's broker
                snap = await bed.snapshot("b0")
                if any(e["filter"] == "class == 0" for t in snap["core"]["tables"] for e in t):
                    break
                await asyncio.sleep(0.05)
            stub = client_pb2_grpc.ClientStub(pub_ch)

            async def send(n: client_pb2.Notification) -> None:
                await stub.Publish(client_pb2.PublishRequest(client="src", notifications=[n]),
                                   timeout=30)

            return await rounds(watch, send, rate, count, repeat)
    finally:
        bed.close()


async def raw_chain(length: int, rate: float, count: int, repeat: int) -> list[tuple[float,
                                                                                    float]]:
    with relays(length, 1) as addrs:
        async with channel(addrs[-1]) as sink_ch, channel(addrs[0]) as pub_ch:
            watch = Stopwatch()
            await watch.start(sink_ch)
            call = pub_ch.stream_stream(CONNECT)()
            outbox: asyncio.Queue[bytes] = asyncio.Queue()

            async def writer() -> None:  # a stream takes one write at a time
                while True:
                    await call.write(await outbox.get())

            async def send(n: client_pb2.Notification) -> None:
                outbox.put_nowait(link_pb2.Envelope(seq=n.seq, notify=link_pb2.NotifyMsg(
                    notification=n)).SerializeToString())

            task = asyncio.create_task(writer())
            try:
                return await rounds(watch, send, rate, count, repeat)
            finally:
                task.cancel()
                call.cancel()


async def rounds(watch: Stopwatch, send: Any, rate: float, count: int,
                 repeat: int) -> list[tuple[float, float]]:
    out = []
    for r in range(repeat + 1):  # round 0 warms up
        result = await watch.round(send, rate, count, 1 + r * count)
        if watch.late:
            print(f"  saturated: {watch.late} of {count} not delivered within 5 s",
                  file=sys.stderr, flush=True)
            await asyncio.sleep(5)  # let the backlog drain before the next round
        if r:
            out.append(result)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="notifications/s")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round")
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds (median)")
    args = parser.parse_args()
    count = int(args.rate * args.seconds)
    result: dict[tuple[str, int], tuple[float, float]] = {}
    for system, run in (("broker", broker_chain), ("raw grpc", raw_chain)):
        for length in (1, 3):
            measured = asyncio.run(run(length, args.rate, count, args.repeat))
            result[system, length] = (median([p50 for p50, _ in measured]),
                                      median([p99 for _, p99 in measured]))
            print(f"{system} x{length}: p50 {result[system, length][0]:.3f} ms,"
                  f" p99 {result[system, length][1]:.3f} ms", file=sys.stderr, flush=True)
    rows = []
    for system in ("broker", "raw grpc"):
        (p50_1, p99_1), (p50_3, p99_3) = result[system, 1], result[system, 3]
        rows.append({"system": system, "e2e p50 x1": p50_1, "e2e p99 x1": p99_1,
                     "e2e p50 x3": p50_3, "e2e p99 x3": p99_3,
                     "hop p50": (p50_3 - p50_1) / 2, "hop p99": (p99_3 - p99_1) / 2})
    print(f"\nlatency in ms, unbatched, {args.rate:,.0f} notifications/s,"
          f" {TABLE_SIZE:,} subscriptions per table, median of {args.repeat} rounds"
          f" of {count:,}")
    print(table(rows, list(rows[0])))
    hop = rows[0]["hop p50"]
    raw = rows[1]["hop p50"]
    ratio = f" (x{hop / raw:.1f})" if raw > 0 else ""
    print(f"per-hop p50 {hop:.3f} ms vs raw {raw:.3f} ms{ratio}; target < 1 ms:"
          f" {'met' if hop < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
