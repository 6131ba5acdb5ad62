"""The report: RUN/analysis/report.html (one self-contained page), report.md (its text twin)
and PNG plots beside them.

The time series both draw from are collected once (`collect_series`): per bin, publications,
deliveries, losses and duplicates, latency percentiles, messages by kind, and per broker the
routing-table size (from the snapshot records) and the messages sent.

Plots: the correct-delivery ratio over time with the fault windows shaded, stabilization time
(service and state level) against the bound Δ per fault, the deliveries and losses with the
reconfiguration windows, the optimizer's tree cost over time and the degree distribution (when
recorded), violations of the timing model over time, message overhead over time, latency over
time. The numbers are the
summary's; the report only arranges them for a reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from weeble.analytics.html import fifo_line, write_html
from weeble.analytics.jobs.context import Context

if TYPE_CHECKING:
    from matplotlib.axes import Axes

REPORT = "report.md"


REPORT_HTML = "report.html"


def write_report(ctx: Context, summary: dict[str, Any]) -> Path:
    """report.md with its plots, and report.html; returns report.md's path (the HTML page is
    beside it)."""
    import matplotlib

    matplotlib.use("Agg")  # no display; also safe inside Spark's Python workers
    out = ctx.out
    series = collect_series(ctx, summary)
    plots = [p for p in (_correctness_plot(ctx, summary, series),
                         _stabilization_plot(ctx, summary),
                         _reconfigurations_plot(ctx, summary, series),
                         _optimizer_plot(ctx, summary),
                         _timing_plot(ctx, summary), _overhead_plot(ctx, series),
                         _latency_plot(ctx, series))
             if p is not None]
    path = out / REPORT
    path.write_text(_markdown(summary, plots), encoding="utf-8")
    write_html(out / REPORT_HTML, summary, series)
    return path


# ---- the time series (one Spark pass each; the PNGs and the HTML page draw from them) ------


def collect_series(ctx: Context, summary: dict[str, Any]) -> dict[str, Any]:
    """Everything over time the report shows, as plain lists (JSON-able). Times are bin starts
    in s since the run's origin; counts are per bin of `bin` s."""
    from pyspark.sql import functions as F

    judged = F.col("judged")
    pubs = ctx.rows(ctx.table("publications").groupBy(ctx.bins()).agg(
        F.count(F.lit(1)).alias("published"),
        F.sum(judged.cast("long")).alias("judged"),
        F.avg(F.when(judged, F.col("correct").cast("double"))).alias("correct"),
        *[F.sum(F.when(judged, F.col(c)).otherwise(0)).alias(c)
          for c in ("expected", "delivered", "missing", "duplicate")]).orderBy("bin"))
    delivered = ctx.rows(ctx.table("deliveries").where(F.col("first_ts").isNotNull())
                         .groupBy(ctx.bins("first_ts")).agg(F.sum("n").alias("deliveries"))
                         .orderBy("bin"))
    latency = ctx.rows(ctx.table("latency").orderBy("bin"))
    overhead = ctx.rows(ctx.table("overhead").orderBy("bin", "msg"))
    sent = ctx.rows(ctx.events("send", "node").groupBy("node", ctx.bins())
                    .agg(F.count(F.lit(1)).alias("n")))
    # a snapshot's routing tables: a list of tables, each a list of entries
    size = F.expr("aggregate(transform(from_json(tables, 'array<array<string>>'), "
                  "t -> coalesce(size(t), 0)), 0, (a, b) -> a + b)")
    tables = ctx.rows(ctx.events("snapshot", "broker", "tables")
                      .where(F.col("tables").isNotNull())
                      .select("broker", ctx.bins(), size.alias("entries"))
                      .groupBy("broker", "bin").agg(F.max("entries").alias("entries")))
    recolours = ctx.rows(ctx.events("recolor", "node").groupBy(ctx.bins())
                         .agg(F.count(F.lit(1)).alias("n")).orderBy("bin"))
    evidence = {r["fault_id"]: r["evidence"] for r in ctx.rows(
        ctx.table("faults").select("fault_id", "evidence"))}
    brokers: dict[str, dict[str, dict[float, int]]] = {}
    for r in sent:
        brokers.setdefault(r["node"], {"sent": {}, "entries": {}})["sent"][r["bin"]] = r["n"]
    for r in tables:
        brokers.setdefault(r["broker"], {"sent": {}, "entries": {}})["entries"][r["bin"]] = \
            r["entries"]
    topology = summary["run"]["header"].get("topology") or {}
    order = {b: i for i, b in enumerate(topology.get("brokers") or [])}
    return {
        "bin": ctx.bin, "end": ctx.end,
        "publications": [{k: (float(v) if isinstance(v, float) else v) for k, v in r.items()}
                         for r in pubs],
        "deliveries": [{"bin": r["bin"], "deliveries": int(r["deliveries"] or 0)}
                       for r in delivered],
        "latency": [{k: r.get(k) for k in ("bin", "deliveries", "p50", "p90", "p99", "p999",
                                           "max")} for r in latency],
        "overhead": [{"bin": r["bin"], "msg": str(r["msg"]), "messages": int(r["messages"])}
                     for r in overhead],
        "brokers": {b: {k: sorted(([t, n] for t, n in v.items()), key=lambda x: x[0])
                        for k, v in brokers[b].items()}
                    for b in sorted(brokers, key=lambda b: (order.get(b, len(order)), b))},
        "recolours": [{"bin": r["bin"], "n": int(r["n"])} for r in recolours],
        "evidence": evidence,
    }


