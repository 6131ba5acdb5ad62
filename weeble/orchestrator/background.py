"""The workload of a run that `weeble up --workload` left up: the scenario's clients, driven by
a process of their own that outlives `weeble up` (as the brokers do), writing their traces into
the run's trace folder. At its end, or when `weeble down` stops it first (SIGTERM), its clients
unsubscribe, close and flush their traces, so `weeble check` judges the hand-run flow (up,
chaos, down, check) like `weeble run`.

    python -m weeble.orchestrator.background RUN_DIR SCENARIO [DURATION]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from weeble.orchestrator.backends.processes import pid_alive

PID_FILE = "workload.pid"  # in the run directory, while the workload runs
STATS_FILE = "workload.json"  # in the run directory, when it has ended
_MARKER = "weeble.orchestrator.background"


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


async def _drive(run_dir: Path, scenario_path: str, duration: float) -> dict[str, object]:
    from weeble.model.scenario import load_scenario
    from weeble.orchestrator.testbed import Testbed
    from weeble.orchestrator.workload import LiveWorkload

    scenario = load_scenario(scenario_path)
    bed = Testbed.attach(run_dir)
    workload = LiveWorkload(scenario, {b: a.listen for b, a in bed.addresses().items()},
                            bed.trace_dir if scenario.trace.enabled else None,
                            tokens=bed.client_token, tls=bed.client_tls())
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(s, task.cancel)  # the run's `finally` closes every client
    with contextlib.suppress(asyncio.CancelledError):
        await workload.run(duration, unsubscribe_at_end=True)  # the brokers go on
    return workload.stats.as_dict()


def main(argv: list[str]) -> int:
    run_dir, scenario_path, duration = Path(argv[0]), argv[1], float(argv[2])
    stats = asyncio.run(_drive(run_dir, scenario_path, duration))
    (run_dir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
