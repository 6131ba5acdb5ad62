"""Faults, episodes and stabilization times (rules R10-R12).

Faults closer than Δ form one episode; an episode is measured from its end E (the end of its
last fault) up to the begin of the next episode (or the run's end). The service level asks
when publications became correct again, the state level when the routing tables became
legitimate again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from weeble.check.deliveries import EPS
from weeble.check.state import Check


@dataclass(slots=True)
class Fault:
    fault_id: str
    type: str
    target: str
    begin: float
    end: float | None  # None: never ended
    took_effect: bool | None = None
    error: str | None = None
    episode: int = -1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def faults_of(records: Iterable[tuple[float, dict[str, Any]]]) -> list[Fault]:
    """R10: one Fault per fault_id from its (time, fault_begin/fault_end record) pairs."""
    faults: dict[str, Fault] = {}
    ends: dict[str, float] = {}
    for t, r in records:
        fid = r["fault_id"]
        f = faults.get(fid)
        if r["kind"] == "fault_begin":
            if f is None:
                faults[fid] = f = Fault(fid, r.get("type") or "?", fault_target(r), t, None)
            else:
                f.begin = min(f.begin, t)
                f.target = merge_targets(f.target, fault_target(r))
        else:
            ends[fid] = max(ends.get(fid, t), t)
        if f is not None:
            if r.get("took_effect") is not None:
                f.took_effect = bool(r["took_effect"]) or bool(f.took_effect)
            if r.get("error"):
                f.error = str(r["error"])
    for fid, t in ends.items():
        if fid in faults:  # an end without a begin: nothing to measure from
            faults[fid].end = t
    return sorted(faults.values(), key=lambda f: (f.begin, f.fault_id))


def fault_target(r: dict[str, Any]) -> str:
    """What a fault_begin record names as its target: `target`, else its `links`, else the
    recording node (the reference checker and the Spark twin read it alike)."""
    if r.get("target"):
        return str(r["target"])
    if r.get("links"):
        return ",".join(r["links"])
    return str(r.get("node", ""))


def merge_targets(have: str, target: str) -> str:
    """A fault's targets so far (comma-separated) with those of another record, each once, in
    order of first appearance (not b0,b6,b0,b6)."""
    out = have.split(",") if have else []
    for t in target.split(","):
        if t and t not in out:
            out.append(t)
    return ",".join(out)


@dataclass(slots=True)
class Episode:
    index: int
    begin: float
    end: float | None  # None: a fault never ended
    observed_until: float
    faults: list[str] = field(default_factory=list)
    service_time: float | None = None
    service_status: str = ""
    state_time: float | None = None
    state_status: str = ""
    # R12: the last failing check's time minus E (None: none failed), the time's lower bound;
    # the state is late against Δ only when this is (R14)
    state_last_failing: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def episodes_of(faults: Sequence[Fault], bound: float, run_end: float) -> list[Episode]:
    """R10: group faults (sorted by begin) into episodes; sets each fault's `episode`."""
    out: list[Episode] = []
    for f in faults:
        last = out[-1] if out else None
        if last is not None and (last.end is None or f.begin < last.end + bound - EPS):
            last.faults.append(f.fault_id)
            last.end = None if last.end is None or f.end is None else max(last.end, f.end)
        else:
            out.append(Episode(len(out), f.begin, f.end, run_end, [f.fault_id]))
        f.episode = out[-1].index
    for i, e in enumerate(out):
        e.observed_until = out[i + 1].begin if i + 1 < len(out) else run_end
    return out


def service_stabilization(e: Episode, pub_times: Sequence[float], pub_ok: Sequence[int],
                          deactivation: float) -> tuple[float | None, str]:
    """R11 over the judged publications (times in increasing order, ok flags)."""
    if e.end is None:
        return None, "fault never ended"
    window = [(t, ok) for t, ok in zip(pub_times, pub_ok, strict=True)
              if e.end - EPS <= t and t + deactivation <= e.observed_until + EPS]
    return stabilization_tail(window, e.end, "no publications observed")


def state_stabilization(e: Episode, checks: Sequence[Check],
                        spans: Sequence[tuple[float, float]] = (),
                        ) -> tuple[float | None, str, float | None]:
    """R12 over the legitimacy checks (in time order): the time, the status, and the last
    failing check's time minus E (see `last_failing`). The checks inside `spans` (the
    reconfigurations' state spans, R15) are left out: an exchange's transient is its own."""
    if e.end is None:
        return None, "fault never ended", None
    window = [(c.t, c.ok) for c in checks if e.end - EPS <= c.t < e.observed_until - EPS
              and not inside(c.t, spans)]
    return (*stabilization_tail(window, e.end, "no checks observed"),
            last_failing(window, e.end))


def inside(t: float, spans: Sequence[tuple[float, float]]) -> bool:
    """Whether `t` lies in one of the closed `spans` (on the edge is inside)."""
    return any(lo - EPS <= t <= hi + EPS for lo, hi in spans)


def loss_windows(episodes: Sequence[Episode],
                 deactivation: float) -> dict[int, tuple[float, float]]:
    """R14: per episode, the publication times [lo, hi) whose losses its row shows: from its
    begin − D (what was in flight when its first fault struck) to the next episode's begin − D
    (the last: every later one). With the prefix (before the first begin − D) they partition
    the run, so each loss is shown once."""
    out = {}
    for i, e in enumerate(episodes):
        hi = episodes[i + 1].begin - deactivation if i + 1 < len(episodes) else float("inf")
        out[e.index] = (e.begin - deactivation, hi)
    return out


def last_failing(window: Sequence[tuple[float, Any]], end: float) -> float | None:
    """R12's lower bound: the last failing moment of the (time, ok) pairs minus `end` (None: no
    pair failed). The state became legitimate after it; `stabilization_tail`'s time is when a
    check first saw it so, which with checks every P s may be up to P later: a state that kept
    Δ between two checks must not read as late (R14 judges this one)."""
    bad = [t for t, ok in window if not ok]
    return max(0.0, max(bad) - end) if bad else None


def stabilization_tail(window: Sequence[tuple[float, Any]], end: float,
                       empty: str) -> tuple[float | None, str]:
    """R11/R12 over (time, ok) pairs. Pairs at the same instant (within EPS) are one moment,
    ok only if all of them are: the order a trace lists them in must not decide."""
    if not window:
        return None, empty
    bad = [t for t, ok in window if not ok]
    if not bad:
        return 0.0, "stable"
    last_bad = max(bad)
    after = [t for t, _ in window if t > last_bad + EPS]
    if not after:
        return None, "not stabilized"
    return max(0.0, min(after) - end), "stabilized"
