"""report.html: one self-contained page per run (no network: its data, style and script are
inline), the visual twin of report.md.

Sections (each an element with an id, which the headless-browser test looks for):
`header` (the run, its verdict, the commands that reproduce it), `timeline` (faults as shaded
windows, reconfigurations and recolours as bands, publications, deliveries, losses and
duplicates per second, the timing model's violations), `episodes` (per episode and per fault:
the evidence it took effect, service- and state-level stabilization beside the bound, lost,
duplicated, reordered), `reconfigurations`, `brokers` (per broker: routing-table size and
messages over time), `latency` (percentiles over time on a log scale) and `deliveries`.

The page draws its charts itself (SVG, from the JSON embedded in it); it marks
`<body data-rendered="yes">` when done and lists any script error in `data-errors`.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

SECTIONS = ("header", "timeline", "episodes", "reconfigurations", "brokers", "latency",
            "deliveries")


def write_html(path: Path, summary: dict[str, Any], series: dict[str, Any]) -> Path:
    path.write_text(render(summary, series), encoding="utf-8")
    return path


def reproduce_commands(summary: dict[str, Any]) -> list[str]:
    """The commands that judge this run again and run its scenario again (the run directory
    keeps the scenario as scenario.json)."""
    run = summary["run"]
    d = run["dir"]
    scenario = Path(d) / "scenario.json"
    again = (f"weeble simulate {scenario} --out {d}-again" if run["source"] == "sim"
             else f"weeble run {scenario} --backend {run['source']}")
    return [f"weeble check {d}", f"weeble analyze {d}", again]


def render(summary: dict[str, Any], series: dict[str, Any]) -> str:
    run, verdict = summary["run"], summary["verdict"]
    data = {
        "series": series,
        "faults": summary["faults"],
        "episodes": summary["stabilization"].get("episodes") or [],
        "reconfigurations": summary["reconfigurations"].get("operations") or [],
        "timing": summary["timing"].get("groups") or [],
        "bound": verdict["bound"],
        "latency": summary["latency"],
    }
    # "</" inside a string would end the script element early
    payload = json.dumps(_finite(data), default=str).replace("</", "<\\/")
    status = str(verdict["status"])
    body = "\n".join([
        _header(summary, status),
        _section("timeline", "Timeline",
                 "<p class=note>Per second, by publication time (deliveries: by delivery time)."
                 " Red: a fault's window; green: a reconfiguration; purple ticks: recolours;"
                 " dotted: an episode's end + Δ.</p><div id=timeline-chart></div>"),
        _section("episodes", "Episodes and faults",
                 _episodes(summary, series.get("evidence") or {})),
        _section("reconfigurations", "Reconfigurations", _reconfigurations(summary)),
        _section("brokers", "Brokers",
                 "<p class=note>One row per broker, one column per time bin; darker is more."
                 " Table size: entries in its routing tables at its snapshots (live runs take"
                 " them every few seconds; the simulator checks legitimacy online instead)."
                 "</p><div id=brokers-chart></div>"),
        _section("latency", "Latency", _latency_table(summary)
                 + "<div id=latency-chart></div>"),
        _section("deliveries", "Deliveries", _deliveries(summary)),
    ])
    return _PAGE.format(title=html.escape(f"Weeble: {run['name']} ({status})"), style=_STYLE,
                        body=body, data=payload, script=_SCRIPT)


def _finite(x: Any) -> Any:
    """JSON has no infinity or NaN: they become null (the page shows them as '-')."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def _e(x: Any) -> str:
    return html.escape("-" if x is None else str(x))


def _section(key: str, title: str, inner: str) -> str:
    return f"<section id={key}><h2>{_e(title)}</h2>{inner}</section>"


def _s(t: float | None, status: str | None = None) -> str:
    return f"{t:.3g} s" if t is not None else _e(status)


def _badge(status: str) -> str:
    cls = {"pass": "pass", "fail": "fail"}.get(status, "warn")
    return f"<span class='badge {cls}'>{_e(status.upper())}</span>"


