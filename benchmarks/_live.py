"""Shared by the live benchmarks: chains and trees of real broker processes, their set-up,
and py-spy profiles of them.

Brokers b0, b1, ... on their own loopback addresses (127.N.x.y, a block per test bed), started
through the orchestrator's Testbed exactly as `weeble up` does, with tracing off (a benchmark
measures the brokers, not the disk) and leases long enough (π = 600 s) that no refresh traffic
runs during a measurement.
"""

from __future__ import annotations

import asyncio
import atexit
import ipaddress
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from weeble.model.scenario import parse_scenario
from weeble.orchestrator.testbed import Testbed
from weeble.proto.v1 import client_pb2, client_pb2_grpc

_blocks = itertools.count()
_BASE = ipaddress.IPv4Address(f"127.{3 + os.getpid() % 100}.0.2")


def next_base_host() -> str:
    """A fresh block of 256 loopback addresses (a broker per address, b0 first)."""
    return str(_BASE + 256 * next(_blocks))


def chain(n: int, *, link_batch: int = 1, algorithm: str = "identity",
          metrics: bool = False, trace: bool = False, runs_dir: Path | None = None) -> Testbed:
    """Start a chain of n brokers (b0 first); the caller closes it."""
    return testbed({"kind": "chain", "brokers": n}, name=f"bench-chain{n}",
                   link_batch=link_batch, algorithm=algorithm, metrics=metrics, trace=trace,
                   runs_dir=runs_dir)


def testbed(topology: dict[str, Any], *, name: str, link_batch: int = 1,
            algorithm: str = "identity", metrics: bool = False, trace: bool = False,
            runs_dir: Path | None = None, startup_timeout: float = 30.0) -> Testbed:
    """Start the brokers of `topology` (a scenario topology block); the caller closes it.
    With `trace`, every broker writes its trace (a record per message, as in `weeble run`)."""
    s = parse_scenario({
        "name": name,
        "duration": 60,
        "topology": topology,
        "routing": {"algorithm": algorithm},
        "timing": {"pi": 600.0, "rho": 300.0, "delta_min": 0.0, "delta_max": 0.05},
        "trace": {"enabled": trace},
        # open clients: the benchmark's raw-RPC clients carry no token (a token is checked
        # once per RPC, i.e. once per stream, so this leaves the per-notification path as is)
        "live": {"base_host": next_base_host(), "link_batch": link_batch, "open_clients": True,
                 "metrics_port": 9100 if metrics else None, "drain": 0.2,
                 "startup_timeout": startup_timeout},
    }, source="<benchmark>")
    if runs_dir is None:
        runs_dir = Path(tempfile.mkdtemp(prefix="weeble-bench-"))
        atexit.register(shutil.rmtree, runs_dir, ignore_errors=True)
    runs = runs_dir
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


def cpu_model() -> str:
    """The machine's CPU model, for a benchmark's header (figures without it do not carry
    over between machines)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


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


class Profile:
    """Sample processes with py-spy while a block runs; `summary()` lists where time went.

        with Profile({"b0": pid}, out_dir) as prof:
            ...  # the measured work
        print(prof.summary())

    py-spy (pip install py-spy) attaches to running processes, so the brokers need no
    change. Only Python frames are sampled (the GIL holder and threads waiting on I/O are
    told apart by py-spy's idle filter); time inside gRPC's C core shows at its Python caller.
    """

    def __init__(self, pids: dict[str, int], out_dir: Path, *, rate: int = 200) -> None:
        self.pids = pids
        self.out_dir = out_dir
        self.rate = rate
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Profile:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise SystemExit("--profile needs py-spy (pip install py-spy)")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, pid in self.pids.items():
            self._procs[name] = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "raw",
                 "--nolineno", "--nonblocking", "--output", str(self.out_dir / f"{name}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # py-spy attaches
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs.values():
            proc.send_signal(signal.SIGINT)
        for proc in self._procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def summary(self, top: int = 25) -> str:
        out = []
        for name in self._procs:
            path = self.out_dir / f"{name}.txt"
            if not path.exists():
                out.append(f"{name}: no profile written")
                continue
            out.append(summarize_collapsed(path, title=name, top=top))
        return "\n\n".join(out)


def summarize_collapsed(path: Path, *, title: str, top: int = 25) -> str:
    """Collapsed stacks ("f1;f2;f3 count" lines) -> the functions with most inclusive and
    most own samples, as percentages of all samples."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    if not total:
        return f"{title}: no samples"
    lines = [f"{title}: {total} samples", f"{'incl%':>6} {'own%':>6}  function"]
    for f, n in inclusive.most_common(top):
        lines.append(f"{100 * n / total:6.1f} {100 * own[f] / total:6.1f}  {f}")
    lines.append(f"{'own%':>6}  function (by own time)")
    for f, n in own.most_common(top):
        lines.append(f"{100 * n / total:6.1f}  {f}")
    return "\n".join(lines)


def _short(frame: str) -> str:
    """'func (/long/path/site-packages/grpc/aio/_call.py)' -> 'func (grpc/aio/_call.py)'."""
    func, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/weeble/", "/lib/python3"):
        i = where.rfind(marker)
        if i >= 0:
            where = where[i + len(marker):] if marker != "/weeble/" else "weeble/" + where[
                i + len(marker):]
            break
    return f"{func} ({where})" if where else func
