"""R15 in PySpark (issue 10, item 5): per reconfiguration window the lost, duplicated, spurious
and reordered notifications, its duration, its coordination messages and its verdict equal the
reference checker's on simulated runs with reconfigurations — one under causal order with a
fault scheduled inside an exchange, one with the uncoordinated strawman exchange, which loses on
purpose and fails, and the optimizer's, whose tree cost over time and degree distribution come
from its `tree_cost` records; the report has a row per reconfiguration and the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from weeble.chaos.runner import in_simulation
from weeble.check.history import check_run
from weeble.model.scenario import parse_scenario
from weeble.sim.run import simulate

EXCHANGE = Path(__file__).resolve().parents[2] / "scenarios" / "reconfig-exchange.yaml"
SAME = ("rid", "op", "outcome", "why", "coordination", "publications", "lost", "duplicated",
        "spurious", "reordered", "fifo", "causal", "during_faults", "verdict", "reason")
OPTIMIZER = EXCHANGE.parent / "optimizer.yaml"


def _simulate(out: Path, source: Path = EXCHANGE, **changes: Any) -> Path:
    data = yaml.safe_load(source.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            data[key] = {**data.get(key, {}), **value}
        else:
            data[key] = value
    scenario = parse_scenario(data)
    simulate(scenario, out, progress=False,
             faults=in_simulation(scenario) if scenario.chaos is not None else None)
    return out


@pytest.fixture(scope="module")
def causal_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Causal order, and a table fault at b0 while it holds r2's lock."""
    return _simulate(tmp_path_factory.mktemp("causal"), duration=70,
                     reconfigurations={"ordering": "causal"},
                     chaos={"faults": [
                         {"name": "in-r2", "kind": "corrupt", "target": "b0",
                          "field": "entry.filter",
                          "during": {"reconfiguration": 2, "phase": "lock", "broker": "b0"}}]})


@pytest.fixture(scope="module")
def optimizer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Cost-and-Interest heuristic reshaping a 20-broker tree (its decisions carried out
    by link exchanges, some given up), with its `tree_cost` records."""
    return _simulate(tmp_path_factory.mktemp("optimizer"), OPTIMIZER, duration=60)


@pytest.fixture(scope="module")
def strawman_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uncoordinated exchange of 4.4.1: it loses and duplicates inside its windows."""
    data = yaml.safe_load(EXCHANGE.read_text())
    ops = [o for o in data["reconfigurations"]["operations"] if "at" not in o]
    return _simulate(tmp_path_factory.mktemp("strawman"), duration=40,
                     reconfigurations={"strawman": True, "operations": ops})


def _compare(spark: Any, run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from weeble.analytics.pipeline import analyze

    ours = check_run(run)
    theirs = analyze(run, spark=spark)
    spark_ops = theirs["reconfigurations"]["operations"]
    assert [r["rid"] for r in spark_ops] == [r["rid"] for r in ours["operations"]]
    for s, o in zip(spark_ops, ours["operations"], strict=True):
        assert {k: s[k] for k in SAME} == {k: o[k] for k in SAME}, s["rid"]
        for k in ("start", "end", "duration"):
            assert s[k] == pytest.approx(o[k], abs=1e-6)
        assert s["window"] == pytest.approx(o["window"], abs=1e-6)
    assert theirs["verdict"]["status"] == ours["verdict"]["status"]
    assert theirs["verdict"]["reasons"] == ours["verdict"]["reasons"]
    assert theirs["timing"]["violations"] == ours["timing"]["violations"]
    return ours, theirs


def test_spark_reconfiguration_windows_equal_the_checkers_under_causal_order_and_chaos(
        spark: Any, causal_run: Path) -> None:
    ours, theirs = _compare(spark, causal_run)
    ops = {r["rid"]: r for r in ours["operations"]}
    assert len(ops) == 7 and all(r["outcome"] == "done" for r in ops.values())
    assert all(r["causal"] is not None for r in ops.values())  # causal order was judged
    assert ops["r2"]["during_faults"] is True and ops["r7"]["during_faults"] is False
    assert ops["r6"]["coordination"]["lock"] > ops["r7"]["coordination"]["lock"]  # it retried
    assert all(r["publications"] > 0 for r in ops.values())
    assert theirs["verdict"]["status"] == "pass"
    assert (causal_run / "analysis" / "reconfigurations.png").stat().st_size > 0


def test_the_optimizers_windows_cost_and_degrees(spark: Any, optimizer_run: Path) -> None:
    ours, theirs = _compare(spark, optimizer_run)
    ops = theirs["reconfigurations"]["operations"]
    assert len(ops) > 10 and all(r["rid"].startswith("ci:") for r in ops)
    assert {r["verdict"] for r in ops} <= {"pass", "not done"}
    assert theirs["verdict"]["status"] == "pass"
    done = sum(r["outcome"] == "done" for r in ops)
    r = theirs["reconfigurations"]
    assert r["done"] == done and r["per_minute"] == pytest.approx(done / (ours["run"]["end"] / 60))
    # the cost per notification of each window, as the simulator's own optimizer digest has it
    series = json.loads((optimizer_run / "summary.json").read_text())["optimizer"]["series"]
    per = [s["cost"] / s["notifications"] for s in series]
    assert r["tree_cost"]["first"] == pytest.approx(per[0])
    assert r["tree_cost"]["last"] == pytest.approx(per[-1])
    assert r["tree_cost"]["windows"] == len(series) and r["tree_cost"]["heuristic"] == "ci"
    assert r["tree_cost"]["last"] < r["tree_cost"]["first"]  # the optimizer lowered it
    # the degrees of the last recorded tree: a spanning tree of the 20 brokers
    degrees = {int(k): v for k, v in r["degrees"].items()}
    assert sum(degrees.values()) == 20 and sum(k * v for k, v in degrees.items()) == 2 * 19
    assert r["degrees_of"] == "the last recorded tree"
    assert (optimizer_run / "analysis" / "optimizer.png").stat().st_size > 0


def test_a_loss_inside_a_window_fails_its_row_and_the_run_in_both(spark: Any,
                                                                 strawman_run: Path) -> None:
    _, theirs = _compare(spark, strawman_run)
    failed = [r for r in theirs["reconfigurations"]["operations"] if r["verdict"] == "fail"]
    assert failed and all(r["op"].startswith("exchange") for r in failed)
    assert sum(r["lost"] + r["duplicated"] for r in failed) > 0
    assert all(r["coordination"] == {"total": 0} for r in failed)  # no coordination at all
    assert theirs["verdict"]["status"] == "fail"
    assert any(reason.startswith(f"reconfiguration {failed[0]['rid']} (")
               for reason in theirs["verdict"]["reasons"])
    report = (strawman_run / "analysis" / "report.md").read_text()
    assert "## Reconfigurations" in report and "![reconfigurations.png]" in report
    for r in theirs["reconfigurations"]["operations"]:
        row = next(line for line in report.splitlines() if line.startswith(f"| {r['rid']} |"))
        assert r["op"] in row and f"| {r['lost']:,} |" in row
        assert row.rstrip(" |").endswith("FAIL" if r["verdict"] == "fail" else r["verdict"])
