"""The verdict: per fault, how fast the system recovered and what it lost on the way; pass/fail.

Per fault (from its episode): type, target, whether it took effect, service- and state-level
stabilization time, the bound Δ and the ratio, and the publications lost (missing deliveries),
duplicated and reordered from the fault's begin until the next episode.

The run passes when
- before the first fault, nothing was lost, duplicated, spurious or reordered (the start state
  is legitimate: every such error is a bug, not a recovery);
- every episode stabilized, at the service level and (where checks exist) at the state level,
  within Δ.

Table: `verdict` (one row per fault).
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context

EPS = 1e-9


def run(ctx: Context, stabilization: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    bound = ctx.header.bound
    episodes = {e["episode"]: e for e in stabilization["episodes"]}
    first_begin = min((e["begin"] for e in episodes.values()), default=None)
    # Before the first fault, up to the last publication the fault cannot have touched.
    prefix_end = first_begin - ctx.header.deactivation if first_begin is not None else 1e300
    windows = [(-1, -1e300, prefix_end)] + [
        (e["episode"], e["begin"], e["observed_until"]) for e in episodes.values()]
    ranges = ctx.spark.createDataFrame(windows, "episode long, lo double, hi double")
    pubs = ctx.table("publications").select("ts", "missing", "spurious", "duplicate")
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
        return {"lost": int(row.get("missing") or 0),
                "duplicated": int(row.get("duplicate") or 0),
                "spurious": int(row.get("spurious") or 0),
                "reordered": int(reordered.get(episode, 0))}

    faults = ctx.rows(ctx.table("faults").orderBy("begin", "fault_id"))
    rows = []
    for f in faults:
        e = episodes[f["episode"]]
        rows.append({
            "fault_id": f["fault_id"], "type": f["type"], "target": f["target"],
            "begin": f["begin"], "end": f["end"], "took_effect": f["took_effect"],
            "episode": f["episode"], "service_time": e["service_time"],
            "service_status": e["service_status"], "state_time": e["state_time"],
            "state_status": e["state_status"], "bound": bound,
            "ratio": e["service_ratio"], "state_ratio": e["state_ratio"],
            **counts(f["episode"]), "pass": _episode_passes(e, bound),
        })
    if rows:
        ctx.write("verdict", ctx.spark.createDataFrame(rows, _schema()))
    prefix = counts(-1)
    errors = [f"{n} {what}" for what, n in prefix.items() if n]
    reasons = [f"before the first fault: {', '.join(errors)}"] if errors else []
    for e in episodes.values():
        if not _episode_passes(e, bound):
            reasons.append(f"episode {e['episode']} ({', '.join(e['faults'])}): "
                           f"{_why(e, bound)}")
    return {"pass": not reasons, "reasons": reasons, "bound": bound,
            "before_first_fault": prefix, "faults": rows}


def _episode_passes(e: dict[str, Any], bound: float) -> bool:
    return _why(e, bound) == ""


def _why(e: dict[str, Any], bound: float) -> str:
    problems = []
    if e["service_time"] is None:
        problems.append(f"service: {e['service_status']}")
    elif e["service_time"] > bound + EPS:
        problems.append(f"service: {e['service_time']:.3g} s > bound {bound:.3g} s")
    if e["state_time"] is None:
        if e["state_status"] not in ("no checks observed",):
            problems.append(f"state: {e['state_status']}")
    elif e["state_time"] > bound + EPS:
        problems.append(f"state: {e['state_time']:.3g} s > bound {bound:.3g} s")
    return "; ".join(problems)


def _schema() -> Any:
    from pyspark.sql import types as T

    d, s, b, n = T.DoubleType(), T.StringType(), T.BooleanType(), T.LongType()
    fields = [("fault_id", s), ("type", s), ("target", s), ("begin", d), ("end", d),
              ("took_effect", b), ("episode", n), ("service_time", d), ("service_status", s),
              ("state_time", d), ("state_status", s), ("bound", d), ("ratio", d),
              ("state_ratio", d), ("lost", n), ("duplicated", n), ("spurious", n),
              ("reordered", n), ("pass", b)]
    return T.StructType([T.StructField(name, typ) for name, typ in fields])
