"""An independent checker of weeble runs, written from docs/trace-schema.md alone.

It imports nothing of weeble: it reads the JSON lines, parses the filters it meets with its own
small parser, and applies rules R1-R7, R10-R12 and R15 (per reconfiguration; without the causal
count of `ordering: causal`) as the document words them, by brute force
(every pair, every window) rather than by the streaming index of weeble.check. The tests hold
its counts equal to the simulator's summary, to `weeble.check` and to `weeble analyze`.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from pathlib import Path
from typing import Any

TOL = 1e-9


# ---- reading ------------------------------------------------------------------------------------


def read(run: Path) -> tuple[dict[str, Any], float, list[dict[str, Any]]]:
    """(header, end in s, records in time order with `ts` in s since the header)."""
    records = []
    for order, path in enumerate(sorted((run / "trace").glob("*.jsonl"))):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        last = lines.pop()  # "" when the file ends with a newline
        for i, line in enumerate(lines):
            if line.strip():
                records.append((order, i, json.loads(line)))
        if last.strip():
            with contextlib.suppress(ValueError):  # a torn last line is skipped
                records.append((order, len(lines), json.loads(last)))
    header = next(r for _, _, r in records if r["kind"] == "run")
    t0 = header["t"]
    records.sort(key=lambda x: (x[2]["t"], x[0], x[1]))
    out = [{**r, "ts": (r["t"] - t0) / 1e9} for _, _, r in records]
    ends = [r["ts"] for r in out if r["kind"] == "run_end"]
    end = max(ends) if ends else out[-1]["ts"]
    return header, end, out


# ---- filters (the text form of the document, the operators the tests use) --------------------

_TERM = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(==|!=|<=|>=|<|>|range|prefix|is)\s*(.+?)\s*$')


def _value(text: str) -> Any:
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if text in ("true", "false"):
        return text == "true"
    # numbers compare exactly: an integer constant stays an int (2**53 + 1 is not 2**53)
    return float(text) if any(c in text for c in ".eE") else int(text)


def _range(rest: str) -> tuple[Any, Any]:
    """The two constants of `[lo, hi]`; a string constant may hold a comma."""
    inner = rest.strip()[1:-1]
    decoder = json.JSONDecoder()
    lo, i = (decoder.raw_decode(inner.strip()) if inner.strip().startswith('"')
             else (None, 0))
    if lo is None:
        first, _, second = inner.partition(",")
        return _value(first), _value(second)
    after = inner.strip()[i:].lstrip().removeprefix(",")
    return lo, _value(after)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def matches(filter_text: str, attrs: dict[str, Any]) -> bool:
    for term in filter_text.split("&&"):
        term = term.strip()
        if term == "true":
            continue
        if term == "false":
            return False
        m = _TERM.match(term)
        if m is None:
            raise ValueError(f"filter term not handled here: {term!r}")
        name, op, rest = m.groups()
        if name not in attrs:
            return False
        v = attrs[name]
        if op == "is":
            typ = {"number": _number(v), "string": isinstance(v, str),
                   "bool": isinstance(v, bool)}
            if not typ[rest.strip()]:
                return False
            continue
        if op == "range":
            lo, hi = _range(rest)
            if isinstance(lo, str):  # strings compare by code point (Python's order)
                if not (isinstance(v, str) and lo <= v <= hi):
                    return False
            elif not (_number(v) and lo <= v <= hi):
                return False
            continue
        if op == "prefix":
            if not (isinstance(v, str) and v.startswith(_value(rest))):
                return False
            continue
        c = _value(rest)
        if isinstance(c, bool) or isinstance(v, bool):  # bool is its own type
            if not (isinstance(c, bool) and isinstance(v, bool)) or not _cmp(op, v, c):
                return False
        elif isinstance(c, str):
            if not isinstance(v, str) or not _cmp(op, v, c):
                return False
        elif not _number(v) or (isinstance(v, float) and math.isnan(v)) or not _cmp(op, v, c):
            return False  # int and float are one number type: 3 == 3.0
    return True


def _cmp(op: str, a: Any, b: Any) -> bool:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}[op]


# ---- the rules ----------------------------------------------------------------------------------


def check(run: Path) -> dict[str, Any]:
    header, end, records = read(run)
    rho, pi, dmax, d = header["rho"], header["pi"], header["delta_max"], header["d"]
    A, D, L, bound = d * dmax + rho, d * dmax, 2 * pi + d * dmax, header["bound"]

    # R1: subscription intervals
    subs: list[dict[str, Any]] = []
    running: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r["kind"] == "subscribe" and (r["client"], r["sub_id"]) not in running:
            s = {"client": r["client"], "filter": r["filter"], "start": r["ts"],
                 "end": math.inf, "crash": False}
            running[(r["client"], r["sub_id"])] = s
            subs.append(s)
        elif r["kind"] in ("unsubscribe", "crash"):
            if r["kind"] == "crash" and r.get("sub_id") is None:
                keys = [k for k in running if k[0] == r["client"]]
            else:
                keys = [(r["client"], r["sub_id"])]
            for k in keys:
                s = running.pop(k, None)
                if s is not None:
                    s["end"], s["crash"] = r["ts"], r["kind"] == "crash"

    # R2: publications
    pubs: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        if r["kind"] == "publish" and (r["publisher"], r["seq"]) not in pubs:
            pubs[(r["publisher"], r["seq"])] = {"t": r["ts"], "client": r["client"],
                                                "attrs": r["attributes"],
                                                "akey": json.dumps(r["attributes"],
                                                                   sort_keys=True),
                                                "judged": r["ts"] + D <= end + TOL}

    by_client: dict[str, list[dict[str, Any]]] = {}
    for s in subs:
        by_client.setdefault(s["client"], []).append(s)
    match_cache: dict[tuple[str, str], bool] = {}

    def m(s: dict[str, Any], p: dict[str, Any]) -> bool:
        key = (s["filter"], p["akey"])
        known = match_cache.get(key)
        if known is None:
            known = match_cache[key] = matches(s["filter"], p["attrs"])
        return known

    def matching(client: str, p: dict[str, Any]) -> list[dict[str, Any]]:
        return [s for s in by_client.get(client, []) if m(s, p)]

    # R3: expected pairs
    expected: set[tuple[tuple[str, int], str]] = set()
    for key, p in pubs.items():
        if not p["judged"]:
            continue
        for s in subs:
            if (s["client"] != p["client"] and s["start"] <= p["t"] - A + TOL
                    and s["end"] >= p["t"] + D - TOL and m(s, p)):
                expected.add((key, s["client"]))

    # R5, R6, R7: deliveries
    counts = dict.fromkeys(("delivered", "window", "spurious", "duplicate", "phantom", "fifo"), 0)
    seen: dict[tuple[tuple[str, int], str], int] = {}
    bad: dict[tuple[str, int], int] = {}
    # per publication: its duplicate and spurious deliveries; the FIFO violations' delivery
    # times (R15)
    dup_of: dict[tuple[str, int], int] = {}
    spurious_of: dict[tuple[str, int], int] = {}
    fifo_at: list[float] = []
    top: dict[tuple[str, str], int] = {}
    for r in records:
        if r["kind"] != "deliver":
            continue
        key, c = (r["publisher"], r["seq"]), r["client"]
        p = pubs.get(key)
        if p is None:
            counts["phantom"] += 1
            continue
        seen[(key, c)] = seen.get((key, c), 0) + 1
        if seen[(key, c)] > 1:
            counts["duplicate"] += 1
            bad[key] = bad.get(key, 0) + 1
            dup_of[key] = dup_of.get(key, 0) + 1
            continue
        if (key, c) in expected:
            counts["delivered"] += 1
        elif any(s["start"] - TOL <= r["ts"] <= s["end"] + (L if s["crash"] else D) + TOL
                 for s in matching(c, p)):
            counts["window"] += 1
        else:
            counts["spurious"] += 1
            bad[key] = bad.get(key, 0) + 1
            spurious_of[key] = spurious_of.get(key, 0) + 1
        if r["seq"] < top.get((c, r["publisher"]), 0):
            counts["fifo"] += 1
            fifo_at.append(r["ts"])
        top[(c, r["publisher"])] = max(top.get((c, r["publisher"]), 0), r["seq"])
    missing = [e for e in expected if e not in seen]
    for key, _ in missing:
        bad[key] = bad.get(key, 0) + 1
    judged = [(p["t"], key not in bad) for key, p in pubs.items() if p["judged"]]
    judged.sort()

    # R10-R11: episodes and their service-level stabilization
    faults: dict[str, list[float | None]] = {}
    for r in records:
        if r["kind"] == "fault_begin":
            f = faults.setdefault(r["fault_id"], [r["ts"], None])
            f[0] = min(f[0], r["ts"])  # type: ignore[type-var]
        elif r["kind"] == "fault_end" and r["fault_id"] in faults:
            f = faults[r["fault_id"]]
            f[1] = r["ts"] if f[1] is None else max(f[1], r["ts"])  # type: ignore[type-var]
    episodes: list[dict[str, Any]] = []
    for begin, fend in sorted(faults.values(), key=lambda f: f[0]):  # type: ignore[arg-type,return-value]
        last = episodes[-1] if episodes else None
        if last is not None and (last["end"] is None or begin < last["end"] + bound):
            last["end"] = None if last["end"] is None or fend is None else max(last["end"], fend)
            last["faults"] += 1
        else:
            episodes.append({"begin": begin, "end": fend, "faults": 1})
    for i, e in enumerate(episodes):
        until = episodes[i + 1]["begin"] if i + 1 < len(episodes) else end
        if e["end"] is None:
            e["service"] = None
            continue
        window = [(t, ok) for t, ok in judged if t >= e["end"] - TOL and t + D <= until + TOL]
        # publications at the same instant are one moment, correct if all of them are
        moments: dict[float, bool] = {}
        for t, ok in window:
            key = next((m for m in moments if abs(m - t) <= TOL), t)
            moments[key] = moments.get(key, True) and ok
        order = sorted(moments.items())
        if not order or order[-1][1] is False:
            e["service"] = None
        elif all(ok for _, ok in order):
            e["service"] = 0.0
        else:
            last_bad = max(i for i, (_, ok) in enumerate(order) if not ok)
            e["service"] = order[last_bad + 1][0] - e["end"]

    # R15: per reconfiguration, lost, duplicated and spurious over the judged publications of
    # its window [start - D, end + D), reordered: FIFO violations delivered in
    # [start - D, end + 2D). (Causal ordering is not covered here.)
    missing_of: dict[tuple[str, int], int] = {}
    for key, _ in missing:
        missing_of[key] = missing_of.get(key, 0) + 1
    ops: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["kind"] != "reconfiguration":
            continue
        op = ops.setdefault(r["rid"], {"rid": r["rid"], "op": r.get("op"), "start": None,
                                       "end": None, "outcome": None})
        if r["phase"] == "started":
            op["start"] = r["ts"]
        elif r["phase"] == "finished":
            op["end"], op["outcome"] = r["ts"], r.get("outcome")
    reconfigurations = []
    for op in sorted(ops.values(), key=lambda o: (o["start"], o["rid"])):
        lo = op["start"] - D
        hi = (op["end"] if op["end"] is not None else end) + D
        inside = [key for key, p in pubs.items() if p["judged"] and lo <= p["t"] < hi]
        reconfigurations.append({
            **op, "publications": len(inside),
            "lost": sum(missing_of.get(k, 0) for k in inside),
            "duplicated": sum(dup_of.get(k, 0) for k in inside),
            "spurious": sum(spurious_of.get(k, 0) for k in inside),
            "reordered": sum(lo <= t < hi + D for t in fifo_at)})
    return {**counts, "expected": len(expected), "missing": len(missing),
            "publications": len(pubs), "judged": len(judged),
            "correct": sum(ok for _, ok in judged), "episodes": episodes,
            "reconfigurations": reconfigurations}
