"""Chaos during reconfiguration (issue 10, item 4): a fault scheduled `during` a reconfiguration
strikes inside its window, at the phase it names, with the evidence to show it; the run recovers.
Validated with errors that name the field."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from weeble.chaos.evidence import TRACE_FILE
from weeble.chaos.runner import in_simulation
from weeble.model.experiment import ExperimentError, parse_experiment
from weeble.model.faults import PHASES
from weeble.model.scenario import Scenario, ScenarioError, parse_scenario
from weeble.sim.run import simulate
from weeble.trace.reader import read_trace

REPO = Path(__file__).resolve().parents[2]
EXCHANGE = REPO / "scenarios" / "reconfig-exchange.yaml"
COLOURS = REPO / "scenarios" / "reconfig-colours.yaml"


def _scenario(path: Path, faults: list[dict[str, Any]], **more: Any) -> Scenario:
    data = yaml.safe_load(path.read_text())
    data.update(chaos={"faults": faults}, **more)
    return parse_scenario(data, source=path.name)


def _run(scenario: Scenario, out: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    simulate(scenario, out, progress=False, faults=in_simulation(scenario))
    summary = json.loads((out / "summary.json").read_text())
    by_node: dict[str, list[dict[str, Any]]] = {}
    for f in (out / "trace").glob("*.jsonl"):
        by_node[f.stem] = list(read_trace(f))
    return summary, by_node


def _phase_times(records: list[dict[str, Any]], rid: str, phase: str) -> list[float]:
    return [r["t"] / 1e9 for r in records
            if r["kind"] == "reconfig" and r["rid"] == rid and r["phase"] == phase]


# ---- the schedule, validated ------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "clock", "target": "b1", "during": {"reconfiguration": 1, "phase": "lokced"}},
     r"faults\[0\]\.during\.phase: .*unknown reconfiguration phase 'lokced' \(did you mean "
     r"'locked'\?"),
    ({"kind": "clock", "target": "b1", "at": 3, "during": "r1"},
     r"faults\[0\]\.after: give either `during` .* or `at`/`after`, not both"),
    ({"kind": "clock", "target": "b1", "during": "r1", "every": 2, "times": 3},
     r"faults\[0\]\.times: a fault `during` a reconfiguration strikes once"),
    ({"kind": "clock", "target": "b1", "during": {"reconfiguration": 1, "phase": "started",
                                                    "broker": "b1"}},
     r"faults\[0\]\.during\.broker: the manager's phase 'started' happens at no broker"),
    ({"kind": "clock", "target": "b1", "during": {"reconfiguration": 0}},
     r"faults\[0\]\.during\.reconfiguration: 0: they are numbered from 1"),
    ({"kind": "clock", "target": "b1", "during": {"reconfiguration": 1, "when": "soon"}},
     r"faults\[0\]\.during: unknown field 'when'"),
])
def test_a_bad_during_is_refused_naming_the_field(fault: dict[str, Any], message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        parse_experiment({"faults": [fault]})


def test_during_is_checked_against_the_runs_reconfigurations_and_brokers() -> None:
    with pytest.raises(ScenarioError, match=r"chaos\.faults\[0\]\.during\.reconfiguration: 'r9':"
                                            r" the run has 7 \(r1 \.\.\. r7"):
        _scenario(EXCHANGE, [{"kind": "clock", "target": "b1", "during": 9}])
    with pytest.raises(ScenarioError, match=r"chaos\.faults\[0\]\.during\.broker: unknown broker"
                                            r" 'b99'"):
        _scenario(EXCHANGE, [{"kind": "clock", "target": "b1",
                              "during": {"reconfiguration": 1, "phase": "lock",
                                         "broker": "b99"}}])
    with pytest.raises(ScenarioError, match=r"chaos\.faults\[1\]\.after: faults\[0\] strikes"
                                            r" `during` a reconfiguration"):
        _scenario(EXCHANGE, [{"kind": "clock", "target": "b1", "during": 1},
                             {"kind": "clock", "target": "b2", "after": 1}])
    with pytest.raises(ScenarioError, match=r"during\.reconfiguration: .r1.: the run has no"
                                            r" reconfigurations"):
        data = yaml.safe_load(EXCHANGE.read_text())
        del data["reconfigurations"]
        data["chaos"] = {"faults": [{"kind": "clock", "target": "b1", "during": 1}]}
        parse_scenario(data)
    with pytest.raises(ScenarioError, match=r"during: a client_crash with `target` prepares"):
        _scenario(EXCHANGE, [{"kind": "client_crash", "target": "b4", "during": 1}])
    with pytest.raises(ScenarioError, match=r"during\.phase: 'locked': this run reconfigures"
                                            r" through the 3-colour scheme, which records"
                                            r" submitted, disseminated, activated"):
        _scenario(COLOURS, [{"kind": "clock", "target": "b1",
                             "during": {"reconfiguration": 1, "phase": "locked"}}])
    with pytest.raises(ScenarioError, match=r"during\.phase: 'activated': this run"
                                            r" reconfigures through the coordinated link"):
        _scenario(EXCHANGE, [{"kind": "clock", "target": "b1",
                              "during": {"reconfiguration": 1, "phase": "activated"}}])
    # a broker the run adds (b13 joins in r3) may be named
    _scenario(EXCHANGE, [{"kind": "clock", "target": "b1",
                          "during": {"reconfiguration": 4, "phase": "lock", "broker": "b13"}}])


def test_every_phase_a_reconfiguration_records_can_be_named(tmp_path: Path) -> None:
    """The vocabulary of `during.phase` covers what the simulator's runs record."""
    seen = set()
    for path in (EXCHANGE, COLOURS):
        data = yaml.safe_load(path.read_text())
        data.pop("chaos", None)
        out = tmp_path / path.stem
        simulate(parse_scenario(data), out, progress=False)
        for f in (out / "trace").glob("*.jsonl"):
            seen |= {r["phase"] for r in read_trace(f)
                     if r["kind"] in ("reconfig", "reconfiguration")}
    assert {"started", "finished", "lock", "locked", "begin", "gray", "end", "unlocked",
            "done", "submitted", "disseminated", "activated"} <= seen
    assert seen <= set(PHASES), seen - set(PHASES)


