"""R15: what each reconfiguration did to the service, and the overlay's legitimacy (thesis ch. 4).

`Reconfigurations` is fed the `reconfiguration` records of the manager (started, finished), the
`overlay_legitimacy` checks, and, when the run keeps causal order, every publication and
delivery (vector clocks, `causal.py`). Its `report` judges each reconfiguration by the same
`Deliveries` that judges the whole run (R5, R7): the lost (missing), duplicated and reordered
notifications of its window. The simulator feeds it online, `weeble check RUN` from the trace:
one definition, the same figures.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from weeble.check.causal import Causal
from weeble.check.deliveries import EPS, Deliveries
from weeble.check.episodes import Fault, inside
from weeble.check.state import Check
from weeble.trace.header import RunHeader


@dataclass(slots=True)
class Reconfiguration:
    rid: str
    op: str
    start: float
    end: float | None = None
    outcome: str = "pending"
    why: str = ""
    coordination: dict[str, int] = field(default_factory=dict)


class Reconfigurations:
    def __init__(self, header: RunHeader) -> None:
        self.D = header.deactivation
        self.bound = header.overlay_bound
        self.delta = header.bound  # Δ: a fault's effects may last this long after it ends
        self.causal = Causal() if header.ordering == "causal" else None
        self.items: dict[str, Reconfiguration] = {}
        self.overlay: list[Check] = []

    # ---- the history ----

    def record(self, t: float, fields: dict[str, Any]) -> None:
        """A `reconfiguration` record."""
        rid = str(fields["rid"])
        item = self.items.get(rid)
        if item is None:
            item = self.items[rid] = Reconfiguration(rid, str(fields["op"]), t)
        if fields["phase"] == "finished":
            item.end = t
            item.outcome = str(fields.get("outcome") or "done")
            item.why = str(fields.get("why") or "")
            item.coordination = {str(k): int(v) for k, v in
                                 (fields.get("coordination") or {}).items()}

    def overlay_check(self, t: float, fields: dict[str, Any]) -> None:
        """An `overlay_legitimacy` record."""
        self.overlay.append(Check(t, bool(fields["ok"]), int(fields.get("problems") or 0),
                                  "overlay", tuple(fields.get("sample") or ())))

    def publish(self, client: str, publisher: str, seq: int) -> None:
        if self.causal is not None:
            self.causal.publish(client, (publisher, seq))

    def deliver(self, t: float, client: str, publisher: str, seq: int) -> None:
        if self.causal is not None:
            self.causal.deliver(t, client, (publisher, seq))

    # ---- the report ----

    def windows(self, end: float) -> list[tuple[float, float]]:
        """Each reconfiguration's window as (begin, end): its publications and deliveries."""
        return [(r.start - self.D, (r.end if r.end is not None else end) + 2 * self.D)
                for r in self.items.values()]

    def state_spans(self, end: float) -> list[tuple[float, float]]:
        """Each reconfiguration's state span [start, end + D] (R15): the legitimacy checks
        there see its transient, and R12 leaves them out of an episode's state level."""
        return [(r.start, (r.end if r.end is not None else end) + self.D)
                for r in self.items.values()]

    def report(self, d: Deliveries, end: float, faults: list[Fault]) -> dict[str, Any]:
        """Per reconfiguration, in start order (R15), and the overlay's checks."""
        faulty = [(f.begin, f.end if f.end is not None else end) for f in faults]
        ops = [self._judge(r, d, end, faulty)
               for r in sorted(self.items.values(), key=lambda r: (r.start, r.rid))]
        return {"operations": ops, "overlay": self._overlay(end, faulty)}

    def _judge(self, r: Reconfiguration, d: Deliveries, end: float,
               faulty: list[tuple[float, float]]) -> dict[str, Any]:
        D = self.D
        finish = r.end if r.end is not None else end
        lo, hi = r.start - D, finish + D  # publications in flight at the start, and after
        window = d.between(lo, hi)
        fifo = d.between(lo, hi + D)["fifo"]  # what was published by hi is delivered by hi + D
        causal = _count(self.causal.times, lo, hi + D) if self.causal is not None else 0
        published = _count(d.pub_times, lo, hi)
        # its window overlaps a fault or the Δ after it, when the system may still be
        # recovering: its figures are the fault's doing as much as its own
        during = any(b < hi + D and e + self.delta > lo for b, e in faulty)
        return {
            "rid": r.rid, "op": r.op, "outcome": r.outcome, "why": r.why,
            "start": r.start, "end": r.end,
            "duration": None if r.end is None else r.end - r.start,
            "coordination": {**r.coordination, "total": sum(r.coordination.values())},
            "window": [lo, hi], "publications": published,
            "lost": window["missing"], "duplicated": window["duplicate"],
            "spurious": window["spurious"], "reordered": fifo + causal,
            "fifo": fifo, "causal": causal if self.causal is not None else None,
            "during_faults": during,
        } | verdict_of(r.outcome, r.why, lost=window["missing"], duplicated=window["duplicate"],
                       spurious=window["spurious"], reordered=fifo + causal,
                       during_faults=during)

    def _overlay(self, end: float, faulty: list[tuple[float, float]]) -> dict[str, Any] | None:
        """The overlay's checks; after each fault, when it was legitimate again (as R12, from
        the fault's end to the next fault's begin, leaving out the reconfigurations' state
        spans: a reconfiguration locks and rewires the overlay by design), against ∆r."""
        checks = self.overlay
        if not checks:
            return None
        failed = [c for c in checks if not c.ok]
        after = []
        spans = sorted(faulty)
        reshaped = self.state_spans(end)
        for i, (_, e) in enumerate(spans):
            until = spans[i + 1][0] if i + 1 < len(spans) else end
            seen = [c for c in checks if e - EPS <= c.t < until and not inside(c.t, reshaped)]
            bad = [c for c in seen if not c.ok]
            if not seen:
                status, time = "no checks observed", None
            elif not bad:
                status, time = "stable", 0.0
            elif bad[-1] is seen[-1]:
                status, time = "not stabilized", None
            else:
                status = "stabilized"
                time = next(c for c in seen if c.t > bad[-1].t).t - e
            after.append({"from": e, "until": until, "status": status, "time": time,
                          "within_bound": time is not None and (
                              self.bound is None or time <= self.bound + EPS)})
        return {"checks": len(checks), "illegitimate": len(failed),
                "last_illegitimate": failed[-1].t if failed else None,
                "sample_problems": list(failed[-1].sample) if failed else [],
                "bound": self.bound, "after_faults": after}


