"""The timing model, checked (rule R13; the reference is `weeble.check.timing`).

Four measurements, each a violation when it exceeds the model by more than τ:
- hop: a `send` and the `receive` with the same (from, to, lseq), the latest send before the
  receive: the delay against [δmin, δmax];
- refresh: consecutive `subscribe`/`refresh` records of a running subscription: the gap
  against ρ;
- timer: a `timer` record's lateness;
- path: the first delivery of each published pair: its delay against hops·δmax.
A violation that overlaps a fault, or a reconfiguration's span (R15), does not count; the others are
grouped by kind, broker and bin of Δ/10 of their begin (the groups the verdict judges and the
report plots).

Tables: `timing` (the groups: kind, broker, begin, end, value = worst, limit, count),
`timing_measured` (per kind: measurements, worst, violations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.analytics.jobs import reconfigurations
from weeble.analytics.jobs.context import Context
from weeble.check.rules import TIMING_TOLERANCE
from weeble.check.timing import KINDS, Violation, summarize

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    tau = TIMING_TOLERANCE
    p = ctx.header.params
    parts = {"hop": _hops(ctx, p.delta_min, p.delta_max), "refresh": _refreshes(ctx, p.rho),
             "timer": _timers(ctx), "path": _paths(ctx, p.delta_max)}
    measured, worst = dict.fromkeys(KINDS, 0), dict.fromkeys(KINDS, 0.0)
    # the four measurements as one table, cached: one action counts them all (each Spark
    # action costs a fixed overhead), the violations below read the cache
    every: DataFrame | None = None
    for kind, df in parts.items():
        df = df.select(F.lit(kind).alias("kind"), "begin", "end", "broker", "value", "limit")
        every = df if every is None else every.unionByName(df)
    assert every is not None
    every = every.cache()
    for r in ctx.rows(every.groupBy("kind").agg(F.count(F.lit(1)).alias("n"),
                                                F.max("value").alias("worst"))):
        measured[r["kind"]], worst[r["kind"]] = int(r["n"]), float(r["worst"] or 0.0)
    value, limit = F.col("value"), F.col("limit")
    bad = every.where((value > limit + tau)
                      | ((F.col("kind") == "hop") & (value < p.delta_min - tau))).select(
        "kind", "begin", "end", "broker", "value",
        F.when(value < limit, p.delta_min).otherwise(limit).alias("limit"))
    # a fault is allowed to break the model: violations overlapping a fault do not count;
    # nor inside a reconfiguration's span (R15: an exchange holds notifications back)
    allowed = [(f["begin"], f["end"] if f["end"] is not None else ctx.end)
               for f in ctx.rows(ctx.table("faults").select("begin", "end"))]
    for begin, end in [*allowed, *reconfigurations.spans(ctx)]:
        bad = bad.where(~((F.col("begin") <= end) & (F.col("end") >= begin)))
    width = ctx.header.bound / 10
    worst_first = F.max(F.struct("value", "limit"))
    groups = ctx.write("timing", bad.groupBy(
        "kind", "broker", F.floor(F.col("begin") / width).alias("bin")).agg(
        F.min("begin").alias("begin"), F.max("end").alias("end"),
        worst_first.alias("w"), F.count(F.lit(1)).alias("count")).select(
        "kind", "broker", "begin", "end", F.col("w.value").alias("value"),
        F.col("w.limit").alias("limit"), "count").orderBy("begin", "kind", "broker"))
    every.unpersist()
    violations = [Violation(r["kind"], r["begin"], r["end"], r["broker"], r["value"],
                            r["limit"], int(r["count"])) for r in ctx.rows(groups)]
    return {**summarize(violations, measured, worst, tau), "groups": violations}


def _hops(ctx: Context, dmin: float, dmax: float) -> DataFrame:
    from pyspark.sql import functions as F

    sends = (ctx.events("send", "from", "to", "lseq", "fate")
             .where(F.col("lseq").isNotNull() & (F.coalesce("fate", F.lit("sent")) != "dropped"))
             .select("from", "to", "lseq", F.col("ts").alias("sent")))
    receives = (ctx.events("receive", "from", "to", "lseq").where(F.col("lseq").isNotNull())
                .select("from", "to", "lseq", F.col("ts").alias("received"), "ord"))
    pairs = (receives.join(sends, ["from", "to", "lseq"])
             .where(F.col("sent") <= F.col("received"))
             .groupBy("from", "to", "lseq", "received", "ord").agg(F.max("sent").alias("sent")))
    return pairs.select(F.col("sent").alias("begin"), F.col("received").alias("end"),
                        F.col("to").alias("broker"),
                        (F.col("received") - F.col("sent")).alias("value"),
                        F.lit(dmax).alias("limit"))


def _refreshes(ctx: Context, rho: float) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = ("client", "sub_id", "broker")
    timeline = (ctx.events("subscribe", *cols).withColumn("end_", F.lit(False))
                .unionByName(ctx.events("refresh", *cols).withColumn("end_", F.lit(False)))
                .unionByName(ctx.events("unsubscribe", *cols).withColumn("end_", F.lit(True)))
                .unionByName(ctx.events("crash", *cols).withColumn("end_", F.lit(True))))
    # a crash without sub_id ends every subscription of its client: rare; apply it per client
    whole = timeline.where(F.col("end_") & F.col("sub_id").isNull()).select(
        "client", F.col("ts").alias("crash_ts"))
    timeline = timeline.where(F.col("sub_id").isNotNull())
    subs = timeline.select("client", "sub_id").distinct()
    timeline = timeline.unionByName(
        whole.join(subs, "client").select(
            "client", "sub_id", F.lit(None).cast("string").alias("broker"),
            F.col("crash_ts").alias("ts"), F.lit(None).cast("long").alias("ord"),
            F.lit(True).alias("end_")))
    w = Window.partitionBy("client", "sub_id").orderBy("ts", "ord")
    prev = timeline.select("*", F.lag("ts").over(w).alias("prev_ts"),
                           F.lag("end_").over(w).alias("prev_end"))
    gaps = prev.where(~F.col("end_") & F.col("prev_ts").isNotNull() & ~F.col("prev_end"))
    return gaps.select(F.col("prev_ts").alias("begin"), F.col("ts").alias("end"), "broker",
                       (F.col("ts") - F.col("prev_ts")).alias("value"),
                       F.lit(rho).alias("limit"))


def _timers(ctx: Context) -> DataFrame:
    from pyspark.sql import functions as F

    t = ctx.events("timer", "node", "late").where(F.col("late").isNotNull())
    return t.select((F.col("ts") - F.col("late")).alias("begin"), F.col("ts").alias("end"),
                    F.col("node").alias("broker"), F.col("late").alias("value"),
                    F.lit(0.0).alias("limit"))


def _paths(ctx: Context, dmax: float) -> DataFrame:
    from pyspark.sql import functions as F

    hops = ctx.header.path_hops()  # d for every pair when the tree changes (R13(d))
    table = ctx.spark.createDataFrame(
        [(a, b, float(h)) for a, row in hops.items() for b, h in row.items()],
        "p_broker string, first_broker string, hops double")
    first = (ctx.table("deliveries").where(~F.col("phantom") & F.col("p_ts").isNotNull())
             .join(F.broadcast(table), ["p_broker", "first_broker"]))
    if ctx.header.skip_ring is not None:
        # mode skip_ring: history a newcomer catches up on is not timed (weeble.check.timing):
        # only clients with a subscription running since the publication's t − A
        a = ctx.header.activation
        since = (ctx.table("subscriptions")
                 .select("client", F.col("start").alias("s_start"), F.col("end").alias("s_end")))
        held = (first.join(F.broadcast(since), "client")
                .where((F.col("s_start") <= F.col("p_ts") - a + 1e-9)
                       & (F.col("s_end").isNull() | (F.col("s_end") >= F.col("first_ts"))))
                .select("publisher", "seq", "client").distinct())
        first = first.join(held, ["publisher", "seq", "client"], "left_semi")
    return first.select(F.col("p_ts").alias("begin"), F.col("first_ts").alias("end"),
                        F.col("first_broker").alias("broker"),
                        (F.col("first_ts") - F.col("p_ts")).alias("value"),
                        (F.col("hops") * dmax).alias("limit"))
