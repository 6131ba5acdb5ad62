"""Latency of live brokers, nothing held back for a batch, at 1,000 and 5,000 notifications/s.

    python benchmarks/live_latency.py
    python benchmarks/live_latency.py --rates 1000,5000 --seconds 3 --repeat 3
    python benchmarks/live_latency.py --rates 1000 --publishers one   # issue 13's definition

A publisher at b0 publishes at a steady rate (open loop) on a PublishStream; a subscriber at
the end of a chain of 1 or 3 brokers timestamps each arrival. Two publishers (--publishers):
"library", the client library's `Publisher` (weeble/runtime/client.py; `send` per
notification): what a user gets, a request at once while the broker has acknowledged every
request before it, and what was sent meanwhile in one request when the acknowledgement comes
(Nagle's algorithm with the PublishAck as the ACK: never a timer); "nodelay", the same
library with `nodelay=True`: what piled up while the previous request was being written
(the library before stop 36); and "one", one request per notification whatever piles up
(issue 13's "unbatched": the benchmark's only publisher before stop 36).
End-to-end latency = arrival - publish time (one machine, one clock; the publish time is
stamped when the publisher's loop publishes it, so what this process's own loop is late by
is not in it, what its writer queue holds is).
Its two client legs are the same in both chains, so per broker-to-broker hop = (latency
through 3 brokers - through 1) / 2, for p50 and (as an estimate) for p99. Every table holds
10,000 subscriptions, as in the throughput benchmark.

Nothing is held back to fill a batch anywhere: the brokers' links and streams run with zero
linger (the default), so a gRPC message carries more than one notification only when several
are already waiting when the link or stream can write. Baseline, in the same run: the raw
grpc.aio relays of live_throughput.py (same protocol; a relay forwards what one message
brought in one message) measured the same way, with the same publishers. The four chains (1
and 3 brokers, 1 and 3 relays) are up at once and take turns round by round (each publisher
in turn), so a change in the machine's load hits them alike.

Reported: medians over --repeat rounds of each round's p50 and p99, in milliseconds, and the
share delivered within 5 s after the last publish (below 100%: saturated). Targets at
1,000/s (issue 25 item 2): through a chain of 3, p50 under 1 ms and p99 under 5 ms; per hop
(issue 13) the same; at 5,000/s: no saturation.
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
from live_throughput import (
    PUBLISH_STREAM,
    SUBSCRIBE,
    TABLE_SIZE,
    cpu_model,
    cpu_seconds,
    relays,
    routed_at,
)

from weeble.codec.wire import publish_request
from weeble.proto.v1 import client_pb2
from weeble.runtime import client

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


class OnePerRequest:
    """One request per notification, written by one task in order, whatever piles up."""

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

    async def publish(self, seq: int) -> None:
        n = client_pb2.Notification(publisher="src", seq=seq, published_at=time.time())
        n.attributes["class"].i = 0
        self.outbox.put_nowait(publish_request("src", [n.SerializeToString()]))

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.call.cancel()


class Library:
    """The client library's Publisher: `send` queues, its writer writes what is waiting."""

    def __init__(self, address: str, publisher_id: str, *, nodelay: bool = False) -> None:
        # its stream opens at the first send (the warm-up round), so the broker's hello
        # timeout cannot end it while the other chains' tables fill
        self.pub = client.Publisher(address, publisher_id, nodelay=nodelay)

    async def publish(self, seq: int) -> None:
        await self.pub.send({"class": 0})  # waits only with `window` unacknowledged

    async def close(self) -> None:
        await self.pub.close()


PUBLISHERS = ("library", "nodelay", "one")


async def one_round(watch: Stopwatch, pub: OnePerRequest | Library, rate: float, count: int,
                    seq: int) -> tuple[float, float, float]:
    """Publish `count` at `rate`/s; (p50 ms, p99 ms, share delivered within 5 s)."""
    watch.latencies.clear()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    sent = 0
    while sent < count:
        due = min(count, int((loop.time() - t0) * rate) + 1)
        while sent < due:  # everything due by now, each in its own request
            await pub.publish(seq + sent)
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
        self._pubs: dict[str, OnePerRequest | Library] = {}

    async def open(self, publishers: list[str], routed: Any = None) -> None:
        sink_ch, pub_ch = channel(self.sink_address), channel(self.pub_address)
        self._channels = [sink_ch, pub_ch]
        await self.watch.start(sink_ch)
        if routed is not None:
            await routed()
        # each publisher its own publisher id: the brokers see two independent sources
        for name in publishers:
            self._pubs[name] = (OnePerRequest(pub_ch) if name == "one"
                                else Library(self.pub_address, f"src-{name}",
                                             nodelay=name == "nodelay"))

    async def round(self, publisher: str, rate: float,
                    count: int) -> tuple[float, float, float]:
        assert publisher in self._pubs, "open() first"
        result = await one_round(self.watch, self._pubs[publisher], rate, count, self.seq)
        self.seq += count
        if result[2] < 1:
            print(f"  saturated: {1 - result[2]:.1%} of {count} not delivered within 5 s",
                  file=sys.stderr, flush=True)
            await asyncio.sleep(5)  # let the backlog drain before the next round
        return result

    async def close(self) -> None:
        for pub in self._pubs.values():
            await pub.close()
        if self.watch.task is not None:
            self.watch.task.cancel()
        for ch in self._channels:
            await ch.close()


Key = tuple[float, str, str, int]  # rate, publisher, system, chain length
Round = tuple[float, float, float, float, float]  # p50, p99, delivered, CPU µs/n chain, self


