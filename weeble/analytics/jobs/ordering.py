"""Per-publisher FIFO order at each subscriber.

A tree with FIFO links delivers the notifications of one publisher to a client in publication
order. A violation is a first delivery of sequence number s to client c after c already got a
higher sequence number of the same publisher. Duplicates are the oracle's business, not a
reordering: only the first delivery of each published (publisher, seq, client) is considered
(phantoms, never published, are not). Deliveries in the same instant are taken in trace order.

The highest sequence number got before each first delivery (`seen_max`) is a column of the
oracle's `deliveries` table (`seen_max` below): the oracle has the deliveries partitioned by
(client, publisher) already, so the window costs a sort there instead of a shuffle and a sort
of every first delivery here.

Tables: `reorderings` (one row per violation), `ordering` (deliveries and violations per
subscriber and publisher).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.analytics.jobs.context import Context

if TYPE_CHECKING:
    from pyspark.sql import Column


def seen_max(published: Column) -> Column:
    """Over one row per delivered (publisher, seq, client) with its first delivery's `first_ts`
    and `first_ord`: the highest `seq` of the same publisher the client got before this one,
    among the rows where `published` holds (null: none, or not published itself)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    before = (Window.partitionBy("client", "publisher").orderBy("first_ts", "first_ord")
              .rowsBetween(Window.unboundedPreceding, -1))
    return F.when(published, F.max(F.when(published, F.col("seq"))).over(before))


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    first = ctx.table("deliveries").where(~F.col("phantom"))  # first deliveries
    reordered = F.col("seq") < F.col("seen_max")
    ctx.write("reorderings", first.where(reordered).select(
        "client", "publisher", "seq", "seen_max", F.col("first_ts").alias("ts")))
    ordering = ctx.write("ordering", first.groupBy("client", "publisher").agg(
        F.count(F.lit(1)).alias("deliveries"),
        F.sum(F.coalesce(reordered, F.lit(False)).cast("long")).alias("violations")))
    # the summary in one action over the small per-pair table: its violations are the rows
    # of `reorderings`, so their count and clients are the affected pairs' sums
    affected = F.col("violations") > 0
    row = ordering.agg(F.sum("violations"), F.countDistinct(F.when(affected, F.col("client"))),
                       F.count(F.when(affected, 1)), F.sum("deliveries"),
                       F.countDistinct("client")).first()
    assert row is not None
    return {"violations": int(row[0] or 0), "subscribers_affected": int(row[1]),
            "pairs_affected": int(row[2]),
            # what was checked: a run with no violation says over how much
            "deliveries": int(row[3] or 0), "subscribers": int(row[4])}
