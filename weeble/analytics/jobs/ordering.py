"""Per-publisher FIFO order at each subscriber.

A tree with FIFO links delivers the notifications of one publisher to a client in publication
order. A violation is a first delivery of sequence number s to client c after c already got a
higher sequence number of the same publisher. Duplicates are the oracle's business, not a
reordering: only the first delivery of each published (publisher, seq, client) is considered
(phantoms, never published, are not). Deliveries in the same instant are taken in trace order.

Tables: `reorderings` (one row per violation), `ordering` (deliveries and violations per
subscriber and publisher).
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = ctx.table("deliveries").where(~F.col("phantom")).select(  # first deliveries
        "client", "publisher", "seq", F.col("first_ts").alias("ts"),
        F.col("first_ord").alias("ord"))
    before = (Window.partitionBy("client", "publisher").orderBy("ts", "ord")
              .rowsBetween(Window.unboundedPreceding, -1))
    marked = first.withColumn("seen_max", F.max("seq").over(before))
    violations = ctx.write("reorderings", marked.where(F.col("seq") < F.col("seen_max"))
                           .select("client", "publisher", "seq", "seen_max", "ts"))
    per_pair = marked.groupBy("client", "publisher").agg(
        F.count(F.lit(1)).alias("deliveries"),
        F.sum((F.col("seq") < F.col("seen_max")).cast("long")).alias("violations"))
    ordering = ctx.write("ordering", per_pair)
    row = violations.agg(F.count(F.lit(1)), F.countDistinct("client")).first()
    checked = ordering.agg(F.sum("deliveries"), F.countDistinct("client")).first()
    assert row is not None and checked is not None
    return {"violations": int(row[0]), "subscribers_affected": int(row[1]),
            "pairs_affected": ordering.where(F.col("violations") > 0).count(),
            # what was checked: a run with no violation says over how much
            "deliveries": int(checked[0] or 0), "subscribers": int(checked[1])}
