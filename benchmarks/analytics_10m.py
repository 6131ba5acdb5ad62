"""Benchmark the analytics on a ~10-million-record trace made by the simulator.

    python benchmarks/analytics_10m.py                 # 10M records, local[2], 3 repeats
    python benchmarks/analytics_10m.py --records 2e6 --repeat 1

The trace: scenarios/sim-small.yaml with 10x the publication rate, twice the subscriptions and
every inter-broker send and receive traced, long enough for the requested number of records
(~21,700 per simulated second). It is cached under --cache and reused while its parameters stay
the same (making 10M records takes ~2 minutes).

Measured in one process, one SparkSession (its start-up is reported apart):
- Spark: ingest (JSON lines -> Parquet, pyarrow) and the full job set (every job of
  weeble.analytics.pipeline.JOBS), wall seconds and records per second; every repeat reads the
  trace again (a later analysis of an unchanged trace reuses the stored ingest: timed apart);
- baseline: the oracle and overhead jobs in single-process pandas/pyarrow over the same ingested
  Parquet, checked against Spark's answers.
Prints the median of --repeat runs of each, the ratio, the CPU model and the load, and the
target line: ingest + jobs within 120 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDS_PER_SIM_SECOND = 21_700
EPS = 1e-9


def make_trace(cache: Path, records: int) -> Path:
    from weeble.chaos.runner import in_simulation
    from weeble.model.scenario import load_scenario
    from weeble.sim.run import simulate

    duration = max(10.0, round(records / RECORDS_PER_SIM_SECOND / 10) * 10.0)
    run = cache / f"sim-small-x10-{int(duration)}s"
    stamp = run / "complete"
    if stamp.exists():
        return run
    base = load_scenario(ROOT / "scenarios" / "sim-small.yaml")
    assert base.workload is not None
    scenario = base.model_copy(update={
        "duration": duration,
        "workload": base.workload.model_copy(update={"publish_rate": 500, "subscriptions": 400}),
        "trace": base.trace.model_copy(update={"sends": True}),
    })
    print(f"making the trace: {duration:g} simulated s into {run} ...", file=sys.stderr)
    start = time.perf_counter()
    simulate(scenario, run, progress=False, faults=in_simulation(scenario))
    print(f"  {time.perf_counter() - start:.0f} s", file=sys.stderr)
    stamp.touch()
    return run


# ---- the single-process baseline --------------------------------------------------------------


def baseline(run: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """The oracle's totals and the overhead table in pandas, from the ingested Parquet."""
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    from weeble.core.filters import Filter
    from weeble.trace.reader import read_header

    info = read_header(run)
    meta = info.header
    events = run / "analysis" / "events"
    ingest = json.loads((run / "analysis" / "ingest.json").read_text())
    t0 = info.t0_ns
    end = ((info.end_ns or ingest["t_max_ns"]) - t0) / 1e9
    A, D, linger = meta.activation, meta.deactivation, meta.crash_linger
    times: dict[str, float] = {}

    def read(kind: str, columns: list[str]) -> pd.DataFrame:
        path = events / f"kind={kind}"
        if not path.exists():
            return pd.DataFrame({c: [] for c in ["ts", *columns]})
        df = pq.read_table(path, columns=["t", *columns]).to_pandas()
        df["ts"] = (df.pop("t") - t0) / 1e9
        return df

    cpu = time.process_time()
    start = time.perf_counter()
    sends = read("send", ["msg"])
    width = 2.0
    overhead = sends.groupby([np.floor(sends["ts"] / width) * width, "msg"]).size()
    by_kind = sends.groupby("msg").size().to_dict()
    times["overhead"] = time.perf_counter() - start

    start = time.perf_counter()
    pubs = (read("publish", ["publisher", "seq", "attributes"]).sort_values("ts")
            .drop_duplicates(["publisher", "seq"]))
    pubs["judged"] = pubs["ts"] + D <= end + EPS
    subs = read("subscribe", ["client", "sub_id", "filter"]).sort_values("ts")
    ends = pd.concat([read("unsubscribe", ["client", "sub_id"]).assign(how="unsubscribe"),
                      read("crash", ["client", "sub_id"]).assign(how="crash")]).sort_values("ts")
    ends = ends.rename(columns={"ts": "end"})
    subs = pd.merge_asof(subs, ends, left_on="ts", right_on="end", by=["client", "sub_id"],
                         direction="forward").rename(columns={"ts": "start"})
    filters = {f: Filter.parse(f) for f in subs["filter"].unique()}
    attrs = {a: json.loads(a) for a in pubs["attributes"].unique()}
    matches = pd.DataFrame([(f, a) for f, flt in filters.items() for a, av in attrs.items()
                            if flt.matches(av)], columns=["filter", "attributes"])

    dv = read("deliver", ["publisher", "seq", "client"])
    pairs = dv.groupby(["publisher", "seq", "client"], sort=False)["ts"].agg(["size", "min"])
    pairs = pairs.rename(columns={"size": "n", "min": "first_ts"}).reset_index()
    j = pairs.merge(pubs.rename(columns={"ts": "p_ts"}), on=["publisher", "seq"], how="left")
    j = j.merge(subs[["client", "filter", "start", "end", "how"]], on="client", how="left")
    j = j.merge(matches.assign(matching=True), on=["filter", "attributes"], how="left")
    match = j["matching"].eq(True)
    until = j["end"].fillna(np.inf)
    grace = np.where(j["how"] == "crash", linger, D)
    j["expected"] = (match & j["judged"].eq(True) & (j["client"] != j["publisher"])
                     & (j["p_ts"] >= j["start"] + A - EPS) & (j["p_ts"] <= until - D + EPS))
    j["allowed"] = (match & (j["first_ts"] >= j["start"] - EPS)
                    & (j["first_ts"] <= until + grace + EPS))
    keys = ["publisher", "seq", "client"]
    flags = j.groupby(keys, sort=False).agg(n=("n", "first"), expected=("expected", "max"),
                                            allowed=("allowed", "max"))
    delivered = int(flags["expected"].sum())
    window = int((~flags["expected"] & flags["allowed"]).sum())
    spurious = int((~flags["expected"] & ~flags["allowed"]).sum())
    duplicate = int((flags["n"] - 1).sum())

    # expected receivers: publications x matching filters x subscriptions alive around them,
    # joined on time buckets of width A (as the Spark job does)
    w = max(A, end / 1000, 1e-3)
    req = subs.assign(lo=subs["start"] + A, hi=subs["end"].fillna(np.inf) - D)
    req = req[req["lo"] <= np.minimum(req["hi"], end)]
    first = np.floor((req["lo"] - EPS) / w).astype(int)
    last = np.floor((np.minimum(req["hi"], end) + EPS) / w).astype(int)
    req = req.loc[req.index.repeat(last - first + 1)]
    req["bucket"] = np.repeat(first.to_numpy(), (last - first + 1).to_numpy())
    req["bucket"] += req.groupby(level=0).cumcount().to_numpy()
    judged = pubs[pubs["judged"]].assign(bucket=lambda p: np.floor(p["ts"] / w).astype(int))
    cand = judged.merge(matches, on="attributes").merge(
        req[["client", "filter", "lo", "hi", "bucket"]], on=["filter", "bucket"])
    cand = cand[(cand["ts"] >= cand["lo"] - EPS) & (cand["ts"] <= cand["hi"] + EPS)
                & (cand["client"] != cand["publisher"])]
    expected = int(cand.drop_duplicates(keys).shape[0])
    times["oracle"] = time.perf_counter() - start
    times["cpu"] = time.process_time() - cpu
    result = {"expected": expected, "delivered": delivered, "missing": expected - delivered,
              "window": window, "spurious": spurious, "duplicate": duplicate,
              "overhead_by_kind": by_kind, "overhead_bins": int(overhead.shape[0])}
    return times, result


