"""The verdict of a run (rule R14) from what the other rules measured.

The same function judges a run for the simulator's summary, `weeble check` (the reference
checker over a trace) and `weeble analyze` (the PySpark twin hands over its own measurements):
each part of the run (the fault-free prefix, each episode) passes, fails, or fails while the
timing model was violated ("assumptions violated", with the figures).

An episode that missed Δ while the run broke the timing model is judged again against Δ
recomputed with the timing the run had (R13e, `timing.retimed`): within it, the bound did
not apply and the part is "assumptions violated"; beyond it, the algorithm was late even so
and the part fails. Duplicates and reordering fail whatever the timing: no delay explains them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weeble.check.deliveries import EPS
from weeble.check.episodes import Episode, Fault
from weeble.check.status import Status, worst
from weeble.check.timing import Violation, describe, overlapping

PASS, FAIL, ASSUMPTIONS = Status.PASS.value, Status.FAIL.value, Status.ASSUMPTIONS_VIOLATED.value
NOT_JUDGED, NO_CHECKS = Status.NOT_JUDGED.value, Status.NO_CHECKS_OBSERVED.value
UNOBSERVED = "no publications observed"  # R11's status of an episode without publications
NOT_STABILIZED = "not stabilized"  # R11's and R12's status: the last moment observed was not ok

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
    elif (e.state_last_failing or 0.0) > bound + EPS:  # a check failed after E + Δ (R12)
        problems.append(f"state: {e.state_time:.3g} s > bound {bound:.3g} s (illegitimate "
                        f"at {e.state_last_failing:.3g} s)")
    return problems


# counts of R5/R7 that no delay explains: a failure whatever the timing model
HARD = ("duplicate", "fifo")


def late_problems(e: Episode, bound: float, deactivation: float,
                  since: float | None = None) -> list[str]:
    """The problems of `episode_problems` that remain against `bound` counted from `since`
    (default: the episode's end E): a stabilization later than since + bound, or none
    although the episode was observed for longer than that (its publications up to D before
    its observed-until time, its checks up to that time). Other problems remain none."""
    assert e.end is not None
    since = e.end if since is None else since
    problems = []
    if e.service_time is not None and e.end + e.service_time > since + bound + EPS:
        problems.append(f"service: {e.end + e.service_time - since:.3g} s")
    elif (e.service_status == "not stabilized"
          and e.observed_until - deactivation > since + bound + EPS):
        problems.append(
            f"service: not stabilized in {e.observed_until - deactivation - since:.3g} s")
    if (e.state_time is not None
            and e.end + (e.state_last_failing or 0.0) > since + bound + EPS):
        problems.append(f"state: {e.end + e.state_time - since:.3g} s")
    elif e.state_status == "not stabilized" and e.observed_until > since + bound + EPS:
        problems.append(f"state: not stabilized in {e.observed_until - since:.3g} s")
    return problems


def judge(*, bound: float, deactivation: float, run_end: float, faults: Sequence[Fault],
          episodes: Sequence[Episode], prefix: dict[str, int],
          violations: Sequence[Violation],
          losses: dict[int, dict[str, int]] | None = None,
          reconfigurations: Sequence[dict[str, Any]] = (),
          retime: Callable[[Sequence[Violation]], dict[str, Any]] | None = None,
          ) -> dict[str, Any]:
    """R14. `prefix`: missing, spurious, duplicate and fifo counts before the first episode
    (publications, and FIFO violations, before its begin − D). `losses`: per episode, the same
    counts over its `loss_windows` (from its begin − D: what was in flight when its first fault
    struck; shown, not judged: a fault may lose).
    `reconfigurations`: R15's rows; one whose verdict is `fail` fails the run. `violations`:
    R13's groups outside faults; `retime`: the timing some of them show and Δ recomputed with
    it (`timing.retimed` of the run's header; None: Δ is not recomputed)."""
    first = episodes[0].begin if episodes else run_end
    parts = []
    errors = [f"{n:,} {what}" for what, n in prefix.items() if n]
    hard = [f"{n:,} {what}" for what, n in prefix.items() if n and what in HARD]
    parts.append(_part("before the first fault" if episodes else "the whole run",
                       0.0, first, errors, violations, hard=bool(hard)))
    for e in episodes:
        ids = ", ".join(e.faults)
        parts.append(_episode(f"episode {e.index} ({ids})", e, bound, deactivation,
                              violations, retime))
        parts[-1]["episode"] = e.index
    for r in reconfigurations:  # after the episodes: `rows` index parts by episode
        if r.get("verdict") == FAIL:  # lost, duplicated or reordered: no delay explains it
            parts.append(_part(f"reconfiguration {r['rid']} ({r['op']})", r["start"],
                               r["end"] if r["end"] is not None else run_end, [r["reason"]],
                               violations, hard=True))
    status = worst(p["status"] for p in parts).value
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
          violations: Sequence[Violation], hard: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"part": name, "begin": begin, "end": end}
    if not problems:
        return {**part, "status": PASS, "reason": ""}
    inside = overlapping(violations, begin, end)
    if inside and not hard:
        return {**part, "status": ASSUMPTIONS,
                "reason": f"{'; '.join(problems)} — assumptions violated: {describe(inside)}"}
    if inside:
        return {**part, "status": FAIL, "reason": f"{'; '.join(problems)} (whatever the "
                f"timing; the run broke the timing model too: {describe(inside)})"}
    return {**part, "status": FAIL, "reason": "; ".join(problems)}


def _episode(name: str, e: Episode, bound: float, deactivation: float,
             violations: Sequence[Violation],
             retime: Callable[[Sequence[Violation]], dict[str, Any]] | None) -> dict[str, Any]:
    """An episode's part (R14, R13e). A problem against Δ while the run broke the timing model
    inside the episode is judged again. A violation under which no bound holds (R13e of it
    alone) suspends the model: the clock restarts at K, the end of the last such violation
    (a self-stabilizing system recovers within its bound from any state the breach left).
    The milder ones after K stretch the bound: Δ̂, R13e of the violations after K. The part
    fails if it is late against Δ̂ counted from K; otherwise the bound did not apply:
    "assumptions violated", with the figures."""
    if e.end is None:  # judged alone: the other episodes keep their own verdicts
        return {"part": name, "begin": e.begin, "end": e.observed_until, "status": NOT_JUDGED,
                "reason": "a fault never ended: no stabilization time can be measured"}
    problems = episode_problems(e, bound)
    if problems == [f"service: {UNOBSERVED}"]:  # nothing to judge it by, not a failure
        return {"part": name, "begin": e.begin, "end": e.observed_until, "status": NOT_JUDGED,
                "reason": f"service: {UNOBSERVED} (no judged publication after its end)"}
    if problems and all(p.endswith(NOT_STABILIZED) or p == f"service: {UNOBSERVED}"
                        for p in problems) and not late_problems(e, bound, deactivation):
        # the run ended before Δ had passed: it may yet have kept its bound
        return {"part": name, "begin": e.begin, "end": e.observed_until, "status": NOT_JUDGED,
                "reason": f"{'; '.join(problems)} when the run's observation ended, "
                          f"{e.observed_until - e.end:.3g} s after the episode's end: less than"
                          f" Δ = {bound:.3g} s, too soon to tell"}
    part = _part(name, e.begin, e.observed_until, problems, violations)
    if part["status"] == PASS and e.state_status == NO_CHECKS:
        return {**part, "status": NO_CHECKS,
                "reason": "state: no checks observed (its stabilization was not measured)"}
    if part["status"] != ASSUMPTIONS or retime is None or e.end is None:
        return part
    inside = overlapping(violations, e.begin, e.observed_until)
    severe = [v for v in inside if retime([v])["bound"] is None]
    kept = max([e.end, *(v.end for v in severe)])
    timing = retime(inside)  # what the episode had, all of it
    after = retime([v for v in inside if v.end > kept])  # what it had once the model held
    timing.update(kept_from=kept, judged_bound=after["bound"])
    part["timing"] = timing
    if after["bound"] is None:  # mild ones only, that together break the precondition
        part["reason"] += f"; {after['why']}: the bound does not apply"
        return part
    since = (f"from when the timing model held again (t = {kept:.6g} s)" if severe
             else "from the episode's end")
    against = (f"Δ = {after['bound']:.3g} s recomputed at the timing the run had then "
               f"(δmax {after['delta_max']:.3g} s, ρ {after['rho']:.3g} s, "
               f"π {after['pi']:.3g} s)" if after["bound"] != bound else f"Δ = {bound:.3g} s")
    late = late_problems(e, after["bound"], deactivation, since=kept)
    if late:
        return {**part, "status": FAIL, "reason": (
            f"{'; '.join(problems)}; the run broke the timing model ({describe(inside)}), but "
            f"the algorithm was late even so: {'; '.join(late)} {since}, more than {against}")}
    part["reason"] += f"; nothing was late against {against} counted {since}"
    return part


def _losses(counts: dict[str, int] | None) -> dict[str, int | None]:
    c = counts or {}
    return {"lost": c.get("missing"), "spurious": c.get("spurious"),
            "duplicated": c.get("duplicate"), "reordered": c.get("fifo")}


def _ratio(t: float | None, bound: float) -> float | None:
    return t / bound if t is not None and bound > 0 else None
