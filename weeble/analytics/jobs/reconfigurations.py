"""Reconfigurations (rule R15): per reconfiguration window, what it cost and what it did to the
service; and, for the optimizer, the tree's cost over time, the rate of reconfigurations and the
degree distribution.

A reconfiguration is the manager's `reconfiguration` records with one `rid`: it starts at its
first record and ends at its `finished` one (none: pending, ended by the run's end). Its window
holds the judged publications with start − D ≤ t_p < end + D: their missing, duplicate and
spurious deliveries (oracle job) are its *lost*, *duplicated* and *spurious*; its *reordered* are
the FIFO violations (ordering job) delivered in [start − D, end + 2D), plus the causal
violations there when the run keeps causal order. It is *during faults* when that span overlaps
a fault or the Δ after it. The verdict is `weeble.check.reconfig.verdict_of`, the checker's own.

Causal order needs vector clocks along every client's history, which is sequential: when the
header's `ordering` is causal, the publications and deliveries are streamed to the driver in
trace order and judged by the checker's `Causal` (weeble/check/causal.py), one definition.

Optimizer: the `tree_cost` records (the simulator's measure of the tree optimizer: what the
notifications of each window cost, eq. 5.2) give the cost per notification over time; the degree
distribution is the last recorded tree's (`tree`), else the run's first tree.

Tables: `reconfigurations` (one row per reconfiguration), `tree_cost` (when recorded).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from weeble.analytics.jobs.context import Context
from weeble.check.causal import Causal
from weeble.check.reconfig import verdict_of

EPS = 1e-9  # as the checker's windows (weeble.check.deliveries.EPS)


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    h = ctx.header
    D, delta, end = h.deactivation, h.bound, ctx.end
    ops = operations(ctx)
    out: dict[str, Any] = {"operations": [], **_optimizer(ctx, ops)}
    if not ops:
        return out

    windows = []
    for i, r in enumerate(ops):
        finish = r["end"] if r["end"] is not None else end
        windows.append((i, r["start"] - D, finish + D))
    ranges = F.broadcast(ctx.spark.createDataFrame(windows, "i long, lo double, hi double"))
    pubs = ctx.table("publications").where(F.col("judged")).select(
        "ts", "missing", "spurious", "duplicate")
    in_window = (F.col("ts") >= F.col("lo") - EPS) & (F.col("ts") < F.col("hi"))
    losses = {x["i"]: x for x in ctx.rows(
        pubs.join(ranges, in_window).groupBy("i").agg(
            *[F.sum(c).alias(c) for c in ("missing", "spurious", "duplicate")]))}
    published = {x["i"]: x["n"] for x in ctx.rows(
        pubs.join(ranges, (F.col("ts") >= F.col("lo") - EPS) & (F.col("ts") < F.col("hi") - EPS))
        .groupBy("i").agg(F.count(F.lit(1)).alias("n")))}
    late = (F.col("ts") >= F.col("lo") - EPS) & (F.col("ts") < F.col("hi") + D)
    fifo = {x["i"]: x["n"] for x in ctx.rows(
        ctx.table("reorderings").join(ranges, late).groupBy("i")
        .agg(F.count(F.lit(1)).alias("n")))}
    causal = _causal(ctx) if h.ordering == "causal" else None
    faulty = [(f["begin"], f["end"] if f["end"] is not None else end)
              for f in ctx.rows(ctx.table("faults").select("begin", "end"))]

    rows = []
    for i, r in enumerate(ops):
        _, lo, hi = windows[i]
        got = losses.get(i) or {}
        lost, dup, spur = (int(got.get(c) or 0) for c in ("missing", "duplicate", "spurious"))
        n_fifo = int(fifo.get(i, 0))
        n_causal = (sum(1 for t in causal if lo - EPS <= t < hi + D - EPS)
                    if causal is not None else 0)
        during = any(b < hi + D and e + delta > lo for b, e in faulty)
        rows.append({
            "rid": r["rid"], "op": r["op"], "outcome": r["outcome"], "why": r["why"],
            "start": r["start"], "end": r["end"],
            "duration": None if r["end"] is None else r["end"] - r["start"],
            "coordination": {**r["coordination"], "total": sum(r["coordination"].values())},
            "window": [lo, hi], "publications": int(published.get(i, 0)),
            "lost": lost, "duplicated": dup, "spurious": spur, "reordered": n_fifo + n_causal,
            "fifo": n_fifo, "causal": n_causal if causal is not None else None,
            "during_faults": during,
            **verdict_of(r["outcome"], r["why"], lost=lost, duplicated=dup, spurious=spur,
                         reordered=n_fifo + n_causal, during_faults=during)})
    ctx.write("reconfigurations", ctx.spark.createDataFrame(
        [{**{k: row[k] for k in _COLUMNS}, "coordination": row["coordination"]["total"]}
         for row in rows], _schema()))
    out["operations"] = rows
    return out


def operations(ctx: Context) -> list[dict[str, Any]]:
    """The reconfigurations of the run, from the manager's records, in start order."""
    items: dict[str, dict[str, Any]] = {}
    records = ctx.rows(ctx.events("reconfiguration", "rid", "op", "phase", "outcome", "why",
                                  "coordination").orderBy("ts", "ord"))
    for r in records:
        item = items.setdefault(str(r["rid"]), {
            "rid": str(r["rid"]), "op": str(r["op"]), "start": r["ts"], "end": None,
            "outcome": "pending", "why": "", "coordination": {}})
        if r["phase"] == "finished":
            item["end"] = r["ts"]
            item["outcome"] = str(r["outcome"] or "done")
            item["why"] = str(r["why"] or "")
            item["coordination"] = {str(k): int(v) for k, v in
                                    json.loads(r["coordination"] or "{}").items()}
    return sorted(items.values(), key=lambda r: (r["start"], r["rid"]))


