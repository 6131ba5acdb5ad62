"""Latency per hop of live brokers, unbatched, at 1,000 and 5,000 notifications/s.

    python benchmarks/live_latency.py
    python benchmarks/live_latency.py --rates 1000,5000 --seconds 3 --repeat 3

A publisher at b0 publishes at a steady rate (open loop), each notification in its own
request on a PublishStream; a subscriber at the end of a chain of 1 or 3 brokers timestamps
each arrival. End-to-end latency = arrival - publish time (one machine, one clock; the publish
time is when the notification was due, so a publisher that falls behind shows as latency).
Its two client legs are the same in both chains, so per broker-to-broker hop = (latency
through 3 brokers - through 1) / 2, for p50 and (as an estimate) for p99. Every table holds
10,000 subscriptions, as in the throughput benchmark.

"Unbatched" means nothing is held back to fill a batch: no publisher batching, and the
brokers' links and streams run with zero linger (the default), so a gRPC message carries
more than one notification only when several are already waiting when the link or stream can
write. Baseline, in the same run: the raw grpc.aio relays of live_throughput.py (same
protocol; each notification its own message on every hop) measured the same way. The four
chains (1 and 3 brokers, 1 and 3 relays) are up at once and take turns round by round, so a
change in the machine's load hits them alike.

Reported: medians over --repeat rounds of each round's p50 and p99, in milliseconds, and the
share delivered within 5 s after the last publish (below 100%: saturated). Targets at
1,000/s: per-hop p50 under 1 ms and p99 under 5 ms; at 5,000/s: no saturation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import chain, channel, fill_tables, median, percentile, table
from live_throughput import PUBLISH_STREAM, SUBSCRIBE, TABLE_SIZE, relays, routed_at

from weeble.codec.wire import publish_request
from weeble.proto.v1 import client_pb2

STREAM_BATCH = 64  # what a link or stream message may carry when several are waiting


class Stopwatch:
    """The subscriber side: arrival time minus publish time of every notification."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self, ch: grpc.aio.Channel) -> None:
        call = ch.unary_stream(SUBSCRIBE, request_serializer=None,
                               response_deserializer=client_pb2.SubscriptionEvent.FromString)(
            client_pb2.SubscribeRequest(client="sink", sub_id="sink.1", filter="class == 0",
                                        max_batch=STREAM_BATCH).SerializeToString())
        first = await call.read()
        assert first.HasField("subscribed"), first
        self.task = asyncio.create_task(self._time(call))

    async def _time(self, call: Any) -> None:
        while (event := await call.read()) is not grpc.aio.EOF:
            now = time.time()
            if event.HasField("batch"):
                self.latencies.extend(now - n.published_at for n in event.batch.notifications)
            else:
                self.latencies.append(now - event.notification.published_at)


class Publisher:
    """Open loop: one request per notification, written by one task in order."""

    def __init__(self, ch: grpc.aio.Channel) -> None:
        self.call = ch.stream_stream(PUBLISH_STREAM, request_serializer=None,
                                     response_deserializer=client_pb2.PublishAck.FromString)()
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()
        # a first request naming the client, now: a broker ends a PublishStream whose first
        # request does not come within hello_timeout_s (5 s), and the first round comes after
        # the other chains' tables are filled (the brokers then delivered nothing at all)
        self.outbox.put_nowait(publish_request("src", []))
        self.tasks = [asyncio.create_task(self._write()), asyncio.create_task(self._acks())]

    async def _write(self) -> None:
        while True:
            await self.call.write(await self.outbox.get())

    async def _acks(self) -> None:
        while await self.call.read() is not grpc.aio.EOF:
            pass

    def publish(self, seq: int) -> None:
        n = client_pb2.Notification(publisher="src", seq=seq, published_at=time.time())
        n.attributes["class"].i = 0
        self.outbox.put_nowait(publish_request("src", [n.SerializeToString()]))

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.call.cancel()


async def one_round(watch: Stopwatch, pub: Publisher, rate: float, count: int,
                    seq: int) -> tuple[float, float, float]:
    """Publish `count` at `rate`/s; (p50 ms, p99 ms, share delivered within 5 s)."""
    watch.latencies.clear()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    sent = 0
    while sent < count:
        due = min(count, int((loop.time() - t0) * rate) + 1)
        while sent < due:  # everything due by now, each in its own request
            pub.publish(seq + sent)
            sent += 1
        await asyncio.sleep(max(0.0, t0 + sent / rate - loop.time()))
    deadline = loop.time() + 5
    while len(watch.latencies) < count and loop.time() < deadline:
        await asyncio.sleep(0.01)
    ms = sorted(x * 1000 for x in watch.latencies)
    return percentile(ms, 50), percentile(ms, 99), len(ms) / count


