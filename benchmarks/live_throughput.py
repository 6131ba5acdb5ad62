"""Throughput of live brokers: 1 publisher -> a chain of 1 or 3 brokers -> 1 subscriber.

    python benchmarks/live_throughput.py                 # chains 1 and 3, batched and not
    python benchmarks/live_throughput.py --chains 1 --skip-raw --skip-unbatched  # traced/untraced
    python benchmarks/live_throughput.py --chains 1 --repeat 5 --count 50000
    python benchmarks/live_throughput.py --chains 1 --skip-raw --profile prof/  # py-spy

Every broker's routing table holds 10,000 subscriptions (distinct identity filters that the
notifications do not match, subscribed at the far end so they fill every table on the way)
plus the one subscription that receives. The publisher sits at b0 and writes a PublishStream;
the subscriber at the last broker reads a Subscribe stream. "Batched" (--batch B): publish
requests of B notifications, link batches and subscribe-stream batches of up to B;
"unbatched": one notification per publish request, per link message and per stream message.

The baseline, measured in the same run on the same machine (the broker chain and the relay
chain are up at once and take turns round by round, so a change in the machine's load hits
both alike): the same dataflow and the same wire protocol in raw grpc.aio
(benchmarks/_relay.py: publish stream -> relay process(es) -> subscribe stream, with the same
batching at every hop, each relay parsing what it receives and serializing what it sends,
nothing else) -- the floor any Python gRPC broker stands on.
Reported: notifications/s (median of --repeat rounds after one warm-up round), broker/raw,
for chains of 3 their ratio to one broker, and the CPU time the brokers (relays) used per
notification, all processes of the chain together (Linux /proc; median over the rounds): the
figure that does not depend on how much of the machine the chain was given.

Tracing: by default every broker chain is measured twice in the same run, untraced ("broker")
and writing its traces as every live run does ("traced", a record per publication, delivery
and link message), side by side and taking turns like the relays, with their ratio
(traced/untraced; the target is 80%). `--trace` alone measures traced brokers only, `--trace
off` untraced ones only.

The publisher is closed-loop (at most --outstanding notifications published and not yet
received), so no queue overflows and what is measured is sustained throughput. Both sides
pre-build their requests, so the publisher's own encoding is not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import Profile, chain, channel, cpu_model, fill_tables, median, next_base_host, table

from weeble.codec.wire import publish_request
from weeble.orchestrator.local import free_port
from weeble.orchestrator.testbed import Testbed
from weeble.proto.v1 import client_pb2

PUBLISH_STREAM = "/weeble.v1.Client/PublishStream"
SUBSCRIBE = "/weeble.v1.Client/Subscribe"
RELAY = Path(__file__).resolve().parent / "_relay.py"
TABLE_SIZE = 10_000


# ---- measuring one round ----------------------------------------------------------------------


class Sink:
    """Counts notifications arriving on one subscribe stream (single or batched events)."""

    def __init__(self) -> None:
        self.received = 0
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self, ch: grpc.aio.Channel, max_batch: int) -> None:
        call = ch.unary_stream(SUBSCRIBE, request_serializer=None,
                               response_deserializer=client_pb2.SubscriptionEvent.FromString)(
            client_pb2.SubscribeRequest(client="sink", sub_id="sink.1", filter="class == 0",
                                        max_batch=max_batch,
                                        max_batch_bytes=64 * 1024 * 1024).SerializeToString())
        first = await call.read()
        assert first.HasField("subscribed"), first
        self.task = asyncio.create_task(self._count(call))

    async def _count(self, call: Any) -> None:
        while (event := await call.read()) is not grpc.aio.EOF:
            self.received += len(event.batch.notifications) if event.HasField("batch") else 1
            self.changed.set()

    async def until(self, target: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while self.received < target:
                self.changed.clear()
                await self.changed.wait()


class PublishStream:
    """One PublishStream of raw, pre-built requests; acknowledgements are read and counted."""

    def __init__(self, ch: grpc.aio.Channel) -> None:
        self.call = ch.stream_stream(PUBLISH_STREAM, request_serializer=None,
                                     response_deserializer=client_pb2.PublishAck.FromString)()
        self.acked = 0
        self.task = asyncio.create_task(self._acks())

    async def _acks(self) -> None:
        while (ack := await self.call.read()) is not grpc.aio.EOF:
            self.acked = ack.accepted

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self.task


async def closed_loop(stream: PublishStream, requests: list[bytes], per_request: int,
                      sink: Sink, outstanding: int, timeout: float) -> float:
    """Write all requests in order (at most `outstanding` notifications not yet received);
    returns notifications/s from the first write to the last receipt."""
    base = sink.received
    total = len(requests) * per_request
    t0 = time.perf_counter()
    sent = 0
    for req in requests:
        while sent - (sink.received - base) > outstanding:
            sink.changed.clear()
            await sink.changed.wait()
        try:
            await stream.call.write(req)
        except asyncio.InvalidStateError:  # the far end ended the stream: say how
            raise RuntimeError(f"the publish stream ended after {sent} notifications:"
                               f" {await stream.call.code()}: {await stream.call.details()}"
                               ) from None
        sent += per_request
    await sink.until(base + total, timeout)
    return total / (time.perf_counter() - t0)


def requests(count: int, start_seq: int, batch: int) -> list[bytes]:
    """Encoded PublishRequests of `batch` notifications each (class 0: the sink's filter)."""
    encoded = []
    for i in range(count):
        n = client_pb2.Notification(publisher="src", seq=start_seq + i, published_at=time.time())
        n.attributes["class"].i = 0
        n.attributes["n"].i = i
        encoded.append(n.SerializeToString())
    return [publish_request("src", encoded[i:i + batch]) for i in range(0, count, batch)]


class Pipe:
    """One publisher -> brokers or relays -> one sink, kept open between rounds."""

    def __init__(self, pub_address: str, sink_address: str, batch: int,
                 pids: list[int]) -> None:
        self.pub_address, self.sink_address, self.batch = pub_address, sink_address, batch
        self.pids = pids  # the brokers' or relays' processes, for their CPU time
        self.cpu: list[float] = []  # µs of CPU (all of them) per notification, each round
        # µs of CPU per notification of each process (the chain's, first first, then this
        # one: the publisher and the subscriber), each round
        self.cpu_each: list[list[float]] = []
        self.sink = Sink()
        self.seq = 1
        self._channels: list[grpc.aio.Channel] = []
        self._stream: PublishStream | None = None

    async def open(self, routed: Callable[[], Awaitable[None]] | None = None) -> None:
        sink_ch, pub_ch = channel(self.sink_address), channel(self.pub_address)
        self._channels = [sink_ch, pub_ch]
        await self.sink.start(sink_ch, self.batch)
        if routed is not None:  # the sink's subscription has reached the publisher's broker
            await routed()

    async def round(self, count: int, outstanding: int) -> float:
        assert self._channels, "open() first"
        reqs = requests(count, self.seq, self.batch)
        if self._stream is None:
            # opened just before its first request: a broker ends a stream whose first
            # request does not come within its hello timeout (5 s), and the other pipes'
            # rounds can take longer than that
            self._stream = PublishStream(self._channels[1])
        self.seq += count
        procs = [*self.pids, os.getpid()]
        before = [cpu_seconds(p) for p in procs]
        rate = await closed_loop(self._stream, reqs, self.batch, self.sink, outstanding,
                                 timeout=180)
        each = [(cpu_seconds(p) - b) / count * 1e6 for p, b in zip(procs, before, strict=True)]
        self.cpu.append(sum(each[:-1]))
        self.cpu_each.append(each)
        return rate

    async def close(self) -> None:
        if self._stream is not None:
            await self._stream.close()
        if self.sink.task is not None:
            self.sink.task.cancel()
        for ch in self._channels:
            await ch.close()


def routed_at(bed: Testbed, broker: str = "b0") -> Callable[[], Awaitable[None]]:
    """Waits until the sink's subscription (class == 0) is in `broker`'s table."""

    async def routed() -> None:
        for _ in range(200):
            snap = await bed.snapshot(broker)
            if any(e["filter"] == "class == 0" for t in snap["core"]["tables"] for e in t):
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the sink's subscription did not reach {broker}")

    return routed


async def measure(length: int, batch: int, count: int, repeat: int, outstanding: int, *,
                  raw: bool = True, tracing: str = "both",
                  profile_dir: Path | None = None
                  ) -> dict[str, tuple[list[float], float, list[float]]]:
    """Rounds through the broker chain(s) -- untraced ("broker") and traced ("traced"), or
    one of them (`tracing`: both, on, off) -- and (with `raw`) the relay chain, alternating:
    all are up at once and take turns, so a change in the machine's load hits each alike."""
    with contextlib.ExitStack() as stack:
        pipes: dict[str, Pipe] = {}
        beds: dict[str, Testbed] = {}
        for name, trace in (("broker", False), ("traced", True)):
            if tracing == "both" or (tracing == "on") == trace:
                bed = beds[name] = chain(length, link_batch=batch, trace=trace)
                stack.callback(bed.close)
                await fill_tables(bed, bed.brokers[-1], TABLE_SIZE)
        for name, bed in beds.items():
            pipes[name] = Pipe(bed.address("b0").listen, bed.address(bed.brokers[-1]).listen,
                               batch, [int(bed.backend.handle(b)) for b in bed.brokers])
            await pipes[name].open(routed_at(bed))
        if raw:
            relay = stack.enter_context(relays(length, batch))
            pipes["raw"] = Pipe(relay.addresses[0], relay.addresses[-1], batch, relay.pids)
            await pipes["raw"].open()
        profile = None
        if profile_dir is not None:
            pids = {(b if name == "broker" else f"{name}-{b}"): int(bed.backend.handle(b))
                    for name, bed in beds.items() for b in bed.brokers}
            profile = Profile(pids, profile_dir / f"chain{length}-batch{batch}")
        rates: dict[str, list[float]] = {name: [] for name in pipes}
        cpu_from = 1  # round 0 warms up
        try:
            for r in range(repeat + 1):  # round 0 warms up
                if r == 1 and profile is not None:
                    profile.__enter__()
                order = list(pipes) if r % 2 else list(reversed(pipes))
                for name in order:
                    rate = await pipes[name].round(count, outstanding)
                    if r:
                        rates[name].append(rate)
        finally:
            if profile is not None and repeat:
                profile.__exit__(None, None, None)
            for pipe in pipes.values():
                await pipe.close()
        if profile is not None:
            print(f"\nprofile, {length} broker(s), batch {batch}:\n{profile.summary()}",
                  file=sys.stderr, flush=True)
        return {name: (rates[name], median(pipes[name].cpu[cpu_from:]),
                       [median(list(x)) for x in zip(*pipes[name].cpu_each[cpu_from:],
                                                     strict=True)])
                for name in pipes}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RelayChain(NamedTuple):
    addresses: list[str]
    pids: list[int]


# ---- the raw grpc.aio baseline ----------------------------------------------------------------


@contextlib.contextmanager
def relays(length: int, batch: int) -> Iterator[RelayChain]:
    """Start a chain of `length` raw relay processes (first first)."""
    host = next_base_host()
    addrs = [f"{host}:{free_port(host)}" for _ in range(length)]
    procs = []
    try:
        for i in reversed(range(length)):  # the last relay first: each dials its successor
            cmd = [sys.executable, str(RELAY), "--listen", addrs[i], "--batch", str(batch)]
            if i + 1 < length:
                cmd += ["--next", addrs[i + 1]]
            # a session of its own, as every broker process has (process.py): with the
            # kernel's autogroup scheduling each session gets its own share of the CPUs, so
            # relays sharing the benchmark's session would be scheduled differently
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                    start_new_session=True)
            procs.append(proc)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        yield RelayChain(addrs, [proc.pid for proc in reversed(procs)])
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


