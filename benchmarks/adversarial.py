"""The filter attack of issue 12 (finding 1), before and after, on one run.

    python benchmarks/adversarial.py
    python benchmarks/adversarial.py --notifications 300 --repeat 3

Part 1, parsing (in this process): the probe's filter `x != 0 && x != 1 && ...` at 1,000,
4,000 and 16,000 terms. "before" folds the terms one by one with `&` -- what the parser did
until issue 12 (each term rebuilt the set of excluded points: quadratic); "after" is
`Filter.parse` (linear). "verdict" is what a broker answers today: the text is accepted, or
refused with INVALID_ARGUMENT naming the limit, after "to verdict" seconds.

Part 2, live (3 broker processes in a chain, started as `weeble up` does): a subscriber at b2
(`k >= 0`), a publisher at b0 publishing --notifications notifications at --rate per second,
and a prober asking every broker's gRPC health service every 20 ms. Once without an attack
(the baseline), once while an attacker at b0 subscribes, alternately, the probe's 103 KB
filter (8,000 terms; refused now) and the largest distinct filter the limits allow, refreshing
each. Figures: notifications lost, health-check latency (p50/max: the event loop's stall),
publish acknowledgement latency, peak RSS of the brokers. Medians over --repeat runs.

Part 3, memory (one broker process, b1): a subscriber that opens its stream and reads nothing
and a link peer (this script, as neighbour b0) that subscribes to everything and reads
nothing, while a publisher sends --memory-count notifications of 200 KB. "before": the queues
bounded by count only (10,000 per queue, as before issue 12: byte limits set to 4 GiB);
"after": the defaults (64 MiB per queue). Figures: the broker's RSS at rest, at its peak, and
within 3 s after both peers left; notifications counted as undeliverable (stream full) and dropped
(link queue full). --memory-limit sets the "after" byte limits (MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, os.path.dirname(__file__))
import contextlib

from _live import chain, median, next_base_host, percentile, rss_mb, table

from weeble.codec.wire import Limits, WireError, hello, parse_filter
from weeble.core.filters import Filter
from weeble.orchestrator.testbed import Testbed
from weeble.proto.v1 import client_pb2, link_pb2
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.client import Publisher, Subscriber
from weeble.runtime.config import BrokerConfig, Tuning
from weeble.runtime.links import CONNECT_METHOD
from weeble.runtime.process import BrokerProcess

OLD_BUDGET_S = 60.0  # "before" at 16,000 terms takes about a minute on a quiet core


def probe_filter(terms: int, offset: int = 0) -> str:
    return " && ".join(f"x != {offset + i}" for i in range(terms))


def parse_rows(sizes: list[int]) -> list[dict[str, Any]]:
    t = Tuning()
    limits = Limits(filter_bytes=t.max_filter_bytes, filter_terms=t.max_filter_terms,
                    filter_attributes=t.max_filter_attributes,
                    notification_bytes=t.max_notification_bytes)
    rows = []
    spent = 0.0
    for n in sizes:
        text = probe_filter(n)
        start = time.perf_counter()
        after = Filter.parse(text)
        after_s = time.perf_counter() - start
        before_s: float | None = None
        if spent < OLD_BUDGET_S:
            start = time.perf_counter()
            folded = functools.reduce(lambda f, term: f & Filter.parse(term),
                                      text.split(" && "), Filter.everything())
            before_s = time.perf_counter() - start
            spent += before_s
            assert folded == after
        start = time.perf_counter()
        try:
            parse_filter(text + " && y == 1", "filter", limits)  # a text no cache has seen
            verdict = "accepted"
        except WireError as e:
            verdict = "refused: " + str(e).split("limit ")[-1].split("=")[0]
        rows.append({"terms": n, "bytes": len(text), "before s": before_s, "after s": after_s,
                     "verdict": verdict, "to verdict s": time.perf_counter() - start})
    return rows


async def live_phase(bed: Testbed, *, attack: bool, notifications: int, rate: float
                     ) -> dict[str, Any]:
    addr = {b: a.listen for b, a in bed.addresses().items()}
    health: list[float] = []
    acks: list[float] = []
    attacks = {"accepted": 0, "refused": 0}
    stop = asyncio.Event()
    pids = [int(bed.backend.handle(b) or 0) for b in bed.brokers]
    peak = [0.0]

    async def probe() -> None:
        channels = [grpc.aio.insecure_channel(a) for a in addr.values()]
        stubs = [health_pb2_grpc.HealthStub(c) for c in channels]
        try:
            while not stop.is_set():
                for stub in stubs:
                    start = time.perf_counter()
                    await stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
                    health.append(time.perf_counter() - start)
                peak[0] = max(peak[0], *(rss_mb(p) for p in pids if p))
                await asyncio.sleep(0.02)
        finally:
            for c in channels:
                await c.close()

    async def attacker() -> None:
        terms = Tuning().max_filter_terms
        async with Subscriber(addr["b0"], "mallory", rho=0.5,
                              token=bed.client_token("mallory")) as sub:
            for round_ in range(10_000):
                if stop.is_set():
                    return
                size = 8000 if round_ % 2 == 0 else terms
                try:
                    await sub.subscribe(probe_filter(size, round_ * 10_000))
                    attacks["accepted"] += 1
                except grpc.aio.AioRpcError:
                    attacks["refused"] += 1

    async with Subscriber(addr["b2"], "alice", rho=0.5, token=bed.client_token("alice")) as sub, \
            Publisher(addr["b0"], "pub", token=bed.client_token("pub")) as pub:
        await sub.subscribe("k >= 0")
        await asyncio.sleep(0.5)  # the subscription reaches b0
        tasks = [asyncio.create_task(probe())]
        if attack:
            tasks.append(asyncio.create_task(attacker()))
        for k in range(notifications):
            start = time.perf_counter()
            try:
                await pub.publish({"k": k})
                acks.append(time.perf_counter() - start)
            except (grpc.aio.AioRpcError, TimeoutError):
                acks.append(float("inf"))
            await asyncio.sleep(1 / rate)
        got: set[int] = set()
        deadline = time.monotonic() + 10
        while len(got) < notifications and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                got.add(int((await sub.get(timeout=0.5)).notification.attributes["k"]))
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    health.sort()
    acks.sort()
    return {"phase": "attack" if attack else "baseline", "lost": notifications - len(got),
            "health p50 ms": 1000 * percentile(health, 50),
            "health max ms": 1000 * health[-1] if health else None,
            "ack p50 ms": 1000 * percentile(acks, 50), "ack max ms": 1000 * acks[-1],
            "peak RSS MiB": peak[0], "filters accepted": attacks["accepted"] if attack else None,
            "filters refused": attacks["refused"] if attack else None}


def memory_phase(*, label: str, queue_bytes: int, count: int, blob: int = 200_000
                 ) -> dict[str, Any]:
    """A slow subscriber and a silent link peer against one broker process (part 3)."""
    import ipaddress
    import secrets
    import tempfile

    host = next_base_host()
    b0 = str(ipaddress.IPv4Address(host) + 1)
    workdir = Path(tempfile.mkdtemp(prefix="weeble-adversarial-mem-"))
    token, link_token = secrets.token_urlsafe(24), secrets.token_urlsafe(16)
    cfg = BrokerConfig.model_validate({
        "broker_id": "b1", "algorithm": "flooding", "root": "b1",
        "params": {"pi": 60.0, "rho": 30.0, "delta_min": 0.0, "delta_max": 0.05, "d": 2},
        "neighbors": {"b0": f"{b0}:7000"}, "listen_address": f"{host}:7000",
        "admin_address": f"{host}:7001", "admin_token": token, "link_token": link_token,
        "open_clients": True,
        "tuning": {"link_queue_bytes": queue_bytes, "client_queue_bytes": queue_bytes}})
    proc = BrokerProcess(cfg, workdir, log_level="WARNING")
    proc.start()
    try:
        proc.wait_ready(timeout=30)
        assert proc.pid is not None
        pid = proc.pid

        async def go() -> dict[str, Any]:
            base = rss_mb(pid)
            peer = grpc.aio.insecure_channel(cfg.listen_address)
            call = peer.stream_stream(CONNECT_METHOD)()
            await call.write(hello("b0", link_token).SerializeToString())
            await call.read()
            await call.write(link_pb2.Envelope(seq=1, sub=link_pb2.SubMsg(
                sub_id="s0", filter="k >= 0")).SerializeToString())
            slow = grpc.aio.insecure_channel(cfg.listen_address)
            sloth = slow.unary_stream(
                "/weeble.v1.Client/Subscribe", request_serializer=None,
                response_deserializer=client_pb2.SubscriptionEvent.FromString)(
                client_pb2.SubscribeRequest(client="sloth", sub_id="sloth.1",
                                            filter="k >= 0").SerializeToString())
            await sloth.read()
            await asyncio.sleep(0.3)
            peak = base
            async with Publisher(cfg.listen_address, "pub") as pub, \
                    AdminClient(cfg.admin_address, token) as admin:
                for k in range(count):
                    await pub.publish({"k": k, "blob": "x" * blob})
                    if k % 25 == 0:
                        peak = max(peak, rss_mb(pid))
                peak = max(peak, rss_mb(pid))
                counters = (await admin.snapshot())["counters"]
                call.cancel()
                sloth.cancel()
                await peer.close()
                await slow.close()
                after = peak
                for _ in range(30):  # the broker hands freed memory back on its 1 s sampling
                    await asyncio.sleep(0.1)
                    after = min(after, rss_mb(pid))
            return {"queues": label, "RSS at rest MiB": base, "peak MiB": peak,
                    "after they left MiB": after,
                    "stream_full": int(counters.get("undeliverable_stream_full", 0)),
                    "link overflow": int(counters.get("dropped_overflow", 0))}

        return asyncio.run(go())
    finally:
        proc.stop(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notifications", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="publications per second")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--skip-live", action="store_true", help="skip part 2")
    parser.add_argument("--memory-count", type=int, default=750,
                        help="200 KB notifications in part 3 (0: skip it)")
    parser.add_argument("--memory-limit", type=int, default=64, help="MiB per queue, after")
    args = parser.parse_args()

    print("parsing the probe's filter (before: term-by-term intersection; after: the parser)")
    print(table(parse_rows([int(s) for s in args.sizes.split(",")]),
                ["terms", "bytes", "before s", "after s", "verdict", "to verdict s"]))
    if not args.skip_live:
        runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "attack": []}
        for _ in range(args.repeat):
            bed = chain(3, runs_dir=Path(os.environ.get("TMPDIR", "/tmp")) / "weeble-adversarial")
            try:
                for attack in (False, True):
                    row = asyncio.run(live_phase(bed, attack=attack,
                                                 notifications=args.notifications, rate=args.rate))
                    runs[row["phase"]].append(row)
            finally:
                bed.close()
        rows = []
        for phase, results in runs.items():
            merged: dict[str, Any] = {"phase": phase}
            for key in results[0]:
                if key != "phase":
                    values = [r[key] for r in results if r[key] is not None]
                    merged[key] = median(values) if values else None
            rows.append(merged)
        print(f"\nlive: 3 brokers in a chain, {args.notifications} notifications b0 -> b2 at"
              f" {args.rate:g}/s, medians of {args.repeat} run(s)")
        print(table(rows, ["phase", "lost", "health p50 ms", "health max ms", "ack p50 ms",
                           "ack max ms", "peak RSS MiB", "filters accepted", "filters refused"]))
    if args.memory_count:
        mem = [memory_phase(label="before: count only", queue_bytes=4 * 1024**3,
                            count=args.memory_count),
               memory_phase(label=f"after: {args.memory_limit} MiB", count=args.memory_count,
                            queue_bytes=args.memory_limit * 1024 * 1024)]
        print(f"\nmemory: one broker, a subscriber and a link peer that read nothing,"
              f" {args.memory_count} notifications of 200 KB")
        print(table(mem, ["queues", "RSS at rest MiB", "peak MiB", "after they left MiB",
                          "stream_full", "link overflow"]))


if __name__ == "__main__":
    main()
