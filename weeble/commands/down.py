"""`weeble down [RUN]`: stop a run's brokers (SIGTERM, drain) and collect their traces."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "down",
        help="stop a live run's brokers and collect the traces",
        description="Stop every broker of RUN (default: the newest run that is up), after the"
                    " workload `weeble up --workload` started (its clients' traces flushed):"
                    " SIGTERM,"
                    " wait while they drain and flush their traces (SIGKILL after --timeout),"
                    " and collect the traces into the run directory.",
    )
    p.add_argument("run", nargs="?", help="run id or run directory (default: newest run up)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--timeout", type=float, default=15.0, metavar="S",
                   help="seconds to wait before SIGKILL (default: 15)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.testbed import Testbed

    bed = Testbed.attach(args.run, runs_dir=args.runs_dir, active=args.run is None)
    with signals_raise():
        running = [b for b in bed.brokers if bed.backend.alive(b)]
        bed.down(timeout=args.timeout)
        bed.backend.teardown()  # the run's hosts, links, containers, networks go too
        bed.backend.close()
    left = [b for b in bed.brokers if bed.backend.alive(b)]
    traces = sorted(bed.trace_dir.glob("*.jsonl"))
    print(f"run {bed.run_id} is down: stopped {len(running)} broker(s)"
          + (f", still running: {', '.join(left)}" if left else ""))
    print(f"traces: {len(traces)} file(s) in {bed.trace_dir}")
    return 1 if left else 0
