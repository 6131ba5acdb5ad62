"""The verdict: per fault, how fast the system recovered and what it lost on the way; pass/fail.

The measurements are this job's (Spark): per episode the service- and state-level times
(stabilization job), the losses from its begin − D (what was in flight when its first fault
struck) to the next episode's begin − D, and before the first fault (judged publications, FIFO
violations). The judgement is `weeble.check.verdict.judge`,
the one implementation of rule R14 (the reference checker uses it too): the run passes when
nothing went wrong before the first fault and every episode stabilized within Δ; a failure
while the timing model was violated is "assumptions violated".

Table: `verdict` (one row per fault). The reconfigurations' rows (R15, one per
reconfiguration, with their own verdict) are the reconfigurations job's; one that fails fails
the run.
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context
from weeble.check.episodes import Episode, Fault
from weeble.check.history import unpromised
from weeble.check.timing import Violation, retimed
from weeble.check.verdict import judge

EPS = 1e-9


def run(ctx: Context, stabilization: dict[str, Any],
        violations: list[Violation] | None = None,
        reconfigurations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    from pyspark.sql import functions as F

    bound = ctx.header.bound
    episodes = {e["episode"]: e for e in stabilization["episodes"]}
    first_begin = min((e["begin"] for e in episodes.values()), default=None)
    # Before the first fault, up to the last publication the fault cannot have touched; each
    # episode from there on (its begin − D) to the next one's begin − D (the checker's
    # `loss_windows`, R14)
    D = ctx.header.deactivation
    prefix_end = first_begin - D if first_begin is not None else 1e300
    ordered = sorted(episodes.values(), key=lambda e: e["begin"])
    windows = [(-1, -1e300, prefix_end)] + [
        (e["episode"], e["begin"] - D,
         ordered[i + 1]["begin"] - D if i + 1 < len(ordered) else 1e300)
        for i, e in enumerate(ordered)]
    ranges = ctx.spark.createDataFrame(windows, "episode long, lo double, hi double")
    violations = violations or []
    pubs = ctx.table("publications").where(F.col("judged")).select(
        "ts", "missing", "spurious", "duplicate")
    in_window = (F.col("ts") >= F.col("lo") - EPS) & (F.col("ts") < F.col("hi"))
    losses = {r["episode"]: r for r in ctx.rows(
        pubs.join(F.broadcast(ranges), in_window).groupBy("episode").agg(
            F.count(F.lit(1)).alias("publications"),
            *[F.sum(c).alias(c) for c in ("missing", "spurious", "duplicate")]))}
    reordered = {r["episode"]: r["n"] for r in ctx.rows(
        ctx.table("reorderings").join(F.broadcast(ranges), in_window)
        .groupBy("episode").agg(F.count(F.lit(1)).alias("n")))}

    def counts(episode: int) -> dict[str, int]:
        row = losses.get(episode) or {}
        return {"missing": int(row.get("missing") or 0),
                "spurious": int(row.get("spurious") or 0),
                "duplicate": int(row.get("duplicate") or 0),
                "fifo": int(reordered.get(episode, 0))}

    faults = [Fault(f["fault_id"], f["type"] or "?", f["target"], f["begin"], f["end"],
                    f["took_effect"], episode=f["episode"])
              for f in ctx.rows(ctx.table("faults").orderBy("begin", "fault_id"))]
    eps = [Episode(e["episode"], e["begin"], e["end"], e["observed_until"], list(e["faults"]),
                   e["service_time"], e["service_status"], e["state_time"], e["state_status"],
                   e["state_last_failing"])
           for e in sorted(episodes.values(), key=lambda e: e["episode"])]
    verdict = judge(bound=bound, deactivation=ctx.header.deactivation, run_end=ctx.end,
                    faults=faults, episodes=eps,
                    prefix=unpromised(ctx.header, counts(-1)), violations=violations,
                    losses={e.index: counts(e.index) for e in eps},
                    reconfigurations=reconfigurations or [],
                    retime=lambda vs: retimed(ctx.header, vs))
    if verdict["faults"]:
        ctx.write("verdict", ctx.spark.createDataFrame(
            [{k: r[k] for k in _COLUMNS} for r in verdict["faults"]], _schema()))
    return verdict


_COLUMNS = ("fault_id", "type", "target", "begin", "end", "took_effect", "episode",
            "service_time", "service_status", "state_time", "state_status", "bound", "ratio",
            "state_ratio", "lost", "duplicated", "spurious", "reordered", "status", "pass")


def _schema() -> Any:
    from pyspark.sql import types as T

    d, s, b, n = T.DoubleType(), T.StringType(), T.BooleanType(), T.LongType()
    types = {"begin": d, "end": d, "service_time": d, "state_time": d, "bound": d, "ratio": d,
             "state_ratio": d, "took_effect": b, "pass": b, "episode": n, "lost": n,
             "duplicated": n, "spurious": n, "reordered": n}
    return T.StructType([T.StructField(c, types.get(c, s)) for c in _COLUMNS])
