"""The process of the workload `weeble up --workload` leaves up (background.py starts and stops
it): it attaches to the run's testbed, drives the scenario's clients, and at its end, or at
SIGTERM, unsubscribes and closes them and writes their statistics beside the run.

    python -m weeble.orchestrator.background_main RUN_DIR SCENARIO [DURATION]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

from weeble.model.scenario import load_scenario
from weeble.orchestrator.background import STATS_FILE
from weeble.orchestrator.testbed import Testbed
from weeble.orchestrator.workload import LiveWorkload


async def _drive(run_dir: Path, scenario_path: str, duration: float) -> dict[str, object]:
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