# ---- in the simulator -------------------------------------------------------------------------


def test_a_fault_during_an_exchange_strikes_while_its_broker_is_locked(tmp_path: Path) -> None:
    """Corrupt b0's table while b0 holds r2's lock (the exchange b0-b3 for b3-b6, cycle
    b3 b0 b1 b6): it strikes after b0 locked and before b0 unlocked; the exchange finishes, the
    run recovers (routing stabilizes within Δ) and passes. A phase that never comes (r3 adds a
    leaf: nothing locks) is reported as skipped, with the reason."""
    scenario = _scenario(EXCHANGE, [
        {"name": "in-r2", "kind": "corrupt", "target": "b0", "field": "entry.filter",
         "during": {"reconfiguration": 2, "phase": "lock", "broker": "b0", "delay": 0.001}},
        {"name": "never", "kind": "clock", "target": "b4",
         "during": {"reconfiguration": "r3", "phase": "locked"}},
    ])
    summary, trace = _run(scenario, tmp_path)
    faults = {f["id"]: f for f in summary["faults"]}
    struck = faults["in-r2"]
    assert struck["took_effect"] is True and struck["during"] == "r2 lock at b0 + 0.001 s"
    locked, = _phase_times(trace["b0"], "r2", "lock")
    unlocked, = _phase_times(trace["b0"], "r2", "unlocked")
    assert locked + 0.001 == pytest.approx(struck["began"], abs=1e-9)
    assert locked < struck["began"] < unlocked
    begin, = [r for r in trace[Path(TRACE_FILE).stem] if r["kind"] == "fault_begin"]
    assert (begin["fault_id"], begin["rid"], begin["phase"]) == ("in-r2", "r2", "lock")
    assert begin["evidence"]["b0"]["changed"]["tables"]["removed"] == 1  # the entry it changed
    never = faults["never"]
    assert never["took_effect"] is None and never["began"] is None
    assert never["skipped"] == "reconfiguration r3 did not reach phase locked (by the end)"

    r2 = next(r for r in summary["reconfigurations"] if r["rid"] == "r2")
    assert r2["outcome"] == "done" and r2["during_faults"] is True
    assert r2["start"] < struck["began"] < r2["end"]
    assert all(r["outcome"] == "done" for r in summary["reconfigurations"])
    episode, = summary["episodes"]
    assert episode["service_time"] is not None and episode["service_time"] <= summary["bound"]
    assert summary["verdict"]["status"] == "pass", summary["verdict"]["reasons"]
    last = max(r["end"] for r in summary["reconfigurations"])
    assert summary["overlay"]["last_illegitimate"] <= last  # locked only while exchanging