async def measure(rates: list[float], seconds: float, repeat: int,
                  publishers: list[str]) -> dict[Key, list[Round]]:
    """Chains of 1 and 3 brokers and of 1 and 3 relays, all up at once; every round runs
    each of them with each publisher in turn (in a rotating order), so the machine's load
    hits all alike."""
    with contextlib.ExitStack() as stack:
        pipes: dict[tuple[str, int], Pipe] = {}
        pids: dict[tuple[str, int], list[int]] = {}
        for length in (1, 3):
            bed = chain(length, link_batch=STREAM_BATCH)  # the brokers' default: no linger
            stack.callback(bed.close)
            await fill_tables(bed, bed.brokers[-1], TABLE_SIZE)
            pipes["broker", length] = Pipe(bed.address("b0").listen,
                                           bed.address(bed.brokers[-1]).listen)
            pids["broker", length] = [int(bed.backend.handle(b)) for b in bed.brokers]
            await pipes["broker", length].open(publishers, routed_at(bed))
            # a relay forwards what one message brought in one message (up to 64, as the
            # brokers' links and the stopwatch's stream)
            relay = stack.enter_context(relays(length, STREAM_BATCH))
            pipes["raw grpc", length] = Pipe(relay.addresses[0], relay.addresses[-1])
            pids["raw grpc", length] = relay.pids
            await pipes["raw grpc", length].open(publishers)
        out: dict[Key, list[Round]] = {}
        me = os.getpid()
        try:
            for rate in rates:
                count = int(rate * seconds)
                for r in range(repeat + 1):  # round 0 warms up
                    keys = [(pub, *key) for key in pipes for pub in publishers]
                    for pub, *key in keys[r % len(keys):] + keys[:r % len(keys)]:
                        system, length = key[0], int(key[1])
                        chain_cpu0 = sum(cpu_seconds(p) for p in pids[system, length])
                        cpu0 = cpu_seconds(me)
                        p50, p99, ok = await pipes[system, length].round(pub, rate, count)
                        chain_cpu = sum(cpu_seconds(p) for p in pids[system, length])
                        if r:
                            out.setdefault((rate, pub, system, length), []).append(
                                (p50, p99, ok, (chain_cpu - chain_cpu0) / count * 1e6,
                                 (cpu_seconds(me) - cpu0) / count * 1e6))
        finally:
            for pipe in pipes.values():
                await pipe.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1000,5000", help="notifications/s (default: both)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round")
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds (median)")
    parser.add_argument("--publishers", default="library,nodelay,one",
                        help="library (the client library's Publisher), nodelay (it with"
                             " nodelay=True), one (a request per notification), comma-separated"
                             " (default: all three)")
    args = parser.parse_args()
    publishers = args.publishers.split(",")
    for name in publishers:
        if name not in PUBLISHERS:
            parser.error(f"--publishers: unknown publisher {name!r} (library, nodelay, one)")
    load0 = os.getloadavg()[0]
    rates = [float(x) for x in args.rates.split(",")]
    measured = asyncio.run(measure(rates, args.seconds, args.repeat, publishers))
    rows = []
    for rate in rates:
        for pub in publishers:
            for system in ("broker", "raw grpc"):
                result = {}
                for length in (1, 3):
                    m = measured[rate, pub, system, length]
                    result[length] = [median([x[i] for x in m]) for i in (0, 1, 3, 4)] + [
                        min(x[2] for x in m)]
                (p50_1, p99_1, _, _, ok1), (p50_3, p99_3, cpu3, me3, ok3) = result[1], result[3]
                rows.append({"rate/s": rate, "publisher": pub, "system": system,
                             "e2e p50 x1": p50_1, "e2e p99 x1": p99_1, "e2e p50 x3": p50_3,
                             "e2e p99 x3": p99_3, "hop p50": (p50_3 - p50_1) / 2,
                             "hop p99": (p99_3 - p99_1) / 2, "delivered": f"{min(ok1, ok3):.1%}",
                             "cpu µs/n x3": cpu3, "client cpu µs/n": me3})
    print(f"\nlatency in ms, nothing held back, {TABLE_SIZE:,} subscriptions per table, median"
          f" of {args.repeat} rounds of {args.seconds:g} s; load average {load0:.1f} before,"
          f" {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores, {cpu_model()}); cpu µs/n"
          " x3: the 3 brokers' (relays') CPU per notification, client: this process's")
    print(table(rows, list(rows[0])))
    for row in rows:
        if row["system"] != "broker":
            continue
        who = f"{row['rate/s']:,.0f}/s, publisher {row['publisher']}"
        if row["rate/s"] <= 1000:
            ok = row["e2e p50 x3"] < 1 and row["e2e p99 x3"] < 5
            print(f"target at {who}: through 3 brokers p50 < 1 ms and p99 < 5 ms:"
                  f" {row['e2e p50 x3']:.3f} / {row['e2e p99 x3']:.3f} ms"
                  f" ({'met' if ok else 'MISSED'})")
            ok = row["hop p50"] < 1 and row["hop p99"] < 5
            print(f"target at {who}: hop p50 < 1 ms and p99 < 5 ms:"
                  f" {row['hop p50']:.3f} / {row['hop p99']:.3f} ms"
                  f" ({'met' if ok else 'MISSED'})")
        else:
            print(f"target at {who}: no saturation: delivered"
                  f" {row['delivered']} ({'met' if row['delivered'] == '100.0%' else 'MISSED'})")


if __name__ == "__main__":
    main()
