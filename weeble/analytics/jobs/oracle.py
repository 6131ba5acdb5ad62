"""The correctness oracle: which clients had to get each publication, and what they got.

The subscription history comes from the clients' records: a subscription lives from its
`subscribe` to its `unsubscribe` or `crash` (or to the end of the run). The liveness property
gives every subscription two grey zones (times in RunMeta):

- activation: a subscription must be served only once it is A = d·δ_max + ρ old (it needs d·δ_max
  to spread, plus one refresh for a first copy that met a transiently wrong table);
- deactivation: a publication must reach a subscription only if it lives D = d·δ_max after the
  publication; a delivery up to D after an unsubscription, or up to 2π + D after a crash (the
  lease lingers, F12), is allowed.

So for publication p at time t and client c (never the client that published it):
- expected: a subscription of c matching p lives over [t - A, t + D]; judged only if t + D is
  within the run. An expected pair without a delivery is *missing*.
- allowed: a subscription of c matching p lives at the delivery time, grey zones included. A
  delivery that is neither expected nor allowed is *spurious*; one that is allowed but not
  expected fell in a window (neither missing nor spurious).
- every delivery of the same (p, c) after the first is a *duplicate*; a delivery of a
  publication never published is a *phantom* (also spurious).

Filters are matched on the driver, once per distinct (filter, attribute set) pair: a workload has
few of each, and the broker core's own `Filter.matches` is then the one definition of matching.

Tables: `publications` (one verdict row per publication), `deliveries` (one row per delivered
(publication, client): count, first delivery and its broker, the publishing broker, verdict,
and `seen_max`, the highest seq of its publisher the client got before it: the ordering job's),
`violations` (one row per bad (publication, client) pair), `subscriptions` (the intervals).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weeble.analytics.jobs import ordering
from weeble.analytics.jobs.context import Context
from weeble.core.filters import Filter, FilterSyntaxError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EPS = 1e-9  # s: a delivery in the same instant as a subscription's edge is inside it
MATCH_PAIRS_LIMIT = 20_000_000  # distinct filters x attribute sets evaluated on the driver


def run(ctx: Context) -> dict[str, Any]:
    """Five Spark actions: the subscriptions' write, one collect of what the driver needs (the
    subscriptions, the attribute sets, the delivering brokers), and the writes of `deliveries`,
    `publications` and `violations`; the summary is observed during the last two writes."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    pubs = publications(ctx).cache()
    subs = ctx.write("subscriptions", intervals(ctx))
    records = ctx.events("deliver", "publisher", "seq", "client", "broker")
    small = _small_sides(ctx, pubs, subs, records)
    matches = F.broadcast(small.matches.withColumn("matching", F.lit(True)))

    pairs = ctx.write("deliveries", _judge_deliveries(ctx, pubs, subs, matches,
                                                      _delivered(ctx, records, small.brokers)))
    got = pairs.groupBy("publisher", "seq").agg(
        F.sum(F.col("expected").cast("long")).alias("delivered"),
        F.sum(F.col("window").cast("long")).alias("window"),
        F.sum(F.col("spurious").cast("long")).alias("spurious"),
        F.sum("duplicate").alias("duplicate"),
        F.max("first_ts").alias("last_delivery"))
    counts = ["expected", "delivered", "window", "spurious", "duplicate"]
    expected = (_expected_receivers(ctx, pubs, subs, matches, small.overlapping)
                .groupBy("publisher", "seq").agg(F.count(F.lit(1)).alias("expected")))
    table = (pubs.drop("attributes")
             .join(expected, ["publisher", "seq"], "left")
             .join(got, ["publisher", "seq"], "left").na.fill(0, counts)
             .withColumn("missing", F.col("expected") - F.col("delivered")))
    table = table.withColumn("correct", F.when(
        F.col("judged"),
        (F.col("missing") == 0) & (F.col("spurious") == 0) & (F.col("duplicate") == 0)))
    totals = Observation("publications")
    published = ctx.write("publications", table.observe(
        totals,
        F.count(F.lit(1)).alias("publications"),
        F.sum(F.col("judged").cast("long")).alias("judged"),
        F.sum(F.col("correct").cast("long")).alias("correct"),
        *[F.sum(c).alias(c) for c in ("expected", "delivered", "missing", "window", "spurious",
                                      "duplicate")]))

    # The pairs behind each miss: the receivers of the few publications with one, again.
    missed = F.broadcast(published.where(F.col("missing") > 0).select("publisher", "seq"))
    receivers = _expected_receivers(ctx, pubs.join(missed, ["publisher", "seq"], "left_semi"),
                                    subs, matches, small.overlapping)
    got_missed = pairs.select("publisher", "seq", "client").join(
        missed, ["publisher", "seq"], "left_semi")
    missing = (receivers.join(got_missed, ["publisher", "seq", "client"], "left_anti")
               .join(pubs.select("publisher", "seq", F.col("ts").alias("published_ts")),
                     ["publisher", "seq"])
               .select("publisher", "seq", "client", "published_ts",
                       F.lit(None).cast("double").alias("first_ts"), F.lit(0).cast("long")
                       .alias("n"), F.lit(True).alias("expected"), F.lit(True).alias("missing"),
                       F.lit(False).alias("spurious"), F.lit(0).cast("long").alias("duplicate"),
                       F.lit(False).alias("phantom")))
    bad = (pairs.where(F.col("spurious") | (F.col("duplicate") > 0))
           .select("publisher", "seq", "client", F.col("p_ts").alias("published_ts"),
                   "first_ts", "n", "expected", F.lit(False).alias("missing"), "spurious",
                   "duplicate", "phantom"))
    phantoms = Observation("violations")
    ctx.write("violations", missing.unionByName(bad).observe(
        phantoms, F.sum(F.when(F.col("phantom"), F.col("n"))).alias("phantom")))
    pubs.unpersist()
    return summarize(totals.get, phantoms.get["phantom"])