# ---- main -------------------------------------------------------------------------------------


def ceilings(each: dict[tuple[int, int, str], list[float]]) -> str:
    """What the CPU time measured allows on this machine's cores: a chain (its processes
    and this one: the publisher and the subscriber) carries at most cores / (their CPU µs
    per notification together) and 1 / (its busiest process's), whatever its pipelining."""
    cores = os.cpu_count() or 1
    lines = [f"CPU µs per notification of each process (median of the rounds) and the"
             f" throughput it allows on {cores} cores:"]
    ceiling: dict[tuple[int, int, str], float] = {}
    for (length, batch, name), cpu in each.items():
        if not cpu or min(cpu) <= 0:
            continue
        ceiling[length, batch, name] = top = min(cores * 1e6 / sum(cpu), 1e6 / max(cpu))
        procs = ", ".join(f"{'r' if name == 'raw' else 'b'}{i} {c:.1f}"
                          for i, c in enumerate(cpu[:-1]))
        lines.append(f"  {name}, {length} x batch {batch}: {procs}, client {cpu[-1]:.1f};"
                     f" at most {top:,.0f} n/s")
    for (length, batch, name), top in ceiling.items():
        one = ceiling.get((1, batch, name))
        if length > 1 and one:
            lines.append(f"  {name}, batch {batch}: chain of {length} / one, at most"
                         f" {top / one:.2f} (the CPU ceiling of the ratio)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", default="1,3", help="chain lengths (default: 1,3)")
    parser.add_argument("--batch", type=int, default=100, help="batch size when batched")
    parser.add_argument("--count", type=int, default=100_000, help="notifications per round")
    parser.add_argument("--unbatched-count", type=int, default=10_000)
    parser.add_argument("--skip-unbatched", action="store_true",
                        help="batched rounds only (no batch of 1)")
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds (median)")
    parser.add_argument("--outstanding", type=int, default=5_000)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample the brokers with py-spy during the measured rounds, write"
                             " the raw stacks to DIR and print a summary")
    parser.add_argument("--skip-raw", action="store_true", help="brokers only (no baseline)")
    parser.add_argument("--trace", nargs="?", const="on", default="both",
                        choices=("both", "on", "off"),
                        help="both (default): an untraced and a traced chain side by side, in"
                             " the same run; on (--trace alone): only brokers that write their"
                             " traces (a record per message, as live runs do); off: only"
                             " untraced brokers")
    args = parser.parse_args()
    rows = []
    each: dict[tuple[int, int, str], list[float]] = {}  # CPU µs/n of each process
    load0 = os.getloadavg()[0]
    traced = args.trace != "off"
    batches = (args.batch,) if args.skip_unbatched else (1, args.batch)
    for length in (int(x) for x in args.chains.split(",")):
        for batch in batches:
            count = args.count if batch > 1 else args.unbatched_count
            rates = asyncio.run(measure(length, batch, count, args.repeat, args.outstanding,
                                        raw=not args.skip_raw, tracing=args.trace,
                                        profile_dir=args.profile))
            each |= {(length, batch, name): r[2] for name, r in rates.items()}
            # "broker": the untraced chain, or the only one measured (--trace on)
            main_name = "broker" if "broker" in rates else "traced"
            broker = median(rates[main_name][0])
            raw = median(rates["raw"][0]) if "raw" in rates else float("nan")
            row: dict[str, Any] = {"brokers": length, "batch": batch, "broker n/s": broker}
            if args.trace == "both":
                row["traced n/s"] = median(rates["traced"][0])
                row["traced/untraced"] = row["traced n/s"] / broker
            row |= {"raw grpc n/s": raw, "broker/raw": broker / raw, "/ one broker": None,
                    "broker cpu µs/n": rates[main_name][1]}
            if args.trace == "both":
                row["traced cpu µs/n"] = rates["traced"][1]
            row["raw cpu µs/n"] = rates["raw"][1] if "raw" in rates else None
            one = [r for r in rows if r["brokers"] == 1 and r["batch"] == batch]
            if length > 1 and one:
                row["/ one broker"] = broker / one[0]["broker n/s"]
            rows.append(row)
            print(table(rows[-1:], list(rows[-1])), file=sys.stderr, flush=True)
    what = {"both": "; broker: untraced, traced: the same chain writing its traces",
            "on": ", brokers tracing", "off": ""}[args.trace]
    print(f"\nthroughput, {TABLE_SIZE:,} subscriptions in every table, median of {args.repeat}"
          f" rounds{what}; {cpu_model()}, {os.cpu_count()} cores; load average {load0:.1f}"
          f" before, {os.getloadavg()[0]:.1f} after")
    print(table(rows, list(rows[0])))
    print(f"\n{ceilings(each)}")  # after a blank line: before_after.py reads the table above
    batched = [r for r in rows if r["batch"] > 1]
    one = [r for r in batched if r["brokers"] == 1]
    if one:
        r = one[0]
        print(f"target >= 50,000 n/s through one broker, batched: {r['broker n/s']:,.0f}"
              f" ({'met' if r['broker n/s'] >= 50_000 else 'MISSED'})")
    if batched and not args.skip_raw:
        worst = min(r["broker/raw"] for r in batched)
        print(f"target >= 50% of raw gRPC, batched: {worst:.0%} at worst"
              f" ({'met' if worst >= 0.5 else 'MISSED'})")
    chains = [r for r in batched if r["/ one broker"] is not None]
    if chains:
        worst = min(r["/ one broker"] for r in chains)
        print(f"target chains >= 60% of one broker, batched: {worst:.0%}"
              f" ({'met' if worst >= 0.6 else 'MISSED'})")
    if traced and args.trace == "both" and batched:
        worst = min(r["traced/untraced"] for r in batched)
        print(f"target traced >= 80% of untraced, batched: {worst:.0%} at worst"
              f" ({'met' if worst >= 0.8 else 'MISSED'})")


if __name__ == "__main__":
    main()