# ---- plots ----------------------------------------------------------------------------------


def _shade_faults(ax: Axes, summary: dict[str, Any]) -> None:
    end = summary["run"]["end"]
    bound = summary["verdict"]["bound"]
    for i, f in enumerate(summary["faults"]):
        label = "fault" if i == 0 else None
        if f["end"] is None:
            ax.axvspan(f["begin"], end, color="tab:red", alpha=0.15, label=label)
        elif f["end"] - f["begin"] < end / 500:  # instantaneous: a line shows, a span would not
            ax.axvline(f["begin"], color="tab:red", alpha=0.6, label=label)
        else:
            ax.axvspan(f["begin"], f["end"], color="tab:red", alpha=0.15, label=label)
    for i, e in enumerate(summary["stabilization"]["episodes"]):
        if e["end"] is not None and e["end"] + bound < end:
            ax.axvline(e["end"] + bound, color="tab:gray", linestyle=":",
                       label="fault end + Δ" if i == 0 else None)


def _frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows)


def _correctness_plot(ctx: Context, summary: dict[str, Any],
                      series: dict[str, Any]) -> str | None:
    df = _frame([r for r in series["publications"] if r["judged"]])
    if df.empty:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    x = df["bin"] + ctx.bin / 2
    ax.plot(x, df["correct"], label="publications delivered correctly", color="tab:blue")
    ratio = (df["delivered"] / df["expected"]).where(df["expected"] > 0)
    ax.plot(x, ratio, label="expected deliveries made", color="tab:green", alpha=0.7)
    _shade_faults(ax, summary)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlim(0, summary["run"]["end"])
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel(f"ratio per {ctx.bin:g} s")
    ax.set_title("Correct delivery over time")
    ax.legend(loc="lower left", fontsize="small")
    return _save(fig, ctx.out / "correctness.png")


def _shade_reconfigurations(ax: Axes, ops: list[dict[str, Any]], end: float) -> None:
    """Each reconfiguration from its start to its end (a line when it took no time), named by
    its rid; red when its verdict failed."""
    for i, r in enumerate(ops):
        finish = r["end"] if r["end"] is not None else end
        color = "tab:red" if r.get("verdict") == "fail" else "tab:green"
        label = "reconfiguration" if i == 0 else None
        if finish - r["start"] < end / 500:
            ax.axvline(r["start"], color=color, alpha=0.5, linestyle="--", label=label)
        else:
            ax.axvspan(r["start"], finish, color=color, alpha=0.2, label=label)
        if len(ops) <= 40:  # names stay readable
            ax.annotate(r["rid"], (r["start"], 1.0), xycoords=("data", "axes fraction"),
                        fontsize="x-small", rotation=90, va="top", ha="right")