# ---- the Spark side ---------------------------------------------------------------------------


def jvm_cpu_seconds(spark: Any) -> float:
    """CPU time of Spark's JVM so far (user + system): a figure that other load cannot inflate."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spark_run(spark: Any, run: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from weeble.analytics.pipeline import analyze

    cpu = jvm_cpu_seconds(spark) + time.process_time()
    summary = analyze(run, spark=spark, report=True, reuse_ingest=False)
    cpu = jvm_cpu_seconds(spark) + time.process_time() - cpu
    t = summary["timings"]
    jobs = sum(v for k, v in t.items() if k not in ("spark", "ingest", "report"))
    return {"ingest": t["ingest"], "jobs": jobs, "report": t.get("report", 0.0), "cpu": cpu,
            **{f"job:{k}": v for k, v in t.items()}}, summary


def main() -> int:
    from _live import cpu_model  # benchmarks/ is the script's directory, on sys.path

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=float, default=10e6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/weeble-bench-analytics"))
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    run = make_trace(args.cache, int(args.records))
    load_at_start = os.getloadavg()
    from weeble.analytics.ingest import current
    from weeble.analytics.spark import session

    start = time.perf_counter()
    spark = session(args.master)
    startup = time.perf_counter() - start

    spark_times: list[dict[str, float]] = []
    base_times: list[dict[str, float]] = []
    summary: dict[str, Any] = {}
    base: dict[str, Any] = {}
    for i in range(args.repeat):
        t, summary = spark_run(spark, run)
        spark_times.append(t)
        b, base = baseline(run)
        base_times.append(b)
        per_job = ", ".join(f"{k[4:]} {v:.1f}" for k, v in t.items()
                            if k.startswith("job:") and k[4:] not in ("spark", "ingest"))
        both = (t["job:oracle"] + t["job:overhead"]) / max(b["oracle"] + b["overhead"], 1e-9)
        print(f"run {i + 1}: spark ingest {t['ingest']:.1f} s, jobs {t['jobs']:.1f} s "
              f"({per_job}); baseline oracle {b['oracle']:.1f} s, overhead "
              f"{b['overhead']:.1f} s; spark/baseline oracle "
              f"{t['job:oracle'] / max(b['oracle'], 1e-9):.2f}x, overhead "
              f"{t['job:overhead'] / max(b['overhead'], 1e-9):.2f}x, total "
              f"{both:.2f}x; "
              f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)

    start = time.perf_counter()
    reused = current(run, run / "analysis") is not None
    reuse_s = time.perf_counter() - start
    records = summary["ingest"]["records"]
    d = summary["deliveries"]
    agree = all(base[k] == d[k] for k in ("expected", "delivered", "missing", "window",
                                           "spurious", "duplicate"))
    agree = agree and base["overhead_by_kind"] == {
        k: v for k, v in summary["overhead"]["by_kind"].items() if k != "dropped"}

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows)

    ingest, jobs = med(spark_times, "ingest"), med(spark_times, "jobs")
    oracle_overhead = med(spark_times, "job:oracle") + med(spark_times, "job:overhead")
    b_total = med(base_times, "oracle") + med(base_times, "overhead")
    result = {
        "records": records, "trace_bytes": sum(p.stat().st_size
                                               for p in (run / "trace").glob("*.jsonl")),
        "cpu_model": cpu_model(), "cores": os.cpu_count(), "master": args.master,
        "repeats": args.repeat, "spark_startup_s": round(startup, 1),
        "spark_ingest_s": round(ingest, 1),
        "spark_jobs_s": round(jobs, 1),
        "spark_report_s": round(med(spark_times, "report"), 1),
        "spark_ingest_plus_jobs_s": round(ingest + jobs, 1),
        "spark_jobs_records_per_s": round(records / jobs),
        "spark_ingest_plus_jobs_records_per_s": round(records / (ingest + jobs)),
        "spark_per_job_s": {k[4:]: round(med(spark_times, k), 1) for k in spark_times[0]
                            if k.startswith("job:") and k[4:] not in ("spark",)},
        "spark_oracle_plus_overhead_s": round(oracle_overhead, 1),
        "baseline_oracle_plus_overhead_s": round(b_total, 1),
        "baseline_per_job_s": {k: round(med(base_times, k), 1) for k in base_times[0]},
        "spark_over_baseline": round(oracle_overhead / b_total, 2),
        # the same ratio job by job (medians), to show which job stands in the way of 1.5x
        "spark_over_baseline_per_job": {
            k: round(med(spark_times, f"job:{k}") / med(base_times, k), 2)
            for k in ("oracle", "overhead") if med(base_times, k) > 0},
        # CPU seconds (JVM + driver) of ingest + jobs + report, and of the baseline: unlike wall
        # time, not inflated by other processes competing for the cores
        "spark_cpu_s": round(med(spark_times, "cpu"), 1),
        "baseline_cpu_s": round(med(base_times, "cpu"), 1),
        "answers_agree": agree,
        # every repeat as measured (the medians above hide a repeat slowed by other load)
        "runs": [{"ingest_s": round(t["ingest"], 1), "jobs_s": round(t["jobs"], 1),
                  "spark_oracle_plus_overhead_s": round(t["job:oracle"] + t["job:overhead"], 1),
                  "baseline_oracle_plus_overhead_s": round(b["oracle"] + b["overhead"], 1)}
                 for t, b in zip(spark_times, base_times, strict=True)],
        # what every user pays for a first analysis: ingest + jobs (the session's start apart)
        "target": f"ingest + jobs = {ingest + jobs:.1f} s; target 120 s: "
                  f"{'met' if ingest + jobs <= 120 else 'NOT met'}",
        "target_met": ingest + jobs <= 120,
        # a second analysis of the unchanged trace: the stored ingest is checked, not redone
        "reuse_check_s": round(reuse_s, 3), "reused": reused,
        "load_average_at_start": load_at_start, "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
