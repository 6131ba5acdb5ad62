"""`weeble check RUN_DIR`: the reference checker (weeble.check, pure Python) over a run's trace.

It applies the rules R1-R15 of docs/trace-schema.md to RUN_DIR/trace/ and prints the verdict
per fault episode; `weeble analyze` computes the same with PySpark at any scale. Exit status:
one per verdict status (weeble.check.status, docs/trace-schema.md "Verdict
statuses and exit codes"): 0 pass, 1 fail, 3 assumptions violated, 4 not judged, 5 no checks
observed; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from weeble.commands import add_junit_option


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="judge a run's trace with the reference checker (no Spark)",
        description="Read RUN_DIR/trace/*.jsonl and apply the correctness rules of "
                    "docs/trace-schema.md: expected, missing, spurious, duplicate and FIFO "
                    "deliveries, legitimacy, stabilization per fault episode, the timing "
                    "model. Prints the verdict; the exit status is the verdict's: 0 pass, 1"
                    " fail, 3 assumptions violated, 4 not judged, 5 no checks observed (2: bad"
                    " input).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (simulated or live)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    add_junit_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.check.history import check_run
    from weeble.commands import UsageError
    from weeble.trace.reader import TraceError

    try:
        report = check_run(args.run_dir)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    if args.junit:
        from weeble.commands.junit import write_junit

        write_junit(args.junit, suite=report["run"]["scenario"], verdict=report["verdict"],
                    faults=report["verdict"]["faults"],
                    reconfigurations=report.get("operations") or [], timing=report["timing"],
                    properties={"run": args.run_dir, "judged by": "weeble check"})
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print_report(report)
    from weeble.check.status import exit_code

    return exit_code(report["verdict"]["status"])


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from weeble.chaos.verdict import print_reconfigurations

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    v, d = report["verdict"], report["deliveries"]
    table = Table(title=f"{report['run']['scenario']}: bound Δ = {v['bound']:.4g} s")
    for column in ("fault", "kind", "target", "episode", "service level", "state level",
                   "ratio", "status"):
        table.add_column(column)
    for f in v["faults"]:
        table.add_row(f["fault_id"], f["type"], f["target"], str(f["episode"]),
                      _time(f["service_time"], f["service_status"]),
                      _time(f["state_time"], f["state_status"]),
                      "-" if f["ratio"] is None else f"{f['ratio']:.2f}", f["status"])
    if v["faults"]:
        console.print(table)
        console.print(f"stabilization is measured from {v['stabilization_measured_from']}")
    else:
        console.print("no faults in this run: no stabilization time")
    console.print(
        f"publications {d['publications']:,} (judged {d['judged']:,}, correct {d['correct']:,});"
        f" deliveries expected {d['expected']:,}, missing {d['missing']:,}, in a window "
        f"{d['window']:,}, spurious {d['spurious']:,}, duplicate {d['duplicate']:,}, phantom "
        f"{d['phantom']:,}; FIFO violations {d['fifo']:,}")
    for node, t in sorted((report["run"].get("capped") or {}).items()):
        console.print(f"[bold]warning:[/bold] {node}'s trace reached its size cap at t = {t:.3f} s:"
                      " its later records are missing, and what depends on them is not judged"
                      " correctly")
    print_reconfigurations(report.get("operations") or [], console,
                           title="reconfigurations (R15: lost, duplicated, reordered in each "
                                 "window)")
    overlay = report.get("overlay")
    if overlay:
        console.print(f"overlay: {overlay['checks']} checks, {overlay['illegitimate']} "
                      f"illegitimate (last at {overlay['last_illegitimate']})")
        bound = "" if overlay["bound"] is None else f" (∆r = {overlay['bound']:.4g} s)"
        for a in overlay.get("after_faults") or []:
            console.print(f"  after the fault ending at {a['from']:.4g} s: "
                          f"{_time(a['time'], a['status'])}{bound}")
    timing = report["timing"]
    if timing["violations"]:
        console.print(f"timing model: {timing['violations']:,} violations")
    for reason in v["reasons"]:
        console.print(f"  [red]-[/] {reason}")
    status = v["status"]
    colour = "green" if status == "pass" else "red"
    console.print(f"verdict: [{colour}]{status.upper()}[/]")


def _time(t: float | None, status: str) -> str:
    return f"{t:.3g} s" if t is not None else status
