"""Throughput of live brokers: 1 publisher -> a chain of 1 or 3 brokers -> 1 subscriber.

    python benchmarks/live_throughput.py                 # chains 1 and 3, batched and not
    python benchmarks/live_throughput.py --chains 1 --repeat 5 --count 50000

Every broker's routing table holds 10,000 subscriptions (distinct identity filters that the
notifications do not match, subscribed at the far end so they fill every table on the way)
plus the one subscription that receives. The publisher sits at b0, the subscriber at the last
broker. "Batched": publish requests of B notifications and link batches of up to B; "unbatched":
one notification per publish RPC and per link message.

The baseline, measured in the same run on the same machine: the same dataflow in raw grpc.aio
(publisher -> bidirectional stream -> relay process(es) -> subscribe stream), where each relay
parses what it receives and re-serializes it onward, with the same batching, and does nothing
else — the floor any Python gRPC broker stands on. Reported: notifications/s (median of
--repeat rounds after one warm-up round), and broker/raw. One more raw column, batched only:
the same relays, but the last hop streams batches to the subscriber too — the ceiling a
subscribe stream that carried several notifications per message would lift (weeble.v1 has one
notification per SubscriptionEvent).

The publisher is closed-loop (at most --outstanding notifications published and not yet
received), so no queue overflows and what is measured is sustained throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import chain, channel, fill_tables, median, next_base_host, table

from weeble.orchestrator.local import free_port
from weeble.proto.v1 import client_pb2, client_pb2_grpc, link_pb2

CONNECT = "/weeble.v1.Link/Connect"
RELAY = Path(__file__).resolve().parent / "_relay.py"
TABLE_SIZE = 10_000


# ---- measuring one round ----------------------------------------------------------------------


class Sink:
    """Counts notifications arriving on one subscribe stream."""

    def __init__(self) -> None:
        self.received = 0
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self, address: str, ch: grpc.aio.Channel) -> None:
        stub = client_pb2_grpc.ClientStub(ch)
        call = stub.Subscribe(client_pb2.SubscribeRequest(client="sink", sub_id="sink.1",
                                                          filter="class == 0"))
        first = await call.read()
        assert first.HasField("subscribed"), first
        self.task = asyncio.create_task(self._count(call))

    async def _count(self, call: Any) -> None:
        while (await call.read()) is not grpc.aio.EOF:
            self.received += 1
            self.changed.set()

    async def until(self, target: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while self.received < target:
                self.changed.clear()
                await self.changed.wait()


class BatchSink(Sink):
    """Counts notifications arriving in Batch envelopes on the relay's Follow stream."""

    async def start(self, address: str, ch: grpc.aio.Channel) -> None:
        call = ch.unary_stream("/weeble.bench.Sink/Follow")(b"")
        self.task = asyncio.create_task(self._count(call))

    async def _count(self, call: Any) -> None:
        while (data := await call.read()) is not grpc.aio.EOF:
            env = link_pb2.Envelope.FromString(data)
            self.received += len(env.batch.envelopes) if env.HasField("batch") else 1
            self.changed.set()


async def closed_loop(send: Any, requests: list[Any], per_request: int, sink: Sink,
                      outstanding: int, window: int, timeout: float) -> float:
    """Send all requests (at most `window` in flight, at most `outstanding` notifications not
    yet received); returns notifications/s from the first send to the last receipt."""
    base = sink.received
    total = len(requests) * per_request
    sem = asyncio.Semaphore(window)
    t0 = time.perf_counter()

    async def one(req: Any) -> None:
        try:
            await send(req)
        finally:
            sem.release()

    tasks = []
    sent = 0
    for req in requests:
        while sent - (sink.received - base) > outstanding:
            sink.changed.clear()
            await sink.changed.wait()
        await sem.acquire()
        tasks.append(asyncio.create_task(one(req)))
        sent += per_request
    await asyncio.gather(*tasks)
    await sink.until(base + total, timeout)
    return total / (time.perf_counter() - t0)


def notifications(count: int, start_seq: int) -> list[client_pb2.Notification]:
    out = []
    for i in range(count):
        n = client_pb2.Notification(publisher="src", seq=start_seq + i, published_at=time.time())
        n.attributes["class"].i = 0
        n.attributes["n"].i = i
        out.append(n)
    return out


# ---- the broker chain -------------------------------------------------------------------------


