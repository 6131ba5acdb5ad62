"""Replay: a (minimal) scenario on live brokers, K times, judged by the same checker.

The simulator is deterministic by seed; live brokers are not (real clocks, real scheduling), so
a replay is a rate: per try, whether the same rule failed, with the timing model's figures of
that try (R13: how far its hops, refresh gaps and timers strayed from the model, and the Δ the
checker recomputed with them), which say whether a try that did not fail ran under the timing
the failure needs.

Each try is one `weeble run SCENARIO --no-analysis --link-delays` in a process of its own (a
fresh gRPC runtime, every broker stopped on every way out), on the backend asked for, with the
scenario's link delays emulated in the brokers' link shapers (the simulator gave every hop
δmin..δmax; loopback alone gives a fraction of a millisecond, which decides the order of
notifications on paths of different lengths otherwise than the simulation did); its trace is judged
by the reference checker (weeble.check.history.check_run, no Spark), and explore.broken_rules
names the rules it breaks.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.chaos.explore import broken_rules

BREAKS = re.compile(r"^#\s*breaks:\s*(.+?)\s*$", re.M)


def expected_rule(text: str) -> str | None:
    """The rule a shrunk scenario breaks, from the comment `weeble shrink` wrote."""
    m = BREAKS.search(text)
    return m.group(1) if m else None


@dataclass
class Try:
    index: int
    run_dir: Path
    status: str  # the checker's verdict; `error` when the live run did not complete
    rules: list[str]
    reproduced: bool
    timing: dict[str, Any]
    wall: float
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"try": self.index, "run_dir": str(self.run_dir), "status": self.status,
                "rules": self.rules, "reproduced": self.reproduced, "timing": self.timing,
                "wall": round(self.wall, 1), "error": self.error}


def timing_figures(report: dict[str, Any]) -> dict[str, Any]:
    """The timing model's figures of a run (R13, R13e): its scalar figures and, when the
    checker recomputed Δ with the timing the run had, that."""
    t = report.get("timing") or {}
    out = {k: v for k, v in t.items() if isinstance(v, int | float | str | bool) or v is None}
    for k, v in (t.get("worst") or {}).items():  # the largest hop, refresh gap, timer lag
        out[f"worst_{k}"] = v
    retimed = t.get("retimed")
    if isinstance(retimed, dict):
        out["retimed"] = {k: v for k, v in retimed.items()
                          if isinstance(v, int | float | str | bool) or v is None}
    return out


def replay_once(scenario: Path, rule: str, index: int, *, backend: str, runs_dir: Path,
                timeout: float, link_delays: bool = True) -> Try:
    run_id = f"replay-{scenario.stem}-{index}-{int(time.time())}"
    command = [sys.executable, "-m", "weeble.cli", "run", str(scenario), "--no-analysis",
               "--quiet", "--any-ports", "--backend", backend, "--runs-dir", str(runs_dir),
               "--run-id", run_id, *(["--link-delays"] if link_delays else [])]
    start = time.perf_counter()
    run_dir = runs_dir / run_id
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return Try(index, run_dir, "error", [], False, {}, time.perf_counter() - start,
                   error=f"the live run took more than {timeout:g} s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Try(index, run_dir, "error", [], False, {}, time.perf_counter() - start,
                   error=f"weeble run exited {done.returncode}: {last}")
    from weeble.check.history import check_run

    report = check_run(run_dir)
    rules = [r["rule"] for r in broken_rules(report)]
    return Try(index, run_dir, report["verdict"]["status"], rules, rule in rules,
               timing_figures(report), time.perf_counter() - start)


def replay(scenario: Path, *, rule: str, tries: int, backend: str, runs_dir: Path,
           timeout: float, on_try: Any = None, link_delays: bool = True) -> list[Try]:
    out = []
    for i in range(1, tries + 1):
        t = replay_once(scenario, rule, i, backend=backend, runs_dir=runs_dir, timeout=timeout,
                        link_delays=link_delays)
        out.append(t)
        if on_try is not None:
            on_try(t)
    return out


__all__ = ["Try", "expected_rule", "replay", "replay_once", "timing_figures"]