def publications(ctx: Context) -> DataFrame:
    """One row per publication (a repeated record of the same (publisher, seq) keeps the first)."""
    from pyspark.sql import functions as F

    pubs = ctx.events("publish", "publisher", "seq", "broker", "attributes", "nid", "client")
    first = F.min(F.struct("ts", "ord", "broker", "attributes", "nid", "client"))
    pubs = pubs.groupBy("publisher", "seq").agg(first.alias("p")).select(
        "publisher", "seq", "p.ts", "p.broker", "p.attributes", "p.nid",
        F.col("p.client").alias("p_client"))
    return pubs.withColumn("judged", F.col("ts") + ctx.header.deactivation <= ctx.end + EPS)


def intervals(ctx: Context) -> DataFrame:
    """Subscription lifetimes: each subscribe up to the next unsubscribe/crash of its sub_id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    starts = ctx.events("subscribe", "client", "sub_id", "broker", "filter")
    unsubs = ctx.events("unsubscribe", "client", "sub_id").withColumn("how", F.lit("unsubscribe"))
    # The broker cannot see a client crash: the client side records it.
    crashes = ctx.events("crash", "client", "sub_id").withColumn("how", F.lit("crash"))
    # A crash without sub_id ends every subscription its client has started by then.
    whole = crashes.where(F.col("sub_id").isNull()).drop("sub_id").alias("c").join(
        starts.select("client", "sub_id", F.col("ts").alias("s_ts")), "client"
    ).where(F.col("s_ts") <= F.col("ts")).select("ts", "ord", "client", "sub_id", "how")
    ends = unsubs.unionByName(crashes.where(F.col("sub_id").isNotNull())).unionByName(whole)
    timeline = starts.withColumn("how", F.lit(None).cast("string")).unionByName(
        ends.withColumn("broker", F.lit(None).cast("string"))
        .withColumn("filter", F.lit(None).cast("string")))
    after = (Window.partitionBy("client", "sub_id").orderBy("ts", "ord")
             .rowsBetween(1, Window.unboundedFollowing))
    is_end = F.col("how").isNotNull()
    nxt = F.first(F.when(is_end, F.struct("ts", "how")), ignorenulls=True).over(after)
    return (timeline.select("*", nxt.alias("nxt")).where(~is_end)
            .select("client", "sub_id", "broker", "filter", F.col("ts").alias("start"),
                    F.col("nxt.ts").alias("end"), F.col("nxt.how").alias("ended_by")))


@dataclass(slots=True)
class SmallSides:
    """What the driver works out from one collect: the match table (as a DataFrame), the
    (client, attribute set) whose subscriptions' required times overlap, the brokers' names."""

    matches: DataFrame
    overlapping: list[tuple[str | None, str]]
    brokers: list[str]


def _small_sides(ctx: Context, pubs: DataFrame, subs: DataFrame,
                 records: DataFrame) -> SmallSides:
    """One collect of the small sides (every subscription interval, the distinct attribute sets
    of the publications, the distinct brokers of the deliveries) and what the driver derives
    from them: one Spark action where five were (three distinct collects and two counts)."""
    from pyspark.sql import functions as F

    def distinct(part: int, df: DataFrame, column: str) -> DataFrame:
        return df.select(F.col(column).alias("value")).distinct().select(
            F.lit(part).alias("part"), F.lit(None).cast("string").alias("client"),
            F.lit(None).cast("string").alias("filter"), F.lit(None).cast("double").alias("start"),
            F.lit(None).cast("double").alias("end"), "value")

    rows = (subs.select(F.lit(0).alias("part"), "client", "filter", "start", "end",
                        F.lit(None).cast("string").alias("value"))
            .unionByName(distinct(1, pubs, "attributes"))
            .unionByName(distinct(2, records, "broker"))
            .collect())
    held = [r for r in rows if r["part"] == 0]
    attr_sets = sorted(r["value"] for r in rows if r["part"] == 1 and r["value"] is not None)
    brokers = sorted(r["value"] for r in rows if r["part"] == 2 and r["value"] is not None)
    filters = sorted({r["filter"] for r in held if r["filter"] is not None})
    pairs = match_pairs(filters, attr_sets)
    return SmallSides(_match_frame(ctx, pairs), _overlapping(ctx, held, pairs), brokers)


def match_pairs(filters: list[str], attr_sets: list[str]) -> list[tuple[str, str]]:
    """(filter, attribute set) of the given ones where the filter matches, by the broker core's
    own `Filter.matches`."""
    if len(filters) * len(attr_sets) > MATCH_PAIRS_LIMIT:
        raise ValueError(f"{len(filters)} filters x {len(attr_sets)} attribute sets: too many "
                         f"to match on the driver")
    parsed = []
    for text in filters:
        try:
            parsed.append((text, Filter.parse(text)))
        except FilterSyntaxError:
            continue  # a filter no broker could have accepted matches nothing
    pairs = []
    for text in attr_sets:
        try:
            attrs = json.loads(text)
        except ValueError:
            continue
        if not isinstance(attrs, dict):
            continue
        pairs.extend((f_text, text) for f_text, f in parsed if f.matches(attrs))
    return pairs


def _match_frame(ctx: Context, pairs: list[tuple[str, str]]) -> DataFrame:
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("filter", T.StringType()),
                           T.StructField("attributes", T.StringType())])
    return ctx.spark.createDataFrame(pairs, schema)


def _overlapping(ctx: Context, held: list[Any],
                 pairs: list[tuple[str, str]]) -> list[tuple[str | None, str]]:
    """The (client, attribute set) where one client's subscriptions matching that set have
    overlapping required times ([start + A, end - D], cut at the run's end): in start order, an
    interval that begins before an earlier one has ended (both widened by EPS, and a margin: a
    pair made distinct without need costs time, never an answer). Only clients with two
    required subscriptions whose times overlap, whatever their filters, are looked at."""
    header = ctx.header
    by_client: dict[str | None, list[tuple[float, float, str]]] = {}
    for r in held:
        if r["start"] is None or r["filter"] is None:
            continue
        lo = r["start"] + header.activation
        hi = (r["end"] if r["end"] is not None else math.inf) - header.deactivation
        if lo <= min(hi, ctx.end):
            by_client.setdefault(r["client"], []).append((lo, hi, r["filter"]))
    matching: dict[str, list[str]] | None = None
    out = []
    for client, required in by_client.items():
        if not _overlaps([(lo, hi) for lo, hi, _ in required]):
            continue
        if matching is None:
            matching = {}
            for f_text, attrs in pairs:
                matching.setdefault(f_text, []).append(attrs)
        by_attrs: dict[str, list[tuple[float, float]]] = {}
        for lo, hi, f_text in required:
            for attrs in matching.get(f_text, ()):
                by_attrs.setdefault(attrs, []).append((lo, hi))
        out.extend((client, attrs) for attrs, times in by_attrs.items() if _overlaps(times))
    return out


def _overlaps(times: list[tuple[float, float]]) -> bool:
    reach = -math.inf
    for lo, hi in sorted(times):
        if lo <= reach + 1e-6:
            return True
        reach = max(reach, hi)
    return False


def _judge_deliveries(ctx: Context, pubs: DataFrame, subs: DataFrame,
                      matches: DataFrame, delivered: DataFrame) -> DataFrame:
    """One row per delivered (publication, client): how often, when first, and its verdict.

    The client's own subscriptions decide: a delivery is expected if one of them required the
    publication, allowed if one of them (grey zones included) was alive when it arrived. Clients
    hold few subscriptions and the run few in all: each (client, attribute set) gets the list of
    its matching subscriptions' lifetimes, joined by broadcast, and each delivered pair is judged
    against its list in place (no aggregation after the join: one row in, one row out).
    """
    from pyspark.sql import functions as F

    header = ctx.header
    published = F.broadcast(pubs.select("publisher", "seq", F.col("ts").alias("p_ts"),
                                        F.col("broker").alias("p_broker"), "attributes",
                                        "judged", "p_client", F.lit(True).alias("published")))
    grace = (F.when(F.col("ended_by") == "crash", header.crash_linger)
             .otherwise(header.deactivation))
    lifetime = F.struct("start", F.coalesce("end", F.lit(math.inf)).alias("until_required"),
                        F.coalesce(F.col("end") + grace, F.lit(math.inf)).alias("until_allowed"))
    held = F.broadcast(subs.select("client", "filter", lifetime.alias("life"))
                       .join(matches, "filter")
                       .groupBy("client", "attributes").agg(F.collect_list("life").alias("held")))
    candidates = (delivered.join(published, ["publisher", "seq"], "left")
                  .join(held, ["client", "attributes"], "left"))
    required = F.exists("held", lambda s: (
        (F.col("p_ts") >= s["start"] + header.activation - EPS)
        & (F.col("p_ts") <= s["until_required"] - header.deactivation + EPS)))
    allowed = F.coalesce(F.exists("held", lambda s: (
        (F.col("first_ts") >= s["start"] - EPS) & (F.col("first_ts") <= s["until_allowed"] + EPS))),
        F.lit(False))
    expected = F.coalesce(F.col("judged") & (F.col("client") != F.col("p_client")) & required,
                          F.lit(False))
    # the FIFO order of the first deliveries (ordering job): a sort here, where the deliveries
    # are partitioned by (client, publisher) already
    return candidates.select(
        "publisher", "seq", "client", "n", "first_ts", "first_ord", "first_broker", "p_ts",
        "p_broker", expected.alias("expected"),
        (~expected & allowed).alias("window"),
        (~expected & ~allowed).alias("spurious"),
        (F.col("n") - 1).alias("duplicate"),
        F.col("published").isNull().alias("phantom"),
        ordering.seen_max(F.col("published").isNotNull()).alias("seen_max"))


def _delivered(ctx: Context, records: DataFrame, names: list[str]) -> DataFrame:
    """One row per delivered (publisher, seq, client) of the `deliver` records: n, and the
    first delivery's ts, ord and broker (the least (ts, ord)); `names`: their brokers.

    By hash, after one shuffle. Spark's hash aggregate holds only fixed-width values, so the
    least struct(ts, ord, broker) of every key would sort all deliveries; and a pair's
    deliveries may share an instant. So the brokers are numbered, the deliveries are shuffled
    once by (client, publisher) (a part of the key: both aggregations below, and the FIFO
    window over the result, find them in place), and aggregated twice: per (pair, ts), the
    count and the least ord with its broker (`ord` is unique); per pair, the count, the least
    ts and what its one (pair, ts) row holds (`min_by`, now without ties).
    """
    from pyspark.sql import functions as F

    keys = ["publisher", "seq", "client"]
    numbers = F.broadcast(ctx.spark.createDataFrame(
        list(enumerate(names)), "number long, broker string"))
    instants = (records.join(numbers, "broker", "left").repartition("client", "publisher")
                .groupBy(*keys, "ts")
                .agg(F.count(F.lit(1)).alias("n"), F.min("ord").alias("ord"),
                     F.min_by("number", "ord").alias("number")))
    pairs = instants.groupBy(*keys).agg(
        F.sum("n").alias("n"), F.min("ts").alias("first_ts"),
        F.min_by("ord", "ts").alias("first_ord"), F.min_by("number", "ts").alias("number"))
    return (pairs.join(numbers, "number", "left")
            .select(*keys, "n", "first_ts", "first_ord", F.col("broker").alias("first_broker")))


def _expected_receivers(ctx: Context, pubs: DataFrame, subs: DataFrame, matches: DataFrame,
                        overlapping: list[tuple[str | None, str]]) -> DataFrame:
    """(publisher, seq, client) that must be delivered, each once: a range join, bucketed by time.

    A subscription is required for publications in [start + A, end - D]. Both sides are cut
    into buckets of width W and joined on (filter, bucket), so a publication meets only the
    subscriptions alive around it, not every subscription the run ever had.

    A pair comes out once per subscription that requires it: more than once only where a
    client holds two subscriptions matching the same attribute set whose required times
    overlap. Those (client, attribute set), `overlapping`, are found on the driver from the
    small side (`_overlapping`), and only their pairs are made distinct: a distinct of every
    pair (millions, keyed by strings) was the largest step of the oracle after its deliveries.
    """
    from pyspark.sql import functions as F

    header = ctx.header
    width = max(header.activation, ctx.end / 1000, 1e-3)
    lo = F.col("start") + header.activation
    hi = F.coalesce(F.col("end"), F.lit(math.inf)) - header.deactivation
    last = F.least(F.col("hi"), F.lit(ctx.end))
    required = (subs.select("client", "filter", lo.alias("lo"), hi.alias("hi"))
                .where(F.col("lo") <= last))
    judged = (pubs.where("judged").select("publisher", "seq", "ts", "attributes", "p_client",
                                           F.floor(F.col("ts") / width).alias("bucket"))
              .join(matches, "attributes"))
    pairs = (judged.join(required.select("client", "filter", "lo", "hi", F.explode(F.sequence(
                 F.floor((F.col("lo") - EPS) / width),
                 F.floor((last + EPS) / width))).alias("bucket")), ["filter", "bucket"])
             .where((F.col("ts") >= F.col("lo") - EPS) & (F.col("ts") <= F.col("hi") + EPS)
                    & (F.col("client") != F.col("p_client"))))
    keys = ["publisher", "seq", "client"]
    if not overlapping:
        return pairs.select(*keys)
    flagged = F.broadcast(ctx.spark.createDataFrame(
        overlapping, "client string, attributes string").withColumn("twice", F.lit(True)))
    pairs = pairs.join(flagged, ["client", "attributes"], "left")
    return (pairs.where(F.col("twice").isNull()).select(*keys)
            .unionByName(pairs.where(F.col("twice")).select(*keys).distinct()))


def summarize(totals: dict[str, Any], phantom: int | None) -> dict[str, int]:
    """The run's counts from the `publications` table's totals (observed as it was written) and
    the phantom deliveries (the `violations` table's, likewise)."""
    summary = {k: int(v or 0) for k, v in totals.items()}
    summary["phantom"] = int(phantom or 0)
    summary["deliveries"] = (summary["delivered"] + summary["window"] + summary["spurious"]
                             + summary["duplicate"] + summary["phantom"])
    return summary