async def broker_rounds(length: int, batch: int, count: int, repeat: int,
                        outstanding: int, window: int) -> list[float]:
    bed = chain(length, link_batch=batch)
    try:
        await fill_tables(bed, bed.brokers[-1], TABLE_SIZE)
        async with channel(bed.address(bed.brokers[-1]).listen) as sink_ch, \
                channel(bed.address("b0").listen) as pub_ch:
            sink = Sink()
            await sink.start(bed.address(bed.brokers[-1]).listen, sink_ch)
            # the receiving subscription must have reached the publisher's broker
            for _ in range(200):
                snap = await bed.snapshot("b0")
                if any(e["sub_id"] == "sink.1" or e["filter"] == "class == 0"
                       for t in snap["core"]["tables"] for e in t):
                    break
                await asyncio.sleep(0.05)
            stub = client_pb2_grpc.ClientStub(pub_ch)
            seq = 1
            rates = []
            for r in range(repeat + 1):  # round 0 warms up
                ns = notifications(count, seq)
                seq += count
                reqs = [client_pb2.PublishRequest(client="src", notifications=ns[i:i + batch])
                        for i in range(0, count, batch)]
                rate = await closed_loop(lambda q: stub.Publish(q, timeout=60), reqs, batch,
                                         sink, outstanding, window, timeout=120)
                if r:
                    rates.append(rate)
            return rates
    finally:
        bed.close()


# ---- the raw grpc.aio baseline ----------------------------------------------------------------


def _batch(envs: list[bytes]) -> bytes:
    from weeble.broker.runtime.wire import batch_bytes

    return batch_bytes(envs)


@contextlib.contextmanager
def relays(length: int, batch: int) -> Iterator[list[str]]:
    """Start a chain of `length` raw relay processes; yields their addresses (first first)."""
    host = next_base_host()
    addrs = [f"{host}:{free_port(host)}" for _ in range(length)]
    procs = []
    try:
        for i in reversed(range(length)):  # the last relay first: each dials its successor
            cmd = [sys.executable, str(RELAY), "--listen", addrs[i], "--batch", str(batch)]
            if i + 1 < length:
                cmd += ["--next", addrs[i + 1]]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        yield addrs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


async def raw_rounds(length: int, batch: int, count: int, repeat: int, outstanding: int,
                     window: int, *, batched_delivery: bool = False) -> list[float]:
    with relays(length, batch) as addrs:
        async with channel(addrs[-1]) as sink_ch, channel(addrs[0]) as pub_ch:
            sink: Any = BatchSink() if batched_delivery else Sink()
            await sink.start(addrs[-1], sink_ch)
            call = pub_ch.stream_stream(CONNECT)()
            seq = 1
            rates = []
            for r in range(repeat + 1):
                ns = notifications(count, seq)
                seq += count
                envs = [link_pb2.Envelope(seq=n.seq, notify=link_pb2.NotifyMsg(notification=n))
                        .SerializeToString() for n in ns]
                reqs = [envs[i] if batch == 1 else _batch(envs[i:i + batch])
                        for i in range(0, count, batch)]
                # one stream: writes are sequential, like the broker's link writer
                rate = await closed_loop(call.write, reqs, batch, sink, outstanding, 1,
                                         timeout=120)
                if r:
                    rates.append(rate)
            call.cancel()
            return rates


# ---- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", default="1,3", help="chain lengths (default: 1,3)")
    parser.add_argument("--batch", type=int, default=100, help="batch size when batched")
    parser.add_argument("--count", type=int, default=30_000, help="notifications per round")
    parser.add_argument("--unbatched-count", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds (median)")
    parser.add_argument("--outstanding", type=int, default=5_000)
    parser.add_argument("--window", type=int, default=64,
                        help="concurrent publish RPCs (unbatched)")
    args = parser.parse_args()
    rows = []
    for length in (int(x) for x in args.chains.split(",")):
        for batch in (1, args.batch):
            count = args.count if batch > 1 else args.unbatched_count
            window = args.window if batch == 1 else 8
            broker = median(asyncio.run(broker_rounds(length, batch, count, args.repeat,
                                                      args.outstanding, window)))
            raw = median(asyncio.run(raw_rounds(length, batch, count, args.repeat,
                                                args.outstanding, window)))
            row = {"brokers": length, "batch": batch, "broker n/s": broker,
                   "raw grpc n/s": raw, "broker/raw": broker / raw, "raw, batched sink": None}
            if batch > 1:  # the ceiling of a subscribe stream that carried batches too
                row["raw, batched sink"] = median(asyncio.run(raw_rounds(
                    length, batch, count, args.repeat, args.outstanding, window,
                    batched_delivery=True)))
            rows.append(row)
            print(table(rows[-1:], list(rows[-1])), file=sys.stderr, flush=True)
    print(f"\nthroughput, {TABLE_SIZE:,} subscriptions in every table,"
          f" median of {args.repeat} rounds")
    print(table(rows, list(rows[0])))
    one = [r for r in rows if r["brokers"] == 1 and r["batch"] > 1]
    if one:
        r = one[0]
        print(f"targets: >= 50,000 n/s through one broker batched: {r['broker n/s']:,.0f}"
              f" ({'met' if r['broker n/s'] >= 50_000 else 'MISSED'});"
              f" >= 50% of raw: {min(x['broker/raw'] for x in rows):.0%} at worst"
              f" ({'met' if min(x['broker/raw'] for x in rows) >= 0.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
