"""Helpers for the live tests that run whole testbeds (weeble/orchestrator/testbed.py).

Each testbed gets its own block of loopback addresses (127.1.x.y upwards, apart from the
127.0.0.x range of the single-broker tests and of a user's `weeble up`) and free ports, so
tests never collide with each other or with a run someone left up.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from weeble.core.filters import Filter
from weeble.core.legitimacy import LiveSub, SnapshotView, check
from weeble.model.scenario import Scenario, parse_scenario
from weeble.orchestrator.testbed import Testbed
from weeble.orchestrator.workload import LiveWorkload

REPO = Path(__file__).resolve().parents[2]
_blocks = itertools.count()
# a per-process second octet: two test sessions at once still get different addresses
_BASE = ipaddress.IPv4Address(f"127.{1 + os.getpid() % 200}.0.2")


def next_base_host(size: int = 16) -> str:
    """The first address of a fresh block of `size` loopback addresses."""
    return str(_BASE + size * next(_blocks))


def scenario(*, topology: dict[str, Any] | None = None, algorithm: str = "identity",
             hierarchical: bool = False, pi: float = 2.0, rho: float = 1.0,
             delta_max: float = 0.05, duration: float = 10, live: dict[str, Any] | None = None,
             **extra: Any) -> Scenario:
    """A live test scenario: 7-broker binary tree by default, fast leases (π=2 s, ρ=1 s)."""
    data: dict[str, Any] = {
        "name": "live-test",
        "duration": duration,
        "topology": topology or {"kind": "kary", "m": 2, "levels": 3},
        "routing": {"algorithm": algorithm, "hierarchical": hierarchical},
        "timing": {"pi": pi, "rho": rho, "delta_min": 0.0, "delta_max": delta_max},
        "live": {"base_host": next_base_host(), "metrics_port": None, "drain": 0.5,
                 "startup_timeout": 60, **(live or {})},
        **extra,
    }
    return parse_scenario(data, source="<test>")


def start(s: Scenario, runs_dir: Path) -> Testbed:
    """Plan and start a testbed; the caller (a fixture) must close it."""
    bed = Testbed.plan(s, runs_dir=runs_dir, any_ports=True, log_level="DEBUG")
    try:
        bed.up()
    except BaseException:
        bed.close()
        raise
    return bed


async def legitimacy(bed: Testbed, required: list[LiveSub],
                     allowed: list[LiveSub] | None = None) -> list[str]:
    """legitimacy.check over every broker's live admin snapshot ([] = legitimate)."""
    snaps = await bed.snapshots()
    views = {b: SnapshotView(snap["core"]) for b, snap in snaps.items()}
    return check(views, required, allowed if allowed is not None else required)


async def wait_for(probe: Callable[[], Awaitable[Any]], timeout: float, what: str,
                   every: float = 0.05) -> float:
    """Poll `probe` until it returns a truthy value; returns the seconds it took.

    A probe may also return a list of problems: [] (falsy) means "not yet" only when it is not
    a list; for lists, [] means done, and the last problems are reported on timeout."""
    t0 = time.monotonic()
    last: Any = None
    while True:
        last = await probe()
        if (last == []) if isinstance(last, list) else bool(last):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}: {last!r:.1500}")
        await asyncio.sleep(every)


def live_sub(sub_id: str, filter_text: str, client: str, broker: str) -> LiveSub:
    return LiveSub(sub_id, Filter.parse(filter_text), client, broker)


def run_and_check(data: dict[str, Any], tmp_path: Path, run_id: str,
                  timeout: float = 150) -> tuple[Path, dict[str, Any]]:
    """`weeble run` of a scenario given as data (its own loopback hosts, no analysis), then
    the reference checker over its run directory: (run directory, check_run's report)."""
    import yaml

    from weeble.check.history import check_run

    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    done = weeble("run", str(path), "--no-analysis", "--quiet", "--runs-dir", str(runs),
                  "--run-id", run_id, "--any-ports", "--base-host", next_base_host(16),
                  timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / run_id, check_run(runs / run_id)


def weeble(*args: str, timeout: float = 120, cwd: Path | None = None) -> Any:
    """Run the `weeble` command line in a subprocess (as a user would)."""
    import subprocess

    return subprocess.run([sys.executable, "-m", "weeble.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd or REPO)


async def under_load(bed: Testbed, s: Any, steps: Any) -> Any:
    """The scenario's workload for its duration, `steps(manager, workload)` beside it (the
    live manager, its clients the workload's); returns (what steps returned, the workload's
    stats)."""
    addresses = {b: a.listen for b, a in bed.addresses().items()}
    workload = LiveWorkload(s, addresses, bed.trace_dir, tokens=bed.client_token,
                            tls=bed.client_tls())
    loop = asyncio.get_running_loop()
    async with bed.reconfigurer(clients=workload, t0=loop.time()) as manager:
        load = asyncio.create_task(workload.run(s.duration))
        try:
            result = await steps(manager, workload)
        finally:
            stats = await load
    return result, stats