def _reconfigurations_plot(ctx: Context, summary: dict[str, Any],
                           series: dict[str, Any]) -> str | None:
    """The delivery timeline with every reconfiguration window on it: deliveries expected and
    made per bin, and the lost ones, so that a window that loses shows where."""
    ops = summary["reconfigurations"]["operations"]
    df = _frame([r for r in series["publications"] if r["judged"]])
    if not ops or df.empty:
        return None
    import matplotlib.pyplot as plt

    end = summary["run"]["end"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True,
                                      height_ratios=(2, 1))
    x = df["bin"] + ctx.bin / 2
    top.plot(x, df["expected"] / ctx.bin, color="tab:gray", label="expected deliveries")
    top.plot(x, df["delivered"] / ctx.bin, color="tab:blue", alpha=0.8,
             label="made (by publication time)")
    _shade_reconfigurations(top, ops, end)
    top.set_ylabel("deliveries per s")
    top.set_title("Deliveries with the reconfiguration windows")
    top.legend(loc="lower left", fontsize="small")
    bottom.bar(x, df["missing"], width=ctx.bin * 0.9, color="tab:red", label="lost")
    bottom.bar(x, df["duplicate"], width=ctx.bin * 0.9, bottom=df["missing"],
               color="tab:orange", label="duplicated")
    _shade_reconfigurations(bottom, ops, end)
    for f in summary["faults"]:
        for ax in (top, bottom):
            ax.axvline(f["begin"], color="black", alpha=0.5, linestyle=":")
    if not (df["missing"].sum() or df["duplicate"].sum()):
        bottom.set_ylim(0, 1)
        bottom.text(0.5, 0.5, "nothing lost or duplicated", transform=bottom.transAxes,
                    ha="center", va="center", color="tab:gray",
                    bbox={"facecolor": "white", "edgecolor": "none"})
    else:  # the stacked bars' top: lost + duplicated, not lost alone
        bottom.set_ylim(0, float((df["missing"] + df["duplicate"]).max()) * 1.1)
    bottom.set_ylabel(f"per {ctx.bin:g} s")
    bottom.set_xlabel("publication time since run start (s); dotted: a fault began")
    bottom.set_xlim(0, end)
    bottom.legend(loc="upper right", fontsize="small")
    return _save(fig, ctx.out / "reconfigurations.png")


def _optimizer_plot(ctx: Context, summary: dict[str, Any]) -> str | None:
    """The tree's cost over time (the optimizer's `tree_cost` records), with the
    reconfigurations it made, and the degree distribution of the last tree."""
    r = summary["reconfigurations"]
    if r.get("tree_cost") is None:
        return None
    df = ctx.table("tree_cost").orderBy("ts").toPandas()
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=(3, 1))
    for heuristic, group in df.groupby(df["heuristic"].fillna("?")):
        # each window's cost per notification, drawn over the window it measured
        left.hlines(group["per_notification"], group["since"], group["ts"],
                    label=f"heuristic {heuristic}")
        left.plot((group["since"] + group["ts"]) / 2, group["per_notification"], ".",
                  color="tab:blue")
    for op in r["operations"]:
        if op["outcome"] == "done":
            left.axvline(op["start"], color="tab:green", alpha=0.15)
    left.set_xlabel("time since run start (s); green: a reconfiguration")
    left.set_ylabel("cost per notification (eq. 5.2)")
    rate = r.get("per_minute")
    left.set_title("Tree cost over time" + (f" ({rate:.3g} reconfigurations/min)"
                                            if rate is not None else ""))
    left.legend(fontsize="small")
    degrees = {int(k): v for k, v in r["degrees"].items()}
    right.bar(list(degrees), list(degrees.values()), color="tab:purple")
    right.set_xticks(sorted(degrees))
    right.set_xlabel("degree")
    right.set_ylabel("brokers")
    right.set_title(f"Degrees ({r['degrees_of']})", fontsize="small")
    return _save(fig, ctx.out / "optimizer.png")


