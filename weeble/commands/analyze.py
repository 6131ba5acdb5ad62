"""`weeble analyze RUN_DIR`: the PySpark analysis of a run, its verdict table and report.

Exit status: 0 when the verdict passes, 1 when it fails, 2 for bad input (no such run, a trace
of another schema version, ...), as for every weeble command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from weeble.commands import UsageError


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "analyze",
        help="analyze a run's traces: correctness, stabilization, ordering, overhead, latency",
        description="Ingest RUN_DIR/trace/*.jsonl into Parquet, run the analytics jobs, and "
                    "write RUN_DIR/analysis/{summary.json,report.md}. Exits 1 if the verdict "
                    "fails.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (weeble simulate --out)")
    p.add_argument("--master", help="Spark master (default: $WEEBLE_SPARK_MASTER or local[*])")
    p.add_argument("--no-report", action="store_true", help="skip report.md and the plots")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.analytics.errors import USER_ERRORS
    from weeble.analytics.pipeline import analyze

    def progress(step: str) -> None:
        if not args.quiet:
            print(f"analyze: {step}", file=sys.stderr, flush=True)

    try:
        summary = analyze(args.run_dir, master=args.master, report=not args.no_report,
                          progress=progress)
    except USER_ERRORS as exc:
        raise UsageError(str(exc)) from None
    if not args.quiet:
        print_verdict(summary)
    return 0 if summary["verdict"]["pass"] else 1


def print_verdict(summary: dict[str, Any]) -> None:
    """The per-fault verdict table, the totals, and where the report is."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=160)
    v, d = summary["verdict"], summary["deliveries"]
    table = Table(title=f"{summary['run']['name']}: bound Δ = {v['bound']:.4g} s")
    for column in ("fault", "kind", "target", "took effect", "stabilization", "state level",
                   "bound", "ratio", "lost", "duplicated", "reordered", "pass"):
        table.add_column(column, justify="right" if column in (
            "stabilization", "state level", "bound", "ratio", "lost", "duplicated", "reordered")
            else "left")
    for f in summary["faults"]:
        table.add_row(
            f["fault_id"], f["type"] or "?", f["target"],
            "unknown" if f["took_effect"] is None else ("yes" if f["took_effect"] else "NO"),
            _time(f["service_time"], f["service_status"]),
            _time(f["state_time"], f["state_status"]),
            f"{f['bound']:.3g} s", "-" if f["ratio"] is None else f"{f['ratio']:.2f}",
            f"{f['lost']:,}", f"{f['duplicated']:,}", f"{f['reordered']:,}",
            "[green]yes[/]" if f["pass"] else "[red]NO[/]")
    if summary["faults"]:
        console.print(table)
        console.print(f"stabilization is measured from {v['stabilization_measured_from']}")
    else:
        console.print("no faults in this run: no stabilization time")
    reconfigurations = (summary.get("reconfigurations") or {}).get("operations") or []
    if reconfigurations:
        from weeble.check.reconfig import TABLE_COLUMNS, table_cells

        table = Table(title="verdict per reconfiguration")
        for column in TABLE_COLUMNS:
            table.add_column(column, justify="left" if column in (
                "reconfiguration", "operation", "outcome", "verdict") else "right")
        for r in reconfigurations:
            cells = table_cells(r)
            if r["verdict"] == "fail":
                cells[-1] = "[red]FAIL[/]"
            table.add_row(*cells)
        console.print(table)
        for r in reconfigurations:
            if r.get("reason"):
                console.print(f"  {r['rid']}: {r['verdict']}: {r['reason']}")
    console.print(
        f"publications {d['publications']:,} (judged {d['judged']:,}, correct {d['correct']:,}); "
        f"deliveries expected {d['expected']:,}, missing {d['missing']:,}, in a window "
        f"{d['window']:,}, spurious {d['spurious']:,}, duplicate {d['duplicate']:,}, phantom "
        f"{d['phantom']:,}; FIFO violations {summary['ordering']['violations']:,}")
    for reason in v["reasons"]:
        console.print(f"  [red]-[/] {reason}")
    status = "[green]PASS[/]" if v["pass"] else f"[red]{v['status'].upper()}[/]"
    console.print(f"verdict: {status}")
    if summary.get("report"):
        console.print(f"report: {summary['report']}")


_SHORT = {"fault never ended": "never ended", "not stabilized": "not stable",
          "no checks observed": "no checks", "no publications observed": "no data"}


def _time(t: float | None, status: str) -> str:
    return f"{t:.3g} s" if t is not None else _SHORT.get(status, status)