class Pipe:
    """One publisher -> brokers or relays -> one stopwatch, kept open between rounds."""

    def __init__(self, pub_address: str, sink_address: str) -> None:
        self.pub_address, self.sink_address = pub_address, sink_address
        self.watch = Stopwatch()
        self.seq = 1
        self._channels: list[grpc.aio.Channel] = []
        self._pub: Publisher | None = None

    async def open(self, routed: Any = None) -> None:
        sink_ch, pub_ch = channel(self.sink_address), channel(self.pub_address)
        self._channels = [sink_ch, pub_ch]
        await self.watch.start(sink_ch)
        if routed is not None:
            await routed()
        self._pub = Publisher(pub_ch)

    async def round(self, rate: float, count: int) -> tuple[float, float, float]:
        assert self._pub is not None, "open() first"
        result = await one_round(self.watch, self._pub, rate, count, self.seq)
        self.seq += count
        if result[2] < 1:
            print(f"  saturated: {1 - result[2]:.1%} of {count} not delivered within 5 s",
                  file=sys.stderr, flush=True)
            await asyncio.sleep(5)  # let the backlog drain before the next round
        return result

    async def close(self) -> None:
        if self._pub is not None:
            self._pub.close()
        if self.watch.task is not None:
            self.watch.task.cancel()
        for ch in self._channels:
            await ch.close()


async def measure(rates: list[float], seconds: float,
                  repeat: int) -> dict[tuple[float, str, int], list[tuple[float, float, float]]]:
    """Chains of 1 and 3 brokers and of 1 and 3 relays, all up at once; every round runs
    each of them in turn (in a rotating order), so the machine's load hits all alike."""
    with contextlib.ExitStack() as stack:
        pipes: dict[tuple[str, int], Pipe] = {}
        for length in (1, 3):
            bed = chain(length, link_batch=STREAM_BATCH)  # the brokers' default: no linger
            stack.callback(bed.close)
            await fill_tables(bed, bed.brokers[-1], TABLE_SIZE)
            pipes["broker", length] = Pipe(bed.address("b0").listen,
                                           bed.address(bed.brokers[-1]).listen)
            await pipes["broker", length].open(routed_at(bed))
            addrs = stack.enter_context(relays(length, 1)).addresses
            pipes["raw grpc", length] = Pipe(addrs[0], addrs[-1])
            await pipes["raw grpc", length].open()
        out: dict[tuple[float, str, int], list[tuple[float, float, float]]] = {}
        try:
            for rate in rates:
                count = int(rate * seconds)
                for r in range(repeat + 1):  # round 0 warms up
                    keys = list(pipes)
                    for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                        result = await pipes[key].round(rate, count)
                        if r:
                            out.setdefault((rate, *key), []).append(result)
        finally:
            for pipe in pipes.values():
                await pipe.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1000,5000", help="notifications/s (default: both)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round")
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds (median)")
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    rates = [float(x) for x in args.rates.split(",")]
    measured = asyncio.run(measure(rates, args.seconds, args.repeat))
    rows = []
    for rate in rates:
        for system in ("broker", "raw grpc"):
            result = {}
            for length in (1, 3):
                m = measured[rate, system, length]
                result[length] = (median([x[0] for x in m]), median([x[1] for x in m]),
                                  min(x[2] for x in m))
            (p50_1, p99_1, ok1), (p50_3, p99_3, ok3) = result[1], result[3]
            rows.append({"rate/s": rate, "system": system, "e2e p50 x1": p50_1,
                         "e2e p99 x1": p99_1, "e2e p50 x3": p50_3, "e2e p99 x3": p99_3,
                         "hop p50": (p50_3 - p50_1) / 2, "hop p99": (p99_3 - p99_1) / 2,
                         "delivered": f"{min(ok1, ok3):.1%}"})
    print(f"\nlatency in ms, unbatched, {TABLE_SIZE:,} subscriptions per table, median of"
          f" {args.repeat} rounds of {args.seconds:g} s; load average {load0:.1f} before,"
          f" {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    print(table(rows, list(rows[0])))
    for row in rows:
        if row["system"] != "broker":
            continue
        if row["rate/s"] <= 1000:
            ok = row["hop p50"] < 1 and row["hop p99"] < 5
            print(f"target at {row['rate/s']:,.0f}/s: hop p50 < 1 ms and p99 < 5 ms:"
                  f" {row['hop p50']:.3f} / {row['hop p99']:.3f} ms"
                  f" ({'met' if ok else 'MISSED'})")
        else:
            print(f"target at {row['rate/s']:,.0f}/s: no saturation: delivered"
                  f" {row['delivered']} ({'met' if row['delivered'] == '100.0%' else 'MISSED'})")


if __name__ == "__main__":
    main()
