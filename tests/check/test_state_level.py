"""R12 and R14 at the state level: the checks sample the state, so a state that became
legitimate within Δ between two checks is not late, though the first ok check came after
E + Δ (issue 28's sweep: 29 of the periodic-rebuild wrapper's 35 failures were this). Late is
a check that failed after E + Δ."""

from __future__ import annotations

import pytest

from weeble.check.episodes import Episode, state_stabilization
from weeble.check.state import Check
from weeble.check.verdict import judge

BOUND = 6.1  # Δ of the sweep's seed 4
END = 15.0  # E: the episode's end


def episode(checks: list[tuple[float, bool]]) -> Episode:
    e = Episode(0, 10.0, END, 40.0, ["f"], service_time=1.0, service_status="stabilized")
    e.state_time, e.state_status, e.state_last_failing = state_stabilization(
        e, [Check(END + t, ok, 0 if ok else 1, "legitimacy") for t, ok in checks])
    return e


def status(e: Episode) -> str:
    v = judge(bound=BOUND, deactivation=0.25, run_end=40.0, faults=[], episodes=[e],
              prefix={}, violations=[])
    return str(v["parts"][1]["status"])


@pytest.mark.parametrize(("last_bad", "first_ok", "expect"), [
    (5.9, 6.4, "pass"),   # legitimate by some instant in (5.9, 6.4]: Δ may have held
    (6.1, 6.6, "pass"),   # a failing check at E + Δ exactly is on the edge: inside
    (6.2, 6.7, "fail"),   # a check saw the state illegitimate after E + Δ
    (2.0, 2.5, "pass"),
])
def test_the_state_is_late_only_if_a_check_failed_after_the_bound(
        last_bad: float, first_ok: float, expect: str) -> None:
    checks = [(0.0, False), (last_bad / 2, False), (last_bad, False),
              *((first_ok + k * 0.5, True) for k in range(10))]
    e = episode(checks)
    assert e.state_status == "stabilized"
    assert e.state_time == pytest.approx(first_ok)
    assert e.state_last_failing == pytest.approx(last_bad)
    assert status(e) == expect


def test_a_stable_state_and_one_never_legitimate_again() -> None:
    stable = episode([(0.5, True), (1.0, True)])
    assert (stable.state_time, stable.state_last_failing, status(stable)) == (0.0, None, "pass")
    never = episode([(0.5, True), (7.0, False)])
    assert (never.state_status, never.state_last_failing) == ("not stabilized", 7.0)
    assert status(never) == "fail"


def test_late_at_the_timing_the_run_had_uses_the_last_failing_check() -> None:
    """R14's retimed test (K + Δ̂) reads the state level the same way."""
    from weeble.check.verdict import late_problems

    e = episode([(0.0, False), (5.9, False), (6.4, True), (6.9, True)])
    assert late_problems(e, BOUND, 0.25) == []
    assert late_problems(e, BOUND - 0.5, 0.25) == ["state: 6.4 s"]


@pytest.mark.parametrize(("observed_until", "expect"), [
    (END + 3.0, "not judged"),      # the run ended 3 s after E, Δ = 6.1 s: too soon to tell
    (END + BOUND, "not judged"),    # on the edge: not observed past E + Δ
    (END + BOUND + 0.5, "fail"),    # observed past E + Δ and still not legitimate
])
def test_a_state_not_yet_stabilized_when_the_run_ended_within_the_bound_is_not_judged(
        observed_until: float, expect: str) -> None:
    """R14: a run taken down less than Δ after its last fault, its state not yet legitimate
    (the README's tour in CI, stop 38: `weeble down` 4.7 s after E, Δ = 6.3 s), has not shown
    that the bound was missed; it is not judged, not failed."""
    e = Episode(0, 10.0, END, observed_until, ["f"], service_time=0.0, service_status="stable")
    e.state_time, e.state_status, e.state_last_failing = state_stabilization(
        e, [Check(END + t, t < 1.0, 0 if t < 1.0 else 1, "legitimacy")
            for t in (0.5, 1.0, 1.5, observed_until - END - 0.2)])
    assert e.state_status == "not stabilized"
    part = judge(bound=BOUND, deactivation=0.25, run_end=observed_until, faults=[],
                 episodes=[e], prefix={}, violations=[])["parts"][1]
    assert part["status"] == expect
    if expect == "not judged":
        assert "too soon to tell" in part["reason"]