def _stabilization_plot(ctx: Context, summary: dict[str, Any]) -> str | None:
    faults = summary["faults"]
    if not faults:
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    names = [f"{f['fault_id']}\n{f['type'] or ''}" for f in faults]
    x = np.arange(len(faults))
    fig, ax = plt.subplots(figsize=(max(6, len(faults) * 1.2), 4))
    bound = summary["verdict"]["bound"]
    for offset, level, color in ((-0.2, "service", "tab:blue"), (0.2, "state", "tab:orange")):
        times = [f[f"{level}_time"] for f in faults]
        heights = [t if t is not None else 0 for t in times]
        ax.bar(x + offset, heights, width=0.4, color=color, label=f"{level} level")
        for xi, t in zip(x, times, strict=True):
            # every bar says its value: a time of 0 s (legitimate when the episode ended) has
            # no height, and must not look like a level that was not measured
            ax.text(xi + offset, (t or 0) + bound * 0.02, "n/a" if t is None else f"{t:.2g} s",
                    ha="center", va="bottom", fontsize="small", rotation=90)
    ax.axhline(bound, color="tab:red", linestyle="--", label=f"bound Δ = {bound:.3g} s")
    ax.set_xticks(x, names, fontsize="small")
    ax.set_ylabel("stabilization time (s)")
    ax.set_title("Stabilization time against the bound, per fault")
    ax.legend(fontsize="small")
    return _save(fig, ctx.out / "stabilization.png")


