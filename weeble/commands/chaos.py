"""`weeble chaos EXPERIMENT.yaml [--run RUN]`: run a chaos experiment against a live testbed.

The testbed is one started by `weeble up` (the newest run that is up, or --run). Every
injection is recorded, with the evidence that it took effect, in the run's trace/chaos.jsonl;
the table at the end says which faults took effect. Exit status 1 if one did not.

When every fault has ended, the command waits Δ more (the run's stabilization bound, plus one
snapshot round) before it returns: the checker judges an episode by how the brokers recovered
within Δ of its end, and a run taken down sooner has not shown it (`--no-wait` returns at once).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chaos",
        help="run a chaos experiment against a live run",
        description="Inject the faults of EXPERIMENT (a YAML schedule, see"
                    " weeble/model/experiment.py) into the brokers of RUN (default: the newest"
                    " run that is up), and record each with its evidence in the run's"
                    " trace/chaos.jsonl.",
    )
    p.add_argument("experiment", help="experiment YAML file")
    p.add_argument("--run", help="run id or run directory (default: the newest run up)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--until", type=float, metavar="S",
                   help="inject nothing that starts later than S seconds from now")
    p.add_argument("--quiet", action="store_true", help="no line per injection")
    p.add_argument("--no-wait", action="store_true",
                   help="return when the last fault ends, without waiting the bound Δ for the"
                        " brokers to stabilize (a run taken down within Δ of its last fault"
                        " cannot show its recovery to `weeble check`)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.chaos.runner import ChaosRunner
    from weeble.chaos.verdict import outcome_table
    from weeble.commands import UsageError
    from weeble.model.experiment import ExperimentError, load_experiment, timing_warnings
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.testbed import Testbed

    if args.until is not None and not args.until > 0:
        raise UsageError(f"--until: must be > 0, got {args.until}")
    try:
        experiment = load_experiment(args.experiment)
    except ExperimentError as e:
        raise UsageError(str(e)) from None
    bed = Testbed.attach(args.run, runs_dir=args.runs_dir, active=args.run is None)
    down = [b for b in bed.brokers if not bed.backend.alive(b)]
    if len(down) == len(bed.brokers):
        raise UsageError(f"run {bed.run_id}: no broker is running (start one with `weeble up`)")
    try:
        runner = ChaosRunner(bed, experiment, until=args.until,
                             on_event=None if args.quiet else
                             (lambda msg: print(f"  {msg}", file=sys.stderr)))
    except ExperimentError as e:
        raise UsageError(f"{args.experiment}: {e} (run {bed.run_id})") from None
    print(f"chaos {experiment.name!r} on run {bed.run_id}: {len(runner.timeline)} injection(s),"
          f" seed {runner.seed}", file=sys.stderr)
    for warning in timing_warnings(experiment, runner.target.params):
        print(f"weeble: warning: {warning}", file=sys.stderr)
    with signals_raise():
        try:
            outcomes = asyncio.run(runner.run())
        finally:
            bed.backend.close()  # attached: closing leaves the brokers running
        if not args.no_wait:
            _observe_recovery(bed.run_dir, outcomes, say=not args.quiet)
    outcome_table(outcomes)
    print(f"evidence: {runner.trace.path}")
    return 0 if all(o.took_effect for o in outcomes if o.skipped is None) else 1


def _observe_recovery(run_dir: Any, outcomes: list[Any], *, say: bool) -> None:
    """Wait Δ and one snapshot round after the last fault's end, so that the run observes the
    recovery R14 judges (a fault that never ended has none to wait for)."""
    import time

    from weeble.trace.reader import RunDirError, read_header

    injected = [o for o in outcomes if o.skipped is None and o.took_effect]
    if not injected or any(o.end is None for o in injected):
        return
    try:
        header = read_header(run_dir).header
    except (RunDirError, ValueError):  # no header: nothing says how long recovery may take
        return
    wait = header.bound + (header.snapshot_period or 0.0)
    if say:
        print(f"  waiting {wait:.3g} s for the brokers to stabilize (Δ = {header.bound:.3g} s"
              " and a snapshot round), so that `weeble check` sees the recovery"
              " (--no-wait skips)", file=sys.stderr)
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 10.0))
        if say and deadline - time.monotonic() > 1.0:
            print(f"  {deadline - time.monotonic():.0f} s left", file=sys.stderr)