def test_a_link_fault_after_an_exchange_is_resolved_against_the_tree_it_made(
        tmp_path: Path) -> None:
    """Selectors are resolved against the overlay as it is when the fault strikes (issue 28):
    r1 exchanges b1-b5 for b5-b7, so leaf b5's one link is b1-b5 before r1 and b5-b7 after it.
    A delay on b5's links before r1 hits b1-b5; the same selector once r1 is finished hits the
    new link b5-b7 (resolved against the configured tree, it named b1-b5, which no longer
    carries anything); a cut of the removed link named outright says there is no such link."""
    scenario = _scenario(EXCHANGE, [
        {"name": "before", "kind": "delay", "link": {"of": "b5"}, "delay_ms": 5, "at": 5,
         "duration": 1},
        {"name": "after", "kind": "delay", "link": {"of": "b5"}, "delay_ms": 5, "duration": 1,
         "during": {"reconfiguration": 1, "phase": "finished"}},
        {"name": "drawn", "kind": "delay", "link": {"random": 2, "of": ["b5", "b7"]},
         "delay_ms": 5, "duration": 1,
         "during": {"reconfiguration": 1, "phase": "finished", "delay": 0.5}},
        {"name": "gone", "kind": "cut", "link": ["b1", "b5"], "duration": 1,
         "during": {"reconfiguration": 1, "phase": "finished", "delay": 1.5}},
    ])
    summary, _trace = _run(scenario, tmp_path)
    faults = {f["id"]: f for f in summary["faults"]}
    assert (faults["before"]["targets"], faults["before"]["took_effect"]) == (["b1-b5"], True)
    assert (faults["after"]["targets"], faults["after"]["took_effect"]) == (["b5-b7"], True)
    # b5 and b7 have two links after r1 (b5-b7, b2-b7), where they had b1-b5 and b2-b7
    assert sorted(faults["drawn"]["targets"]) == ["b2-b7", "b5-b7"], faults["drawn"]
    assert faults["drawn"]["took_effect"] is True
    gone = faults["gone"]
    assert gone["took_effect"] is False
    assert "b1 and b5 are not neighbours" in gone["error"], gone
    r1 = summary["reconfigurations"][0]
    assert r1["outcome"] == "done" and r1["end"] <= faults["after"]["began"]


def test_a_colour_fault_during_a_recolor_reconfiguration_recovers_within_its_bound(
        tmp_path: Path) -> None:
    """The 3-colour scheme: 50 ms after R disseminated r5 (b8 moves under b13 in the tree
    being prepared), b8's parent in the current tree is corrupted. The evidence shows the
    reconfiguration in flight (c_new's parent b13, c_cur's b2 -> b0); r5 still becomes active,
    the overlay is legitimate again within ∆r, and the run passes; what r5's window lost is
    the fault's doing (during faults)."""
    data = yaml.safe_load(COLOURS.read_text())
    scenario = _scenario(COLOURS, [
        {"name": "ptr", "kind": "corrupt", "target": "b8", "field": "colour.parent",
         "value": "b0", "args": {"colour": 0},
         "during": {"reconfiguration": 5, "phase": "disseminated", "delay": 0.05}}],
        duration=data["duration"])
    summary, trace = _run(scenario, tmp_path)
    fault, = summary["faults"]
    disseminated, = _phase_times(trace["b0"], "r5", "disseminated")
    assert fault["began"] == pytest.approx(disseminated + 0.05, abs=1e-9)
    r5 = summary["reconfigurations"][4]
    assert r5["rid"] == "r5" and r5["outcome"] == "done" and r5["during_faults"] is True
    assert r5["start"] < fault["began"] < r5["end"]
    begin, = [r for r in trace["chaos"] if r["kind"] == "fault_begin"]
    colours = begin["evidence"]["b8"]["changed"]["colours"]
    before, after = colours["before"], colours["after"]
    assert before["c_cur"] == 0 and before["trees"][0]["parent"] == "b2"
    assert after["trees"][0]["parent"] == "b0"
    assert before["trees"][before["c_new"]]["parent"] == "b13"  # r5's move, being prepared
    after_fault, = summary["overlay"]["after_faults"]
    # the fault strikes inside r5's state span, whose checks judge no episode (0026e75): what
    # r5 reshapes after the fault may leave no illegitimate check outside the span ("stable")
    assert after_fault["status"] in ("stable", "stabilized"), after_fault
    assert after_fault["within_bound"] is True
    assert summary["verdict"]["status"] == "pass", summary["verdict"]["reasons"]


# ---- live: the phases come from the trace -----------------------------------------------------


