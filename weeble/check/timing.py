"""Did the run keep the timing model the bounds assume? (rule R13)

From the trace: per-hop delays (send/receive pairs with the same link sequence number) against
[δmin, δmax], refresh gaps against ρ, timer lateness, and end-to-end delivery delays against
hops·δmax. Each violation has a time span and the broker where it showed; `summarize` gives the
figures per kind and per broker, and `overlapping` the violations inside a time span.
`retimed` gives the timing a part of the run actually had (R13e) and the bound Δ recomputed
with it, so the verdict can tell a late algorithm from a run that broke the model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from weeble.check.deliveries import EPS, INF
from weeble.check.rules import TIMING_TOLERANCE
from weeble.core.rom import ConfigError, leased_like
from weeble.trace.header import RunHeader

KINDS = ("hop", "refresh", "timer", "path")
LIMIT_NAMES = {"hop": "δmax", "refresh": "ρ", "timer": "on time", "path": "hops·δmax"}


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # hop, refresh, timer, path
    begin: float  # s since the run's origin
    end: float
    broker: str
    value: float  # the measured delay, gap or lateness (s); of a group: the worst
    limit: float  # what the model allows (s)
    count: int = 1  # how many violations this row stands for (a group of `aggregate`)


def retimed(header: RunHeader, violations: Sequence[Violation]) -> dict[str, Any]:
    """R13e: the timing some violations show, and Δ recomputed with it.

    δmax becomes the longest hop delay among them (a path's delay counts per hop: its delay
    over its hops, or whole over none), ρ the longest refresh gap, π grows by the latest
    timer (a lease expires that much later); each at least the header's. `bound` is the
    header's Δ with those constants (the coloured overlay's ∆r stays the recorded one), or
    None, with `why`, when the algorithm's precondition on π fails at them: no bound holds.
    """
    p = header.params
    delta, gap, late = p.delta_max, p.rho, 0.0
    for v in violations:
        if v.kind == "hop":
            delta = max(delta, v.value)
        elif v.kind == "path":
            hops = v.limit / p.delta_max if p.delta_max > 0 else 0.0
            delta = max(delta, v.value / hops if hops >= 1 else v.value)
        elif v.kind == "refresh":
            gap = max(gap, v.value)
        elif v.kind == "timer":
            late = max(late, v.value)
    at = replace(p, delta_max=delta, rho=gap, pi=p.pi + late)
    out: dict[str, Any] = {"delta_max": delta, "rho": gap, "pi": at.pi, "bound": None, "why": ""}
    try:
        at.validate(leased_like(header.algorithm, header.mode), header.wrapper)
    except ConfigError as exc:
        out["why"] = f"no bound holds at that timing ({exc})"
        return out
    out["bound"] = replace(header, params=at).bound
    return out


def outside_faults(violations: Iterable[Violation],
                   windows: Iterable[tuple[float, float | None]], end: float) -> list[Violation]:
    """R13: the violations that overlap no fault window (begin, end or None: to the run's end);
    a fault is allowed to break the model (a crashed broker receives no refresh)."""
    spans = [(b, end if e is None else e) for b, e in windows]
    return [v for v in violations if not any(v.begin <= e and v.end >= b for b, e in spans)]


def aggregate(violations: Iterable[Violation], width: float) -> list[Violation]:
    """R13: violations grouped by kind, broker and the bin of width `width` their begin falls
    in; a group spans its members, keeps the worst value (and its limit), and counts them."""
    groups: dict[tuple[str, str, int], Violation] = {}
    for v in violations:
        key = (v.kind, v.broker, math.floor(v.begin / width))
        g = groups.get(key)
        if g is None:
            groups[key] = Violation(v.kind, v.begin, v.end, v.broker, v.value, v.limit, v.count)
        else:
            worst = v if v.value > g.value else g
            groups[key] = Violation(v.kind, min(g.begin, v.begin), max(g.end, v.end), v.broker,
                                    worst.value, worst.limit, g.count + v.count)
    return sorted(groups.values(), key=lambda g: (g.begin, g.kind, g.broker))


class Timing:
    """Collects the R13 measurements from records fed in time order (seconds since origin)."""

    def __init__(self, header: RunHeader, tolerance: float = TIMING_TOLERANCE) -> None:
        p = header.params
        self.dmin, self.dmax, self.rho, self.tau = p.delta_min, p.delta_max, p.rho, tolerance
        self.hops = header.path_hops()
        # mode skip_ring: a newcomer catches up on history, which the path rule does not time
        # (Deliveries.timed): client -> when its running subscriptions began
        self.history = header.skip_ring is not None
        self.activation = header.activation
        self.started: dict[str, dict[str, float]] = {}
        self.sends: dict[tuple[str, str, int], float] = {}
        self.last_refresh: dict[tuple[str, str], float] = {}  # running subscriptions
        self.published: dict[tuple[str, int], tuple[float, str]] = {}  # -> (t_p, broker)
        self.first: set[tuple[str, int, str]] = set()  # (publisher, seq, client) delivered
        self.violations: list[Violation] = []
        self.measured = {k: 0 for k in KINDS}
        self.worst = {k: 0.0 for k in KINDS}

    def feed(self, t: float, r: dict[str, Any]) -> None:
        kind = r["kind"]
        if kind == "send":
            if r.get("lseq") is not None and r.get("fate", "sent") != "dropped":
                self.sends[(r["from"], r["to"], r["lseq"])] = t
        elif kind == "receive":
            if r.get("lseq") is not None:
                sent = self.sends.pop((r["from"], r["to"], r["lseq"]), None)
                if sent is not None:
                    self._hop(sent, t, r["to"])
        elif kind in ("subscribe", "refresh"):
            if kind == "subscribe" and self.history:
                self.started.setdefault(r["client"], {}).setdefault(r["sub_id"], t)
            key = (r["client"], r["sub_id"])
            last = self.last_refresh.get(key)
            self.last_refresh[key] = t
            if last is not None:
                self._measure("refresh", t - last, self.rho, last, t, r["broker"])
        elif kind in ("unsubscribe", "crash"):
            if self.history:
                if r.get("sub_id") is None:
                    self.started.pop(r["client"], None)
                else:
                    self.started.get(r["client"], {}).pop(r["sub_id"], None)
            if r.get("sub_id") is None:
                for key in [k for k in self.last_refresh if k[0] == r["client"]]:
                    del self.last_refresh[key]
            else:
                self.last_refresh.pop((r["client"], r["sub_id"]), None)
        elif kind == "timer":
            late = float(r["late"])
            self._measure("timer", late, 0.0, t - late, t, r["node"])
        elif kind == "publish":
            self.published.setdefault((r["publisher"], r["seq"]), (t, r["broker"]))
        elif kind == "deliver":
            pub = self.published.get((r["publisher"], r["seq"]))
            pair = (r["publisher"], r["seq"], r["client"])
            if pub is not None and pair not in self.first:
                self.first.add(pair)
                hops = self.hops.get(pub[1], {}).get(r["broker"])
                if self.history and min(self.started.get(r["client"], {}).values(),
                                        default=INF) > pub[0] - self.activation + EPS:
                    hops = None  # history (or a join still settling): not timed
                if hops is not None:
                    self._measure("path", t - pub[0], hops * self.dmax, pub[0], t, r["broker"])

    def _hop(self, sent: float, received: float, broker: str) -> None:
        delay = received - sent
        self.measured["hop"] += 1
        self.worst["hop"] = max(self.worst["hop"], delay)
        if delay > self.dmax + self.tau or delay < self.dmin - self.tau:
            self.violations.append(Violation("hop", sent, received, broker, delay,
                                             self.dmax if delay > self.dmax else self.dmin))

    def _measure(self, kind: str, value: float, limit: float, begin: float, end: float,
                 broker: str) -> None:
        self.measured[kind] += 1
        if value > self.worst[kind]:
            self.worst[kind] = value
        if value > limit + self.tau:
            self.violations.append(Violation(kind, begin, end, broker, value, limit))

    def summarize(self) -> dict[str, Any]:
        return summarize(self.violations, self.measured, self.worst, self.tau)


def summarize(violations: Iterable[Violation], measured: dict[str, int] | None = None,
              worst: dict[str, float] | None = None,
              tolerance: float = TIMING_TOLERANCE) -> dict[str, Any]:
    """Figures per kind and per broker."""
    by_kind: dict[str, dict[str, Any]] = {}
    by_broker: dict[str, dict[str, int]] = {}
    for v in violations:
        k = by_kind.setdefault(v.kind, {"violations": 0, "max": 0.0, "limit": v.limit,
                                        "first": v.begin, "last": v.end, "brokers": set()})
        k["violations"] += v.count
        k["max"] = max(k["max"], v.value)
        k["first"], k["last"] = min(k["first"], v.begin), max(k["last"], v.end)
        k["brokers"].add(v.broker)
        b = by_broker.setdefault(v.broker, {})
        b[v.kind] = b.get(v.kind, 0) + v.count
    for k in by_kind.values():
        k["brokers"] = sorted(k["brokers"])
    return {"tolerance": tolerance, "measured": measured or {}, "worst": worst or {},
            "by_kind": by_kind, "by_broker": dict(sorted(by_broker.items())),
            "violations": sum(k["violations"] for k in by_kind.values())}


def overlapping(violations: Iterable[Violation], begin: float, end: float) -> list[Violation]:
    return [v for v in violations if v.begin <= end and v.end >= begin]


def describe(violations: list[Violation]) -> str:
    """The figures of some violations, in words: "hop delays up to 0.35 s > δmax 0.1 s (12,
    at b3, b4); ..."."""
    parts = []
    for kind in KINDS:
        vs = [v for v in violations if v.kind == kind]
        if not vs:
            continue
        worst = max(vs, key=lambda v: v.value)
        brokers = sorted({v.broker for v in vs})
        where = ", ".join(brokers[:5]) + (f" and {len(brokers) - 5} more" if len(brokers) > 5
                                          else "")
        what = {"hop": "hop delays", "refresh": "refresh gaps", "timer": "timers late by",
                "path": "delivery delays"}[kind]
        limit = f"{LIMIT_NAMES[kind]} {worst.limit:.3g} s" if kind != "timer" else "0 s"
        n = sum(v.count for v in vs)
        parts.append(f"{what} up to {worst.value:.3g} s > {limit} ({n:,}, at {where})")
    return "; ".join(parts)