def _header(summary: dict[str, Any], status: str) -> str:
    run, verdict = summary["run"], summary["verdict"]
    p = run["params"]
    versions = run["header"].get("versions") or {}
    facts = [
        ("run", run["dir"]), ("backend", run["source"]),
        ("routing", f"{run['algorithm']}{' + wrapper' if run['wrapper'] else ''}"
                    f"{', hierarchical' if run['hierarchical'] else ''}"),
        ("seed", run["seed"]), ("duration", f"{run['end']:.6g} s"),
        ("π, ρ, δmax, d", f"{p['pi']:g} s, {p['rho']:g} s, {p['delta_max']:g} s, {p['d']}"),
        ("bound Δ", f"{verdict['bound']:.4g} s"),
        ("trace", f"{summary['ingest']['records']:,} records in {run['trace_files']} files"),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items())),
    ]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    reasons = "".join(f"<li>{_e(r)}</li>" for r in verdict["reasons"])
    commands = "\n".join(_e(c) for c in reproduce_commands(summary))
    return (f"<header id=header><h1>{_e(run['name'])} {_badge(status)}</h1>"
            f"<table class=facts>{rows}</table>"
            + (f"<ul class=reasons>{reasons}</ul>" if reasons else
               "<p>Every part of the run passed.</p>")
            + f"<h3>Reproduce</h3><pre class=commands>{commands}</pre></header>")


def _episodes(summary: dict[str, Any], evidence: dict[str, str]) -> str:
    faults = summary["faults"]
    if not faults:
        return "<p>No faults in this run: no stabilization time.</p>"
    parts = {p.get("episode"): p for p in summary["verdict"].get("parts") or []
             if p.get("episode") is not None}
    out = [f"<p class=note>Stabilization is measured from "
           f"{_e(summary['verdict'].get('stabilization_measured_from'))}.</p>"]
    by_episode: dict[int, list[dict[str, Any]]] = {}
    for f in faults:
        by_episode.setdefault(f["episode"], []).append(f)
    for index, fs in sorted(by_episode.items()):
        part = parts.get(index) or {}
        first = fs[0]
        status = str(part.get("status") or first["status"])
        out.append(
            f"<div class=episode><h3>Episode {index} {_badge(status)}</h3>"
            f"<div class=bars data-bound='{first['bound']}' "
            f"data-service='{_num(first['service_time'])}' "
            f"data-state='{_num(first['state_time'])}'></div>"
            f"<p>service level {_s(first['service_time'], first['service_status'])}, state level "
            f"{_s(first['state_time'], first['state_status'])}, bound Δ {first['bound']:.3g} s; "
            f"lost {_e(first['lost'])}, duplicated {_e(first['duplicated'])}, reordered "
            f"{_e(first['reordered'])} (from its begin to its observed end).</p>"
            + (f"<p class=reason>{_e(part.get('reason'))}</p>" if part.get("reason") else ""))
        out.append("<table><tr><th>fault</th><th>kind</th><th>target</th><th>window</th>"
                   "<th>took effect</th><th>evidence</th></tr>")
        for f in fs:
            end = "never ended" if f["end"] is None else f"{f['end']:.4g} s"
            took = "unknown" if f["took_effect"] is None else ("yes" if f["took_effect"]
                                                               else "NO")
            out.append(f"<tr><td>{_e(f['fault_id'])}</td><td>{_e(f['type'])}</td>"
                       f"<td>{_e(f['target'])}</td><td>{f['begin']:.4g} s → {end}</td>"
                       f"<td>{took}</td><td class=evidence>"
                       f"{_e(evidence.get(f['fault_id']) or '-')}</td></tr>")
        out.append("</table></div>")
    return "".join(out)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


def _reconfigurations(summary: dict[str, Any]) -> str:
    from weeble.check.reconfig import TABLE_COLUMNS, table_cells

    ops = summary["reconfigurations"].get("operations") or []
    if not ops:
        return "<p>No reconfiguration in this run.</p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in TABLE_COLUMNS)
    rows = "".join(
        f"<tr class={'fail' if r.get('verdict') == 'fail' else 'ok'}>"
        + "".join(f"<td>{_e(c)}</td>" for c in table_cells(r, detail=True)) + "</tr>"
        for r in ops)
    reasons = "".join(f"<li>{_e(r['rid'])}: {_e(r['reason'])}</li>" for r in ops
                      if r.get("reason"))
    return f"<table><tr>{head}</tr>{rows}</table>" + (f"<ul>{reasons}</ul>" if reasons else "")


