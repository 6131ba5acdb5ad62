"""The verdict vocabulary (weeble.check.status): one place names the statuses and their exit
codes; the run's status is its worst part's; a never-ending fault is judged alone ("not
judged"), and an episode without a state-level check is "no checks observed", not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from weeble.check import doc
from weeble.check.episodes import Episode, Fault
from weeble.check.status import BAD_INPUT, STATUSES, Status, exit_code, worst
from weeble.check.verdict import judge


def test_every_status_has_its_own_exit_code_and_is_in_the_contract() -> None:
    codes = [s.exit_code for s in STATUSES]
    assert {s.status for s in STATUSES} == set(Status)
    assert len(set(codes)) == len(codes) and BAD_INPUT not in codes
    assert exit_code("pass") == 0 and exit_code("fail") == 1
    text = doc.render()
    for s in STATUSES:
        assert f"| `{s.status.value}` | {s.exit_code} |" in text
    with pytest.raises(ValueError):
        exit_code("passed")


def test_the_run_status_is_its_worst_part() -> None:
    assert worst([]) is Status.PASS
    assert worst(["pass", "no checks observed"]) is Status.NO_CHECKS_OBSERVED
    assert worst(["no checks observed", "not judged", "pass"]) is Status.NOT_JUDGED
    assert worst(["not judged", "assumptions violated"]) is Status.ASSUMPTIONS_VIOLATED
    assert worst(["assumptions violated", "fail", "pass"]) is Status.FAIL


def _judge(*episodes: Episode) -> dict:
    faults = [Fault(fault_id=e.faults[0], type="corrupt", target="b1", begin=e.begin,
                    end=e.end, episode=e.index) for e in episodes]
    return judge(bound=10.0, deactivation=0.5, run_end=100.0, faults=faults,
                 episodes=list(episodes), prefix={}, violations=[])


def test_a_fault_that_never_ended_is_not_judged_and_fails_no_other_episode() -> None:
    ok = Episode(0, 10.0, 11.0, 40.0, ["a"], service_time=2.0, service_status="stabilized",
                 state_time=1.0, state_status="stabilized")
    never = Episode(1, 40.0, None, 100.0, ["b"], service_status="fault never ended",
                    state_status="fault never ended")
    v = _judge(ok, never)
    assert [p["status"] for p in v["parts"]] == ["pass", "pass", "not judged"]
    assert v["status"] == "not judged" and v["pass"] is False
    assert [r["status"] for r in v["faults"]] == ["pass", "not judged"]


def test_no_checks_observed_is_its_own_status_not_a_pass() -> None:
    e = Episode(0, 10.0, 11.0, 40.0, ["a"], service_time=2.0, service_status="stabilized",
                state_status="no checks observed")
    v = _judge(e)
    assert v["status"] == "no checks observed" and v["pass"] is False
    late = Episode(0, 10.0, 11.0, 40.0, ["a"], service_time=20.0,
                   service_status="stabilized", state_status="no checks observed")
    assert _judge(late)["status"] == "fail"  # a failure stays one


def test_weeble_check_exits_with_the_status_code(tmp_path: Path) -> None:
    from tests.trace.test_trace_contract import run, scenario
    from weeble.cli import main

    data = scenario("identity", False, False, seed=3)
    run(data, tmp_path)
    from weeble.check.history import check_run

    assert main(["check", str(tmp_path)]) == exit_code(check_run(tmp_path)["verdict"]["status"])
    assert main(["check", str(tmp_path / "nothing")]) == BAD_INPUT


def test_an_episode_without_publications_is_not_judged_not_failed() -> None:
    quiet = Episode(0, 10.0, 11.0, 40.0, ["a"], service_status="no publications observed",
                    state_time=1.0, state_status="stabilized")
    v = _judge(quiet)
    assert v["parts"][1]["status"] == "not judged" and v["status"] == "not judged"
    assert "no publications observed" in v["parts"][1]["reason"]
