"""Fault windows and the evidence that each fault took effect.

A fault is the fault_begin/fault_end records sharing a `fault_id` (one pair per broker it hit):
its window runs from the first begin to the last end. A fault without an end never ended: its
window lasts to the end of the run, and no stabilization can be measured after it.

Faults closer than Δ form one episode (rule R10, `weeble.check.episodes`, the one grouping): the
system is judged from the end of an episode's last fault to the start of the next episode (or
the end of the run), as one recovery.

Evidence, strongest first: the fault_end says it failed (`ok` false or an `error`); a state fault
changed the state (`before` != `after`, in the fault_end or in the core's `fault` record on that
broker within the window; no change on any broker: it did not take effect); a client crash shows
as the client's `crash` record; a link fault as `drop` records in its window; otherwise a
fault_end with `ok` true says it was applied. No evidence leaves `took_effect` unknown (null).

Tables: `faults` (one row per fault), `episodes`.
"""

from __future__ import annotations

import json
from typing import Any

from weeble.analytics.jobs.context import Context
from weeble.check.episodes import Fault, episodes_of, fault_target, merge_targets

EPS = 1e-9  # s: records of the same instant as a window's edge belong to it


def run(ctx: Context) -> dict[str, Any]:
    cols = ("node", "fault_id", "type", "target", "field", "links", "client", "sub_id", "ok",
            "error", "before", "after", "took_effect")
    begins, ends, core = _records(ctx, cols)
    faults: dict[str, dict[str, Any]] = {}
    for r in sorted(begins, key=lambda r: (r["ts"], r["ord"])):
        f = faults.setdefault(r["fault_id"], {
            "fault_id": r["fault_id"], "type": r["type"], "field": r["field"], "begin": r["ts"],
            "end": None, "nodes": [], "target": "", "sub_ids": [], "evidence": [],
            "took_effect": None, "reported": None})
        f["nodes"].append(r["node"])
        f["target"] = merge_targets(f["target"], fault_target(r))
        if r["sub_id"]:  # (client, sub_id): ids are unique per client only (R1)
            f["sub_ids"].append((r["client"], r["sub_id"]))
    applied: set[str] = set()
    for r in ends:
        f = faults.get(r["fault_id"])
        if f is None:
            continue  # an end without a begin: nothing to measure from
        f["end"] = r["ts"] if f["end"] is None else max(f["end"], r["ts"])
        if r["ok"] is True:
            applied.add(f["fault_id"])
        if r["ok"] is False or r["error"]:
            f["evidence"].append(f"{r['node']}: failed: {r['error'] or 'not ok'}")
            if f["took_effect"] is None:  # a change on another broker it hit still counts
                f["took_effect"] = False
        elif r["before"] is not None and r["after"] is not None:
            _changed(f, r["node"], r["before"], r["after"])
    for r in core:  # the core's own evidence of a state fault
        for f in faults.values():
            if r["fault_id"] not in (None, f["fault_id"]) or r["node"] not in f["nodes"]:
                continue
            if f["begin"] - EPS <= r["ts"] <= _until(f, ctx) + EPS:
                _changed(f, r["node"], r["before"], r["after"])
    _client_and_link_evidence(ctx, faults)
    for fault_id in applied:
        f = faults[fault_id]
        if f["took_effect"] is None:
            f["evidence"].append("applied (fault_end ok)")
            f["took_effect"] = True
    for r in [*begins, *ends]:  # what the chaos module reported: as weeble.check reads it
        f = faults.get(r["fault_id"])
        if f is not None and r["took_effect"] is not None:
            f["reported"] = bool(r["took_effect"]) or bool(f["reported"])
    for f in faults.values():
        if f["reported"] is not None:
            f["took_effect"] = f["reported"]
    rows = sorted(faults.values(), key=lambda f: (f["begin"], f["fault_id"]))
    grouped = [Fault(f["fault_id"], f["type"] or "?", f["target"], f["begin"], f["end"])
               for f in rows]
    episodes = [{"episode": e.index, "begin": e.begin, "faults": e.faults, "end": e.end,
                 "observed_until": e.observed_until}
                for e in episodes_of(grouped, ctx.header.bound, ctx.end)]
    for f, g in zip(rows, grouped, strict=True):
        f["episode"] = g.episode
    table = [{
        "fault_id": f["fault_id"], "type": f["type"], "target": f["target"],
        "field": f["field"], "begin": f["begin"], "end": f["end"],
        "never_ended": f["end"] is None, "took_effect": f["took_effect"],
        "evidence": "; ".join(f["evidence"][:5]), "episode": f["episode"],
    } for f in rows]
    ctx.write("faults", ctx.spark.createDataFrame(table, _fault_schema()))
    ctx.write("episodes", ctx.spark.createDataFrame(episodes, _episode_schema()))
    return {"faults": table, "episodes": episodes}


