"""State-level correctness: legitimacy checks (rules R8, R9).

`select` picks the required and allowed subscriptions at a time (R9) from subscription
intervals; `Legitimacy` runs `core.legitimacy.check` on live brokers (the simulator's online
monitor) or on snapshot rounds (`snapshot_checks`, any run with `snapshot` records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weeble.check.deliveries import EPS, INF
from weeble.core.filters import Filter, FilterSyntaxError
from weeble.core.legitimacy import Broker, LiveSub, SnapshotView, check


@dataclass(frozen=True, slots=True)
class Check:
    """One legitimacy check: when, whether the state was legitimate, how many problems."""

    t: float
    ok: bool
    problems: int
    source: str  # "legitimacy" (the simulator's monitor) or "snapshot" (a round of snapshots)
    sample: tuple[str, ...] = ()


@dataclass(slots=True)
class Interval:
    """A subscription's life (R1), as the state checks need it."""

    client: str
    sub_id: str
    broker: str
    filter: Filter | None
    start: float
    end: float = INF
    live_sub: LiveSub | None = None

    def as_live(self) -> LiveSub | None:
        if self.live_sub is None and self.filter is not None:
            self.live_sub = LiveSub(self.sub_id, self.filter, self.client, self.broker)
        return self.live_sub


def select(subs: Iterable[Interval], t: float, settle: float,
           linger: float) -> tuple[list[LiveSub], list[LiveSub]]:
    """R9: (required, allowed) at t. Required: started by t - settle, not ended by t.
    Allowed: started by t, not ended before t - linger."""
    required, allowed = [], []
    for s in subs:
        if s.start > t + EPS:
            continue
        live = s.as_live()
        if live is None:
            continue  # a filter no broker could accept has no entries anywhere
        if s.end > t + EPS and s.start <= t - settle + EPS:
            required.append(live)
        if s.end >= t - linger - EPS:
            allowed.append(live)
    return required, allowed


class Legitimacy:
    """The simulator's online monitor: every `period` s, check the live brokers' tables."""

    def __init__(self, brokers: Mapping[str, Broker], subs: Callable[[], Iterable[Interval]],
                 *, settle: float, linger: float,
                 record: Callable[[float, dict[str, Any]], None] | None = None,
                 adverts: Callable[[], Iterable[Interval]] | None = None) -> None:
        """`adverts`: the publishers' advertisements, when they route the subscriptions (R9
        then judges the tables by the advertisement-routing rule, thesis §3.4.2)."""
        self.brokers, self.subs = brokers, subs
        self.settle, self.linger = settle, linger
        self.record = record
        self.adverts = adverts
        self.checks: list[Check] = []

    def __call__(self, t: float) -> Check:
        required, allowed = select(self.subs(), t, self.settle, self.linger)
        adverts = None if self.adverts is None else select(self.adverts(), t, self.settle,
                                                           self.linger)
        problems = check(self.brokers, required, allowed, adverts=adverts)
        c = Check(t, not problems, len(problems), "legitimacy", tuple(problems[:3]))
        self.checks.append(c)
        if self.record is not None:
            self.record(t, {"ok": c.ok, "problems": c.problems, "sample": list(c.sample),
                            "required": len(required)})
        return c


def snapshot_checks(snapshots: Iterable[tuple[float, dict[str, Any]]], brokers: Iterable[str],
                    subs: list[Interval], *, settle: float, linger: float,
                    adverts: bool = False) -> list[Check]:
    """R8(b): check every complete round of (time, snapshot record). None when advertisements
    route the subscriptions (`adverts`): a subscription's entries then depend on the live
    advertisements, which the trace does not record, so a round cannot be judged from it (the
    simulator's own checks, R8a, see them)."""
    if adverts:
        return []
    everyone = set(brokers)
    rounds: dict[Any, list[tuple[float, dict[str, Any]]]] = {}
    for t, rec in snapshots:
        rounds.setdefault(rec.get("round", t), []).append((t, rec))
    out = []
    for snaps in rounds.values():
        latest = {rec["broker"]: (t, rec) for t, rec in snaps}  # a repeated broker: its last
        if set(latest) != everyone:
            continue  # an incomplete round cannot show the whole configuration
        t = max(t for t, _ in latest.values())
        try:
            views = {b: SnapshotView(rec) for b, (_, rec) in latest.items()}
        except (KeyError, ValueError, FilterSyntaxError) as e:  # a corrupted table entry
            out.append(Check(t, False, 1, "snapshot", (f"unreadable snapshot: {e}",)))
            continue
        required, allowed = select(subs, t, settle, linger)
        problems = check(views, required, allowed)
        out.append(Check(t, not problems, len(problems), "snapshot", tuple(problems[:3])))
    return sorted(out, key=lambda c: c.t)