def _timing_plot(ctx: Context, summary: dict[str, Any]) -> str | None:
    """Violations of the timing model (R13) over time, per kind, with the faults shaded."""
    groups = summary["timing"]["groups"]
    if not groups:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    by_kind: dict[str, dict[float, int]] = {}
    for g in groups:
        slot = by_kind.setdefault(g["kind"], {})
        b = (g["begin"] // ctx.bin) * ctx.bin
        slot[b] = slot.get(b, 0) + g["count"]
    for kind, bins in sorted(by_kind.items()):
        xs = sorted(bins)
        ax.bar([x + ctx.bin / 2 for x in xs], [bins[x] for x in xs], width=ctx.bin * 0.9,
               alpha=0.6, label=kind)
    _shade_faults(ax, summary)
    ax.set_xlim(0, summary["run"]["end"])
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel(f"violations per {ctx.bin:g} s")
    ax.set_title("Timing model: hop delays > δmax, refresh gaps > ρ, late timers, slow paths")
    ax.legend(fontsize="small")
    return _save(fig, ctx.out / "timing.png")


def _overhead_plot(ctx: Context, series: dict[str, Any]) -> str | None:
    df = _frame(series["overhead"])
    if df.empty:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    for msg, group in df.groupby("msg"):
        ax.plot(group["bin"] + ctx.bin / 2, group["messages"] / ctx.bin, label=str(msg))
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("messages per second")
    ax.set_title("Inter-broker messages by kind")
    ax.legend(fontsize="small")
    return _save(fig, ctx.out / "overhead.png")


def _latency_plot(ctx: Context, series: dict[str, Any]) -> str | None:
    df = _frame(series["latency"])
    if df.empty:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    x = df["bin"] + ctx.bin / 2
    for column in ("p50", "p90", "p99", "max"):
        ax.plot(x, df[column] * 1000, label=column)
    # log scale: p99 is orders of magnitude above p50 under faults, and hid under max
    ax.set_yscale("log")
    ax.set_xlabel("delivery time since run start (s)")
    ax.set_ylabel("end-to-end latency (ms, log scale)")
    ax.set_title("Latency")
    ax.legend(fontsize="small")
    return _save(fig, ctx.out / "latency.png")


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


# ---- text -----------------------------------------------------------------------------------


def _markdown(s: dict[str, Any], plots: list[str]) -> str:
    run, verdict, d = s["run"], s["verdict"], s["deliveries"]
    lines = [
        f"# Weeble analysis: {run['name']}",
        "",
        f"Run `{run['dir']}` ({run['source']}), {run['end']:.6g} s, "
        f"{s['ingest']['records']:,} trace records from {run['trace_files']} files. "
        f"Routing {run['algorithm']}{' + wrapper' if run['wrapper'] else ''}"
        f"{', hierarchical' if run['hierarchical'] else ''}; π = {run['params']['pi']:g} s, "
        f"ρ = {run['params']['rho']:g} s, δ_max = {run['params']['delta_max']:g} s, "
        f"d = {run['params']['d']}; bound Δ = {verdict['bound']:.4g} s.",
        "",
        f"## Verdict: {verdict['status'].upper()}",
        "",
    ]
    lines += [f"- {r}" for r in verdict["reasons"]] or ["Every fault episode stabilized within "
                                                        "the bound; no error before the first "
                                                        "fault."]
    lines += _retimed_lines(verdict.get("parts") or [])
    lines += ["", verdict_table(s["faults"]), ""]
    if s["faults"]:
        lines += [f"Stabilization times are measured from "
                  f"{verdict['stabilization_measured_from']}: the service level to the first "
                  "publication after which every publication was delivered correctly, the state "
                  "level to the first legitimacy check after which every check passed.", ""]
    lines += _reconfigurations_section(s["reconfigurations"])
    lines += _timing_section(s["timing"])
    lines += [
        "## Deliveries",
        "",
        f"Activation window A = {run['activation']:.4g} s, deactivation window "
        f"D = {run['deactivation']:.4g} s: a delivery inside one is neither missing nor "
        "spurious.",
        "",
        "| publications | judged | correct | expected | delivered | missing | in a window | "
        "spurious | duplicate | phantom |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        "| " + " | ".join(f"{d[k]:,}" for k in (
            "publications", "judged", "correct", "expected", "delivered", "missing", "window",
            "spurious", "duplicate", "phantom")) + " |",
        "",
        fifo_line(s["ordering"]),
        "",
    ]
    lat = s["latency"]
    if lat.get("deliveries"):
        lines += ["## Latency", "", "| p50 | p90 | p99 | p99.9 | max |",
                  "|---:|---:|---:|---:|---:|",
                  "| " + " | ".join(f"{lat[k] * 1000:.3f} ms" for k in
                                   ("p50", "p90", "p99", "p999", "max")) + " |", ""]
    o = s["overhead"]
    lines += ["## Overhead", ""]
    if o["total"]:
        lines += [f"{o['total']:,} inter-broker messages ({o['per_second']:.4g}/s): "
                  + ", ".join(f"{k} {v:,}" for k, v in sorted(o["by_kind"].items())), ""]
    else:
        lines += ["No send records in the trace (simulator: `trace: {sends: true}`).", ""]
    sim = s.get("simulator")
    if sim and sim.get("deliveries"):
        sd = sim["deliveries"]
        lines += ["## Cross-check with the simulator's online checker", "",
                  "| | expected | missing | duplicate | spurious |", "|---|---:|---:|---:|---:|",
                  f"| simulator | {sd['expected']:,} | {sd['missing']:,} | {sd['duplicate']:,} | "
                  f"{sd['spurious']:,} |",
                  f"| analytics | {d['expected']:,} | {d['missing']:,} | {d['duplicate']:,} | "
                  f"{d['spurious']:,} |", ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})\n" for p in plots]
    lines += ["## Tables", "", "Parquet, under `analysis/`: `events/kind=*` (the trace), "
              "`publications`, `deliveries`, `violations`, `subscriptions`, `faults`, `episodes`, "
              "`legitimacy`, `stabilization`, `verdict`, `ordering`, `reorderings`, "
              "`overhead`, `latency`, `reconfigurations`, `tree_cost` (when recorded).", ""]
    return "\n".join(lines)


