"""`weeble up SCENARIO`: start a scenario's brokers in the background and print where they are."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "up",
        help="start a scenario's live brokers in the background",
        description="Start SCENARIO's brokers as local processes, wait until every link is up,"
                    " print the run id and the addresses, and leave them running"
                    " (`weeble status`, `weeble down`); with --workload, the scenario's"
                    " clients too, so the hand-run flow (up, chaos, down, check) has"
                    " publications to judge.",
    )
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--workload", action="store_true",
                   help="also run the scenario's workload (its clients, for its duration) in"
                        " the background, traced into the run, so `weeble check` has"
                        " publications to judge; `weeble down` stops it first")
    p.add_argument("--duration", type=float, metavar="S",
                   help="with --workload: seconds of workload (default: the scenario's)")
    add_placement_options(p)
    p.set_defaults(handler=run)


def add_placement_options(p: argparse.ArgumentParser) -> None:
    """Where a live run goes: shared by `up` and `run`."""
    p.add_argument("--runs-dir", default="runs", metavar="DIR",
                   help="parent of the run directory (default: runs)")
    p.add_argument("--run-id", metavar="ID", help="run id (default: <name>-<time>-<random>)")
    p.add_argument("--base-host", metavar="IP",
                   help="first broker's loopback address (overrides live.base_host)")
    p.add_argument("--any-ports", action="store_true",
                   help="pick free ports instead of the scenario's fixed ones")
    from weeble.orchestrator.backend import BACKEND_KINDS

    p.add_argument("--backend", choices=BACKEND_KINDS,
                   help="where the brokers run (overrides the scenario's backend:;"
                        " default local)")


def warn_unsupported(scenario: Any) -> None:
    if scenario.chaos is not None:
        print(f"weeble: note: `weeble up` does not run the scenario's chaos experiment"
              f" ({len(scenario.chaos.faults)} fault(s)); `weeble run` does, and `weeble chaos"
              " FILE` runs an experiment file against this run", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from weeble.commands import OPEN_CLIENTS_NOTE, UsageError
    from weeble.model.scenario import load_scenario
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.testbed import Testbed

    scenario = load_scenario(args.scenario)
    if args.duration is not None and not args.workload:
        raise UsageError("--duration is the workload's: add --workload")
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration: must be > 0, got {args.duration}")
    warn_unsupported(scenario)
    with signals_raise():
        bed = Testbed.plan(scenario, runs_dir=args.runs_dir, run_id=args.run_id,
                           base_host=args.base_host, any_ports=args.any_ports,
                           backend=args.backend,
                           # ready for `weeble reconfigure` (Mininet, Docker: a peer network)
                           reconfigurable=True)
        try:
            bed.up(on_event=lambda msg: print(f"  {msg}", file=sys.stderr))
        except BaseException:
            bed.close()
            raise
        bed.detach()  # from here on the brokers outlive this process
    print(f"run {bed.run_id} is up: {len(bed.brokers)} brokers, root {bed.root}")
    print(f"{'broker':<8} {'pid':>7}  {'clients+links':<22} {'admin':<22} metrics")
    for b, a in bed.addresses().items():
        print(f"{b:<8} {bed.backend.handle(b) or '-':>7}  {a.listen:<22} {a.admin:<22}"
              f" {a.metrics or '-'}")
    print(f"run directory: {bed.run_dir}")
    if args.workload:
        from weeble.orchestrator import background

        duration = args.duration if args.duration is not None else scenario.duration
        pid = background.start(bed.run_dir, args.scenario, duration)
        print(f"workload: the scenario's clients for {duration:g} s (pid {pid}, log"
              f" {bed.run_dir / 'workload.log'}); `weeble down` stops it first")
    if bed.open_clients:
        print(OPEN_CLIENTS_NOTE)
    if not args.workload:
        print("weeble: note: no workload runs (--workload runs the scenario's): `weeble check`"
              " of this run judges only the clients you bring", file=sys.stderr)
    print(f"next: weeble status {bed.run_id} | weeble subscribe --broker ADDR 'class == 1'"
          f" | weeble down {bed.run_id}")
    return 0
