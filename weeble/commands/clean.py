"""`weeble clean`: remove what dead runs left behind.

A run whose orchestrator died (SIGKILL, a crash, a lost terminal) before it could stop its
brokers leaves them running, and on Mininet or Docker its namespaces, veths, containers and
networks too. `weeble clean` finds such runs in the runs directory (state starting/up, the
orchestrator gone, not handed on by `weeble up`) and takes each down, then asks every backend
kind for leftovers that no run directory names. With --all it also ends the runs `weeble up`
left up on purpose.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "clean",
        help="remove the brokers, namespaces, containers and networks of dead runs",
        description="Take down every run whose orchestrator is gone without handing it on,"
                    " and remove what dead runs left on the system (Mininet hosts and"
                    " interfaces, Docker containers and networks).",
    )
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--all", action="store_true",
                   help="also end the runs `weeble up` left up on purpose")
    p.set_defaults(handler=run)


def _orchestrator_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def run(args: argparse.Namespace) -> int:
    from weeble.orchestrator.backend import BACKEND_KINDS, BackendError, backend_class
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.testbed import Testbed, runs

    ended = 0
    problems = []
    with signals_raise():
        for run_dir, data in list(runs(args.runs_dir)):
            if data.get("state") not in ("starting", "up"):
                continue
            if data.get("detached") and not args.all:
                continue
            if not data.get("detached") and _orchestrator_alive(data.get("orchestrator_pid")):
                continue  # a run in progress
            try:
                bed = Testbed.attach(run_dir, runs_dir=args.runs_dir)
                bed.down(timeout=5)
                bed.backend.teardown()
                bed.backend.close()
            except BackendError as e:
                problems.append(f"{run_dir.name}: {e}")
                continue
            ended += 1
            print(f"ended run {data.get('run_id')} ({data.get('backend', 'local')})")
        removed: list[str] = []
        for kind in BACKEND_KINDS:
            with contextlib.suppress(BackendError):  # a kind this machine cannot run
                removed += backend_class(kind).clean_leftovers(everything=args.all)
    for item in removed:
        print(f"removed {item}")
    for problem in problems:
        print(f"weeble clean: {problem}")
    print(f"clean: {ended} run(s) ended, {len(removed)} leftover(s) removed")
    return 1 if problems else 0
