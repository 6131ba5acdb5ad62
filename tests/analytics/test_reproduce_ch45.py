"""`weeble reproduce ch4` and `ch5` on small grids (the real ones take minutes): the runs are the
thesis's setups shrunk, the claims are read from them, the figures and the report are written,
and a rerun resumes. What the small runs must show is what holds at any size: the coordinated
exchange loses and duplicates nothing, sends exactly 6n coordination messages, and the strawman
loses; the heuristics lower the static tree's cost and lose nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weeble.analytics.reproduce.ch4 import Chapter4
from weeble.analytics.reproduce.ch4 import Setup as Setup4
from weeble.analytics.reproduce.ch5 import Chapter5
from weeble.analytics.reproduce.ch5 import Setup as Setup5
from weeble.analytics.reproduce.framework import run
from weeble.cli import main


def test_ch4_small_grid_reads_every_claim_from_the_runs(tmp_path: Path) -> None:
    experiment = Chapter4(setup=Setup4(brokers=30, publishers=10, subscribers=3),
                          seeds=(1, 1), exchanges=(8, 8))
    result = run(experiment, out=tmp_path)
    values = {o.claim.id: o.values["simulation"] for o in result.outcomes}
    assert all(v is not None for v in values.values()), values
    assert values["TC-5"] == 0 and values["TC-6"] == 0  # the coordinated exchange, both modes
    assert values["TC-18"] == 1.0  # exactly 6n coordination messages, every exchange
    assert values["TC-20a"] > 1  # the strawman loses
    met = {o.claim.id: o.met for o in result.outcomes}
    assert met["TC-5"] and met["TC-6"] and met["TC-18"] and met["TC-20a"]
    report = result.report.read_text()
    assert "## Per cycle length" in report and report.count("| met |") + report.count(
        "**NOT met**") == len(result.outcomes)
    assert [p.name for p, _ in result.figures] == [
        "fig4_14_control_messages.png", "fig4_15_strawman_loss.png", "fig4_16_qnot_wait.png"]
    assert all(p.stat().st_size > 10_000 for p, _ in result.figures)
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert {c["id"] for c in claims} == set(values)
    again = run(experiment, out=tmp_path)
    assert (again.evaluated, again.reused) == (0, 3)
    assert [o.values for o in again.outcomes] == [o.values for o in result.outcomes]


def test_ch5_small_grid_lowers_the_static_cost_and_loses_nothing(tmp_path: Path) -> None:
    experiment = Chapter5(setup=Setup5(brokers=20, jobs=10, start=5.0, window=10.0),
                          topologies=(1, 1), durations=(40.0, 40.0))
    result = run(experiment, out=tmp_path)
    values = {o.claim.id: o.values["simulation"] for o in result.outcomes}
    assert all(v is not None for v in values.values()), values
    assert values["exp3.static"] < 1.0  # every heuristic is cheaper than the random tree
    assert values["exp3.ci"] < 0.8 and values["exp4.ci"] < 0.8
    assert values["lost"] == 0 and values["duplicated"] == 0
    assert values["rate.mst"] == 0  # ℓMST settles
    report = result.report.read_text()
    assert "## Per load and heuristic" in report and "Order per topology" in report
    assert "The grid: 1 topology instead of 50 (the short grid;" in report
    assert [p.name for p, _ in result.figures] == ["ch5_cost_over_time.png",
                                                   "ch5_final_cost.png"]
    assert (tmp_path / "points" / "load=0_topology=0_duration=40.json").exists()


def test_ch4_and_ch5_have_no_model_column_and_say_so(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    for name in ("ch4", "ch5"):
        assert main(["reproduce", name, "--model-only", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"{name} has a simulation column only" in err and "--model-only" in err
