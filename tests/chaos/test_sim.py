"""The same experiments in the simulator: every kind maps onto the engine, records its faults in
the trace schema, and a live run's scenario.json replays as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from weeble.chaos.evidence import TRACE_FILE
from weeble.chaos.runner import in_simulation
from weeble.model.scenario import parse_scenario
from weeble.sim.run import simulate

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())

EVERY_KIND = [
    {"name": "flag", "kind": "corrupt", "field": "entry.flag", "target": "root", "at": 5},
    {"name": "any", "kind": "corrupt", "field": "random", "target": "root", "at": 6},
    {"name": "clock", "kind": "clock", "target": "b1", "at": 7},
    {"name": "inject", "kind": "inject", "link": ["b3", "b1"], "at": 8,
     "message": {"type": "sub", "sub_id": "ghost/0", "filter": "class == 77"}},
    {"name": "drop", "kind": "drop", "link": ["b0", "b1"], "probability": 0.5, "at": 9,
     "duration": 1},
    {"name": "dup", "kind": "duplicate", "link": ["b0", "b2"], "at": 9, "duration": 1},
    {"name": "garble", "kind": "garble", "link": ["b1", "b4"], "at": 9, "duration": 1},
    {"name": "delay", "kind": "delay", "link": ["b2", "b5"], "delay_ms": 300, "at": 9,
     "duration": 1},
    {"name": "cut", "kind": "cut", "link": ["b2", "b6"], "at": 12, "duration": 1},
    {"name": "part", "kind": "partition", "target": {"subtree": "b1"}, "at": 12, "duration": 1},
    {"name": "flap", "kind": "flap", "link": ["b0", "b2"], "at": 14, "duration": 2, "down": 0.3,
     "up": 0.3},
    {"name": "crash", "kind": "crash", "target": "b5", "at": 17, "duration": 1},
    {"name": "pause", "kind": "pause", "target": "b4", "at": 17, "duration": 1},
    {"name": "cc", "kind": "client_crash", "target": "b6", "at": 18},
    {"name": "cw", "kind": "client_crash", "clients": {"random": 1}, "at": 19},
    {"name": "open", "kind": "cut", "link": ["b1", "b3"], "at": 20},
    {"name": "heal", "kind": "heal", "link": ["b3", "b1"], "at": 21},
    {"name": "down", "kind": "crash", "target": "b6", "at": 22},
    {"name": "up", "kind": "restart", "target": "b6", "at": 23},
]


def records(out: Path) -> dict[str, list[dict[str, Any]]]:
    by_id: dict[str, list[dict[str, Any]]] = {}
    for line in (out / "trace" / TRACE_FILE).read_text().splitlines():
        rec = json.loads(line)
        by_id.setdefault(rec["fault_id"], []).append(rec)
    return by_id


def test_every_kind_takes_effect_in_simulation(tmp_path: Path) -> None:
    scenario = parse_scenario({**QUICKSTART, "duration": 60,
                               "chaos": {"faults": EVERY_KIND}})
    summary = simulate(scenario, tmp_path, progress=False, faults=in_simulation(scenario))
    log = {f["id"]: f for f in summary.faults if "took_effect" in f}
    assert set(log) == {f["name"] for f in EVERY_KIND}
    assert all(f["took_effect"] for f in log.values()), [f for f in log.values()
                                                         if not f["took_effect"]]
    recs = records(tmp_path)
    for fault_id, rs in recs.items():  # one begin and one end each, in the trace schema
        assert [r["kind"] for r in rs] == ["fault_begin", "fault_end"], fault_id
        assert all(r["v"] == 2 and r["node"] == "chaos" for r in rs)
    assert recs["open"][1]["ended_by"] == "heal" and recs["down"][1]["ended_by"] == "up"
    assert recs["open"][1]["t"] == 21e9 and recs["down"][1]["t"] == 23e9
    added = recs["inject"][0]["evidence"]["b3->b1"]["changed"]["tables"]["added_sample"]
    assert added[0]["sub_id"] == "ghost/0"
    assert recs["garble"][0]["evidence"]["b1->b4"]["sim"].startswith("garbled = lost")
    assert len(log["cw"]["targets"]) == 1  # one subscriber of the workload
    assert recs["cw"][0]["client"] == log["cw"]["targets"][0]
    # the last fault ends at 23 s; the run then stabilizes within the bound
    assert summary.episodes[-1]["end"] == 23  # faults closer than Δ: one episode
    assert summary.stabilization is not None
    assert summary.stabilization["state"] <= summary.bound
    assert summary.stabilization["service"] <= summary.bound


def test_a_live_runs_scenario_json_replays_its_chaos(tmp_path: Path) -> None:
    """runs/<id>/scenario.json is the validated scenario as JSON: `weeble simulate` reads it."""
    live = parse_scenario(QUICKSTART)
    dumped = tmp_path / "scenario.json"
    dumped.write_text(json.dumps(live.model_dump(mode="json")))
    replay = parse_scenario(yaml.safe_load(dumped.read_text()))
    assert replay.chaos == live.chaos and replay.seed == live.seed
    first = simulate(replay, tmp_path / "a", progress=False, faults=in_simulation(replay))
    again = simulate(replay, tmp_path / "b", progress=False, faults=in_simulation(replay))
    assert first.faults == again.faults  # deterministic from the seed
    assert [f["id"] for f in first.faults] == ["table", "clock", "cut", "crash", "dup"]
    assert all(f["took_effect"] for f in first.faults)
    assert first.verdict["pass"], first.verdict["reasons"]


def test_a_restart_that_fails_ends_its_crash_alone(tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 23 item 5: a restart that cannot start the broker (live: its address was still
    held) ends the crash it meant to end with `fault_end` ok false and the reason, so the
    crash's episode is judged from there on its own; the later fault is its own episode and
    keeps its own verdict (before, the crash never ended, every later fault joined its episode
    and all were failed as "fault never ended")."""
    from weeble.check.history import check_run
    from weeble.sim.target import SimTarget, SimTargetError

    async def cannot_bind(self: SimTarget, broker: str) -> dict[str, Any]:
        raise SimTargetError("listen address 127.0.0.5:7000: Address already in use")

    monkeypatch.setattr(SimTarget, "restart", cannot_bind)
    data = {**QUICKSTART, "duration": 90, "chaos": {"faults": [
        {"name": "down", "kind": "crash", "target": "b5", "at": 10},
        {"name": "up", "kind": "restart", "target": "b5", "at": 12},
        {"name": "clear", "kind": "corrupt", "field": "table.clear", "target": "b1", "at": 60},
    ]}}
    s = parse_scenario(data)
    simulate(s, tmp_path, progress=False, faults=in_simulation(s))
    ends = [r for r in map(json.loads, (tmp_path / "trace" / TRACE_FILE).read_text()
                           .splitlines()) if r["kind"] == "fault_end"]
    (crash_end,) = [r for r in ends if r["fault_id"] == "down"]
    assert crash_end["ok"] is False and crash_end["ended_by"] == "up"
    assert "Address already in use" in crash_end["error"]
    report = check_run(tmp_path)
    episodes = [e["faults"] for e in report["episodes"]]
    assert episodes == [["down", "up"], ["clear"]]
    rows = {r["fault_id"]: r for r in report["verdict"]["faults"]}
    assert rows["clear"]["episode"] == 1 and rows["clear"]["end"] is not None
    assert rows["down"]["end"] is not None and rows["down"]["status"] != "not judged"


def test_a_repeated_experiment_names_its_faults_readably(tmp_path: Path) -> None:
    """Issue 23 item 5: an experiment run again on the same run (its ids already in the chaos
    trace) prefixes its fault ids with `NAME#n.`: restart-b3#2.up, then #3, never the
    unreadable restart-b32.up, and never an id an earlier run of it holds."""
    from weeble.chaos.evidence import ChaosTrace
    from weeble.chaos.runner import repeat_prefix

    trace = ChaosTrace(tmp_path / TRACE_FILE)
    ids = ["down", "up"]
    made: list[str] = []
    for n, expect in enumerate(["", "restart-b3#2.", "restart-b3#3."]):
        prefix = repeat_prefix("restart-b3", ids, trace.known_ids())
        assert prefix == expect
        for i in ids:
            trace.write("fault_begin", 10**9 * (n + 1), {"fault_id": prefix + i,
                                                         "type": "crash", "target": "b3"})
            made.append(prefix + i)
    trace.close()
    assert made[-1] == "restart-b3#3.up" and len(set(made)) == len(made)
    # another experiment shares none of these ids: its own stay bare
    assert repeat_prefix("every-kind", ["slow", "cut"], set(made)) == ""
