"""Stabilization time per fault episode, service level and state level, against the bound Δ.

Service level: from the end of the episode's last fault, the first time after which every
judged publication is delivered correctly (no miss, no spurious delivery, no duplicate), up to
the next episode. Measured as the time of the first publication of the all-correct tail, so it
never understates: the true instant lies between the last bad publication and that one. A
publication counts for the episode if it is published after the end and completes (t + D) before
the next episode begins. When the last publication observed is still bad, the system did not
stabilize within the observation (time: null).

State level: the same on the legitimacy checks of the routing tables: the first check of the
all-legitimate tail, and the last failing check (`state_last_failing`): the checks sample the
state, so R14 calls it late only when a check failed after the bound (R12). Checks come from
the simulator's `legitimacy` records, and from `snapshot`
records of all brokers, checked here with the core's `legitimacy.check`; those inside a
reconfiguration's state span (its start to its end + D, R15) see its transient, not the
episode's, and are left out of the episodes' times (not of the `legitimacy` table).

Ratio: measured time / Δ, with Δ = Params.bound(algorithm, wrapper) of the run's metadata.

Tables: `legitimacy` (every check: ts, ok, problems, source), `stabilization` (per episode).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from weeble.analytics.jobs.context import Context
from weeble.analytics.jobs.reconfigurations import operations
from weeble.check.deliveries import INF
from weeble.check.episodes import inside, last_failing, stabilization_tail
from weeble.check.state import Interval, select
from weeble.core.filters import Filter, FilterSyntaxError
from weeble.core.legitimacy import SnapshotView, check

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EPS = 1e-9


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    episodes = sorted(ctx.rows(ctx.table("episodes")), key=lambda e: e["begin"])
    checks = ctx.write("legitimacy", _checks(ctx))
    # R12: the checks in a reconfiguration's state span [start, end + D] are its own (R15)
    reshaped = [(r["start"], (r["end"] if r["end"] is not None else ctx.end)
                 + ctx.header.deactivation) for r in operations(ctx)]
    check_rows = [(r["ts"], r["ok"]) for r in ctx.rows(checks.orderBy("ts"))
                  if not inside(r["ts"], reshaped)]
    pubs = ctx.table("publications").where(F.col("judged"))
    bound = ctx.header.bound
    D = ctx.header.deactivation
    ended = [e for e in episodes if e["end"] is not None]
    tails = dict(zip((e["episode"] for e in ended), service_tails(
        pubs, [(e["end"], e["observed_until"]) for e in ended], D), strict=True))
    rows = []
    for e in episodes:
        row: dict[str, Any] = {"episode": e["episode"], "faults": e["faults"],
                               "begin": e["begin"], "end": e["end"],
                               "observed_until": e["observed_until"], "bound": bound}
        if e["end"] is None:
            row.update(service_time=None, service_status="fault never ended",
                       state_time=None, state_status="fault never ended",
                       state_last_failing=None)
        else:
            time, status = tails[e["episode"]]
            row.update(service_time=time, service_status=status)
            time, status, failing = _state(check_rows, e["end"], e["observed_until"])
            row.update(state_time=time, state_status=status, state_last_failing=failing)
        for level in ("service", "state"):
            t = row[f"{level}_time"]
            row[f"{level}_ratio"] = t / bound if t is not None and bound > 0 else None
        rows.append(row)
    ctx.write("stabilization", ctx.spark.createDataFrame(rows, _schema()))
    return {"bound": bound, "episodes": rows}


def service_tail(pubs: DataFrame, end: float, until: float,
                 deactivation: float) -> tuple[float | None, str]:
    """The checker's service level (`weeble.check.episodes.service_stabilization`, its
    `stabilization_tail`) at scale, over the judged publications (`ts`, `correct`) of an
    episode that ended at `end`, observed until `until`: a few aggregations, no publication
    collected. tests/analytics/test_differential.py holds the two equal."""
    return service_tails(pubs, [(end, until)], deactivation)[0]


def service_tails(pubs: DataFrame, episodes: list[tuple[float, float]],
                  deactivation: float) -> list[tuple[float | None, str]]:
    """`service_tail` of every (end, until) of `episodes` in two actions in all (each Spark
    action costs a fixed overhead): the last bad publication of each and whether it observed
    any, then the first good one after the last bad."""
    from pyspark.sql import functions as F

    if not episodes:
        return []
    ts, correct = F.col("ts"), F.col("correct")
    windows = [(ts >= end - EPS) & (ts + deactivation <= until + EPS) for end, until in episodes]
    row = pubs.agg(*[F.max(F.when(w & ~correct, ts)) for w in windows],
                   *[F.count(F.when(w, 1)) for w in windows]).first()
    assert row is not None
    n = len(episodes)
    last_bad, seen = list(row[:n]), list(row[n:])
    bad = [i for i in range(n) if last_bad[i] is not None]
    first_good: dict[int, float | None] = {}
    if bad:
        good = pubs.agg(*[F.min(F.when(windows[i] & correct & (ts > last_bad[i] + EPS), ts))
                          for i in bad]).first()
        assert good is not None
        first_good = dict(zip(bad, good, strict=True))
    out: list[tuple[float | None, str]] = []
    for i, (end, _) in enumerate(episodes):
        good_ts = first_good.get(i)
        if last_bad[i] is None:
            out.append((0.0, "stable") if seen[i] else (None, "no publications observed"))
        elif good_ts is None:
            out.append((None, "not stabilized"))
        else:
            out.append((max(0.0, good_ts - end), "stabilized"))
    return out


def _state(checks: list[tuple[float, bool]], end: float,
           until: float) -> tuple[float | None, str, float | None]:
    # A check at the instant the next episode begins may already see it: not this episode's.
    later = [(t, ok) for t, ok in checks if end - EPS <= t < until - EPS]
    return (*stabilization_tail(later, end, "no checks observed"), last_failing(later, end))


def _checks(ctx: Context) -> DataFrame:
    """The simulator's legitimacy records, plus a check of every complete round of snapshots."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("ts", T.DoubleType()),
                           T.StructField("ok", T.BooleanType()),
                           T.StructField("problems", T.LongType()),
                           T.StructField("source", T.StringType())])
    recorded = ctx.events("legitimacy", "ok", "problems").select(
        "ts", "ok", F.col("problems").cast("long"), F.lit("legitimacy").alias("source"))
    snapshots = ctx.events("snapshot", "node", "round", "broker", "tables", "neighbors", "root",
                           "parent", "algorithm", "hierarchical", "colours")
    if ctx.header.adverts:
        return recorded  # R8(b): with advertisements the trace cannot judge a round
    taken = ctx.rows(snapshots)  # one action: none taken, nothing to check
    if not taken:
        return recorded
    derived = ctx.spark.createDataFrame(_snapshot_checks(ctx, taken), schema)
    return recorded.unionByName(derived)


