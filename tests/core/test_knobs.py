"""Every scenario knob reaches the core: set it in a scenario, and the ROM a broker gets (its
Params, Options, algorithm, ...) changes in that field and in no other, in the simulator and in
a live broker's configuration (the JSON file a broker process loads)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from weeble.core.rom import (
    Algorithm,
    AntiEntropy,
    Colours,
    Mode,
    Options,
    Ordering,
    OverlayKind,
    Params,
    Rom,
)
from weeble.model.scenario import (
    Overlay,
    Reconfigurations,
    Routing,
    Scenario,
    ScenarioError,
    Timing,
    parse_scenario,
)
from weeble.orchestrator.testbed import Testbed
from weeble.runtime.config import BrokerConfig
from weeble.sim.run import simulate

BASE: dict[str, Any] = {
    "name": "knobs",
    "duration": 1,
    "topology": {"kind": "kary", "m": 2, "levels": 2},  # b0; b1 b2; d = 2
    "routing": {"algorithm": "identity"},
    "timing": {"pi": 10.0, "rho": 4.0, "delta_min": 0.01, "delta_max": 0.1},
    "check_every": None,
    "trace": {"enabled": False},
}

# (knob, value, the ROM fields it must change; every other field stays as it was)
KNOBS: list[tuple[str, Any, set[str]]] = [
    ("routing.algorithm", "covering2", {"algorithm"}),
    ("routing.hierarchical", True, {"hierarchical"}),
    ("routing.wrapper", True, {"wrapper"}),
    ("routing.flag_rule", False, {"options.flag_rule"}),
    ("routing.second_chance", False, {"options.second_chance"}),
    ("routing.renew_forwarded", False, {"options.renew_forwarded"}),
    ("routing.unsub_counts_all", False, {"options.unsub_counts_all"}),
    ("timing.pi", 12.0, {"params.pi"}),
    ("timing.rho", 3.0, {"params.rho"}),
    ("timing.delta_min", 0.02, {"params.delta_min"}),
    ("timing.delta_max", 0.2, {"params.delta_max"}),
    ("timing.d", 5, {"params.d"}),
    ("root", "b1", {"root", "parent"}),
    ("reconfigurations.ordering", "causal", {"ordering"}),
    ("reconfigurations.qsub", False, {"options.qsub"}),
    ("reconfigurations.qnot", False, {"options.qnot"}),
    ("reconfigurations.hold_relays", False, {"options.hold_relays"}),
    ("reconfigurations.backoff", 0.5, {"options.backoff"}),
]
# Not ROM: the simulator's delay model (live links have real delays, shaped by `live.links`),
# and what the manager does (the operations, when, and the strawman's way of doing them).
# routing.adverts is ROM, but simulator only (live clients do not advertise): tested below.
NOT_ROM = {"timing.delay", "routing.adverts", "reconfigurations.operations",
           "reconfigurations.start", "reconfigurations.gap", "reconfigurations.strawman"}
# The coloured overlay's knobs (overlay.kind and the Colours constants): tested on a coloured
# base, in the simulator and in the live brokers' configs.
COLOURED: dict[str, Any] = {"kind": "coloured", "xi": 5.0, "height": 2}
OVERLAY_KNOBS: list[tuple[str, Any]] = [
    ("xi", 6.0), ("height", 3), ("degree", 2), ("timeout", "thesis"), ("xi_prime", 5.5),
    ("colour_check", False), ("flag_on_insert", False), ("prune_all", False),
    ("join_pacing", False), ("early_control", False), ("control_colour", "c_cur")]


def with_knob(knob: str, value: Any) -> Scenario:
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    section, _, name = knob.rpartition(".")
    (data.setdefault(section, {}) if section else data)[name] = value
    return parse_scenario(data)


def flat(rom: Rom) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(rom):
        value = getattr(rom, f.name)
        if dataclasses.is_dataclass(value):
            out.update({f"{f.name}.{k}": v for k, v in dataclasses.asdict(value).items()})
        else:
            out[f.name] = value
    return out


def sim_roms(scenario: Scenario, out: Path) -> dict[str, Rom]:
    """The ROMs of the brokers a simulation runs (read through its fault hook)."""
    seen: dict[str, Rom] = {}

    def hook(target: Any) -> Any:
        seen.update({b: target.brokers[b].rom for b in target.brokers})
        return list

    simulate(scenario, out, progress=False, faults=hook)
    return seen


def live_roms(scenario: Scenario, runs: Path) -> dict[str, Rom]:
    """The ROMs live brokers get: each broker's config file as the broker process loads it."""
    bed = Testbed.plan(scenario, runs_dir=runs, any_ports=True)
    try:
        return {b: BrokerConfig.load(config.dump(runs / f"{b}.json")).to_rom()
                for b, config in bed.configs.items()}
    finally:
        bed.close()


