"""An independent checker of weeble runs, written from docs/trace-schema.md alone.

It imports nothing of weeble: it reads the JSON lines, parses the filters it meets with its own
small parser, and applies rules R1-R12, R14's per-episode losses (from the episode's
begin − D) and R15 (per reconfiguration, with the causal count of `ordering: causal`; R12
leaves out its state span) as the document words them, by brute force
(every pair, every window) rather than by the streaming index of weeble.check. R9 works on
filters as sets (a box of value sets per attribute), so covering and "covered by the union of
the allowed filters" are decided exactly, without weeble's merging; in mode skip_ring, by its
own section (label values as fractions, SR(n) from its definition). The tests hold
its counts equal to the simulator's summary, to `weeble.check` and to `weeble analyze`.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterable
from fractions import Fraction
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
    for term in _terms(filter_text):
        if term == "true":
            continue
        if term == "false":
            return False
        if term.startswith("exists "):
            if term[len("exists "):].strip() not in attrs:
                return False
            continue
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


# ---- filters as sets: covering and unions (R9), from the document's "Filters" section ---------
#
# A filter is a box: per attribute it names, the set of values it allows (a missing attribute
# fails every predicate); an attribute it does not name is unconstrained, absent included.
# A value set is (numbers, strings, bools): numbers and strings each a union of intervals in
# their own order (numbers on the extended reals, ±inf included; strings by code point),
# bools a set. Strings are discrete: their intervals are kept half-open [lo, hi) with hi the
# successor bound, so an interval is empty exactly when lo >= hi.

_NUM_ALL = ((-math.inf, True, math.inf, True),)
_STR_TOP = (1, "")  # above every string: (0, s) < (1, "")
_STR_ALL = (((0, ""), True, _STR_TOP, False),)


def _succ(s: str) -> tuple[int, str]:
    """The least string key above every string that starts with s (prefix s = [s, succ))."""
    while s:
        last = ord(s[-1])
        if last < 0x10FFFF:
            return 0, s[:-1] + chr(last + 1)
        s = s[:-1]
    return _STR_TOP


def _num_empty(iv: tuple[Any, bool, Any, bool]) -> bool:
    lo, lc, hi, hc = iv
    return lo > hi or (lo == hi and not (lc and hc))


def _str_iv(lo: str | None, lo_closed: bool, hi: str | None, hi_closed: bool) -> tuple[Any, ...]:
    """A string interval in the half-open form: an open lower end s is [s + "\\0", and a closed
    upper end s is s + "\\0")."""
    low = (0, "") if lo is None else (0, lo if lo_closed else lo + "\0")
    high = _STR_TOP if hi is None else (0, hi + "\0" if hi_closed else hi)
    return (low, True, high, False)


def _str_empty(iv: tuple[Any, bool, Any, bool]) -> bool:
    return iv[0] >= iv[2]


def _cap(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    lo, lc = (a[0], a[1]) if a[0] > b[0] else (b[0], b[1]) if b[0] > a[0] else (a[0], a[1] and b[1])
    hi, hc = (a[2], a[3]) if a[2] < b[2] else (b[2], b[3]) if b[2] < a[2] else (a[2], a[3] and b[3])
    return lo, lc, hi, hc


def _ivs_and(xs: tuple[Any, ...], ys: tuple[Any, ...], empty: Any) -> tuple[Any, ...]:
    return tuple(c for x in xs for y in ys if not empty(c := _cap(x, y)))


def _ivs_minus(xs: tuple[Any, ...], ys: tuple[Any, ...], empty: Any,
               bottom: Any, top: Any) -> tuple[Any, ...]:
    out = list(xs)
    for y in ys:
        below = (bottom[0], bottom[1], y[0], not y[1])
        above = (y[2], not y[3], top[0], top[1])
        out = [c for x in out for c in (_cap(x, below), _cap(x, above)) if not empty(c)]
    return tuple(out)


_NUM_ENDS = ((-math.inf, True), (math.inf, True))
_STR_ENDS = (((0, ""), True), (_STR_TOP, False))


class Values:
    """The values one attribute may have in a box (`absent`: it may be missing)."""

    __slots__ = ("absent", "bools", "nums", "strs")

    def __init__(self, nums: tuple[Any, ...] = (), strs: tuple[Any, ...] = (),
                 bools: frozenset[bool] = frozenset(), absent: bool = False) -> None:
        self.nums, self.strs, self.bools, self.absent = nums, strs, bools, absent

    def __and__(self, o: Values) -> Values:
        return Values(_ivs_and(self.nums, o.nums, _num_empty),
                      _ivs_and(self.strs, o.strs, _str_empty),
                      self.bools & o.bools, self.absent and o.absent)

    def __sub__(self, o: Values) -> Values:
        return Values(_ivs_minus(self.nums, o.nums, _num_empty, *_NUM_ENDS),
                      _ivs_minus(self.strs, o.strs, _str_empty, *_STR_ENDS),
                      self.bools - o.bools, self.absent and not o.absent)

    def empty(self) -> bool:
        return not (self.nums or self.strs or self.bools or self.absent)


ANYTHING = Values(_NUM_ALL, _STR_ALL, frozenset((False, True)), absent=True)
Box = dict[str, Values]  # unnamed attributes: ANYTHING


def _term_values(op: str, rest: str) -> Values:
    rest = rest.strip()
    if op == "is":
        return {"number": Values(nums=_NUM_ALL), "string": Values(strs=_STR_ALL),
                "bool": Values(bools=frozenset((False, True)))}[rest]
    if op == "prefix":
        p = _value(rest)
        return Values(strs=(((0, p), True, _succ(p), False),))
    if op == "range":
        lo, hi = _range(rest)
        if isinstance(lo, str):
            return Values(strs=(_str_iv(lo, True, hi, True),))
        return Values(nums=((lo, True, hi, True),))
    c = _value(rest)
    if isinstance(c, bool):
        vals = frozenset(b for b in (False, True) if _cmp(op, b, c))
        return Values(bools=vals)
    if isinstance(c, str):
        one = {"==": (c, True, c, True), "<": (None, True, c, False),
               "<=": (None, True, c, True), ">": (c, False, None, False),
               ">=": (c, True, None, False)}
        if op == "!=":
            return Values(strs=_ivs_minus(_STR_ALL, (_str_iv(c, True, c, True),), _str_empty,
                                          *_STR_ENDS))
        return Values(strs=(_str_iv(*one[op]),))
    num = {"==": (c, True, c, True), "<": (-math.inf, True, c, False),
           "<=": (-math.inf, True, c, True), ">": (c, False, math.inf, True),
           ">=": (c, True, math.inf, True)}
    if op == "!=":
        return Values(nums=_ivs_minus(_NUM_ALL, ((c, True, c, True),), _num_empty, *_NUM_ENDS))
    return Values(nums=(num[op],))


def _terms(text: str) -> list[str]:
    """The terms of a filter's text, split at `&&` outside string constants."""
    out, start, i, quoted = [], 0, 0, False
    while i < len(text):
        ch = text[i]
        if quoted and ch == "\\":
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif not quoted and text.startswith("&&", i):
            out.append(text[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    out.append(text[start:].strip())
    return out


_boxes: dict[str, Box | None] = {}


def box(text: str) -> Box | None:
    """The filter as a box; None when it matches nothing (`false`, or contradictory terms).
    ValueError when it does not parse."""
    if text in _boxes:
        return _boxes[text]
    out: Box | None = {}
    for term in _terms(text):
        if term == "true":
            continue
        if term == "false":
            out = None
            break
        if term.startswith("exists "):
            name, values = term[len("exists "):].strip(), Values(
                _NUM_ALL, _STR_ALL, frozenset((False, True)))
        else:
            m = _TERM.match(term)
            if m is None:
                raise ValueError(f"filter term not handled here: {term!r}")
            name, op, rest = m.groups()
            values = _term_values(op, rest)
        assert out is not None
        out[name] = out[name] & values if name in out else values
        if out[name].empty():
            out = None
            break
    _boxes[text] = out
    return out


def _minus(g: Box, f: Box) -> list[Box]:
    """g minus f as disjoint boxes."""
    pieces, rest = [], dict(g)
    for name, fv in f.items():
        gv = rest.get(name, ANYTHING)
        outside = gv - fv
        if not outside.empty():
            pieces.append({**rest, name: outside})
        rest[name] = gv & fv
        if rest[name].empty():
            break
    return pieces


_covered: dict[tuple[str, frozenset[str]], bool] = {}


def covered(text: str, by: Iterable[str]) -> bool:
    """Every notification the filter `text` matches is matched by one of the filters `by`."""
    key = (text, frozenset(by))
    known = _covered.get(key)
    if known is None:
        g = box(text)
        left = [] if g is None else [g]
        for f in map(box, sorted(key[1])):
            if not left:
                break
            if f is not None:
                left = [p for b in left for p in _minus(b, f)]
        known = _covered[key] = not left
    return known


def same(f: str, g: str) -> bool:
    """The two filters match the same notifications."""
    return f == g or (covered(f, (g,)) and covered(g, (f,)))


# ---- R8(b), R9: legitimacy from the snapshot rounds -----------------------------------------


def _side(neighbors: dict[str, set[str]], v: str, d: str) -> set[str]:
    """The brokers on d's side of v: reached from d without crossing v."""
    seen, todo = {d}, [d]
    while todo:
        for n in neighbors.get(todo.pop(), ()):
            if n != v and n not in seen and n in neighbors:
                seen.add(n)
                todo.append(n)
    return seen


def network_id(client: str, sub_id: str) -> str:
    """R9(b): an entry carries `<client>/<sub_id>`, or `sub_id` if it starts with `<client>/`."""
    return sub_id if sub_id.startswith(client + "/") else f"{client}/{sub_id}"


def routing_problems(views: dict[str, dict[str, Any]], required: list[dict[str, Any]],
                     allowed: list[dict[str, Any]], algorithm: str,
                     hierarchical: bool) -> list[str]:
    """R9 on one tree: `views` maps each broker to its `neighbors` (a set), `parent` and
    `entries` [(sub_id, filter, dest)]; [] means legitimate."""
    neighbors = {v: set(x["neighbors"]) for v, x in views.items()}
    problems: list[str] = []

    def pairs(subs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(network_id(s["client"], s["sub_id"]), s["filter"]) for s in subs]

    for v, view in sorted(views.items()):
        by_dest: dict[str, list[tuple[str, str]]] = {}
        for sub_id, f, dest in view["entries"]:
            by_dest.setdefault(dest, []).append((sub_id, f))
        clients = {s["client"] for s in required if s["broker"] == v}
        for d in sorted(set(by_dest) | neighbors[v] | clients):
            held, where = by_dest.get(d, []), f"{v}->{d}"
            if d not in neighbors[v]:  # a local client: by id, each with its filter
                req = pairs([s for s in required if s["broker"] == v and s["client"] == d])
                alw = pairs([s for s in allowed if s["broker"] == v and s["client"] == d])
                # ids are unique per client, but one client may reuse an id for another
                # filter: a required subscription needs an entry with its id and its filter
                problems += [f"{where}: missing {i} ({f})" for i, f in req
                             if not any(i == j and same(f, g) for j, g in held)]
                problems += [f"{where}: spurious {i} ({f})" for i, f in held
                             if not any(i == j and same(f, g) for j, g in alw)]
                continue
            if algorithm == "flooding" or (hierarchical and d == view["parent"]):
                problems += [f"{where}: no entry expected, found {f}" for _, f in held]
                continue
            side = _side(neighbors, v, d)
            req = [s for s in required if s["broker"] in side]
            alw = [s for s in allowed if s["broker"] in side]
            if algorithm == "simple":
                problems += [f"{where}: missing {i} ({f})" for i, f in pairs(req)
                             if not any(i == j and same(f, g) for j, g in held)]
                problems += [f"{where}: spurious {i} ({f})" for i, f in held
                             if not any(i == j and same(f, g) for j, g in pairs(alw))]
            elif algorithm == "identity":
                have = {f for _, f in held}
                may = {s["filter"] for s in alw}
                problems += [f"{where}: missing {s['filter']}" for s in req
                             if not any(same(s["filter"], f) for f in have)]
                problems += [f"{where}: spurious {f}" for f in have
                             if not any(same(f, g) for g in may)]
            else:  # covering, merging: complete and sound
                have = {f for _, f in held}
                may = frozenset(s["filter"] for s in alw)
                problems += [f"{where}: nothing covers {s['filter']}" for s in req
                             if not any(covered(s["filter"], (f,)) for f in have)]
                problems += [f"{where}: spurious {f}" for f in have if not covered(f, may)]
    return problems


def round_problems(snaps: dict[str, dict[str, Any]], required: list[dict[str, Any]],
                   allowed: list[dict[str, Any]]) -> list[str]:
    """R9 on a complete round (broker -> its snapshot record)."""
    first = next(iter(snaps.values()))
    algorithm, hierarchical = first["algorithm"], bool(first["hierarchical"])
    try:
        for s in snaps.values():
            for table in s["tables"] + (s.get("adv_tables") or []):
                for e in table:
                    box(e["filter"])
    except (KeyError, ValueError) as e:
        return [f"unreadable snapshot: {e}"]
    root = first["root"] if first["root"] in snaps else min(snaps)
    if snaps[root].get("colours") is None:  # the static tree: every table (the wrapper's two)
        views = {b: {"neighbors": s["neighbors"], "parent": s.get("parent"),
                     "entries": [(e["sub_id"], e["filter"], e["dest"])
                                 for table in s["tables"] for e in table]}
                 for b, s in snaps.items()}
        return routing_problems(views, required, allowed, algorithm, hierarchical)
    problems = []
    colours = snaps[root]["colours"]
    for name in ("c_cur", "c_old"):  # each colour's tables against that colour's tree
        c = colours[name]
        views = {}
        for b, s in snaps.items():
            tree = s["colours"]["trees"][c]
            views[b] = {"neighbors": set(tree["children"]) | (
                {tree["parent"]} if tree["parent"] is not None else set()),
                "parent": tree["parent"],
                "entries": [(e["sub_id"], e["filter"], e["dest"])
                            for e in (s["tables"][c] if c < len(s["tables"]) else [])]}
        problems += [f"colour {c}: {p}" for p in routing_problems(
            views, required, allowed, algorithm, hierarchical)]
    return problems


def snapshot_checks(header: dict[str, Any], records: list[dict[str, Any]],
                    subs: list[dict[str, Any]], settle: float,
                    linger: float) -> list[tuple[float, bool]]:
    """R8(b): (time, ok) of every complete snapshot round. With advertisements none: the trace
    does not say which advertisements were live, so R9 cannot be applied to the rounds."""
    if header.get("adverts"):
        return []
    everyone = set(header["topology"]["brokers"])
    rounds: dict[Any, dict[str, dict[str, Any]]] = {}
    for r in records:
        if r["kind"] == "snapshot":
            key = r["round"] if r.get("round") is not None else ("t", r["t"])
            rounds.setdefault(key, {})[r["broker"]] = r  # a repeated broker: its last record
    out = []
    for snaps in rounds.values():
        if set(snaps) != everyone:
            continue
        t = max(s["ts"] for s in snaps.values())
        live = [s for s in subs if s["start"] <= t + TOL and s["parsed"]]
        required = [s for s in live if s["start"] <= t - settle + TOL and s["end"] > t + TOL]
        allowed = [s for s in live if s["end"] >= t - linger - TOL]
        judge = skip_ring_problems if header.get("mode") == "skip_ring" else round_problems
        out.append((t, not judge(snaps, required, allowed)))
    return sorted(out)


# ---- mode skip_ring: "State legitimacy in mode skip_ring" ---------------------------------------


def _label_value(i: int) -> Fraction:
    """0.r(i): r(i) is i in binary, its leading bit moved to the end."""
    b = format(i, "b")
    bits = b if i < 2 else b[1:] + b[0]
    return Fraction(int(bits, 2), 2 ** len(bits))


def _sr_neighbours(n: int) -> dict[int, set[int]]:
    """SR(n): per k = 1 … ⌈log₂ n⌉, the cycle of the labels of length ≤ k by value."""
    out: dict[int, set[int]] = {i: set() for i in range(n)}
    for k in range(1, max(1, (n - 1).bit_length()) + 1):
        cycle = sorted((i for i in range(n) if max(1, i.bit_length()) <= k), key=_label_value)
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            if a != b:
                out[a].add(b)
                out[b].add(a)
    return out


def _topic(text: str) -> str | None:
    m = re.fullmatch(r'\s*topic\s*==\s*"((?:[^"\\]|\\.)*)"\s*', text)
    return None if m is None else json.loads(f'"{m.group(1)}"')


def skip_ring_problems(snaps: dict[str, dict[str, Any]], required: list[dict[str, Any]],
                       allowed: list[dict[str, Any]]) -> list[str]:
    """Rules (1)-(6) of "State legitimacy in mode skip_ring" on a complete round (the tries are
    not judged)."""
    state = {b: s.get("skip_ring") or {} for b, s in snaps.items()}

    def by_topic(subs: list[dict[str, Any]]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for x in subs:
            topic = _topic(x["filter"])
            if topic is not None:
                out.setdefault(topic, set()).add(x["broker"])
        return out

    need_of, may_of = by_topic(required), by_topic(allowed)
    topics = set(need_of) | {t for v in state.values()
                             for t in (*v.get("supervised", {}), *v.get("members", {}))}
    problems = []
    for topic in sorted(topics):
        need, may = need_of.get(topic, set()), may_of.get(topic, set()) | need_of.get(topic, set())
        sups = sorted(b for b, v in state.items() if topic in v.get("supervised", {}))
        if not sups:
            if need:
                problems.append(f"{topic}: (1) unsupervised")
            continue
        sup = state[sups[0]]["supervised"][topic]
        if sup.get("corrupted"):
            problems.append(f"{topic}: (2) corrupted")
            continue
        db = {int(i): v for i, v in sup["db"].items()}
        members = set(db.values())
        if not need <= members <= may:
            problems.append(f"{topic}: (3) members {sorted(members)}")
            continue
        problems += [f"{topic}: (4) {b} unrecorded" for b, v in sorted(state.items())
                     if topic in v.get("members", {}) and not v["members"][topic].get("leaving")
                     and b not in members | may]
        if not db:
            continue
        settled = may == need  # (5) and (6) only with no join or leave inside its window
        n = len(db)
        order = sorted(db, key=_label_value)
        nbrs = _sr_neighbours(n)
        for k, i in enumerate(order):
            got = state.get(db[i], {}).get("members", {}).get(topic)
            if got is None:
                if settled:
                    problems.append(f"{topic}: (5) {db[i]} holds no member state")
                continue
            p, s_ = order[k - 1], order[(k + 1) % n]
            first, last = k == 0, k == n - 1
            pred, succ = [db[p], p], [db[s_], s_]
            want = ({"label": i, "left": None, "right": None, "ring": None, "shortcuts": {}}
                    if n == 1 else
                    {"label": i, "left": None if first else pred,
                     "right": None if last else succ,
                     "ring": pred if first else (succ if last else None),
                     "shortcuts": {str(j): db[j] for j in nbrs[i] - {p, s_}}})
            if settled and {key: got.get(key) for key in want} != want:
                problems.append(f"{topic}: (6) {db[i]} is {got}, not {want}")
    return problems


def causal_violations(records: list[dict[str, Any]]) -> list[float]:
    """R15 under `ordering: causal`: the delivery times of the causal violations that are not
    FIFO violations. n1 -> n2 is the transitive closure of "one client published n1 before n2"
    and "the client that published n2 had received n1 before". Each client's knowledge is a
    bit set over the publications: what it published, received, and what those followed."""
    bit: dict[tuple[str, int], int] = {}
    before: dict[tuple[str, int], int] = {}  # the publications that causally precede one
    known: dict[str, int] = {}
    received: set[tuple[str, tuple[str, int]]] = set()
    top: dict[tuple[str, str], int] = {}
    out = []
    for r in records:
        if r["kind"] not in ("publish", "deliver"):
            continue
        key, c = (r["publisher"], r["seq"]), r["client"]
        if r["kind"] == "publish":
            if key not in bit:
                bit[key] = 1 << len(bit)
                before[key] = known.get(c, 0)
                known[c] = before[key] | bit[key]
            continue
        if key not in bit or (c, key) in received:
            continue  # a phantom, or a duplicate
        received.add((c, key))
        fifo = top.get((c, r["publisher"]), 0) > r["seq"]  # R7 counts it
        if known.get(c, 0) & bit[key] and not fifo:
            out.append(r["ts"])
        top[(c, r["publisher"])] = max(top.get((c, r["publisher"]), 0), r["seq"])
        known[c] = known.get(c, 0) | before[key] | bit[key]
    return out


def _parses(text: str) -> bool:
    try:
        box(text)
    except ValueError:
        return False  # a filter that does not parse matches nothing (R1)
    return True


def tail(window: list[tuple[float, bool]], end: float, empty: str) -> tuple[float | None, str]:
    """R11/R12 over (time, ok): moments at the same instant are one, ok if all of them are."""
    moments: dict[float, bool] = {}
    for t, ok in window:
        key = next((m for m in moments if abs(m - t) <= TOL), t)
        moments[key] = moments.get(key, True) and ok
    order = sorted(moments.items())
    if not order:
        return None, empty
    if all(ok for _, ok in order):
        return 0.0, "stable"
    if not order[-1][1]:
        return None, "not stabilized"
    last_bad = max(i for i, (_, ok) in enumerate(order) if not ok)
    return order[last_bad + 1][0] - end, "stabilized"


# ---- the rules ----------------------------------------------------------------------------------


def check(run: Path) -> dict[str, Any]:
    header, end, records = read(run)
    rho, pi, dmax, d = header["rho"], header["pi"], header["delta_max"], header["d"]
    # the coloured overlay: A, D, L and R9's windows grow by 2ξ (R15)
    switch = 2 * header["recolor_period"] if header.get("recolor_period") else 0.0
    A, D, L = d * dmax + rho + switch, d * dmax + switch, 2 * pi + d * dmax + switch
    settle, linger = D, L  # R9's windows
    if header.get("mode") == "skip_ring":  # the header section: P for d·δmax, A, D, L
        levels = max(1, (len(header["topology"]["brokers"]) - 1).bit_length())
        T = header["skip_ring"]["interval"]
        P = (levels + 2) * dmax + 2 * T
        A, D, L = P + rho + (levels + 2) * T, P, 2 * pi + P
        settle, linger = A, 2 * pi + A
    bound = header["bound"]

    # R1: subscription intervals
    subs: list[dict[str, Any]] = []
    running: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r["kind"] == "subscribe" and (r["client"], r["sub_id"]) not in running:
            s = {"client": r["client"], "sub_id": r["sub_id"], "broker": r["broker"],
                 "filter": r["filter"], "start": r["ts"], "end": math.inf, "crash": False,
                 "parsed": _parses(r["filter"])}
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

    # R8: the simulator's own checks and the complete snapshot rounds
    checks = [(r["ts"], bool(r["ok"])) for r in records if r["kind"] == "legitimacy"]
    checks = sorted(checks + snapshot_checks(header, records, subs, settle=settle,
                                             linger=linger))
    failed = [t for t, ok in checks if not ok]
    legitimacy = {"checks": len(checks), "legitimate": len(checks) - len(failed),
                  "illegitimate": len(failed), "first_illegitimate": min(failed, default=None),
                  "last_illegitimate": max(failed, default=None)}

    # R15: the reconfigurations, from start to end (none: the run's end)
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
    # R15's state spans [start, end + D]: R12 leaves their checks out of every episode
    spans = [(op["start"], (op["end"] if op["end"] is not None else end) + D)
             for op in ops.values()]

    # R10-R12: episodes and their service-level stabilization
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
        e["observed_until"] = until
        if e["end"] is None:
            e["service"] = e["state"] = e["state_last_failing"] = None
            e["service_status"] = e["state_status"] = "fault never ended"
            continue
        window = [(t, ok) for t, ok in judged if t >= e["end"] - TOL and t + D <= until + TOL]
        e["service"], e["service_status"] = tail(window, e["end"], "no publications observed")
        # R12: the checks from E up to (not at) the next episode's begin, but for those in a
        # reconfiguration's state span
        window = [(t, ok) for t, ok in checks if e["end"] - TOL <= t < until - TOL
                  and not any(lo - TOL <= t <= hi + TOL for lo, hi in spans)]
        e["state"], e["state_status"] = tail(window, e["end"], "no checks observed")
        # R12's lower bound, R14's test of the state against Δ: the last failing check
        failing = [t for t, ok in window if not ok]
        e["state_last_failing"] = max(failing) - e["end"] if failing else None

    missing_of: dict[tuple[str, int], int] = {}
    for key, _ in missing:
        missing_of[key] = missing_of.get(key, 0) + 1

    def damage(lo: float, hi: float) -> dict[str, int]:
        """Lost, duplicated, spurious over the judged publications made in [lo, hi), and the
        FIFO violations delivered then."""
        made = [key for key, p in pubs.items() if p["judged"] and lo - TOL <= p["t"] < hi]
        return {"lost": sum(missing_of.get(k, 0) for k in made),
                "duplicated": sum(dup_of.get(k, 0) for k in made),
                "spurious": sum(spurious_of.get(k, 0) for k in made),
                "reordered": sum(lo - TOL <= t < hi for t in fifo_at)}

    # R14: an episode's row shows what was published from its begin - D (in flight when its
    # first fault struck) up to the next episode's begin - D (the last: to the end)
    for i, e in enumerate(episodes):
        hi = episodes[i + 1]["begin"] - D if i + 1 < len(episodes) else math.inf
        e.update(damage(e["begin"] - D, hi))

    # R15: per reconfiguration, lost, duplicated and spurious over the judged publications of
    # its window [start - D, end + D), reordered: FIFO (and causal) violations delivered in
    # [start - D, end + 2D).
    causal_at = causal_violations(records) if header.get("ordering") == "causal" else []
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
            "reordered": sum(lo <= t < hi + D for t in fifo_at + causal_at)})
    return {**counts, "expected": len(expected), "missing": len(missing),
            "publications": len(pubs), "judged": len(judged),
            "correct": sum(ok for _, ok in judged), "episodes": episodes,
            "legitimacy": legitimacy,
            "reconfigurations": reconfigurations}
