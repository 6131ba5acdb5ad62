"""Experiments as data: parsing, validation errors that name the field, selectors, schedules."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from weeble.model import faults as F
from weeble.model.experiment import ExperimentError, load_experiment, parse_experiment
from weeble.model.faults import state_diff
from weeble.model.scenario import ScenarioError, parse_scenario
from weeble.model.selectors import BrokerSelector, LinkSelector, Tree
from weeble.model.topology import kary_tree

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = kary_tree(2, 3)  # b0; b1 b2; b3 b4 (under b1) b5 b6 (under b2)
TREE = Tree(TOPOLOGY.brokers, TOPOLOGY.links, "b0")


def one(fault: dict[str, Any], **experiment: Any) -> Any:
    return parse_experiment({"faults": [fault], **experiment})


def error_of(data: dict[str, Any], until: float | None = 60) -> str:
    with pytest.raises(ExperimentError) as info:
        parse_experiment(data).check(TREE, until=until)
    return str(info.value)


# ---- the vocabulary -------------------------------------------------------------------------


def test_every_kind_of_the_brief_is_registered() -> None:
    assert set(F.KINDS) >= {"corrupt", "clock", "inject", "drop", "duplicate", "garble",
                            "delay", "cut", "heal", "flap", "partition", "crash", "restart",
                            "pause", "client_crash"}
    # one implementation per registered kind (for the simulator and live alike)
    from weeble.chaos.actions import ACTIONS

    assert set(ACTIONS) == set(F.KINDS)


def test_a_new_core_ram_field_is_a_corrupt_field_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Color and parent-pointer corruption slot in through the core's corruption targets."""
    with pytest.raises(ExperimentError, match=r"faults\[0\]\.field: unknown RAM field 'color'"):
        one({"kind": "corrupt", "field": "color", "target": "b1", "at": 1})
    monkeypatch.setattr(F, "TARGETS", (*F.TARGETS, "color"))
    assert one({"kind": "corrupt", "field": "color", "target": "b1", "at": 1,
                "value": 2}).faults[0].field == "color"


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "corrupts", "target": "b1", "at": 1}, r"faults\[0\]\.kind: unknown kind 'corrupts'"),
    ({"target": "b1", "at": 1}, r"faults\[0\]\.kind: required field missing"),
    ({"kind": "corrupt", "target": "b1", "at": 1}, r"faults\[0\]\.field: required field missing"),
    ({"kind": "clock", "target": "b1", "at": 1, "colour": 2},
     r"faults\[0\]: unknown field 'colour' \(valid fields: kind,"),
    ({"kind": "drop", "link": ["b0", "b1"], "at": 1}, r"faults\[0\]\.duration: a drop fault needs"),
    ({"kind": "clock", "target": "b1", "at": 1, "duration": 2},
     r"faults\[0\]\.duration: a clock fault is instantaneous"),
    ({"kind": "drop", "link": ["b0", "b1"], "at": 1, "duration": 2, "probability": 1.5},
     r"faults\[0\]\.probability: Input should be less than or equal to 1"),
    ({"kind": "clock", "target": "b1"}, r"faults\[0\]\.after: `at` .* or `after` .* is required"),
    ({"kind": "clock", "target": "b1", "at": 1, "after": 2}, r"either `at` or `after`"),
    ({"kind": "clock", "target": "b1", "at": 1, "times": 3}, r"faults\[0\]\.times: repeating"),
    ({"kind": "cut", "link": ["b0", "b1"], "at": 1, "every": 2, "duration": 3},
     r"faults\[0\]\.duration: 3 s does not end before the next repetition"),
    ({"kind": "clock", "target": {"random": 0}, "at": 1}, r"faults\[0\]\.target\.random: k must"),
    ({"kind": "clock", "target": {"subtree": "b1", "among": "leaves"}, "at": 1},
     r"faults\[0\]\.target\.among: only with random"),
    ({"kind": "inject", "link": ["b0", "b1"], "at": 1,
      "message": {"type": "sub", "filter": "x =="}},
     r"faults\[0\]\.message\.filter: 'x =='"),
    ({"kind": "delay", "link": ["b0", "b1"], "at": 1, "duration": 1},
     r"faults\[0\]\.delay_ms: required field missing"),
])
def test_schema_errors_name_the_field(fault: dict[str, Any], message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        one(fault)


def test_a_typo_names_the_unknown_field_first_and_every_problem_is_listed(
        tmp_path: Path) -> None:
    """A typo'd required field is reported as the unknown field it is, where it is, and the
    resulting "missing" comes after it, never as "(and 1 more problem)"."""
    path = tmp_path / "exp.yaml"
    path.write_text("faults:\n"
                    "  - {kind: clock, target: b1, at: 1}\n"
                    "  - {kind: clock, target: b2, at: 2}\n"
                    "  - {kind: corrupt, target: b1, at: 3, fild: table.clear}\n")
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    message = str(info.value)
    assert message.startswith(f"{path}: faults[2]: unknown field 'fild' (did you mean 'field'?")
    assert "\n  faults[2].field: required field missing" in message
    assert "more problem" not in message


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "corrupt", "field": "table.clear", "target": "b9", "at": 1},
     r"faults\[0\]\.target: unknown broker 'b9' \(brokers: b0, b1, b2, b3, b4, b5, b6\)"),
    ({"kind": "cut", "link": ["b0", "b3"], "at": 1},
     r"faults\[0\]\.link: b0 and b3 are not neighbours"),
    ({"kind": "cut", "link": [["b0", "b1"], ["b1", "b7"]], "at": 1},
     r"faults\[0\]\.link: unknown broker 'b7'"),
    ({"kind": "crash", "target": {"random": 5, "among": "leaves"}, "at": 1},
     r"faults\[0\]\.target: random: 5 brokers asked, but only 4"),
    ({"kind": "partition", "target": "all", "at": 1},
     r"faults\[0\]\.target: all is the whole tree"),
    ({"kind": "clock", "target": {"subtree": "b8"}, "at": 1},
     r"faults\[0\]\.target: unknown broker 'b8'"),
    ({"kind": "clock", "target": "b1", "at": 61},
     r"faults\[0\]\.at: starts at 61 s, after the end"),
])
def test_an_experiment_naming_what_the_tree_lacks_is_refused(fault: dict[str, Any],
                                                             message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        parse_experiment({"faults": [fault]}).check(TREE, until=60)


def test_names_must_be_unique_and_after_needs_an_end() -> None:
    assert "faults[1].name: 'x' is also faults[0]" in error_of({"faults": [
        {"name": "x", "kind": "clock", "target": "b1", "at": 1},
        {"name": "x", "kind": "clock", "target": "b2", "at": 2}]})
    assert "faults[1].after: faults[0] (cut) has no duration" in error_of({"faults": [
        {"kind": "cut", "link": ["b0", "b1"], "at": 1},
        {"kind": "clock", "target": "b2", "after": 2}]})
    assert "faults[0].times: `every` without `times`" in error_of(
        {"faults": [{"kind": "clock", "target": "b1", "at": 1, "every": 5}]}, until=None)


def test_load_experiment_errors_carry_the_file(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match=r"nope\.yaml: no such file"):
        load_experiment(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults: [\n")
    with pytest.raises(ExperimentError, match=r"bad\.yaml: line \d+, column \d+: YAML syntax"):
        load_experiment(bad)
    bad.write_text("- 1\n")
    with pytest.raises(ExperimentError, match=r"expected a mapping"):
        load_experiment(bad)


def test_scenario_embeds_a_chaos_schedule_checked_against_its_tree() -> None:
    base = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())
    scenario = parse_scenario(base)
    assert scenario.chaos is not None and len(scenario.chaos.faults) >= 5
    assert {"corrupt", "clock", "cut", "crash", "duplicate"} <= set(scenario.chaos.kinds)
    # the chaos faults count for the end of the last fault (the simulator measures from it)
    assert scenario.last_fault_end == max(i.end for i in scenario.chaos.timeline())
    for chaos, message in [
        ({"faults": [{"kind": "cut", "link": ["b0", "b9"], "at": 3, "duration": 2}]},
         "chaos.faults[0].link: unknown broker 'b9'"),
        ({"faults": [{"kind": "clock", "target": "b1", "at": 3, "value": 9}]},
         "chaos.faults[0].value: 9.0 is not in [0, pi=4)"),
        ({"faults": [{"kind": "clock", "target": "b1", "at": 3, "duration": 1}]},
         "chaos.faults[0].duration"),
    ]:
        with pytest.raises(ScenarioError) as info:
            parse_scenario({**base, "chaos": chaos})
        assert message in str(info.value)


# ---- selectors ------------------------------------------------------------------------------


@pytest.mark.parametrize(("selector", "brokers"), [
    ("b3", ["b3"]), (["b4", "b3"], ["b4", "b3"]), ("root", ["b0"]),
    ("leaves", ["b3", "b4", "b5", "b6"]), ("inner", ["b0", "b1", "b2"]),
    ("all", list(TOPOLOGY.brokers)), ({"subtree": "b2"}, ["b2", "b5", "b6"]),
])
def test_broker_selectors(selector: Any, brokers: list[str]) -> None:
    assert BrokerSelector.model_validate(selector).resolve(TREE, random.Random(1)) == brokers


def test_random_selection_is_seeded_and_stays_in_its_population() -> None:
    sel = BrokerSelector.model_validate({"random": 2, "among": "leaves"})
    draws = {tuple(sel.resolve(TREE, random.Random(seed))) for seed in range(30)}
    assert len(draws) > 1  # it is random ...
    assert all(set(d) <= {"b3", "b4", "b5", "b6"} and len(d) == 2 for d in draws)
    assert sel.resolve(TREE, random.Random(7)) == sel.resolve(TREE, random.Random(7))  # seeded
    links = LinkSelector.model_validate({"random": 1, "of": "b2"})
    assert all(set(link) & {"b2"} for link in
               (links.resolve(TREE, random.Random(s))[0] for s in range(20)))


def test_link_selectors_and_partition_boundary() -> None:
    assert LinkSelector.model_validate(["b1", "b0"]).resolve(TREE, random.Random()) == [
        ("b1", "b0")]  # as named: an injected message goes from b1 to b0
    assert LinkSelector.model_validate({"of": "b1"}).resolve(TREE, random.Random()) == [
        ("b0", "b1"), ("b1", "b3"), ("b1", "b4")]
    assert TREE.boundary(TREE.subtree("b1")) == [("b0", "b1")]
    assert TREE.boundary(["b1", "b5"]) == [("b0", "b1"), ("b1", "b3"), ("b1", "b4"),
                                           ("b2", "b5")]


# ---- schedules ------------------------------------------------------------------------------


def test_timeline_at_after_every() -> None:
    exp = parse_experiment({"duration": 30, "faults": [
        {"name": "a", "kind": "corrupt", "field": "entry.flag", "target": "root", "at": 5},
        {"kind": "clock", "target": "b1", "after": 8},  # 8 s after `a` ended (instantaneous)
        {"kind": "cut", "link": ["b0", "b1"], "at": 20, "duration": 3},
        {"name": "d", "kind": "drop", "link": ["b1", "b3"], "after": 1, "duration": 1},
        {"name": "c", "kind": "clock", "target": "all", "at": 2, "every": 10},  # until 30
        {"name": "k", "kind": "crash", "target": "b4", "at": 4},  # lasts until a restart
    ]})
    timeline = [(i.id, i.start, i.end) for i in exp.timeline()]
    assert timeline == [("c.0", 2, 2), ("k", 4, None), ("a", 5, 5), ("c.1", 12, 12),
                        ("f1", 13, 13), ("f2", 20, 23), ("c.2", 22, 22), ("d", 24, 25)]
    assert [i.id for i in exp.timeline(until=15)][-1] == "d"  # `until` bounds only `every`


def test_state_diff_is_the_evidence_of_a_state_fault() -> None:
    before = {"next_timer": 4.0, "rebuild_bit": 0, "mergers": [],
              "tables": [[{"sub_id": "s", "filter": "class == 1", "dest": "b1", "flag": 1}]]}
    assert state_diff(before, before) == {}
    after = {**before, "next_timer": 2.5,
             "tables": [[{"sub_id": "s", "filter": "class == 1", "dest": "b1", "flag": 0}]]}
    diff = state_diff(before, after)
    assert diff["next_timer"] == {"before": 4.0, "after": 2.5}
    assert diff["tables"]["removed"] == diff["tables"]["added"] == 1
    assert diff["tables"]["added_sample"][0]["flag"] == 0
    # the overlay and exchange layers are RAM too: their changes are evidence as well
    moved = state_diff({**before, "parent": "b0", "neighbors": ["b0"]},
                       {**before, "parent": "b9", "neighbors": ["b0", "b9"]})
    assert moved == {"parent": {"before": "b0", "after": "b9"},
                     "neighbors": {"before": ["b0"], "after": ["b0", "b9"]}}


def test_entry_values_are_drawn_to_differ() -> None:
    f = one({"kind": "corrupt", "field": "entry.filter", "target": "b1", "at": 1}).faults[0]
    entry = {"sub_id": "s", "filter": "class == 1", "dest": "b3", "flag": 1}
    for seed in range(20):
        rng = random.Random(seed)
        assert f.entry_value(entry, ["class == 1", "class == 2"], [], rng) == "class == 2"
        assert f.entry_value(entry, ["class == 1"], [], rng) != "class == 1"
    g = one({"kind": "corrupt", "field": "entry.dest", "target": "b1", "at": 1}).faults[0]
    assert {g.entry_value(entry, [], ["b3", "b4"], random.Random(s)) for s in range(30)} == {
        "b4", "ghost"}


def test_an_experiment_survives_its_json_dump() -> None:
    """runs/<id>/scenario.json keeps the experiment as JSON; read back, it is the same."""
    import json

    exp = parse_experiment({"seed": 3, "faults": [
        {"kind": "clock", "target": {"random": 2, "among": "leaves"}, "at": 1},
        {"kind": "cut", "link": {"random": 1, "of": {"subtree": "b1"}}, "at": 2, "duration": 1},
        {"kind": "inject", "link": ["b3", "b1"], "at": 3, "message": {"type": "switch"}},
        {"kind": "corrupt", "field": "entry.insert", "target": ["b1", "b2"], "at": 4,
         "value": {"sub_id": "x", "filter": "true"}}]})
    assert parse_experiment(json.loads(json.dumps(exp.model_dump(mode="json")))) == exp
    assert [f.selector() for f in exp.faults] == ["random:2 among leaves",
                                                  "random:1 of:subtree:b1", "b3-b1", "b1,b2"]


def test_the_example_experiment_fits_the_quickstart_tree() -> None:
    exp = load_experiment(REPO / "scenarios" / "experiments" / "every-kind.yaml")
    exp.check(TREE)
    assert set(exp.kinds) == set(F.KINDS)  # it shows every kind


def test_a_delay_above_delta_max_is_warned_of_before_it_runs() -> None:
    """Issue 23 item 6: every-kind's 400 ms delay against δmax 50 ms breaks the timing model;
    `weeble chaos` says so before it injects anything (its episode is then judged "assumptions
    violated")."""
    from pathlib import Path

    from weeble.core.rom import Params
    from weeble.model.experiment import load_experiment, timing_warnings

    repo = Path(__file__).resolve().parents[2]
    every = load_experiment(repo / "scenarios" / "experiments" / "every-kind.yaml")
    params = Params(pi=4, rho=2, delta_min=0, delta_max=0.05, d=2)
    (warning,) = timing_warnings(every, params)
    assert warning.startswith("faults[") and "(slow): a delay of up to 450 ms" in warning
    assert "δmax = 50 ms" in warning
    assert timing_warnings(every, Params(pi=4, rho=2, delta_min=0, delta_max=0.5, d=2)) == []