def test_every_knob_is_tested_and_every_core_option_is_a_knob() -> None:
    knobs = {k for k, _, _ in KNOBS}
    assert knobs | NOT_ROM == ({f"routing.{f}" for f in Routing.model_fields}
                               | {f"timing.{f}" for f in Timing.model_fields}
                               | {f"reconfigurations.{f}" for f in Reconfigurations.model_fields}
                               | {"root"})
    reached = set().union(*(fields for _, _, fields in KNOBS))
    assert {f"options.{f.name}" for f in dataclasses.fields(Options)} <= reached
    assert {f"params.{f.name}" for f in dataclasses.fields(Params)} <= reached
    assert {k for k, _ in OVERLAY_KNOBS} | {"kind"} == set(Overlay.model_fields)
    assert {k for k, _ in OVERLAY_KNOBS} == {f.name for f in dataclasses.fields(Colours)}
    rom_fields = set(flat(parse_scenario(BASE).roms()["b0"]))
    # the tree's, and the overlay's and advertisements' (tests below)
    assert rom_fields - reached == {"broker_id", "neighbors", "overlay", "adverts", "optimizer",
                                    *(f"colours.{k}" for k, _ in OVERLAY_KNOBS), "mode",
                                    *(f"anti_entropy.{k}" for k, _ in AE_KNOBS),
                                    *(f"skip_ring.{k}" for k, _ in SR_KNOBS), "skip_ring.seed",
                                    "skip_ring.announce"}  # the live driver's (below)


# The anti-entropy mode's knobs (seed 002), each to the ROM field of the same name.
AE_KNOBS: list[tuple[str, Any]] = [
    ("sketch", "full"), ("bits_per_element", 4.0), ("hashes", 2), ("min_bits", 16),
    ("full_every", 0), ("on_mismatch", "full"), ("timer", "adaptive"), ("period", 10.0),
    ("threshold", 3), ("reply_timeout", 1.5)]


@pytest.mark.parametrize(("knob", "value"), AE_KNOBS, ids=[k for k, _ in AE_KNOBS])
def test_every_anti_entropy_knob_reaches_its_rom_field(knob: str, value: Any) -> None:
    from weeble.model.scenario import AntiEntropySpec

    base = dataclasses.asdict(AntiEntropySpec().rom())
    changed = dataclasses.asdict(AntiEntropySpec(**{knob: value}).rom())
    assert {k for k in base if base[k] != changed[k]} == {knob}
    assert {k for k, _ in AE_KNOBS} == set(AntiEntropySpec.model_fields) == set(base)


# The skip-ring mode's knobs (seed 003), each to the ROM field of the same name; the ROM's
# `seed` is the run's.
SR_KNOBS: list[tuple[str, Any]] = [
    ("supervisors", ["b1", "b2"]), ("interval", 2.0), ("supervisor_interval", 0.5),
    ("p_base", 2.0), ("q", 0.25), ("flood", False), ("push_hints", False),
    ("plausibility", False), ("suspect_after", 0), ("history", True)]