PASS, FAIL, DURING_FAULTS, NOT_DONE = "pass", "fail", "during faults", "not done"


def verdict_of(outcome: str, why: str, *, lost: int, duplicated: int, spurious: int,
               reordered: int, during_faults: bool) -> dict[str, str]:
    """R15's verdict on one reconfiguration (the checker's and the PySpark job's), on the
    service over its window: it fails when the window lost, duplicated, delivered spuriously
    or reordered anything, unless a fault overlaps it (`during faults`: its figures are shown,
    the fault's episode is judged by R14). Otherwise it passes when it finished (`done`), and
    is `not done` when it was given up (failed, refused: another one changed the tree first)
    or still pending at the end: harmless to the service, so not a failure of the run."""
    problems = [f"{n:,} {what}" for what, n in (
        ("lost", lost), ("duplicated", duplicated), ("spurious", spurious),
        ("reordered", reordered)) if n]
    unfinished = f"{outcome}{f' ({why})' if why else ''}" if outcome != "done" else ""
    reason = "; ".join([*([unfinished] if unfinished else []), *problems])
    if problems:
        return {"verdict": DURING_FAULTS if during_faults else FAIL, "reason": reason}
    return {"verdict": NOT_DONE if unfinished else PASS, "reason": reason}


# The verdict table's rows per reconfiguration (`weeble run`, `weeble analyze`, report.md):
# one layout for every place that shows them.
TABLE_COLUMNS = ("reconfiguration", "operation", "outcome", "duration s", "coordination msgs",
                 "publications", "lost", "duplicated", "reordered", "verdict")


def table_cells(r: dict[str, Any], detail: bool = False) -> list[str]:
    """One reconfiguration (an R15 row) as the cells of TABLE_COLUMNS (`detail`: the
    coordination messages by kind too)."""
    coordination = r.get("coordination") or {}
    total = coordination.get("total", sum(coordination.values())) if isinstance(
        coordination, dict) else coordination
    kinds = ", ".join(f"{k} {v}" for k, v in coordination.items()
                      if k != "total") if isinstance(coordination, dict) else ""
    duration = "-" if r.get("duration") is None else f"{r['duration']:.3f}"
    verdict = r.get("verdict") or "-"
    return [r["rid"], r["op"], r["outcome"], duration,
            f"{total:,}" + (f" ({kinds})" if kinds and detail else ""),
            f"{r.get('publications', 0):,}",
            f"{r['lost']:,}", f"{r['duplicated']:,}", f"{r['reordered']:,}",
            "FAIL" if verdict == FAIL else verdict]


def _count(times: array, lo: float, hi: float) -> int:
    """How many of the times fall in [lo, hi): both arrays it is given grow in time order
    (publications are closed in publication order, violations recorded as they happen)."""
    return bisect_left(times, hi - EPS) - bisect_left(times, lo - EPS)