def _records(ctx: Context, cols: tuple[str, ...]) -> tuple[list[dict[str, Any]], ...]:
    """The fault_begin, fault_end and core `fault` records, collected in one Spark action (each
    action costs a fixed overhead; these kinds are a few records each)."""
    from pyspark.sql import functions as F

    kinds = ("fault_begin", "fault_end", "fault")
    frames = [ctx.events(kind, *cols).withColumn("_kind", F.lit(i))
              for i, kind in enumerate(kinds)]
    union = frames[0].unionByName(frames[1]).unionByName(frames[2])
    out: tuple[list[dict[str, Any]], ...] = ([], [], [])
    for r in ctx.rows(union):
        out[r.pop("_kind")].append(r)
    return out


def _until(f: dict[str, Any], ctx: Context) -> float:
    return f["end"] if f["end"] is not None else ctx.end


def _changed(f: dict[str, Any], node: str, before: str | None, after: str | None) -> None:
    same = _json(before) == _json(after)
    f["evidence"].append(f"{node}: state {'unchanged' if same else 'changed'}")
    if not same:
        f["took_effect"] = True
    elif f["took_effect"] is None:  # unless another broker it hit did change
        f["took_effect"] = False


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return text


def crash_hits(crashed: list[tuple[str | None, str]],
               seen: set[tuple[str | None, str | None, float]], begin: float,
               until: float) -> list[tuple[str | None, str]]:
    """The (client, sub_id) pairs a client-crash fault names that have a `crash` record
    (client, sub_id, ts) inside its window. By client and id: ids are unique per client only,
    so another client's crash of the same id is no evidence. A fault record without `client`
    (an older trace) names its sub_id alone."""
    return [(c, s) for c, s in crashed
            if any(sid == s and (c is None or client == c) and begin - EPS <= ts <= until + EPS
                   for client, sid, ts in seen)]


def _client_and_link_evidence(ctx: Context, faults: dict[str, dict[str, Any]]) -> None:
    from pyspark.sql import functions as F

    pending = [f for f in faults.values() if f["took_effect"] is None]
    crashes = [f for f in pending if f["sub_ids"]]
    if crashes:
        seen = {(r["client"], r["sub_id"], r["ts"])
                for r in ctx.rows(ctx.events("crash", "client", "sub_id"))}
        for f in crashes:
            hit = crash_hits(f["sub_ids"], seen, f["begin"], _until(f, ctx))
            if hit:
                f["evidence"].append(f"crash records of {len(hit)} subscription(s)")
                f["took_effect"] = True
    links = [f for f in pending if f["type"] == "drop" and f["took_effect"] is None]
    if not links:
        return
    # the drop records in each link fault's window, counted in one pass over the drops
    ts = F.col("ts")
    row = ctx.events("drop").agg(*[
        F.count(F.when((ts >= f["begin"] - EPS) & (ts <= _until(f, ctx) + EPS), 1))
        for f in links]).first()
    assert row is not None
    for f, drops in zip(links, row, strict=True):
        if drops:
            f["evidence"].append(f"{drops} drop records")
            f["took_effect"] = True


def _fault_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("fault_id", T.StringType()), T.StructField("type", T.StringType()),
        T.StructField("target", T.StringType()), T.StructField("field", T.StringType()),
        T.StructField("begin", T.DoubleType()), T.StructField("end", T.DoubleType()),
        T.StructField("never_ended", T.BooleanType()),
        T.StructField("took_effect", T.BooleanType()), T.StructField("evidence", T.StringType()),
        T.StructField("episode", T.LongType()),
    ])


def _episode_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("episode", T.LongType()), T.StructField("begin", T.DoubleType()),
        T.StructField("faults", T.ArrayType(T.StringType())),
        T.StructField("end", T.DoubleType()), T.StructField("observed_until", T.DoubleType()),
    ])
