"""End-to-end latency: from a publication's `publish` record to its first `deliver` to a client.

Both records are written by brokers (the publisher's and the subscriber's), so the latency is
the broker network's; a client library adds its own hop on each side. A duplicate is the
oracle's business: only the first copy counts here. Quantiles are approximate (relative error
1e-3).

Table: `latency` (per bin of delivery time: deliveries, p50, p90, p99, p999, max).
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
ACCURACY = 1_000


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    lat = (ctx.table("deliveries").where(F.col("p_ts").isNotNull())  # the oracle's pairs
           .select(ctx.bins("first_ts"), (F.col("first_ts") - F.col("p_ts")).alias("latency")))
    # One pass: rollup gives every bin plus the whole run (the row whose bin is null).
    q = F.percentile_approx("latency", list(QUANTILES.values()), ACCURACY)
    stats = lat.rollup("bin").agg(
        F.count(F.lit(1)).alias("deliveries"), q.alias("q"), F.max("latency").alias("max"),
        F.avg("latency").alias("mean"),
    ).select("bin", "deliveries", *[F.col("q")[i].alias(name) for i, name in
                                    enumerate(QUANTILES)], "max", "mean").cache()
    ctx.write("latency", stats.where(F.col("bin").isNotNull()).orderBy("bin"))
    whole = stats.where(F.col("bin").isNull()).first()
    stats.unpersist()
    if whole is None or not whole["deliveries"]:
        return {"deliveries": 0}
    return {k: v for k, v in whole.asDict().items() if k != "bin"}