def _latency_table(summary: dict[str, Any]) -> str:
    lat = summary["latency"]
    if not lat.get("deliveries"):
        return "<p>No delivery with a known publication time.</p>"
    keys = ("p50", "p90", "p99", "p999", "max")
    return ("<table><tr>" + "".join(f"<th>{k}</th>" for k in keys) + "</tr><tr>"
            + "".join(f"<td>{lat[k] * 1000:.3f} ms</td>" for k in keys) + "</tr></table>")


def fifo_line(o: dict[str, Any]) -> str:
    """FIFO (R7) in one sentence: how many were checked, then how many broke it (report.md
    says it too)."""
    checked = (f" in {o['deliveries']:,} first deliveries to {o['subscribers']:,} subscribers"
               if "subscribers" in o else "")
    affected = (f" ({o['subscribers_affected']:,} subscribers affected)"
                if o["violations"] else "")
    return f"Per-publisher FIFO violations{checked}: {o['violations']:,}{affected}."


def _deliveries(summary: dict[str, Any]) -> str:
    d = summary["deliveries"]
    keys = ("publications", "judged", "correct", "expected", "delivered", "missing", "window",
            "spurious", "duplicate", "phantom")
    return ("<table><tr>" + "".join(f"<th>{k}</th>" for k in keys) + "</tr><tr>"
            + "".join(f"<td>{d[k]:,}</td>" for k in keys) + "</tr></table>"
            + f"<p>{_e(fifo_line(summary['ordering']))}</p>")


_PAGE = """<!DOCTYPE html>
<html lang=en><head><meta charset=utf-8><title>{title}</title>
<meta name=viewport content="width=device-width, initial-scale=1">
<style>{style}</style></head>
<body data-rendered=no data-errors="">
<script>
window.weebleErrors = [];
window.addEventListener("error", function (e) {{
  window.weebleErrors.push(String(e.message));
  document.body.dataset.errors = window.weebleErrors.join(" | ");
}});
</script>
{body}
<script id=weeble-data type="application/json">{data}</script>
<script>{script}</script>
</body></html>
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin: 0 0 .4em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .4em 0; } td, th { padding: 2px 8px;
  border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
.facts th { color: #555; font-weight: normal; }
.badge { font-size: .65em; padding: 2px 8px; border-radius: 4px; color: white;
         vertical-align: middle; }
.badge.pass { background: #2a7d2a; } .badge.fail { background: #b3261e; }
.badge.warn { background: #b26a00; }
pre.commands { background: #f4f4f4; padding: .6em; }
.note { color: #666; font-size: .9em; } .reason { color: #b3261e; }
.episode { border-left: 4px solid #ddd; padding-left: .8em; margin: 1em 0; }
.evidence { font-size: .85em; color: #444; max-width: 40em; }
tr.fail td { background: #fde8e6; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.legend span { display: inline-block; margin-right: 1em; font-size: .9em; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -2px; }
"""