def spans(ctx: Context) -> list[tuple[float, float]]:
    """Each reconfiguration's span [start − D, end + 2D], where the timing model may break by
    design (R15: an exchange holds notifications back)."""
    D = ctx.header.deactivation
    return [(r["start"] - D, (r["end"] if r["end"] is not None else ctx.end) + 2 * D)
            for r in operations(ctx)]


def _causal(ctx: Context) -> list[float]:
    """The delivery times of causal violations, by the checker's vector clocks over the
    publications and deliveries in trace order (time, then file, then position)."""
    from pyspark.sql import functions as F

    cols = ("client", "publisher", "seq", "file")
    events = ctx.events("publish", *cols).select(
        "ts", "ord", *cols, F.lit(0).alias("deliver")).unionByName(
        ctx.events("deliver", *cols).select("ts", "ord", *cols, F.lit(1).alias("deliver")))
    causal = Causal()
    for e in events.orderBy("ts", "file", "ord").toLocalIterator():
        if e["deliver"]:
            causal.deliver(e["ts"], e["client"], (e["publisher"], e["seq"]))
        else:
            causal.publish(e["client"], (e["publisher"], e["seq"]))
    return list(causal.times)


def _optimizer(ctx: Context, ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The tree's cost over time (when recorded), how often the tree changed, and the degree
    distribution of the last tree."""
    costs = ctx.rows(ctx.events("tree_cost", "since", "cost", "notifications", "heuristic",
                                "tree").orderBy("ts", "ord"))
    for c in costs:  # what a notification cost in the window: comparable across windows
        c["per_notification"] = (float(c["cost"]) / c["notifications"]
                                 if c["notifications"] else None)
    if costs:
        ctx.write("tree_cost", ctx.spark.createDataFrame(
            [(c["ts"], c["since"], float(c["cost"]), int(c["notifications"] or 0),
              c["per_notification"], c["heuristic"]) for c in costs],
            "ts double, since double, cost double, notifications long,"
            " per_notification double, heuristic string"))
    tree = next((c["tree"] for c in reversed(costs) if c["tree"]), None)
    edges = ([link.split("-", 1) for link in tree] if tree is not None
             else ctx.header.topology.links)
    degree: Counter[str] = Counter()
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    changes = [r for r in ops if r["outcome"] == "done"]
    minutes = ctx.end / 60 if ctx.end > 0 else None
    return {
        "count": len(ops), "done": len(changes),
        "per_minute": len(changes) / minutes if minutes else None,
        "per_1000_s": len(changes) / ctx.end * 1000 if ctx.end > 0 else None,
        "tree_cost": _series(costs) if costs else None,
        "degrees": {str(k): v for k, v in sorted(Counter(degree.values()).items())},
        "degrees_of": "the last recorded tree" if tree is not None else "the first tree",
    }


def _series(costs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cost per notification of the first and the last window, the least, and how many."""
    per = [c["per_notification"] for c in costs if c["per_notification"] is not None]
    return {"first": per[0] if per else None, "last": per[-1] if per else None,
            "min": min(per) if per else None, "windows": len(costs),
            "heuristic": costs[-1]["heuristic"]}


_COLUMNS = ("rid", "op", "outcome", "start", "end", "duration", "publications", "lost",
            "duplicated", "spurious", "reordered", "during_faults", "verdict", "reason")


def _schema() -> Any:
    from pyspark.sql import types as T

    d, s, n = T.DoubleType(), T.StringType(), T.LongType()
    types = {"start": d, "end": d, "duration": d, "publications": n, "lost": n,
             "duplicated": n, "spurious": n, "reordered": n, "coordination": n,
             "during_faults": T.BooleanType()}
    return T.StructType([T.StructField(c, types.get(c, s)) for c in (*_COLUMNS, "coordination")])
