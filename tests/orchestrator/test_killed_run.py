"""A `weeble run` killed at seeded random moments (SIGTERM during start-up, SIGKILL of the
orchestrator during the workload, SIGINT during the shut-down) leaves nothing that `weeble
clean` cannot find and remove: no broker process, no listening port; and its run directory
stays readable by `weeble check`, which gives a status of the contract (or, when the run died
before its brokers wrote a trace, says so as bad input) (issue 23 item 5)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.orchestrator.leaks import leaked, snapshot
from tests.runtime.livebed import REPO, next_base_host, weeble
from weeble.check.status import BAD_INPUT, STATUSES

DURATION = 8  # s of workload
# (signal, when: a seeded random moment in a span of the run) for start-up (SIGTERM: the
# issue's broker left behind), the workload (SIGKILL: the orchestrator cleans up nothing) and
# the shut-down after it (Ctrl-C). The workload's moment counts from the testbed being up: a
# loaded machine can take longer than 4 s to start one, and a SIGKILL before the state file
# named any broker left `weeble clean` nothing to end
MOMENTS = ((signal.SIGTERM, (0.3, 2.0), False), (signal.SIGKILL, (0.5, 3.0), True),
           (signal.SIGINT, (DURATION + 0.5, DURATION + 2.0), False))


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return True
    return False


def _ours(marker: str) -> list[int]:
    """Every process whose command line names the test's folder (the run, its analysis)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
    return pids


def _wait_up(state: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until the run's testbed is up (a wait, not a figure: 180 s on a loaded machine)."""
    deadline = time.monotonic() + 180
    while proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(state.read_text()).get("state") == "up":
                return
        assert time.monotonic() < deadline, "the run's testbed never came up"
        time.sleep(0.1)


def test_a_run_killed_at_random_moments_leaves_nothing_behind(tmp_path: Path) -> None:
    rng = random.Random(23)
    runs = tmp_path / "runs"
    before = snapshot(str(tmp_path))
    try:
        killed = 0
        for i, (sig, span, after_up) in enumerate(MOMENTS):
            delay = rng.uniform(*span)
            proc = subprocess.Popen(  # judged below by weeble check, not by its analysis
                [sys.executable, "-m", "weeble.cli", "run", str(REPO / "scenarios" /
                 "quickstart.yaml"), "--duration", str(DURATION), "--no-analysis",
                 "--runs-dir", str(runs), "--run-id", f"k{i}", "--base-host",
                 next_base_host(), "--any-ports", "--quiet"],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if after_up:
                _wait_up(runs / f"k{i}" / "testbed.json", proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=delay)  # a fast machine may be done with the shut-down
            crashed = proc.poll() is None and sig == signal.SIGKILL
            if proc.poll() is None:
                proc.send_signal(sig)
                killed += 1
            proc.wait(timeout=300)  # SIGINT, SIGTERM: it takes its brokers down itself
            result = weeble("clean", "--runs-dir", str(runs), timeout=180)
            assert result.returncode == 0, (sig, delay, result.stdout, result.stderr)
            assert "clean:" in result.stdout  # it says what it ended and removed
            if crashed:  # its brokers ran on: weeble clean ended them
                assert f"ended run k{i}" in result.stdout, result.stdout
            left = leaked(before, snapshot(str(tmp_path)))
            assert not left.get("processes"), (sig, delay, result.stdout, left)
            run_dir = runs / f"k{i}"
            state = run_dir / "testbed.json"
            if state.exists():  # planned far enough to name its brokers' addresses
                brokers = json.loads(state.read_text())["brokers"]
                held = [b for b, x in brokers.items() if _listening(x["listen"])]
                assert not held, (sig, delay, held)
            check = weeble("check", str(run_dir), timeout=180)
            codes = {s.exit_code for s in STATUSES}
            if check.returncode == BAD_INPUT:  # no trace to judge: said in words
                assert check.stderr.strip().startswith("weeble"), check.stderr
            else:
                assert check.returncode in codes, (sig, delay, check.returncode, check.stderr)
                assert "verdict: " in check.stdout, check.stdout
        assert killed >= 2  # start-up and workload last longer than their moments anywhere
    finally:
        for pid in _ours(str(tmp_path)):  # e.g. an analysis the orchestrator's death orphaned
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
