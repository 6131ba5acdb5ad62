"""The verdict of a run (rule R14) from what the other rules measured.

The same function judges a run for the simulator's summary, `weeble check` (the reference
checker over a trace) and `weeble analyze` (the PySpark twin hands over its own measurements):
each part of the run (the fault-free prefix, each episode) passes, fails, or fails while the
timing model was violated ("assumptions violated", with the figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from weeble.check.deliveries import EPS
from weeble.check.episodes import Episode, Fault
from weeble.check.timing import Violation, describe, overlapping

PASS, FAIL, ASSUMPTIONS = "pass", "fail", "assumptions violated"

SERVICE_FROM = ("service level: from the end of the episode's last fault (t = {end:.6g} s) to "
                "the first publication after which every publication was delivered correctly")
STATE_FROM = ("state level: from the end of the episode's last fault (t = {end:.6g} s) to the "
              "first legitimacy check after which every check was legitimate")


def episode_problems(e: Episode, bound: float) -> list[str]:
    problems = []
    if e.service_time is None:
        problems.append(f"service: {e.service_status}")
    elif e.service_time > bound + EPS:
        problems.append(f"service: {e.service_time:.3g} s > bound {bound:.3g} s")
    if e.state_time is None:
        if e.state_status != "no checks observed":
            problems.append(f"state: {e.state_status}")
    elif e.state_time > bound + EPS:
        problems.append(f"state: {e.state_time:.3g} s > bound {bound:.3g} s")
    return problems


def judge(*, bound: float, deactivation: float, run_end: float, faults: Sequence[Fault],
          episodes: Sequence[Episode], prefix: dict[str, int],
          violations: Sequence[Violation],
          losses: dict[int, dict[str, int]] | None = None,
          reconfigurations: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """R14. `prefix`: missing, spurious, duplicate and fifo counts before the first episode
    (publications, and FIFO violations, before its begin − D). `losses`: per episode, the same
    counts from its begin to its observed-until time (shown, not judged: a fault may lose).
    `reconfigurations`: R15's rows; one whose verdict is `fail` fails the run."""
    first = episodes[0].begin if episodes else run_end
    parts = []
    errors = [f"{n:,} {what}" for what, n in prefix.items() if n]
    parts.append(_part("before the first fault" if episodes else "the whole run",
                       0.0, first, errors, violations))
    for e in episodes:
        ids = ", ".join(e.faults)
        parts.append(_part(f"episode {e.index} ({ids})", e.begin, e.observed_until,
                           episode_problems(e, bound), violations))
        parts[-1]["episode"] = e.index
    for r in reconfigurations:  # after the episodes: `rows` index parts by episode
        if r.get("verdict") == FAIL:
            parts.append(_part(f"reconfiguration {r['rid']} ({r['op']})", r["start"],
                               r["end"] if r["end"] is not None else run_end, [r["reason"]],
                               violations))
    status = PASS
    if any(p["status"] == FAIL for p in parts):
        status = FAIL
    elif any(p["status"] == ASSUMPTIONS for p in parts):
        status = ASSUMPTIONS
    reasons = [f"{p['part']}: {p['reason']}" for p in parts if p["status"] != PASS]
    rows = []
    for f in faults:
        e = episodes[f.episode]
        part = parts[f.episode + 1]
        rows.append({
            "fault_id": f.fault_id, "type": f.type, "target": f.target, "begin": f.begin,
            "end": f.end, "took_effect": f.took_effect, "episode": e.index,
            "episode_end": e.end,
            "service_time": e.service_time, "service_status": e.service_status,
            "state_time": e.state_time, "state_status": e.state_status, "bound": bound,
            "ratio": _ratio(e.service_time, bound), "state_ratio": _ratio(e.state_time, bound),
            "status": part["status"], "pass": part["status"] == PASS,
            **_losses((losses or {}).get(e.index)),
            "measured_from": (f"the end of episode {e.index}'s last fault at t = {e.end:.6g} s"
                              if e.end is not None else "never (a fault never ended)"),
        })
    return {"status": status, "pass": status == PASS, "reasons": reasons, "bound": bound,
            "parts": parts, "faults": rows, "before_first_fault": prefix,
            "stabilization_measured_from": (
                "each episode's end: the end of its last fault (faults closer than the bound "
                "form one episode)" if episodes else "no fault: no stabilization time")}


def _part(name: str, begin: float, end: float, problems: list[str],
          violations: Sequence[Violation]) -> dict[str, Any]:
    part: dict[str, Any] = {"part": name, "begin": begin, "end": end}
    if not problems:
        return {**part, "status": PASS, "reason": ""}
    inside = overlapping(violations, begin, end)
    if inside:
        return {**part, "status": ASSUMPTIONS,
                "reason": f"{'; '.join(problems)} — assumptions violated: {describe(inside)}"}
    return {**part, "status": FAIL, "reason": "; ".join(problems)}


def _losses(counts: dict[str, int] | None) -> dict[str, int | None]:
    c = counts or {}
    return {"lost": c.get("missing"), "spurious": c.get("spurious"),
            "duplicated": c.get("duplicate"), "reordered": c.get("fifo")}


def _ratio(t: float | None, bound: float) -> float | None:
    return t / bound if t is not None and bound > 0 else None