def _snapshot_checks(ctx: Context,
                     snapshots: list[dict[str, Any]]) -> list[tuple[float, bool, int, str]]:
    """Group snapshots into rounds (`round`, else equal time) and check each complete round."""
    rounds: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in snapshots:
        rounds[r["round"] if r["round"] is not None else r["ts"]].append(r)
    header = ctx.header
    brokers = set(header.topology.brokers)  # R8(b): one record per broker of the header
    subs = _intervals(ctx.rows(ctx.table("subscriptions")))
    out = []
    for snaps in rounds.values():
        if {s["node"] for s in snaps} != brokers:
            continue  # an incomplete round cannot show the whole configuration
        t = max(s["ts"] for s in snaps)
        views = {s["node"]: SnapshotView({
            "broker": s["broker"] or s["node"], "neighbors": s["neighbors"], "root": s["root"],
            "parent": s["parent"], "algorithm": s["algorithm"],
            "hierarchical": s["hierarchical"], "tables": json.loads(s["tables"]),
            # the coloured overlay: each colour's table against its own tree (R9e)
            "colours": json.loads(s["colours"]) if s["colours"] is not None else None})
            for s in snaps}
        required, allowed = select(subs, t, header.settle, header.linger)
        problems = check(views, required, allowed)
        out.append((t, not problems, len(problems), "snapshot"))
    return out


def _intervals(subs: list[dict[str, Any]]) -> list[Interval]:
    """The subscriptions table's rows as the reference checker's intervals (R1), so R9's
    required and allowed sets are chosen by the same `select` (its windows, its edges)."""
    out = []
    for s in subs:
        try:
            f = Filter.parse(s["filter"]) if s["filter"] is not None else None
        except FilterSyntaxError:
            f = None  # a filter that does not parse has no entries anywhere
        out.append(Interval(s["client"], s["sub_id"], s["broker"], f, s["start"],
                            INF if s["end"] is None else s["end"]))
    return out


def _schema() -> Any:
    from pyspark.sql import types as T

    d, s = T.DoubleType(), T.StringType()
    return T.StructType([
        T.StructField("episode", T.LongType()), T.StructField("faults", T.ArrayType(s)),
        T.StructField("begin", d), T.StructField("end", d), T.StructField("observed_until", d),
        T.StructField("bound", d), T.StructField("service_time", d),
        T.StructField("service_status", s), T.StructField("state_time", d),
        T.StructField("state_status", s), T.StructField("state_last_failing", d),
        T.StructField("service_ratio", d), T.StructField("state_ratio", d),
    ])