# The charts: a few hundred lines of plain JavaScript over SVG, no library (offline).
_SCRIPT = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("weeble-data").textContent);
  var S = D.series, BIN = S.bin, END = Math.max(S.end, BIN);
  var NS = "http://www.w3.org/2000/svg";
  var W = 1100, LEFT = 70, RIGHT = 20;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, attrs) {
    var t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    t.textContent = s;
    return t;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "-";
    var a = Math.abs(v);
    if (a !== 0 && (a < 0.01 || a >= 1e5)) return v.toExponential(1);
    return String(Math.round(v * 1000) / 1000);
  }
  function ticks(lo, hi, n) {
    var span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    [1, 2, 5, 10].some(function (m) { if (span / (m * step) <= n) { step *= m; return true; } });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
    return out;
  }
  function legend(container, items) {
    var div = document.createElement("div");
    div.className = "legend";
    items.forEach(function (it) {
      var s = document.createElement("span");
      var i = document.createElement("i");
      i.style.background = it.color;
      s.appendChild(i);
      s.appendChild(document.createTextNode(it.name));
      div.appendChild(s);
    });
    container.appendChild(div);
  }

  // One panel: x is run time; series are lines or bars; bands and marks are drawn behind.
  function panel(container, o) {
    var H = o.height || 150, TOP = 26, BOTTOM = o.xlabel ? 34 : 18;
    var svg = el("svg", {width: W, height: H + TOP + BOTTOM, "class": "panel " + (o.cls || "")},
                 container);
    var x = function (t) { return LEFT + (W - LEFT - RIGHT) * t / END; };
    var vals = [];
    o.series.forEach(function (s) { s.points.forEach(function (p) {
      if (p[1] !== null && isFinite(p[1]) && (!o.log || p[1] > 0)) vals.push(p[1]); }); });
    var lo, hi, y;
    if (o.log) {
      lo = vals.length ? Math.pow(10, Math.floor(Math.log10(Math.min.apply(null, vals)))) : 1e-3;
      hi = vals.length ? Math.pow(10, Math.ceil(Math.log10(Math.max.apply(null, vals)))) : 1;
      if (hi <= lo) hi = lo * 10;
      y = function (v) { return TOP + H - H * (Math.log10(v) - Math.log10(lo)) /
                                                (Math.log10(hi) - Math.log10(lo)); };
    } else {
      lo = 0;
      hi = o.max !== undefined ? o.max : Math.max.apply(null, vals.concat([0])) * 1.08 || 1;
      y = function (v) { return TOP + H - H * (v - lo) / (hi - lo); };
    }
    (o.bands || []).forEach(function (b) {
      // an instantaneous fault (a state corruption) is a line, drawn strong enough to see
      var x0 = x(b.from), narrow = x(b.to) - x0 < 3, x1 = narrow ? x0 + 3 : x(b.to);
      var r = el("rect", {x: x0, y: TOP, width: x1 - x0, height: H, fill: b.color,
                          "fill-opacity": narrow ? 0.7 : (b.opacity || 0.15),
                          "class": "band " + b.cls}, svg);
      el("title", {}, r).textContent = b.label;
      if (o.labels && b.name) text(svg, x0 + 2, TOP - 3, b.name, {fill: b.color});
    });
    (o.marks || []).forEach(function (m) {
      var l = el("line", {x1: x(m.at), x2: x(m.at), y1: TOP, y2: TOP + H, stroke: m.color,
                          "stroke-dasharray": m.dash || "", "class": "mark " + m.cls}, svg);
      el("title", {}, l).textContent = m.label;
    });
    el("line", {x1: LEFT, x2: W - RIGHT, y1: TOP + H, y2: TOP + H, stroke: "#999"}, svg);
    el("line", {x1: LEFT, x2: LEFT, y1: TOP, y2: TOP + H, stroke: "#999"}, svg);
    var yt = o.log ? (function () { var out = [];
      for (var v = lo; v <= hi * 1.0001; v *= 10) out.push(v); return out; })()
      : ticks(lo, hi, 4);
    yt.forEach(function (v) {
      el("line", {x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), stroke: "#eee"}, svg);
      text(svg, LEFT - 4, y(v) + 4, fmt(v), {"text-anchor": "end"});
    });
    ticks(0, END, 10).forEach(function (t) {
      text(svg, x(t), TOP + H + 13, fmt(t), {"text-anchor": "middle"});
    });
    if (o.xlabel) text(svg, (LEFT + W) / 2, TOP + H + 30, o.xlabel, {"text-anchor": "middle"});
    text(svg, 4, 11, o.ylabel);
    var bw = (W - LEFT - RIGHT) * BIN / END;
    o.series.forEach(function (s, i) {
      if (s.kind === "bar") {
        var n = o.series.filter(function (z) { return z.kind === "bar"; }).length;
        var k = o.series.slice(0, i).filter(function (z) { return z.kind === "bar"; }).length;
        s.points.forEach(function (p) {
          if (!p[1]) return;
          var r = el("rect", {x: x(p[0]) + k * bw / n, width: Math.max(bw / n - 0.5, 1),
                              y: y(p[1]), height: TOP + H - y(p[1]), fill: s.color,
                              "class": "bar " + (s.cls || "")}, svg);
          el("title", {}, r).textContent = s.name + " at " + fmt(p[0]) + " s: " + fmt(p[1]);
        });
      } else {
        var d = "", pen = false;
        s.points.forEach(function (p) {
          var ok = p[1] !== null && isFinite(p[1]) && (!o.log || p[1] > 0);
          if (ok) { d += (pen ? "L" : "M") + x(p[0] + BIN / 2).toFixed(1) + " " +
                         y(p[1]).toFixed(1); }
          pen = ok;
        });
        if (d) el("path", {d: d, fill: "none", stroke: s.color, "stroke-width": 1.6,
                           "class": "line " + (s.cls || "")}, svg);
      }
    });
    legend(container, o.series.map(function (s) { return {name: s.name, color: s.color}; }));
    return svg;
  }

  function perSecond(rows, key) {
    return rows.map(function (r) { return [r.bin, (r[key] || 0) / BIN]; });
  }

  function windows() {
    var bands = [], marks = [];
    D.faults.forEach(function (f) {
      var to = f.end === null ? END : f.end;
      bands.push({from: f.begin, to: to, color: "#d62728", opacity: 0.18, cls: "fault",
                  name: f.fault_id,
                  label: f.fault_id + " " + (f.type || "") + " on " + f.target + ": " +
                         fmt(f.begin) + " s to " + (f.end === null ? "never ended" :
                                                    fmt(f.end) + " s")});
    });
    D.reconfigurations.forEach(function (r) {
      bands.push({from: r.start, to: r.end === null ? END : r.end,
                  color: r.verdict === "fail" ? "#d62728" : "#2ca02c", opacity: 0.25,
                  cls: "reconfiguration", name: r.rid,
                  label: r.rid + " " + r.op + " (" + r.outcome + ", " + r.verdict + ")"});
    });
    (S.recolours || []).forEach(function (r) {
      marks.push({at: r.bin + BIN / 2, color: "#9467bd", cls: "recolour",
                  label: r.n + " recolour records in [" + fmt(r.bin) + ", " +
                         fmt(r.bin + BIN) + ") s"});
    });
    D.episodes.forEach(function (e) {
      if (e.end !== null && e.end !== undefined && e.end + D.bound < END) {
        marks.push({at: e.end + D.bound, color: "#555", dash: "3 3", cls: "bound",
                    label: "episode " + e.index + ": end + Δ"});
      }
    });
    return {bands: bands, marks: marks};
  }

  function timeline() {
    var box = document.getElementById("timeline-chart");
    var w = windows();
    var pubs = S.publications;
    panel(box, {cls: "traffic", ylabel: "per second", bands: w.bands, marks: w.marks,
                labels: true,
                series: [
                  {name: "publications", color: "#1f77b4", points: perSecond(pubs, "published")},
                  {name: "expected deliveries", color: "#999",
                   points: perSecond(pubs, "expected")},
                  {name: "deliveries (by delivery time)", color: "#2ca02c",
                   points: perSecond(S.deliveries, "deliveries")}]});
    panel(box, {cls: "losses", ylabel: "per second", height: 90, bands: w.bands,
                marks: w.marks, series: [
                  {name: "lost", color: "#d62728", kind: "bar", cls: "lost",
                   points: perSecond(pubs, "missing")},
                  {name: "duplicated", color: "#ff7f0e", kind: "bar", cls: "duplicated",
                   points: perSecond(pubs, "duplicate")}]});
    var byKind = {};
    D.timing.forEach(function (g) {
      var b = Math.floor(g.begin / BIN) * BIN;
      var k = byKind[g.kind] = byKind[g.kind] || {};
      k[b] = (k[b] || 0) + g.count;
    });
    var colours = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
    var timing = Object.keys(byKind).sort().map(function (kind, i) {
      return {name: "timing model: " + kind, color: colours[i % colours.length], kind: "bar",
              cls: "timing", points: Object.keys(byKind[kind]).map(function (b) {
                return [Number(b), byKind[kind][b]]; })};
    });
    if (!timing.length) timing = [{name: "timing model: no violation", color: "#ccc",
                                   kind: "bar", points: []}];
    panel(box, {cls: "timing", ylabel: "violations per bin", height: 70, bands: w.bands,
                marks: w.marks, series: timing, xlabel: "time since the run's start (s)"});
  }

  function bars() {
    // each episode: service and state level beside the bound, as horizontal bars
    document.querySelectorAll(".bars").forEach(function (div) {
      var bound = Number(div.dataset.bound);
      var items = [["service", div.dataset.service, "#1f77b4"],
                   ["state", div.dataset.state, "#ff7f0e"]];
      var top = Math.max(bound, Number(div.dataset.service) || 0,
                         Number(div.dataset.state) || 0) * 1.1 || 1;
      var svg = el("svg", {width: 520, height: 50, "class": "stabilization"}, div);
      var sx = function (v) { return 60 + 440 * v / top; };
      items.forEach(function (it, i) {
        text(svg, 0, 16 + i * 20, it[0]);
        if (it[1] === "") { text(svg, 64, 16 + i * 20, "not measured"); return; }
        var v = Number(it[1]);
        el("rect", {x: 60, y: 5 + i * 20, height: 14, width: Math.max(sx(v) - 60, 1),
                    fill: it[2]}, svg);
        text(svg, sx(v) + 4, 16 + i * 20, fmt(v) + " s");
      });
      el("line", {x1: sx(bound), x2: sx(bound), y1: 0, y2: 45, stroke: "#d62728",
                  "stroke-dasharray": "4 2"}, svg);
      text(svg, sx(bound) - 2, 48, "Δ", {"text-anchor": "end", fill: "#d62728"});
    });
  }

  function heat(container, title, rows, key) {
    var names = Object.keys(rows).filter(function (b) { return rows[b][key].length; });
    var h = document.createElement("h3");
    h.textContent = title;
    container.appendChild(h);
    if (!names.length) {
      var p = document.createElement("p");
      p.className = "note";
      p.textContent = "Not recorded in this run.";
      container.appendChild(p);
      return;
    }
    var row = Math.max(4, Math.min(14, Math.floor(600 / names.length)));
    var max = 0;
    names.forEach(function (b) {
      rows[b][key].forEach(function (p) { max = Math.max(max, p[1]); });
    });
    var svg = el("svg", {width: W, height: names.length * row + 24, "class": "heat " + key},
                 container);
    var x = function (t) { return LEFT + (W - LEFT - RIGHT) * t / END; };
    var bw = Math.max((W - LEFT - RIGHT) * BIN / END, 1);
    names.forEach(function (b, i) {
      if (row >= 8 || i % Math.ceil(8 / row) === 0) {
        text(svg, LEFT - 4, i * row + row - 1, b, {"text-anchor": "end"});
      }
      rows[b][key].forEach(function (p) {
        var r = el("rect", {x: x(p[0]), y: i * row, width: bw, height: row - 1,
                            fill: "#08519c", "fill-opacity": (0.08 + 0.92 * p[1] / (max || 1))
                              .toFixed(3)}, svg);
        el("title", {}, r).textContent = b + " at " + fmt(p[0]) + " s: " + p[1];
      });
    });
    ticks(0, END, 10).forEach(function (t) {
      text(svg, x(t), names.length * row + 14, fmt(t), {"text-anchor": "middle"});
    });
    var note = document.createElement("p");
    note.className = "note";
    note.textContent = "darkest: " + max;
    container.appendChild(note);
  }

  function brokers() {
    var box = document.getElementById("brokers-chart");
    heat(box, "Routing-table entries (at each snapshot)", S.brokers, "entries");
    heat(box, "Messages sent per bin of " + fmt(BIN) + " s", S.brokers, "sent");
  }

  function latency() {
    var rows = S.latency;
    var box = document.getElementById("latency-chart");
    if (!rows.length) return;
    var colours = {p50: "#1f77b4", p90: "#2ca02c", p99: "#ff7f0e", max: "#d62728"};
    var w = windows();
    panel(box, {cls: "latency", log: true, ylabel: "latency (ms, log)", height: 200,
                bands: w.bands, marks: [], xlabel: "delivery time since the run's start (s)",
                series: Object.keys(colours).map(function (k) {
                  return {name: k, color: colours[k], points: rows.map(function (r) {
                    return [r.bin, r[k] === null ? null : r[k] * 1000]; })};
                })});
  }

  timeline();
  bars();
  brokers();
  latency();
  document.body.dataset.rendered = "yes";
})();
"""