def test_the_live_phase_watch_wakes_a_fault_when_the_phase_is_flushed(tmp_path: Path) -> None:
    """The live target learns of phases from the trace files the nodes flush (the contract):
    a waiter for (r2, locked, b3) wakes with the record's time, not for another broker's or
    another rid's, nor for one older than its experiment; a torn last line is read once whole."""
    from weeble.chaos.live import PhaseWatch
    from weeble.trace.writer import LiveSink

    async def main() -> tuple[int, int, list[tuple[int, str, str, str]]]:
        b3 = LiveSink(tmp_path / "b3.jsonl", "b3")
        b1 = LiveSink(tmp_path / "b1.jsonl", "b1")
        (tmp_path / "chaos.jsonl").write_text('{"kind": "reconfig"}\n')  # skipped, not parsed
        b3.record_at(1_000, "reconfig", {"rid": "r2", "phase": "locked"})  # before: too old
        b3.flush()
        watch = PhaseWatch(tmp_path, skip="chaos.jsonl")
        waiter = asyncio.ensure_future(watch.wait("r2", "locked", "b3", since=2_000))
        other = asyncio.ensure_future(watch.wait("r2", "lock", None, since=2_000))
        await asyncio.sleep(0.05)
        assert not waiter.done() and not other.done()
        b1.record_at(3_000, "reconfig", {"rid": "r2", "phase": "locked"})  # another broker
        b3.record_at(3_500, "reconfig", {"rid": "r1", "phase": "locked"})  # another rid
        b1.record_at(3_700, "reconfig", {"rid": "r2", "phase": "lock"})
        b1.flush()
        b3.flush()
        assert await asyncio.wait_for(other, 2) == 3_700
        assert not waiter.done()
        with (tmp_path / "b3.jsonl").open("a") as f:  # a record flushed in two writes
            f.write('{"v":2,"t":4000,"node":"b3","kind":"reconf')
            f.flush()
            await asyncio.sleep(0.05)
            f.write('ig","rid":"r2","phase":"locked"}\n')
        t = await asyncio.wait_for(waiter, 2)
        watch.close()
        b1.close()
        b3.close()
        return t, len(watch.seen), watch.seen

    t, n, seen = asyncio.run(main())
    assert t == 4_000
    assert n == 5 and ("chaos" not in {node for *_, node in seen})


def test_a_fault_during_an_optimizer_decision_strikes_at_its_phase(tmp_path: Path) -> None:
    """The optimizer's exchanges are named by their decision (ci:<broker>:<n>), made up while
    the run goes: `during` names one, and the fault strikes when b18 takes its lock."""
    optimizer = REPO / "scenarios" / "optimizer.yaml"
    scenario = _scenario(optimizer, [
        {"name": "ci", "kind": "corrupt", "target": "b18", "field": "entry.flag",
         "during": {"reconfiguration": "ci:b17:1", "phase": "lock", "broker": "b18"}}],
        duration=30)
    summary, trace = _run(scenario, tmp_path)
    fault, = summary["faults"]
    lock, = _phase_times(trace["b18"], "ci:b17:1", "lock")
    assert fault["began"] == pytest.approx(lock, abs=1e-9) and fault["took_effect"] is True
    r = next(r for r in summary["reconfigurations"] if r["rid"] == "ci:b17:1")
    assert r["start"] <= fault["began"] < r["end"] and r["during_faults"] is True


def test_the_live_verdict_table_has_a_row_per_reconfiguration(tmp_path: Path) -> None:
    """`weeble run` prints, under its per-fault table, one row per reconfiguration: the R15
    rows of the analysis (here the checker's, the same figures), failing ones named with why."""
    import io

    from weeble.chaos.verdict import print_verdict
    from weeble.check.history import check_run

    data = yaml.safe_load(EXCHANGE.read_text())
    data["reconfigurations"]["strawman"] = True
    data["duration"] = 40
    data["reconfigurations"]["operations"] = [
        o for o in data["reconfigurations"]["operations"] if "at" not in o]
    simulate(parse_scenario(data), tmp_path, progress=False)
    report = check_run(tmp_path)
    out = io.StringIO()
    print_verdict([], report["verdict"]["pass"], report["verdict"]["reasons"], file=out,
                  reconfigurations=report["operations"])
    text = out.getvalue()
    assert "verdict per reconfiguration" in text
    for r in report["operations"]:
        row = next(line for line in text.splitlines() if f" {r['rid']} " in line
                   and r["op"] in line)
        assert ("FAIL" if r["verdict"] == "fail" else r["verdict"]) in row
    failed = [r for r in report["operations"] if r["verdict"] == "fail"]
    assert failed and f"{failed[0]['rid']}: fail: {failed[0]['reason']}" in text
    assert text.rstrip().endswith("run verdict: FAIL")
