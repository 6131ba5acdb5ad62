"""Message overhead: inter-broker messages by kind over time.

Counted from `send` records (one per message put on a link; the simulator writes them with
`trace.sends`), binned over the run, with link-fault losses (`drop`) as their own kind. Without
send records the table is empty and the summary falls back to the simulator's totals.

Table: `overhead` (bin, msg, messages).

Also the load per node and seed 002's overhead metric (`load`, see weeble/check/load.py): the
sends and their bytes summed per node, control traffic (all but notifications) apart, and the
`unwanted` records; the arithmetic from those totals is the checker's.
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context
from weeble.check.load import NOTIFY
from weeble.check.load import report as load_report


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    sends = ctx.events("send", "msg").select(ctx.bins(), F.coalesce("msg", F.lit("?")).alias("msg"))
    drops = ctx.events("drop").select(ctx.bins(), F.lit("dropped").alias("msg"))
    ctx.write("overhead", sends.unionByName(drops).groupBy("bin", "msg")
              .agg(F.count(F.lit(1)).alias("messages")).orderBy("bin", "msg"))
    # the totals by kind and by node, the drops and the unwanted records: one action (each
    # Spark action costs a fixed overhead) over the sends grouped by (node, msg), a few rows
    control = F.col("msg").isNull() | (F.col("msg") != F.lit(NOTIFY))
    size = F.coalesce(F.col("bytes"), F.lit(0))
    per_pair = ctx.events("send", "node", "msg", "bytes").groupBy("node", "msg").agg(
        F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"),
        F.sum(F.when(control, 1).otherwise(0)).alias("control_messages"),
        F.sum(F.when(control, size).otherwise(0)).alias("control_bytes"))
    counts = [ctx.events(kind).agg(F.count(F.lit(1)).alias("messages"))
              .withColumn("kind", F.lit(kind)) for kind in ("drop", "unwanted")]
    rows = ctx.rows(per_pair.withColumn("kind", F.lit("send")).unionByName(
        counts[0], allowMissingColumns=True).unionByName(counts[1], allowMissingColumns=True))
    totals: dict[str, int] = {}
    per_node: dict[str, dict[str, int]] = {k: {} for k in (
        "messages", "bytes", "control_messages", "control_bytes")}
    unwanted = 0
    for r in rows:
        if r["kind"] == "unwanted":
            unwanted = int(r["messages"])
        elif r["kind"] == "drop":
            if r["messages"]:
                totals["dropped"] = totals.get("dropped", 0) + int(r["messages"])
        else:
            msg = r["msg"] if r["msg"] is not None else "?"
            totals[msg] = totals.get(msg, 0) + int(r["messages"])
            for k in per_node:
                per_node[k][r["node"]] = per_node[k].get(r["node"], 0) + int(r[k] or 0)
    sent = sum(n for msg, n in totals.items() if msg != "dropped")
    by_kind = {msg: n for msg, n in totals.items() if msg != "dropped"}
    return {"source": "send records" if totals else "none (run without send tracing)",
            "by_kind": totals, "total": sent, "bin": ctx.bin,
            "per_second": sent / ctx.end if ctx.end > 0 else None,
            "load": load_report(ctx.header, ctx.end, per_node=per_node, by_kind=by_kind,
                                unwanted=unwanted)}
