"""The reference checker over a history: a run directory in, every rule's figures and the verdict
out. `assess` turns the measurements into the report; the simulator's summary uses it too.

    from weeble.check.history import check_run
    report = check_run("runs/sim-small")      # {"deliveries": ..., "verdict": ..., ...}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from weeble.check.deliveries import Deliveries
from weeble.check.episodes import (
    Fault,
    episodes_of,
    faults_of,
    loss_windows,
    service_stabilization,
    state_stabilization,
)
from weeble.check.load import Load
from weeble.check.reconfig import Reconfigurations
from weeble.check.state import Check, Interval, snapshot_checks
from weeble.check.timing import (
    Timing,
    Violation,
    aggregate,
    outside_faults,
    retimed,
    summarize,
)
from weeble.check.verdict import SERVICE_FROM, STATE_FROM, judge
from weeble.trace.header import RunHeader
from weeble.trace.reader import read_run

REPORT_VERSION = 1


def deliveries_for(header: RunHeader, retention: float = float("inf")) -> Deliveries:
    return Deliveries(activation=header.activation, deactivation=header.deactivation,
                      crash_linger=header.crash_linger, retention=retention)


def check_run(run_dir: Path | str) -> dict[str, Any]:
    """Judge a run from its trace directory alone (rules R1-R15)."""
    run = read_run(run_dir)
    h = run.header
    d = deliveries_for(h)
    timing = Timing(h)
    reconfigurations = Reconfigurations(h)
    intervals: list[Interval] = []
    live: dict[tuple[str, str], Interval] = {}
    fault_records: list[tuple[float, dict[str, Any]]] = []
    checks: list[Check] = []
    snapshots: list[tuple[float, dict[str, Any]]] = []
    capped: dict[str, float] = {}  # node -> when its trace reached its cap
    load = Load(h)
    for r in run.records:
        t = run.seconds(r["t"])
        kind = r["kind"]
        timing.feed(t, r)
        if kind == "send" or kind == "unwanted":
            load.feed(r)
        elif kind == "deliver":
            d.deliver(t, r["client"], r["publisher"], r["seq"])
            reconfigurations.deliver(t, r["client"], r["publisher"], r["seq"])
        elif kind == "publish":
            d.publish(t, r["client"], r["publisher"], r["seq"], r["attributes"], r["broker"])
            reconfigurations.publish(r["client"], r["publisher"], r["seq"])
        elif kind == "subscribe":
            key = (r["client"], r["sub_id"])
            if key not in live:
                d.subscribe(t, r["client"], r["broker"], r["sub_id"], r["filter"])
                sub = d.live[key]
                live[key] = iv = Interval(r["client"], r["sub_id"], r["broker"], sub.filter, t)
                intervals.append(iv)
        elif kind in ("unsubscribe", "crash"):
            sub_id = r.get("sub_id")
            d.end(t, r["client"], sub_id, crashed=kind == "crash")
            for key in ([(r["client"], sub_id)] if sub_id is not None
                        else [k for k in live if k[0] == r["client"]]):
                iv = live.pop(key, None)
                if iv is not None:
                    iv.end = t
        elif kind in ("fault_begin", "fault_end"):
            fault_records.append((t, r))
        elif kind == "legitimacy":
            checks.append(Check(t, bool(r["ok"]), int(r.get("problems") or 0), "legitimacy",
                                tuple(r.get("sample") or ())))
        elif kind == "snapshot":
            snapshots.append((t, r))
        elif kind == "reconfiguration":
            reconfigurations.record(t, r)
        elif kind == "overlay_legitimacy":
            reconfigurations.overlay_check(t, r)
        elif kind == "trace_capped":
            capped.setdefault(r["node"], t)
    d.finish(run.end)
    checks += snapshot_checks(snapshots, h.topology.brokers, intervals, settle=h.settle,
                              linger=h.linger, adverts=h.adverts)
    checks.sort(key=lambda c: c.t)
    report = assess(h, run.end, d, checks, faults_of(fault_records), timing.violations,
                    timing.summarize(), reconfigurations)
    report["run"]["dir"] = str(run.dir)
    report["run"]["torn_files"] = run.torn
    # a capped trace lacks this node's records after its time: what depends on them is unjudged
    report["run"]["capped"] = capped
    report["load"] = load.report(run.end)
    return report


def unpromised(header: RunHeader, counts: dict[str, int]) -> dict[str, int]:
    """The counts a mode's verdict judges: mode skip_ring does not promise per-publisher FIFO
    (seed 003 has no order: flooding and anti-entropy both deliver), so its FIFO count is
    reported (`deliveries.fifo`) but not judged."""
    if header.skip_ring is None:
        return counts
    return {k: v for k, v in counts.items() if k != "fifo"}


def assess(header: RunHeader, end: float, d: Deliveries, checks: Sequence[Check],
           faults: list[Fault], violations: Sequence[Violation],
           timing: dict[str, Any],
           reconfigurations: Reconfigurations | None = None) -> dict[str, Any]:
    """Episodes, stabilization, the verdict and the report, from the measurements."""
    bound = header.bound
    episodes = episodes_of(faults, bound, end)
    # R12: a reconfiguration's transient is its own (R15), not the episode's before it
    reshaped = reconfigurations.state_spans(end) if reconfigurations is not None else []
    for e in episodes:
        e.service_time, e.service_status = service_stabilization(
            e, d.pub_times, d.pub_ok, header.deactivation)
        e.state_time, e.state_status, e.state_last_failing = state_stabilization(
            e, checks, reshaped)
    first = episodes[0].begin if episodes else float("inf")
    prefix = unpromised(header, d.between(float("-inf"), first - header.deactivation))
    losses = {i: d.between(lo, hi)
              for i, (lo, hi) in loss_windows(episodes, header.deactivation).items()}
    # A timing violation inside a fault, or inside a reconfiguration's window (an exchange
    # holds notifications in Qnot by design, thesis 4.4.2), is that one's doing (R13, R15).
    spans = [(f.begin, f.end) for f in faults]
    if reconfigurations is not None:
        spans += reconfigurations.windows(end)
    kept = outside_faults(violations, spans, end)
    groups = aggregate(kept, bound / 10)
    timing = summarize(kept, timing["measured"], timing["worst"], timing["tolerance"])
    reconfigured = (reconfigurations.report(d, end, faults) if reconfigurations is not None
                    else {"operations": [], "overlay": None})
    verdict = judge(bound=bound, deactivation=header.deactivation, run_end=end, faults=faults,
                    episodes=episodes, prefix=prefix, violations=groups, losses=losses,
                    reconfigurations=reconfigured["operations"],
                    retime=lambda vs: retimed(header, vs))
    failed = [c for c in checks if not c.ok]
    return {
        "v": REPORT_VERSION,
        "run": {"scenario": header.scenario, "backend": header.backend, "end": end,
                "bound": bound, "activation": header.activation,
                "deactivation": header.deactivation, "crash_linger": header.crash_linger,
                "header": header.fields()},
        "deliveries": d.counts.as_dict(),
        "legitimacy": {"checks": len(checks), "legitimate": len(checks) - len(failed),
                       "illegitimate": len(failed),
                       "first_illegitimate": failed[0].t if failed else None,
                       "last_illegitimate": failed[-1].t if failed else None,
                       "sample_problems": list(failed[-1].sample) if failed else []},
        "faults": [f.as_dict() for f in faults],
        "episodes": [{**e.as_dict(),
                      "service_measured_from": SERVICE_FROM.format(end=e.end)
                      if e.end is not None else "a fault never ended",
                      "state_measured_from": STATE_FROM.format(end=e.end)
                      if e.end is not None else "a fault never ended"} for e in episodes],
        "stabilization": _stabilization(episodes),
        "timing": {**timing, "groups": [asdict(g) for g in groups]},
        "verdict": verdict,
        **reconfigured,
    }


def _stabilization(episodes: Iterable[Any]) -> dict[str, Any] | None:
    """The worst episode's times, or None for a run without faults (R12)."""
    eps = list(episodes)
    if not eps:
        return None
    service = [e.service_time for e in eps]
    state = [e.state_time for e in eps]
    return {"service": None if None in service else max(service),  # type: ignore[type-var]
            "state": None if not state or None in state else max(state),  # type: ignore[type-var]
            "episodes": len(eps)}