@pytest.mark.parametrize(("knob", "value"), SR_KNOBS, ids=[k for k, _ in SR_KNOBS])
def test_every_skip_ring_knob_reaches_its_rom_field(knob: str, value: Any,
                                                    tmp_path: Path) -> None:
    base = parse_scenario({**BASE, "mode": "skip_ring"})
    scenario = parse_scenario({**BASE, "mode": "skip_ring", "skip_ring": {knob: value}})
    before, after = (dataclasses.asdict(s.roms()["b1"].skip_ring) for s in (base, scenario))
    assert {k for k in before if before[k] != after[k]} == {knob}
    assert after[knob] == (tuple(value) if knob == "supervisors" else value)
    # live, and only live, the members announce their planned links (link admission, issue 24)
    assert live_roms(scenario, tmp_path / "runs") == {
        b: dataclasses.replace(rom, skip_ring=dataclasses.replace(rom.skip_ring, announce=True))
        for b, rom in scenario.roms().items()}
    assert not after["announce"]
    from weeble.model.scenario import SkipRingSpec

    assert ({k for k, _ in SR_KNOBS} == set(SkipRingSpec.model_fields)
            == set(before) - {"seed", "announce"})


# The tree optimizer's knobs (ch. 5) and the fields of its ROM (`Optimizer`) they must change;
# `cost_every` is the simulator's measure, not ROM. Simulator only (live runs refuse it).
OPTIMIZER_KNOBS: list[tuple[str, Any, set[str]]] = [
    ("heuristic", "mst", {"heuristic"}),
    ("broadcast_interval", 5.0, {"broadcast_interval", "update_interval"}),
    ("update_interval", 3.0, {"update_interval"}),
    ("eta", 4, {"eta"}),
    ("cache_size", 100, {"cache_size", "filter_size"}),
    ("filter_size", 999, {"filter_size"}),
    ("hashes", 5, {"hashes"}),
    ("start", 7.0, {"start"}),
    ("link_costs", {"links": [["b0", "b1", 1.5]]}, {"link_costs"}),
    ("link_costs", {"model": "measured", "every": 2.0, "per_ms": 3.0, "resolution": 2.0},
     {"link_costs", "measure_every", "cost_per_ms", "resolution_ms"}),
    ("processing_costs", {"brokers": {"b0": 2.5}}, {"processing_cost"}),
]


def _optimizer_rom(optimizer: dict[str, Any]) -> dict[str, Any]:
    rom = parse_scenario({**BASE, "optimizer": optimizer}).roms()["b0"]
    assert rom.optimizer is not None
    return dataclasses.asdict(rom.optimizer)


@pytest.mark.parametrize(("knob", "value", "fields"), OPTIMIZER_KNOBS)
def test_every_optimizer_knob_reaches_its_rom_field(knob: str, value: Any,
                                                    fields: set[str]) -> None:
    base = _optimizer_rom({})
    changed = _optimizer_rom({knob: value})
    assert {k for k in base if base[k] != changed[k]} == fields


def test_every_optimizer_knob_is_tested() -> None:
    from weeble.core.rom import Optimizer
    from weeble.model.scenario import OptimizerSpec

    assert {k for k, _, _ in OPTIMIZER_KNOBS} | {"cost_every"} == set(OptimizerSpec.model_fields)
    reached = set().union(*(f for _, _, f in OPTIMIZER_KNOBS))
    assert {f.name for f in dataclasses.fields(Optimizer)} - reached == {"seed"}  # the run's
    assert parse_scenario({**BASE, "optimizer": {"heuristic": "none"}}).roms()["b0"].optimizer \
        is None


