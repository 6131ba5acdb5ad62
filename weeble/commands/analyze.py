"""`weeble analyze RUN_DIR`: the PySpark analysis of a run, its verdict table and report.

Exit status: one per verdict status (weeble.check.status): 0 pass, 1 fail, 3 assumptions
violated, 4 not judged, 5 no checks observed; 2 for bad input (no such run, a trace of another
schema version, ...), as for every weeble command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from weeble.commands import UsageError, add_junit_option
from weeble.verbosity import verbose

SPARK_LOG = "spark.log"  # RUN_DIR/spark.log: Spark's JVM output, unless -v


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
    add_junit_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.analytics.errors import USER_ERRORS
    from weeble.analytics.pipeline import analyze

    def progress(step: str) -> None:
        if not args.quiet:
            print(f"analyze: {step}", file=sys.stderr, flush=True)

    try:
        summary = analyze(args.run_dir, master=args.master, report=not args.no_report,
                          progress=progress, jvm_log=None if verbose() else Path(
                              args.run_dir) / SPARK_LOG)
    except USER_ERRORS as exc:
        raise UsageError(str(exc)) from None
    if args.junit:
        write_summary_junit(args.junit, summary)
    if not args.quiet:
        print_verdict(summary)
    from weeble.check.status import exit_code

    return exit_code(summary["verdict"]["status"])


def write_summary_junit(path: str, summary: dict[str, Any],
                        not_effective: dict[str, str] | None = None) -> None:
    """The analysis' verdict as JUnit XML (`weeble analyze` and `weeble run`)."""
    from weeble.commands.junit import write_junit

    write_junit(path, suite=summary["run"]["name"], verdict=summary["verdict"],
                faults=summary["faults"],
                reconfigurations=(summary.get("reconfigurations") or {}).get("operations") or [],
                timing=summary["timing"], not_effective=not_effective,
                properties={"run": summary["run"]["dir"], "judged by": "weeble analyze",
                            "report": summary.get("report")})


def print_verdict(summary: dict[str, Any]) -> None:
    """The run's totals, the verdict table (the one printer of it, as `weeble run` shows it),
    and where the report is."""
    from weeble.chaos.verdict import analysis_rows
    from weeble.chaos.verdict import print_verdict as print_table

    v, d = summary["verdict"], summary["deliveries"]
    print(f"{summary['run']['name']}: bound Δ = {v['bound']:.4g} s")
    print(f"publications {d['publications']:,} (judged {d['judged']:,}, correct "
          f"{d['correct']:,}); deliveries expected {d['expected']:,}, missing "
          f"{d['missing']:,}, in a window {d['window']:,}, spurious {d['spurious']:,}, "
          f"duplicate {d['duplicate']:,}, phantom {d['phantom']:,}; FIFO violations "
          f"{summary['ordering']['violations']:,}")
    if summary.get("report"):
        print(report_line(summary["report"]))
    print_table(analysis_rows(summary), bool(v["pass"]), v["reasons"],
                measured_from=v.get("stabilization_measured_from"),
                reconfigurations=(summary.get("reconfigurations") or {}).get("operations") or [],
                status=v.get("status"))  # the verdict, last


def report_line(report_md: str | Path) -> str:
    """Where the report is: the page to open, and its text twin."""
    from weeble.analytics.report import REPORT_HTML

    md = Path(report_md)
    return f"report: {md.with_name(REPORT_HTML)} (text: {md.name})"
