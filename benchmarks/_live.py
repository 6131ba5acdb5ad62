"""Shared by the live benchmarks: chains of real broker processes and their set-up.

A chain b0 - b1 - ... on its own loopback addresses (127.0.3.x), started through the
orchestrator's Testbed exactly as `weeble up` does, with tracing off (a benchmark measures the
brokers, not the disk) and leases long enough (π = 600 s) that no refresh traffic runs during a
measurement.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from weeble.model.scenario import parse_scenario
from weeble.orchestrator.testbed import Testbed
from weeble.proto.v1 import client_pb2, client_pb2_grpc

_blocks = itertools.count()
_BASE = ipaddress.IPv4Address(f"127.3.{os.getpid() % 250}.2")


def next_base_host() -> str:
    return str(_BASE + 16 * next(_blocks))


def chain(n: int, *, link_batch: int = 1, algorithm: str = "identity",
          metrics: bool = False, runs_dir: Path | None = None) -> Testbed:
    """Start a chain of n brokers (b0 first); the caller closes it."""
    s = parse_scenario({
        "name": f"bench-chain{n}",
        "duration": 60,
        "topology": {"kind": "chain", "brokers": n},
        "routing": {"algorithm": algorithm},
        "timing": {"pi": 600.0, "rho": 300.0, "delta_min": 0.0, "delta_max": 0.05},
        "trace": {"enabled": False},
        "live": {"base_host": next_base_host(), "link_batch": link_batch,
                 "metrics_port": 9100 if metrics else None, "drain": 0.2},
    }, source="<benchmark>")
    runs = runs_dir or Path(tempfile.mkdtemp(prefix="weeble-bench-"))
    bed = Testbed.plan(s, runs_dir=runs, any_ports=True, log_level="WARNING")
    try:
        bed.up()
    except BaseException:
        bed.close()
        raise
    return bed


def channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=[
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ])


async def fill_tables(bed: Testbed, broker: str, count: int, *, client: str = "filler",
                      first_class: int = 1_000_000, concurrency: int = 256) -> None:
    """Subscribe `count` distinct filters at `broker` (as Refresh RPCs: the core subscribes on
    the first one, no stream needed) and wait until every broker's table holds them all."""
    async with channel(bed.address(broker).listen) as ch:
        stub = client_pb2_grpc.ClientStub(ch)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                await stub.Refresh(client_pb2.SubscribeRequest(
                    client=client, sub_id=f"{client}.{i}", filter=f"class == {first_class + i}"),
                    timeout=30)

        await asyncio.gather(*(one(i) for i in range(count)))
    for _ in range(600):
        sizes = [sum(len(t) for t in (await bed.snapshot(b))["core"]["tables"])
                 for b in bed.brokers]
        if min(sizes) >= count:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"tables did not fill: {sizes}")


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return float(sorted_values[k])


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    lines = ["  ".join(c.rjust(widths[c]) for c in columns)]
    lines += ["  ".join(_fmt(r.get(c)).rjust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return "-" if value is None else str(value)
