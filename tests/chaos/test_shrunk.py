"""Every scenario `weeble shrink --into-tests` wrote (tests/chaos/data/shrunk/NAME.yaml) runs in
the simulator with its fixed verdict (NAME.expect.json: the status, and the rule it breaks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from weeble.chaos.explore import broken_rules, simulate_data

DATA = Path(__file__).resolve().parent / "data" / "shrunk"
SCENARIOS = sorted(DATA.glob("*.yaml"))


def test_there_are_shrunk_scenarios() -> None:
    assert SCENARIOS, f"no shrunk scenario in {DATA}"
    for path in SCENARIOS:
        assert path.with_suffix(".expect.json").is_file(), path


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_a_shrunk_scenario_keeps_its_verdict(path: Path, tmp_path: Path) -> None:
    expect = json.loads(path.with_suffix(".expect.json").read_text())
    summary = simulate_data(yaml.safe_load(path.read_text()), tmp_path)
    assert summary["verdict"]["status"] == expect["status"], summary["verdict"]["reasons"]
    rules = [r["rule"] for r in broken_rules(summary)]
    assert (expect.get("rule") in rules) if expect["status"] == "fail" else rules == []
