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
    table = ctx.write("overhead", sends.unionByName(drops).groupBy("bin", "msg")
                      .agg(F.count(F.lit(1)).alias("messages")).orderBy("bin", "msg"))
    totals = {r["msg"]: int(r["n"]) for r in ctx.rows(
        table.groupBy("msg").agg(F.sum("messages").alias("n")))}
    sent = sum(n for msg, n in totals.items() if msg != "dropped")
    per_node: dict[str, dict[str, int]] = {k: {} for k in (
        "messages", "bytes", "control_messages", "control_bytes")}
    control = F.col("msg").isNull() | (F.col("msg") != F.lit(NOTIFY))
    size = F.coalesce(F.col("bytes"), F.lit(0))
    for r in ctx.rows(ctx.events("send", "node", "msg", "bytes").groupBy("node").agg(
            F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"),
            F.sum(F.when(control, 1).otherwise(0)).alias("control_messages"),
            F.sum(F.when(control, size).otherwise(0)).alias("control_bytes"))):
        for k in per_node:
            per_node[k][r["node"]] = int(r[k] or 0)
    unwanted = ctx.events("unwanted").count()
    by_kind = {msg: n for msg, n in totals.items() if msg != "dropped"}
    return {"source": "send records" if totals else "none (run without send tracing)",
            "by_kind": totals, "total": sent, "bin": ctx.bin,
            "per_second": sent / ctx.end if ctx.end > 0 else None,
            "load": load_report(ctx.header, ctx.end, per_node=per_node, by_kind=by_kind,
                                unwanted=unwanted)}
