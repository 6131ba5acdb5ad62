"""Corruptions pinned by what their entry is (`entry: {sub_id, filter, dest}`), not by its
position in the table: the pin is resolved when the fault strikes, a missing entry says so, and
`weeble shrink` writes the corruptions of its minimal scenario pinned (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weeble.chaos.evidence import TRACE_FILE
from weeble.chaos.explore import simulate_data
from weeble.chaos.shrink import Shrinker, pin_corruptions
from weeble.model.experiment import ExperimentError, parse_experiment
from weeble.model.scenario import parse_scenario

# b1 holds two entries at 3 s: a/0 (towards b2) arrived first, z/0 (towards b0) second, so
# the entry at position 0 is a/0's and a pin of z/0 must not hit it
BASE: dict[str, Any] = {
    "name": "pin", "seed": 1, "duration": 12,
    "topology": {"kind": "edges", "edges": [["b0", "b1"], ["b1", "b2"]]},
    "routing": {"algorithm": "identity"},
    "timing": {"pi": 3.5, "rho": 3, "delta_min": 0.01, "delta_max": 0.05},
    "subscriptions": [{"client": "a", "broker": "b2", "filter": "class == 1", "start": 0},
                      {"client": "z", "broker": "b0", "filter": "class == 2", "start": 1}],
    "publications": [{"at": 6, "broker": "b1", "attributes": {"class": 2}}],
}


def _struck(tmp: Path, fault: dict[str, Any]) -> dict[str, Any]:
    """The fault_begin record of one corruption at b1 at 3 s, run in the simulator."""
    data = {**BASE, "chaos": {"faults": [{"kind": "corrupt", "target": "b1", "at": 3,
                                          **fault}]}}
    simulate_data(data, tmp, trace=True)
    (begin,) = [r for r in map(json.loads, (tmp / "trace" / TRACE_FILE).read_text().splitlines())
                if r["kind"] == "fault_begin"]
    return begin


def _changed(begin: dict[str, Any]) -> list[str]:
    return [e["sub_id"] for e in begin["evidence"]["b1"]["changed"]["tables"]["removed_sample"]]


def test_a_pin_hits_its_entry_where_the_position_names_another(tmp_path: Path) -> None:
    positional = _struck(tmp_path / "index", {"field": "entry.filter", "value": "class == 9",
                                              "args": {"index": 0}})
    assert positional["took_effect"] and _changed(positional) == ["a/0"]
    for i, pin in enumerate([{"sub_id": "z/0"}, {"filter": "class==2"}, {"dest": "b0"},
                             {"sub_id": "z/0", "filter": "class == 2", "dest": "b0"}]):
        begin = _struck(tmp_path / str(i), {"field": "entry.filter", "value": "class == 9",
                                            "entry": pin})
        assert begin["took_effect"], begin
        assert _changed(begin) == ["z/0"]
        (added,) = begin["evidence"]["b1"]["changed"]["tables"]["added_sample"]
        assert added["filter"] == "class == 9" and added["dest"] == "b0"


def test_a_pinned_entry_that_is_not_there_does_not_take_effect(tmp_path: Path) -> None:
    begin = _struck(tmp_path, {"field": "entry.dest", "value": "ghost",
                               "entry": {"sub_id": "z/0", "dest": "b2"}})
    assert begin["took_effect"] is False
    assert "pinned entry (sub_id 'z/0', dest 'b2') is not in table 0" in begin["error"]
    assert begin["evidence"] == {}


@pytest.mark.parametrize(("fault", "problem"), [
    ({"field": "table.clear", "entry": {"sub_id": "x"}}, "which table.clear does not change"),
    ({"field": "entry.flag", "entry": {}}, "by sub_id, filter or dest"),
    ({"field": "entry.flag", "entry": {"filter": "class =="}}, "class =="),
    ({"field": "entry.flag", "args": {"index": 1}, "entry": {"sub_id": "x"}},
     "named twice"),
    ({"field": "entry.flag", "entry": {"sub_id": "x", "flag": 1}}, "flag"),
])
def test_a_pin_is_checked(fault: dict[str, Any], problem: str) -> None:
    with pytest.raises(ExperimentError, match=problem):
        parse_experiment({"faults": [{"kind": "corrupt", "target": "b1", "at": 1, **fault}]})


def test_corruptions_left_to_chance_are_written_out_as_they_struck(tmp_path: Path) -> None:
    faults = [{"kind": "corrupt", "target": "b1", "at": 3, "field": "entry.filter"},
              {"kind": "corrupt", "target": "b1", "at": 4, "field": "random"},
              {"kind": "corrupt", "target": "b1", "at": 5, "field": "entry.dest",
               "value": "b2", "entry": {"sub_id": "z/0"}},
              {"kind": "clock", "target": "b0", "at": 5}]
    data = {**BASE, "chaos": {"faults": faults}}
    pinned, what = pin_corruptions(data, tmp_path / "pin")
    first, second, third, fourth = pinned["chaos"]["faults"]
    assert first["entry"]["sub_id"] in ("a/0", "z/0") and set(first["entry"]) == {
        "sub_id", "filter", "dest"} and "value" in first
    assert second["field"] != "random"
    assert (third, fourth) == (faults[2], faults[3])  # already pinned; no corruption
    assert what[0].startswith("fault 0 entry.filter @ b1 on ")
    parse_scenario(pinned)  # a valid scenario
    # the pinned run is the run that was drawn: the same tables, the same verdict
    drawn = simulate_data(data, tmp_path / "drawn", trace=True)
    again = simulate_data(pinned, tmp_path / "again", trace=True)
    assert [f["took_effect"] for f in again["faults"]] == [f["took_effect"]
                                                          for f in drawn["faults"]]
    assert _broker_trace(tmp_path / "drawn") == _broker_trace(tmp_path / "again")


def _broker_trace(run: Path) -> list[dict[str, Any]]:
    """The brokers' records; of their fault records, what the faults changed (not how they
    named it)."""
    out = []
    for b in ("b0", "b1", "b2"):
        for rec in map(json.loads, (run / "trace" / f"{b}.jsonl").read_text().splitlines()):
            if rec["kind"] == "fault":
                rec = {k: v for k, v in rec.items() if k not in ("args", "fault_id")}
            out.append(rec)
    assert sum(rec["kind"] == "fault" for rec in out) == 4 and len(out) > 10  # 3 + the clock
    return out


def test_a_shrunk_scenario_pins_its_corruptions(tmp_path: Path) -> None:
    """The run fails R5 whatever the fault (leasing without the second chance loses z's
    notification); shrinking pins the corruption first, so the attempts that keep it keep the
    entry it changed."""
    data = {**BASE, "routing": {"algorithm": "identity", "second_chance": False},
            "chaos": {"faults": [{"kind": "corrupt", "target": "b1", "at": 3,
                                  "field": "entry.flag"}]}}
    shrinker = Shrinker(data, max_runs=3)  # the first run, the pinning, the pinned run
    result = shrinker.shrink()
    (fault,) = result.data["chaos"]["faults"]
    assert fault["entry"]["sub_id"] in ("a/0", "z/0") and fault["value"] in (0, 1)
    assert result.log[0].startswith("pinned: fault 0 entry.flag @ b1 on ")