def _reconfigurations_section(r: dict[str, Any]) -> list[str]:
    """R15: one row per reconfiguration (its window's figures and verdict), and the rates."""
    from weeble.check.reconfig import TABLE_COLUMNS, table_cells

    ops = r["operations"]
    if not ops:
        return []
    lines = ["## Reconfigurations", "",
             "| " + " | ".join(TABLE_COLUMNS) + " |",
             "|" + "|".join("---" if c in ("reconfiguration", "operation", "outcome", "verdict")
                            else "---:" for c in TABLE_COLUMNS) + "|"]
    lines += ["| " + " | ".join(table_cells(x, detail=True)) + " |" for x in ops]
    lines += [""] + [f"- {x['rid']}: {x['verdict']}: {x['reason']}" for x in ops if x["reason"]]
    lines += ["", "Each window holds the publications from its start − D to its end + D; "
              "reordered counts FIFO (and, under causal ordering, causal) violations delivered "
              "up to its end + 2D. *during faults*: a fault overlaps the window, so its figures "
              "are shown but its fault's episode is what is judged (R15).", ""]
    rate = r.get("per_minute")
    if rate is not None:
        lines += [f"{r['done']:,} of {r['count']:,} reconfigurations done: {rate:.3g} per "
                  f"minute ({r['per_1000_s']:.3g} per 1000 s)."]
    cost = r.get("tree_cost")
    if cost is not None and cost["first"] is not None:
        lines += [f"Tree cost per notification (heuristic {cost['heuristic']}): "
                  f"{cost['first']:.4g} in the first window, {cost['last']:.4g} in the last, "
                  f"{cost['min']:.4g} at least ({cost['windows']:,} windows)."]
    lines += ["Degree distribution (" + r["degrees_of"] + "): " + ", ".join(
        f"degree {k}: {v}" for k, v in r["degrees"].items()) + ".", ""]
    return lines


def _timing_section(t: dict[str, Any]) -> list[str]:
    """The timing model (R13): what was measured, the worst, where it was violated."""
    lines = ["## Timing model", ""]
    measured = ", ".join(f"{k} {n:,} (worst {t['worst'].get(k, 0):.3g} s)"
                         for k, n in t["measured"].items() if n)
    lines += [f"Measured (τ = {t['tolerance']:g} s): {measured or 'nothing'}.", ""]
    if not t["violations"]:
        return [*lines, "No violation: the run kept the timing model its bounds assume.", ""]
    lines += ["| kind | violations | worst | limit | first | last | brokers |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for kind, k in t["by_kind"].items():
        brokers = ", ".join(k["brokers"][:8]) + (" …" if len(k["brokers"]) > 8 else "")
        lines.append(f"| {kind} | {k['violations']:,} | {k['max']:.3g} s | {k['limit']:.3g} s | "
                     f"{k['first']:.4g} s | {k['last']:.4g} s | {brokers} |")
    lines += ["", "Per broker: " + "; ".join(
        f"{b}: " + ", ".join(f"{kind} {n:,}" for kind, n in kinds.items())
        for b, kinds in list(t["by_broker"].items())[:30]), ""]
    return lines


def verdict_table(faults: list[dict[str, Any]]) -> str:
    """The per-fault verdict as a Markdown table."""
    if not faults:
        return "No faults in this run."
    head = ("| fault | kind | target | took effect | stabilization (service / state) | bound | "
            "ratio | lost | duplicated | reordered | status |")
    rows = [head, "|---|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for f in faults:
        rows.append(
            f"| {f['fault_id']} | {f['type'] or '?'} | {f['target']} | "
            f"{_effect(f['took_effect'])} | {_time(f['service_time'], f['service_status'])} / "
            f"{_time(f['state_time'], f['state_status'])} | {f['bound']:.3g} s | "
            f"{_num(f['ratio'])} | {f['lost']:,} | {f['duplicated']:,} | {f['reordered']:,} | "
            f"{f['status']} |")  # the row's status as `weeble check` prints it, not pass yes/no
    return "\n".join(rows)


def _effect(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "NO")


def _retimed_lines(parts: list[dict[str, Any]]) -> list[str]:
    """R13e, per part judged again at the timing it had: what that timing was."""
    lines = []
    for p in parts:
        t = p.get("timing")
        if not t:
            continue
        bound = (f"Δ recomputed with it {t['bound']:.4g} s" if t["bound"] is not None
                 else t["why"])
        lines.append(f"- {p['part']}: the timing it had: δmax {t['delta_max']:.3g} s, "
                     f"ρ {t['rho']:.3g} s, π {t['pi']:.3g} s; {bound}; the timing model "
                     f"held again from t = {t['kept_from']:.6g} s ({p['status']})")
    return ["", *lines] if lines else []


def _time(t: float | None, status: str) -> str:
    return f"{t:.3g} s" if t is not None else status


def _num(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"
