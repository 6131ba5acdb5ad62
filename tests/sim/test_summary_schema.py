"""summary.json is in the contract (docs/trace-schema.md, "summary.json", generated from
weeble.trace.summary): every summary the simulator writes has exactly the documented fields and,
where the table lists them, exactly the documented keys. A field added, renamed or dropped
without the table fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.trace.test_trace_contract import run, scenario
from weeble.sim import run as sim_run
from weeble.trace.summary import SUMMARY, SUMMARY_VERSION

ROOT = Path(__file__).resolve().parents[2]


def _at(summary: dict[str, Any], name: str) -> Any:
    value: Any = summary
    for part in name.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize(("algorithm", "hierarchical"), [("identity", True), ("merging1", False)])
def test_every_summary_has_the_documented_fields(algorithm: str, hierarchical: bool,
                                                 tmp_path: Path) -> None:
    run(scenario(algorithm, hierarchical, False, seed=2), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["v"] == SUMMARY_VERSION == sim_run.SUMMARY_VERSION
    assert set(summary) == {f.name for f in SUMMARY if "." not in f.name}
    for f in SUMMARY:
        value = _at(summary, f.name)
        if not f.keys or value is None:
            continue
        rows = value if isinstance(value, list) else [value]
        assert rows, f"{f.name}: no row to hold to the table"
        for row in rows:
            extra = {"episode", "timing"} if f.name == "verdict.parts" else set()
            assert set(f.keys) <= set(row) <= set(f.keys) | extra, (f.name, sorted(row))


@pytest.mark.parametrize("check_every", [1.0, None])
def test_the_summary_counts_the_snapshot_rounds_as_weeble_check_does(
        check_every: float | None, tmp_path: Path) -> None:
    """R8: a simulated run that writes snapshot rounds judges them in its own summary, so its
    `legitimacy` and state times are `weeble check`'s on the same run directory (with the
    simulator's own checks and without them)."""
    from weeble.chaos.runner import in_simulation
    from weeble.check.history import check_run
    from weeble.model.scenario import load_scenario
    from weeble.sim.run import simulate

    s = load_scenario(ROOT / "scenarios" / "sim-small.yaml")
    assert s.chaos is not None
    fault = s.chaos.faults[0].model_copy(update={"at": 20.0})  # the root forgets its table
    workload = s.workload.model_copy(update={"subscriptions": 40, "publish_rate": 10})
    s = s.model_copy(update={"duration": 40.0, "check_every": check_every, "workload": workload,
                             "chaos": s.chaos.model_copy(update={"faults": [fault]}),
                             "trace": s.trace.model_copy(update={"snapshots_every": 1.5})})
    summary = simulate(s, tmp_path, progress=False, faults=in_simulation(s))
    ours = check_run(tmp_path)
    rounds = 26  # one every 1.5 s in 40 s
    assert summary.legitimacy == ours["legitimacy"]
    assert summary.legitimacy["checks"] == rounds + (40 if check_every else 0)
    assert summary.legitimacy["illegitimate"] > 0  # the fault shows in the rounds too
    assert [e["state_time"] for e in summary.episodes] == [
        e["state_time"] for e in ours["episodes"]]
    assert summary.episodes[0]["state_time"] is not None
    assert summary.verdict["status"] == ours["verdict"]["status"]