def test_a_live_configuration_carries_every_rom_field(tmp_path: Path) -> None:
    """A ROM round-trips through a broker's config file, whatever its fields hold."""
    rom = dataclasses.replace(
        parse_scenario(BASE).roms()["b1"], adverts=True, ordering=Ordering.CAUSAL,
        mode=Mode.ANTI_ENTROPY, anti_entropy=AntiEntropy(timer="strawman", period=1.5, hashes=3),
        options=Options(flag_rule=False, second_chance=False, renew_forwarded=False,
                        unsub_counts_all=False, qsub=False, qnot=False, hold_relays=False,
                        backoff=0.5))
    config = BrokerConfig(**BrokerConfig.rom_fields(rom), neighbors={"b0": "127.0.0.1:1"},
                          listen_address="127.0.0.1:2", admin_address="127.0.0.1:3",
                          admin_token="t" * 16, link_token="l", open_clients=True)
    assert BrokerConfig.load(config.dump(tmp_path / "b1.json")).to_rom() == rom


@pytest.mark.parametrize(("knob", "value", "fields"), KNOBS, ids=[k for k, _, _ in KNOBS])
def test_a_knob_reaches_the_core_in_the_simulator_and_live(
        knob: str, value: Any, fields: set[str], tmp_path: Path) -> None:
    default = parse_scenario(BASE)
    scenario = with_knob(knob, value)
    expected = scenario.roms()
    for where, roms in (("sim", sim_roms(scenario, tmp_path / "sim")),
                        ("live", live_roms(scenario, tmp_path / "runs"))):
        assert roms == expected, where
        for b, rom in roms.items():
            before, after = flat(default.roms()[b]), flat(rom)
            changed = {k for k in after if after[k] != before[k]}
            # the parent changes only where the root moved it
            assert changed - {"parent"} == fields - {"parent"}, (where, b, changed)
    field = sorted(fields - {"parent"})[0]
    assert flat(expected["b2"])[field] == (Algorithm(value) if knob == "routing.algorithm"
                                           else value)


@pytest.mark.parametrize(("knob", "value"), OVERLAY_KNOBS, ids=[k for k, _ in OVERLAY_KNOBS])
def test_an_overlay_knob_reaches_the_colours_of_every_broker(
        knob: str, value: Any, tmp_path: Path) -> None:
    coloured = parse_scenario({**BASE, "overlay": COLOURED})
    scenario = parse_scenario({**BASE, "overlay": {**COLOURED, knob: value}})
    for where, roms in (("sim", sim_roms(scenario, tmp_path / "sim")),
                        ("live", live_roms(scenario, tmp_path / "runs"))):
        assert roms == scenario.roms(), where
        for b, rom in roms.items():
            assert rom.overlay is OverlayKind.COLOURED
            before, after = flat(coloured.roms()[b]), flat(rom)
            assert {k for k in after if after[k] != before[k]} == {f"colours.{knob}"}
            assert after[f"colours.{knob}"] == value
    static = parse_scenario(BASE).roms()["b1"]
    assert static.overlay is OverlayKind.STATIC and static.colours == Colours()


def test_advertisements_reach_every_simulated_broker(tmp_path: Path) -> None:
    scenario = with_knob("routing.adverts", True)
    roms = sim_roms(scenario, tmp_path)
    assert roms == scenario.roms()
    for b, rom in roms.items():
        before, after = flat(parse_scenario(BASE).roms()[b]), flat(rom)
        assert {k for k in after if after[k] != before[k]} == {"adverts"}


def test_live_planning_refuses_what_live_brokers_cannot_run_yet(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="simulator only"):  # live clients do not advertise
        live_roms(parse_scenario({**BASE, "routing": {**BASE["routing"], "adverts": True}}),
                  tmp_path / "runs")
    # reconfiguration runs live on every backend (tests/orchestrator/; Kubernetes offline)
    reconfigured = parse_scenario({**BASE, "reconfigurations": {
        "operations": [{"op": "remove_leaf", "leaf": "b2"}]}})
    assert set(live_roms(reconfigured, tmp_path / "runs")) == {"b0", "b1", "b2"}
