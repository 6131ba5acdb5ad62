"""`weeble shrink`: delta debugging over a failing run's faults, reconfigurations, clients,
brokers and duration while the same rule fails; the minimal scenario it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from weeble.chaos.explore import broken_rules, simulate_data
from weeble.chaos.nemesis import draw
from weeble.chaos.shrink import Shrinker, ShrinkError, ddmin, materialize, sizes
from weeble.cli import main
from weeble.model.scenario import load_scenario, parse_scenario
from weeble.model.workload import Publish, Subscribe, workload_plan

ROOT = Path(__file__).resolve().parents[2]
ABLATION = ROOT / "scenarios" / "explore" / "ablation-flag-rule.yaml"
SEED = 7  # `weeble explore` finds the ablation at this seed (test_explore.py)


def test_ddmin_finds_a_one_minimal_sublist() -> None:
    calls = []

    def needs_3_and_7(xs: list[int]) -> bool:
        calls.append(xs)
        return 3 in xs and 7 in xs

    assert ddmin(list(range(20)), needs_3_and_7) == [3, 7]
    assert ddmin([1, 2], lambda xs: True) == []
    assert len(calls) < 60


def _plan(data: dict) -> list[tuple]:
    s = parse_scenario(data)  # (a subscription that ends after the run lasts to its end)
    return [(round(a.t, 9), a.broker, str(a.filter), round(a.end, 9) if a.end < s.duration
             else None, round(a.first_refresh, 9)) if isinstance(a, Subscribe) else
            (round(a.t, 9), a.broker, a.publisher, a.seq, a.attributes)
            for a in workload_plan(s)]


def test_the_workload_written_out_is_the_same_plan() -> None:
    data = draw(load_scenario(ABLATION), SEED)
    explicit = materialize(data)
    assert explicit is not None and "workload" not in explicit
    assert _plan(explicit) == _plan(data)
    assert sum(isinstance(a, Publish) for a in workload_plan(parse_scenario(explicit))) > 100
    crashing = {**data, "workload": {**data["workload"], "subscribers_crash": 0.5}}
    assert materialize(crashing) is None


def test_shrinking_the_ablation_keeps_its_rule_with_few_faults_and_clients() -> None:
    data = draw(load_scenario(ABLATION), SEED)
    shrinker = Shrinker(data)
    result = shrinker.shrink()
    assert result.rule.startswith("R11")
    assert result.after["faults"] <= 3 and result.after["clients"] <= 5
    assert result.after["publications"] < result.before["publications"]
    assert result.runs == shrinker.runs > 1
    # the minimal scenario fails the same rule when `weeble simulate` runs it
    rules = [r["rule"] for r in broken_rules(simulate_data(result.data, Path(
        shrinker.tmp.name) / "again"))]
    assert result.rule in rules
    assert sizes(result.data) == result.after


def test_the_second_chance_ablation_shrinks_to_the_run_replay_reproduces() -> None:
    """Issue 28 item 5 on one ablation: explore's seed 1 of leasing without the second chance
    shrinks to no fault and one subscriber, the scenario in tests/chaos/data/shrunk that
    test_replay.py runs on live brokers (`weeble shrink --into-tests` wrote it)."""
    ablation = ROOT / "scenarios" / "explore" / "ablation-second-chance.yaml"
    result = Shrinker(draw(load_scenario(ablation), 1)).shrink()
    assert result.rule == "R5 missing delivery"
    assert result.after["faults"] == 0 and result.after["clients"] == 1
    assert result.after["publications"] == 1 < result.before["publications"]
    stored = ROOT / "tests" / "chaos" / "data" / "shrunk" / "ablation-second-chance-seed1.yaml"
    assert result.data == yaml.safe_load(stored.read_text())


def test_a_passing_run_or_another_rule_is_refused() -> None:
    s = load_scenario(ABLATION)
    fixed = s.model_dump(mode="json", exclude_unset=True)
    fixed["routing"]["flag_rule"] = True
    with pytest.raises(ShrinkError, match="does not fail"):
        Shrinker(draw(parse_scenario(fixed), SEED))
    with pytest.raises(ShrinkError, match="does not break 'R7"):
        Shrinker(draw(s, SEED), rule="R7 per-publisher FIFO")


def test_the_command_writes_the_minimal_scenario_and_into_the_tests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "seed"
    run.mkdir()
    (run / "scenario.yaml").write_text(yaml.safe_dump(draw(load_scenario(ABLATION), SEED)))
    tests = tmp_path / "tests-data"
    assert main(["shrink", str(run), "--quiet", "--max-runs", "40", "--into-tests", "flag7",
                 "--tests-dir", str(tests)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "fail" and report["runs"] <= 40
    minimal = run / "minimal.yaml"
    assert load_scenario(minimal).name == "ablation-flag-rule"
    assert "# breaks: R11" in minimal.read_text()
    assert (tests / "flag7.yaml").read_text() == minimal.read_text()
    assert json.loads((tests / "flag7.expect.json").read_text())["status"] == "fail"
    assert main(["shrink", str(tmp_path / "nothing")]) == 2


def test_an_explicit_first_refresh_is_checked_and_kept_by_the_plan() -> None:
    data = yaml.safe_load(ABLATION.read_text())
    data["subscriptions"] = [{"client": "x", "broker": "b3", "filter": "class == 1",
                              "start": 2, "first_refresh": 2.5}]
    (sub,) = [a for a in workload_plan(parse_scenario(data))
              if isinstance(a, Subscribe) and a.client == "x"]
    assert sub.first_refresh == 2.5
    data["subscriptions"][0]["first_refresh"] = 9.0  # later than start + rho
    with pytest.raises(ValueError, match=r"subscriptions\[0\].first_refresh: 9.0 is not in"):
        parse_scenario(data)
