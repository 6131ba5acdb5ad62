"""`weeble explore`: the random nemesis (a generator of the one fault vocabulary), the seeds'
verdicts grouped by rule, coverage, determinism; an ablation found, the shipped code passing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from weeble.chaos.explore import OUTSIDE, broken_rules, explore, run_seed
from weeble.chaos.nemesis import (
    FAMILIES,
    LOSS_DURING_EXCHANGE,
    Nemesis,
    NemesisError,
    draw,
    fault_model,
    losses_during_exchanges,
    parse_mix,
    targets_of,
    window,
)
from weeble.cli import main
from weeble.model.faults import KINDS
from weeble.model.scenario import Scenario, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
ABLATION = ROOT / "scenarios" / "explore" / "ablation-flag-rule.yaml"
# seeds the flag-rule ablation fails (with the default nemesis), and the first of them
FAILING_SEEDS = range(1, 13)


def small(**change: Any) -> Scenario:
    data: dict[str, Any] = {
        "name": "tiny", "seed": 1, "duration": 40,
        "topology": {"kind": "kary", "m": 2, "levels": 3},
        "routing": {"algorithm": "identity"},
        "timing": {"pi": 6.5, "rho": 6, "delta_min": 0.01, "delta_max": 0.05},
        "workload": {"filter_classes": 4, "subscriptions": 8, "mean_lifetime": 20,
                     "publish_rate": 5, "subscriber_placement": "all"},
        "check_every": 0.5,
    }
    for key, value in change.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data \
            else value
    return parse_scenario(data)


def test_a_nemesis_is_the_scenario_data_with_faults_of_the_vocabulary_and_is_seeded() -> None:
    s = small()
    first, last = window(s)
    assert 0 < first < last < s.duration - s.bound
    kinds: set[str] = set()
    for seed in range(1, 80):
        data = draw(s, seed, Nemesis(rate=20))
        assert data == draw(s, seed, Nemesis(rate=20))  # the same seed, the same schedule
        assert data["seed"] == seed  # the workload's seed varies with it
        parsed = parse_scenario(data)  # a scenario `weeble simulate` runs
        for f in parsed.chaos.faults if parsed.chaos else []:
            assert f.kind in KINDS
            assert first <= f.at <= last
            kinds.add(f.kind)
        kinds.update("reconfigure" for _ in parsed.reconfigurations.operations)
    every = {k for family in FAMILIES.values() for k in family}
    assert kinds == every, every - kinds
    assert draw(s, 1) != draw(s, 2)


def test_the_state_faults_follow_the_layers_the_brokers_have() -> None:
    plain = set(targets_of(small(), reconfigures=False))
    assert {"entry.insert", "table.clear", "entry.flag"} <= plain
    assert not any(t.startswith(("overlay.", "exchange.", "merger.", "colour.", "sketch.",
                                 "skipring.", "adv.")) for t in plain)
    # the static overlay's RAM exists once the run reconfigures, and is outside the model
    assert {"overlay.parent", "exchange.locked"} <= set(
        targets_of(small(), reconfigures=True, outside_model=True))
    merging = targets_of(small(routing={"algorithm": "merging1"}), reconfigures=False)
    assert "merger.insert" in merging
    coloured = targets_of(small(overlay={"kind": "coloured", "xi": 8.0}), reconfigures=True)
    assert "colour.c_new" in coloured and "recolor.flags" in coloured
    assert not any(t.startswith("exchange.") for t in coloured)
    ae = targets_of(small(mode="anti_entropy"), reconfigures=False)
    assert "sketch.bits" in ae


def test_the_fault_model_of_a_configuration_is_what_its_layers_repair() -> None:
    # self-stabilization promises recovery from transient faults of the state it stabilizes:
    # on the static overlay the neighbour set and the exchange's RAM (RAM once the run
    # reconfigures) are repaired by no layer; the coloured overlay stabilizes its tree
    static = fault_model(small(), reconfigures=True)
    assert {"overlay.parent", "overlay.neighbors", "exchange.locked"} <= set(static.outside)
    assert all(t.startswith(("overlay.", "exchange.")) for t in static.outside)
    assert "no layer repairs" in static.outside["overlay.parent"]
    assert not set(static.inside) & set(static.outside)
    assert "entry.insert" in static.inside
    assert static.targets() == sorted(static.inside)
    assert set(static.targets(outside_model=True)) == {*static.inside, *static.outside}
    # a static tree that never reconfigures: its neighbour set is ROM, nothing to leave out
    assert fault_model(small(), reconfigures=False).outside == {}
    coloured = fault_model(small(overlay={"kind": "coloured", "xi": 8.0}), reconfigures=True)
    assert coloured.outside == {}
    assert {"colour.parent", "colour.children", "recolor.flags"} <= set(coloured.inside)


def test_a_nemesis_draws_outside_the_fault_model_only_when_asked() -> None:
    s = small()
    mix = {"state": 3.0, "reconfigure": 1.0}
    outside = set(fault_model(s, reconfigures=True).outside)
    drawn: dict[bool, set[str]] = {False: set(), True: set()}
    for seed in range(1, 60):
        for flag in (False, True):
            data = draw(s, seed, Nemesis(rate=20, mix=mix, outside_model=flag))
            drawn[flag].update(f["field"] for f in (data.get("chaos") or {}).get("faults", []))
    assert not drawn[False] & outside, drawn[False] & outside
    assert drawn[True] & outside  # the option draws them


def test_a_seed_failing_with_a_fault_outside_the_model_is_reported_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # seed 302 of the flooding sweep (docs/guide/explore.md): an overlay.neighbor.remove on
    # the static tree after a link exchange; the service is broken longer than Δ
    sweep = ROOT / "scenarios" / "explore" / "sweep.yaml"
    scenario = tmp_path / "flooding.yaml"
    scenario.write_text(sweep.read_text().replace(
        "routing: {algorithm: identity", "routing: {algorithm: flooding"))
    args = ["explore", str(scenario), "--seeds", "1", "--first-seed", "302", "--rate", "15"]
    assert main([*args, "--outside-model", "--out", str(tmp_path / "all")]) == 0
    out, err = capsys.readouterr()
    assert re.fullmatch(r"explore \S+: 1/1 seeds, \d+s; 0 failing\n", err)  # piped: one line
    assert "0 failing, 1 failing outside the fault model" in out
    report = json.loads((tmp_path / "all" / "explore.json").read_text())
    assert report["failing"] == 0 and not report["by_rule"]
    (rule, seeds), = report["outside_model_by_rule"].items()
    assert rule.startswith("R11") and seeds[0]["seed"] == 302
    assert seeds[0]["outside"] == ["overlay.neighbor.remove"]
    assert report["coverage"]["statuses"] == {OUTSIDE: 1}
    assert report["coverage"]["outside_model"]["drawn"] is True
    assert (tmp_path / "all" / "seed-302" / "scenario.yaml").is_file()  # shrinkable still
    # by default the same seed draws within the model, and the coverage says what was left
    # out and why
    main([*args, "--out", str(tmp_path / "model")])
    out = capsys.readouterr().out
    assert "outside the fault model, left out" in out and "overlay.parent" in out
    report = json.loads((tmp_path / "model" / "explore.json").read_text())
    assert not any(f.startswith(("overlay.", "exchange."))
                   for f in report["coverage"]["fields"])
    left = report["coverage"]["outside_model"]
    assert left["drawn"] is False and "exchange.locked" in left["targets"]


def test_message_loss_on_an_exchange_s_cycle_while_it_runs_is_outside_the_model(
        tmp_path: Path) -> None:
    # the coordinated exchange assumes reliable links while it runs and has no timeout: seed
    # 897 of the identity sweep drew a garble of b0-b1 (12.46-15.14 s) and an exchange b0-b2
    # for b1-b2 at 14.57 s, which stayed locked for good (docs/findings.md)
    s = small()
    data = {"chaos": {"faults": [
        {"kind": "garble", "at": 12.0, "link": ["b0", "b1"], "probability": 0.5,
         "duration": 2.0},
        {"kind": "delay", "at": 12.0, "link": ["b0", "b1"], "delay_ms": 80, "duration": 2.0},
        {"kind": "cut", "at": 30.0, "link": ["b0", "b1"], "duration": 1.0}]},
        "reconfigurations": {"operations": [
            {"op": "exchange", "remove": ["b0", "b1"], "add": ["b1", "b2"], "at": 13.0}]}}
    assert losses_during_exchanges(s, data) == ["f0"]  # not the delay, not the later cut
    data["reconfigurations"]["operations"][0]["at"] = 21.0  # span: π = 6.5 s
    assert losses_during_exchanges(s, data) == []
    # an exchange started while a broker of its cycle is down (sweep seed 148) cannot run
    data["chaos"]["faults"].append({"kind": "crash", "at": 20.0, "target": "b0",
                                    "duration": 4.0})
    assert losses_during_exchanges(s, data) == ["f3"]
    data["chaos"]["faults"][-1]["target"] = "b3"  # not on the cycle b1-b0-b2
    assert losses_during_exchanges(s, data) == []
    for seed in range(1, 60):  # the default nemesis keeps them apart, the option does not
        assert not losses_during_exchanges(s, draw(s, seed, Nemesis(rate=20)))
    assert any(losses_during_exchanges(s, draw(s, seed, Nemesis(rate=20, outside_model=True)))
               for seed in range(1, 60))
    sweep = ROOT / "scenarios" / "explore" / "sweep.yaml"
    base = load_scenario(sweep)
    result = run_seed(base.model_dump(mode="json", exclude_unset=True), 897,
                      Nemesis(rate=15, outside_model=True))
    assert result.status == OUTSIDE and result.outside == [LOSS_DURING_EXCHANGE]
    assert run_seed(base.model_dump(mode="json", exclude_unset=True), 897,
                    Nemesis(rate=15)).status == "pass"


def test_exact_draws_the_rate_s_count_and_exclude_leaves_targets_out() -> None:
    # a soak (benchmarks/soak.py) wants every fault its rate gives; the static overlay's RAM,
    # which nothing repairs there, is outside the fault model and not drawn
    s = small(duration=400)
    first, last = window(s)
    count = round(5 * (last - first) / 100)
    # state faults only, without the bursts of entry.insert: one fault per draw
    exact = Nemesis(rate=5, mix={"state": 1.0, "reconfigure": 1.0}, max_faults=count,
                    exact=True, exclude=("entry.insert",))
    fewer = 0
    for seed in range(1, 6):
        data = draw(s, seed, exact)
        faults = (data.get("chaos") or {}).get("faults", [])
        ops = (data.get("reconfigurations") or {}).get("operations", [])
        assert ops  # the run reconfigures, and still no overlay or exchange target
        assert not any(f["field"].startswith(("overlay.", "exchange.", "entry.insert"))
                       for f in faults)
        assert count - 2 <= len(faults) + len(ops) <= count  # an exchange may be refused
        default = draw(s, seed, Nemesis(rate=5, mix=exact.mix, max_faults=count,
                                        exclude=exact.exclude))
        fewer += len(default.get("chaos", {}).get("faults", [])) < len(faults)
    assert fewer  # without `exact`, between 1 and that many


def test_a_mix_names_known_families_and_a_too_short_run_is_refused() -> None:
    assert parse_mix("state=2,link") == {"state": 2.0, "link": 1.0}
    with pytest.raises(NemesisError, match="unknown family nope"):
        parse_mix("nope=1")
    with pytest.raises(NemesisError, match="leaves no window"):
        draw(small(duration=10), 1)


def test_broken_rules_name_the_rule_of_each_failing_part() -> None:
    summary = {"verdict": {"parts": [
        {"part": "before the first fault", "status": "fail", "reason": "3 fifo"},
        {"part": "episode 0 (f0)", "status": "fail", "episode": 0,
         "reason": "service: 30 s > bound 13 s; state: not stabilized"},
        {"part": "episode 1 (f1)", "status": "assumptions violated", "episode": 1,
         "reason": "timing"},
        {"part": "reconfiguration r1 (exchange)", "status": "fail", "reason": "2 reordered"},
    ]}}
    rules = [(r["rule"], r["episode"]) for r in broken_rules(summary)]
    assert rules == [("R7 per-publisher FIFO", None),
                     ("R11 service-level stabilization > Δ", 0),
                     ("R12 state-level stabilization > Δ", 0),
                     ("R15 reconfiguration lost/duplicated/reordered", None)]


def test_explore_finds_the_flag_rule_ablation_and_the_shipped_code_passes_the_same_seeds(
        tmp_path: Path) -> None:
    ablation = load_scenario(ABLATION)
    found = explore(ablation, list(FAILING_SEEDS), out=tmp_path / "ablation")
    assert found.failing, [r.status for r in found.results]
    first = found.failing[0]
    assert first.rules[0]["rule"].startswith(("R11", "R12", "R5"))
    assert first.episodes  # the first failing episode comes with it
    written = tmp_path / "ablation" / f"seed-{first.seed}" / "scenario.yaml"
    assert load_scenario(written).chaos is not None  # `weeble simulate` takes it
    fixed = ablation.model_copy(update={"routing": ablation.routing.model_copy(
        update={"flag_rule": True})})
    report = explore(fixed, [r.seed for r in found.failing], out=tmp_path / "fixed")
    assert not report.failing, [r.rules for r in report.failing]
    coverage = found.coverage(ablation)
    assert coverage["faults"] > 0 and coverage["kinds"]


def test_check_determinism_runs_a_seed_twice_and_compares_its_digests() -> None:
    s = small()
    data = s.model_dump(mode="json", exclude_unset=True)
    result = run_seed(data, 3, Nemesis(), check_determinism=True)
    assert result.deterministic is True and len(result.digest) == 64
    assert run_seed(data, 3, Nemesis()).digest != run_seed(data, 4, Nemesis()).digest


def test_the_command_reports_failing_seeds_by_rule_and_coverage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["explore", str(ABLATION), "--seeds", str(len(FAILING_SEEDS)), "--jobs", "2",
                   "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert status == 1  # a failing seed
    assert "coverage:" in out and "weeble shrink" in out
    report = json.loads((tmp_path / "explore.json").read_text())
    assert report["failing"] >= 1 and report["by_rule"]
    (_rule, seeds), *_ = report["by_rule"].items()
    assert (tmp_path / f"seed-{seeds[0]['seed']}" / "result.json").is_file()
    assert main(["explore", str(ABLATION), "--seeds", "1", "--mix", "bogus=1"]) == 2
    assert main(["explore", str(ABLATION), "--seeds", "1", "--exclude", "nope."]) == 2
    assert "names no corruption target" in capsys.readouterr().err
    main(["explore", str(ABLATION), "--seeds", "2", "--mix", "state=1", "--exclude",
          "entry.", "--duration", "30", "--out", str(tmp_path / "x"), "--quiet"])
    fields = json.loads((tmp_path / "x" / "explore.json").read_text())["coverage"]["fields"]
    assert set(fields) == {"table.clear"}, fields  # the one target left to this routing
