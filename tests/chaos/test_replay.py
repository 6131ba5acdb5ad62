"""`weeble replay`: a shrunk scenario on live brokers (local backend), per try whether the same
rule failed, with the timing model's figures of the try."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weeble.chaos.replay import expected_rule, timing_figures
from weeble.cli import main

DATA = Path(__file__).resolve().parent / "data" / "shrunk"
# leasing without the second chance: every overrun deletes the valid entries, without any
# fault, a failure of the protocol's structure, not of its timing: it reproduces live (5 of 5
# tries, docs/guide/explore.md). test_shrink.py shrinks the same ablation to this scenario.
ABLATION = DATA / "ablation-second-chance-seed1.yaml"


def test_the_rule_comes_from_the_comment_shrink_writes() -> None:
    text = ABLATION.read_text()
    rule = expected_rule(text)
    assert rule is not None and rule.startswith("R")
    assert json.loads(ABLATION.with_suffix(".expect.json").read_text())["rule"] == rule
    assert expected_rule("name: x\n") is None


def test_timing_figures_are_the_checkers_scalars_and_worst_values() -> None:
    report = {"timing": {"tolerance": 0.01, "violations": 2, "measured": {"hop": 3},
                         "worst": {"hop": 0.004, "refresh": 6.1},
                         "retimed": {"bound": 14.0, "why": "hop"}}}
    assert timing_figures(report) == {"tolerance": 0.01, "violations": 2, "worst_hop": 0.004,
                                      "worst_refresh": 6.1,
                                      "retimed": {"bound": 14.0, "why": "hop"}}


def test_replay_reproduces_the_shrunk_ablation_on_live_brokers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Live timing is not the model's: on a loaded machine a try can leave the timing model
    (a timer late by more than the tolerance), and the checker then excuses what it would
    have failed ('assumptions violated'). So: up to 3 tries, until one reproduces; every try
    that does not is one the timing model explains, never a pass."""
    reproduced = False
    for _ in range(3):
        main(["replay", str(ABLATION), "--backend", "local", "--tries", "1",
              "--runs-dir", str(tmp_path), "--json"])
        report = json.loads(capsys.readouterr().out)
        (only,) = report["per_try"]
        assert only["error"] is None, only
        assert "worst_hop" in only["timing"] and "violations" in only["timing"]
        assert Path(only["run_dir"], "trace").is_dir()
        if only["reproduced"]:
            reproduced = True
            break
        assert only["status"] == "assumptions violated" and only["timing"]["violations"], only
    assert reproduced


def test_a_scenario_without_its_rule_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(line for line in ABLATION.read_text().splitlines()
                               if not line.startswith("#")))
    assert main(["replay", str(plain), "--tries", "1", "--runs-dir", str(tmp_path)]) == 2


def test_a_live_subscriber_takes_its_refresh_phase_within_rho() -> None:
    from weeble.runtime.client import Subscriber

    assert Subscriber("127.0.0.1:1", "x", rho=2.0, first_refresh=0.5).first_refresh == 0.5
    assert Subscriber("127.0.0.1:1", "x", rho=2.0).first_refresh == 2.0
    with pytest.raises(ValueError, match="first_refresh: must be in"):
        Subscriber("127.0.0.1:1", "x", rho=2.0, first_refresh=3.0)
