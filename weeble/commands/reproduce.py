"""`weeble reproduce NAME --out DIR`: regenerate a paper's numbers and figures.

Exit status: 0 when every claim is met within its tolerance, 1 when one is not, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from weeble.commands import UsageError


def register(subparsers: Any) -> None:
    from weeble.analytics.reproduce import EXPERIMENTS

    p: argparse.ArgumentParser = subparsers.add_parser(
        "reproduce",
        help="reproduce a paper's numbers and figures: table, figures, verdict per claim",
        description="Evaluate the experiment's grid (resuming from DIR/points), check every "
                    "claim of the paper against its tolerance and write DIR/report.md, "
                    "DIR/claims.json and the figures. Exits 1 if a claim is not met.",
    )
    p.add_argument("name", metavar="NAME", choices=[*EXPERIMENTS, "all"],
                   help=f"what to reproduce: {', '.join(EXPERIMENTS)}, or all")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="results directory (DIR/NAME for 'all', with DIR/index.md); rerunning "
                        "resumes")
    p.add_argument("--full", action="store_true",
                   help="the paper's grid (default: a short grid that runs in minutes)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="simulate N grid points at once, in N processes (default 1; each "
                        "121-broker run holds up to about 1 GB)")
    p.add_argument("--model-only", action="store_true",
                   help="leave out the simulation column (seconds instead of minutes)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from weeble.analytics.reproduce import EXPERIMENTS, experiment
    from weeble.analytics.reproduce.framework import ReproduceError, write_index
    from weeble.analytics.reproduce.framework import run as run_experiment
    from weeble.progress import Progress

    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    console = Console(stderr=True, quiet=args.quiet)
    status = 0
    runs: list[Any] = []
    left_out: dict[str, str] = {}
    for name in names:
        out = args.out / name if args.name == "all" else args.out
        try:
            chosen = experiment(name, simulate=not args.model_only)
        except ReproduceError as exc:
            if args.name != "all":
                raise UsageError(str(exc)) from None
            console.print(f"reproduce {name}: left out: {exc}")
            left_out[name] = str(exc)
            continue
        try:
            with Progress(f"reproduce {name}", unit="evaluations", quiet=args.quiet) as bar:

                def progress(done: int, total: int, what: str, bar: Progress = bar) -> None:
                    bar.update(done, total=total, detail=f"last: {what}",
                               skipped=what.endswith("(reused)"))

                result = run_experiment(chosen, out=out, full=args.full, jobs=args.jobs,
                                        progress=progress)
        except ReproduceError as exc:
            raise UsageError(str(exc)) from None
        if not args.quiet:
            print_summary(result)
        runs.append(result)
        status = max(status, 0 if result.met else 1)
    if args.name == "all":
        index = write_index(args.out, runs, left_out, full=args.full)
        if not args.quiet:
            met = sum(sum(o.met for o in r.outcomes) for r in runs)
            Console().print(f"all: {met} of {sum(len(r.outcomes) for r in runs)} claims met "
                            f"in {len(runs)} experiment(s); index: {index}")
    return status


def print_summary(result: Any) -> None:
    """The claims table (compact groups as one line each), then where everything is."""
    from rich.console import Console
    from rich.table import Table

    from weeble.analytics.reproduce.framework import difference, fmt

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=200)
    experiment = result.experiment
    groups: dict[str, list[Any]] = {}
    for o in result.outcomes:
        groups.setdefault(o.claim.group, []).append(o)
    for group, members in groups.items():
        if group in experiment.compact_groups:
            unmet = [o for o in members if not o.met]
            console.print(f"{group}: {len(members) - len(unmet)} of {len(members)} values met"
                          + "".join(f"\n  NOT met: {o.claim.statement}" for o in unmet))
            continue
        table = Table(title=group, title_justify="left")
        differences = [f"{c} − paper" for c in result.columns]
        for column in ("claim", "paper", "tolerance", *result.columns, *differences, "verdict"):
            table.add_column(column, overflow="fold")
        for o in members:
            rel = "" if o.claim.relation == "≈" else o.claim.relation + " "
            table.add_row(
                o.claim.statement, rel + fmt(o.claim.paper),
                o.claim.describe_tolerance(),
                *(fmt(o.values.get(c)) if o.values.get(c) is not None
                  else ("later" if c in experiment.pending else "—") for c in result.columns),
                *(difference(o.values.get(c), o.claim.paper, o.claim.relation)
                  for c in result.columns),
                "[green]met[/]" if o.met else "[red bold]NOT met[/]")
        console.print(table)
    met = sum(o.met for o in result.outcomes)
    console.print(f"{met} of {len(result.outcomes)} claims met; {result.evaluated} point "
                  f"evaluations, {result.reused} reused from {result.report.parent / 'points'}")
    for column, why in experiment.pending.items():
        console.print(f"[dim]{column}: not computed yet: {why}[/]")
    console.print(f"report: {result.report}")
    for path, _ in result.figures:
        console.print(f"figure: {path}")
    sys.stdout.flush()
