"""`analyze(run_dir)`: ingest, every job in dependency order, summary.json and the report.

Everything lands in RUN/analysis/ (replaced on each analysis): `events/` (the ingested trace),
one Parquet table per job output, `summary.json`, `report.md` and its PNG plots.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weeble.analytics.errors import AnalyticsError
from weeble.analytics.ingest import INGEST_FILE, current, ingest
from weeble.analytics.jobs import (
    faults,
    latency,
    oracle,
    ordering,
    overhead,
    reconfigurations,
    stabilization,
    timing,
)
from weeble.analytics.jobs import verdict as verdict_job
from weeble.analytics.jobs.context import Context
from weeble.trace.header import RunHeader
from weeble.trace.reader import read_header, trace_files
from weeble.trace.schema import ANALYSIS_DIR, SUMMARY_FILE

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

SUMMARY_VERSION = 1

# name -> (jobs it reads the tables of, function)
JOBS: dict[str, tuple[tuple[str, ...], Callable[[Context, dict[str, Any]], dict[str, Any]]]] = {
    "faults": ((), lambda ctx, _: faults.run(ctx)),
    "oracle": ((), lambda ctx, _: oracle.run(ctx)),
    "ordering": (("oracle",), lambda ctx, _: ordering.run(ctx)),
    "overhead": ((), lambda ctx, _: overhead.run(ctx)),
    "stabilization": (("faults", "oracle"), lambda ctx, _: stabilization.run(ctx)),
    "latency": (("oracle",), lambda ctx, _: latency.run(ctx)),
    "timing": (("oracle", "faults"), lambda ctx, _: timing.run(ctx)),
    "reconfigurations": (("oracle", "ordering", "faults"),
                         lambda ctx, _: reconfigurations.run(ctx)),
    "verdict": (("stabilization", "ordering", "timing", "reconfigurations"),
                lambda ctx, done: verdict_job.run(ctx, done["stabilization"],
                                                  done["timing"]["groups"],
                                                  done["reconfigurations"]["operations"])),
}


def analyze(run_dir: Path | str, *, spark: SparkSession | None = None,
            master: str | None = None, only: Sequence[str] | None = None,
            reuse_ingest: bool | None = None, report: bool = True,
            progress: Callable[[str], None] | None = None,
            jvm_log: Path | None = None) -> dict[str, Any]:
    """Analyze a run; return the summary (also written to RUN/analysis/summary.json).

    `only` runs a subset of JOBS (plus what they depend on) and writes no summary or report;
    `reuse_ingest`: None (default) keeps the stored ingest of the run while the trace files
    are unchanged (names, sizes, modification times) and reads the trace again otherwise;
    True keeps any stored ingest; False always reads the trace again;
    `jvm_log`: where a JVM this call starts writes its own output (default: the terminal).
    """
    run_dir = Path(run_dir)
    files = trace_files(run_dir)  # the clear errors come before Spark's slow start
    info = read_header(run_dir)
    say = progress or (lambda _: None)
    out = run_dir / ANALYSIS_DIR
    timings: dict[str, float] = {}

    @contextmanager
    def step(name: str) -> Iterator[None]:
        say(name)
        start = time.perf_counter()
        yield
        timings[name] = round(time.perf_counter() - start, 3)

    from weeble.analytics.spark import require_java, session

    if spark is None:
        require_java()  # before an ingest of minutes, not after it

    ingested = current(run_dir, out) if reuse_ingest is not False else None
    if ingested is None and reuse_ingest and (out / INGEST_FILE).exists():
        ingested = json.loads((out / INGEST_FILE).read_text())  # asked for, as it is
    if ingested is not None:
        say("ingest: reused (analysis/ingest.json: the trace files are unchanged since)"
            if reuse_ingest is None else "ingest: reused, as asked")
        ingested["reused"] = True
    if ingested is None:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
    # The trace is ingested (pyarrow, no Spark) while Spark's JVM starts, most of whose start is
    # one thread of its own. Progress lines come first: while the JVM starts, this process's
    # stderr may go to `jvm_log`.
    say("spark")
    if ingested is None:
        say("ingest")
    with ThreadPoolExecutor(1) as pool:
        start = time.perf_counter()
        reading = pool.submit(lambda: ingest(run_dir, out).as_dict()) if ingested is None else None
        spark = spark or session(master, log=jvm_log)
        timings["spark"] = round(time.perf_counter() - start, 3)
        if reading is not None:
            ingested = {**reading.result(), "reused": False}
            timings["ingest"] = round(time.perf_counter() - start, 3)
    ctx = Context.open(spark, run_dir, info.header, info.t0_ns, info.end_ns,
                       ingested["t_max_ns"])

    wanted = _with_dependencies(only or list(JOBS))
    done: dict[str, dict[str, Any]] = {}
    for name in JOBS:
        if name in wanted:
            with step(name):
                done[name] = JOBS[name][1](ctx, done)
    if only is not None:
        return {"timings": timings, **done}

    summary = {
        "v": SUMMARY_VERSION,
        "run": _run_view(info.header, run_dir=run_dir, files=len(files), t0_ns=ctx.t0_ns,
                         end=ctx.end),
        "verdict": {k: v for k, v in done["verdict"].items() if k != "faults"},
        "faults": done["verdict"]["faults"],
        "deliveries": done["oracle"],
        "ordering": done["ordering"],
        "stabilization": done["stabilization"],
        "overhead": done["overhead"],
        "latency": done["latency"],
        "timing": {**{k: v for k, v in done["timing"].items() if k != "groups"},
                   "groups": [asdict(g) for g in done["timing"]["groups"]]},
        "reconfigurations": done["reconfigurations"],
        "ingest": ingested,
        "simulator": _simulator_view(run_dir) if info.header.backend == "sim" else None,
        "timings": timings,
    }
    if report:
        from weeble.analytics.report import write_report

        with step("report"):
            summary["report"] = str(write_report(ctx, summary))
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def _run_view(h: RunHeader, *, run_dir: Path, files: int, t0_ns: int,
              end: float) -> dict[str, Any]:
    p = h.params
    return {"name": h.scenario, "source": h.backend, "algorithm": h.algorithm.value,
            "wrapper": h.wrapper, "hierarchical": h.hierarchical, "seed": h.seed,
            "params": {"pi": p.pi, "rho": p.rho, "delta_min": p.delta_min,
                       "delta_max": p.delta_max, "d": p.d},
            "bound": h.bound, "activation": h.activation, "deactivation": h.deactivation,
            "crash_linger": h.crash_linger, "dir": str(run_dir), "trace_files": files,
            "t0_ns": t0_ns, "end": end, "header": h.fields()}


def _with_dependencies(names: Sequence[str]) -> set[str]:
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise AnalyticsError(f"unknown job(s) {unknown}; known: {', '.join(JOBS)}")
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(JOBS[name][0])
    return wanted


def _simulator_view(run_dir: Path) -> dict[str, Any] | None:
    """The simulator's summary (the reference checker, online), to compare with."""
    try:
        data = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {k: data.get(k) for k in ("deliveries", "legitimacy", "episodes", "stabilization",
                                     "verdict", "messages", "bound", "faults")}
