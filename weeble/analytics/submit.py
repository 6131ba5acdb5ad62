"""Entry point for spark-submit: the analysis of one run on any Spark cluster.

    spark-submit --master local[2] weeble/analytics/submit.py RUN_DIR
    spark-submit --master spark://host:7077 weeble/analytics/submit.py RUN_DIR --jobs oracle

The run directory must be reachable at the same path by the driver and the executors (a shared
filesystem), as for any Spark job reading files. `--jobs` runs some jobs (and what they need)
and prints their results; without it, the whole analysis as `weeble analyze` does.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    from weeble.analytics.errors import USER_ERRORS
    from weeble.analytics.pipeline import JOBS, analyze

    parser = argparse.ArgumentParser(prog="submit.py", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--jobs", help=f"comma-separated, of: {', '.join(JOBS)}")
    parser.add_argument("--reuse-ingest", action="store_true",
                        help="keep a previous ingest of this run even if its trace changed "
                             "(without: kept while the trace files are unchanged)")
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args(argv)
    only = args.jobs.split(",") if args.jobs else None
    try:
        result = analyze(args.run_dir, only=only, reuse_ingest=args.reuse_ingest or None,
                         report=not args.no_report,
                         progress=lambda step: print(f"analyze: {step}", file=sys.stderr))
    except USER_ERRORS as exc:
        print(f"weeble: error: {exc}", file=sys.stderr)
        return 2
    shown = result if only else {k: result[k] for k in ("verdict", "faults", "timings")}
    print(json.dumps(shown, indent=2, default=str))
    from weeble.check.status import exit_code

    return 0 if only else exit_code(result["verdict"]["status"])


if __name__ == "__main__":
    sys.exit(main())
