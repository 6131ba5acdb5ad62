"""The workload of a run that `weeble up --workload` left up: the scenario's clients, driven by
a process of their own that outlives `weeble up` (as the brokers do), writing their traces into
the run's trace folder. At its end, or when `weeble down` stops it first (SIGTERM), its clients
unsubscribe, close and flush their traces, so `weeble check` judges the hand-run flow (up,
chaos, down, check) like `weeble run`.

    python -m weeble.orchestrator.background_main RUN_DIR SCENARIO [DURATION]

This module starts and stops that process (`weeble up`, `Testbed.down`); the process itself is
background_main.py, above the testbed it attaches to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from weeble.orchestrator.backends.processes import pid_alive

PID_FILE = "workload.pid"  # in the run directory, while the workload runs
STATS_FILE = "workload.json"  # in the run directory, when it has ended
_MARKER = "weeble.orchestrator.background_main"  # the workload process (its module)


def start(run_dir: Path, scenario: str | Path, duration: float) -> int:
    """Start the workload of the run in `run_dir` in a session of its own; its pid."""
    log = (run_dir / "workload.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", _MARKER, str(run_dir.resolve()), str(Path(scenario).resolve()),
         str(duration)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        start_new_session=True)
    (run_dir / PID_FILE).write_text(f"{proc.pid}\n")
    return proc.pid


def stop(run_dir: Path, timeout: float = 15.0) -> bool:
    """Stop the run's workload if it runs (SIGTERM, SIGKILL at the deadline); whether one
    was running."""
    path = run_dir / PID_FILE
    try:
        pid = int(path.read_text())
    except (OSError, ValueError):
        return False
    marker = str(run_dir.resolve())
    running = pid_alive(pid, marker)
    if running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid, marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return running
