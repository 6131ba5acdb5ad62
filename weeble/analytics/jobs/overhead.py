"""Message overhead: inter-broker messages by kind over time.

Counted from `send` records (one per message put on a link; the simulator writes them with
`trace.sends`), binned over the run, with link-fault losses (`drop`) as their own kind. Without
send records the table is empty and the summary falls back to the simulator's totals.

Table: `overhead` (bin, msg, messages).
"""

from __future__ import annotations

from typing import Any

from weeble.analytics.jobs.context import Context


def run(ctx: Context) -> dict[str, Any]:
    from pyspark.sql import functions as F

    sends = ctx.events("send", "msg").select(ctx.bins(), F.coalesce("msg", F.lit("?")).alias("msg"))
    drops = ctx.events("drop").select(ctx.bins(), F.lit("dropped").alias("msg"))
    table = ctx.write("overhead", sends.unionByName(drops).groupBy("bin", "msg")
                      .agg(F.count(F.lit(1)).alias("messages")).orderBy("bin", "msg"))
    totals = {r["msg"]: int(r["n"]) for r in ctx.rows(
        table.groupBy("msg").agg(F.sum("messages").alias("n")))}
    sent = sum(n for msg, n in totals.items() if msg != "dropped")
    return {"source": "send records" if totals else "none (run without send tracing)",
            "by_kind": totals, "total": sent, "bin": ctx.bin,
            "per_second": sent / ctx.end if ctx.end > 0 else None}
