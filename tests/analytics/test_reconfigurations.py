"""R15 in PySpark (issue 10, item 5): per reconfiguration window the lost, duplicated, spurious
and reordered notifications, its duration, its coordination messages and its verdict equal the
reference checker's on simulated runs with reconfigurations — one under causal order with a
fault scheduled inside an exchange, one with the uncoordinated strawman exchange, which loses on
purpose and fails; the report has a row per reconfiguration and the plots; the optimizer's tree
cost and degree distribution come from its `tree_cost` records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from weeble.broker.sim.run import simulate
from weeble.chaos.runner import in_simulation
from weeble.check.history import check_run
from weeble.model.scenario import parse_scenario
from weeble.trace.schema import TRACE_DIR

EXCHANGE = Path(__file__).resolve().parents[2] / "scenarios" / "reconfig-exchange.yaml"
SAME = ("rid", "op", "outcome", "why", "coordination", "publications", "lost", "duplicated",
        "spurious", "reordered", "fifo", "causal", "during_faults", "verdict", "reason")
COSTS = [(30.0, 129.0, [["b0", "b1"], ["b0", "b2"], ["b0", "b3"]]), (45.0, 119.0, None),
         (60.5, 113.0, [["b0", "b1"], ["b1", "b2"], ["b1", "b3"], ["b3", "b4"]])]


def _simulate(out: Path, **changes: Any) -> Path:
    data = yaml.safe_load(EXCHANGE.read_text())
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
    """Causal order, a table fault at b0 while it holds r2's lock, and an optimizer's
    `tree_cost` records (written as a controller would, in a trace file of its own)."""
    out = _simulate(tmp_path_factory.mktemp("causal"), duration=70,
                    reconfigurations={"ordering": "causal"},
                    chaos={"faults": [
                        {"name": "in-r2", "kind": "corrupt", "target": "b0",
                         "field": "entry.filter",
                         "during": {"reconfiguration": 2, "phase": "lock", "broker": "b0"}}]})
    t0 = json.loads((out / TRACE_DIR / "run.jsonl").read_text().splitlines()[0])["t"]
    with (out / TRACE_DIR / "optimizer.jsonl").open("w") as f:
        for t, cost, edges in COSTS:
            f.write(json.dumps({"v": 2, "t": t0 + int(t * 1e9), "node": "optimizer",
                                "kind": "tree_cost", "cost": cost, "controller": "ci",
                                **({"edges": edges} if edges else {})}) + "\n")
    return out


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
    # the optimizer's records: cost over time, the rate, the last recorded tree's degrees
    r = theirs["reconfigurations"]
    assert r["tree_cost"] == {"first": 129.0, "last": 113.0, "min": 113.0, "records": 3}
    assert r["degrees"] == {"1": 3, "2": 1, "3": 1}  # COSTS[-1]'s tree
    assert r["per_minute"] == pytest.approx(7 / (theirs["run"]["end"] / 60))
    analysis = causal_run / "analysis"
    assert (analysis / "optimizer.png").stat().st_size > 0
    assert (analysis / "reconfigurations.png").stat().st_size > 0


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
