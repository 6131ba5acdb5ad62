"""Scenario files: the shipped ones load; every user mistake gives file, field path and problem."""

from pathlib import Path

import pytest
import yaml

from weeble.core.rom import Algorithm
from weeble.model.faults import CorruptFault
from weeble.model.scenario import ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

BASE = {
    "name": "t",
    "duration": 10,
    "topology": {"kind": "kary", "m": 2, "levels": 3},  # b0; b1 b2; b3..b6; d = 4
    "routing": {"algorithm": "identity", "hierarchical": True},
    "timing": {"pi": 10.2, "rho": 10, "delta_min": 0.01, "delta_max": 0.05},
}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def error(tmp_path: Path, **changes: object) -> str:
    data = {**BASE, **changes}
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, data))
    message = str(info.value)
    assert message.startswith(str(tmp_path / "s.yaml")), message
    return message


def test_shipped_scenarios_load() -> None:
    small = load_scenario(SCENARIOS / "sim-small.yaml")
    assert len(small.build_topology().brokers) == 13
    assert small.routing.algorithm is Algorithm.IDENTITY
    assert small.chaos is not None and any(f.kind == "drop" for f in small.chaos.faults)
    seed = load_scenario(SCENARIOS / "seed000.yaml")
    assert len(seed.build_topology().brokers) == 121
    assert seed.params.d == 8
    assert seed.bound == pytest.approx(120.6)  # spec claim 9: Δ1 = 120.6 s
    assert seed.workload is not None and seed.workload.subscriptions == 100_000


def test_defaults_and_derived_values(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, BASE))
    assert s.root_broker == "b0"
    assert s.params.d == 4  # the diameter, unless given
    assert s.timing.delay == "constant"
    assert s.check_every == 1.0
    assert s.trace.enabled and not s.trace.sends
    assert s.last_fault_end == 0.0
    assert s.options.flag_rule


def test_every_topology_kind(tmp_path: Path) -> None:
    for topo, n in [
        ({"kind": "random", "brokers": 9, "seed": 3}, 9),
        ({"kind": "edges", "edges": [["x", "y"], ["y", "z"]]}, 3),
        ({"kind": "chain", "brokers": 4}, 4),
    ]:
        timing = {**BASE["timing"], "pi": 12}  # room for any diameter up to 49
        s = parse_scenario({**BASE, "topology": topo, "timing": timing})
        assert len(s.build_topology().brokers) == n


def test_faults_are_a_chaos_experiment(tmp_path: Path) -> None:
    s = parse_scenario({**BASE, "chaos": {"faults": [
        {"at": 1, "kind": "corrupt", "target": "all", "field": "table.clear"},
        {"at": 2, "kind": "drop", "link": ["b0", "b1"], "probability": 0.5, "duration": 3},
        {"at": 2, "kind": "delay", "link": {"of": {"random": 2}}, "delay_ms": 1500,
         "duration": 1},
        {"at": 3, "kind": "pause", "target": "b2", "duration": 0.5},
    ]}})
    assert s.chaos is not None and isinstance(s.chaos.faults[0], CorruptFault)
    assert s.last_fault_end == 5
    assert s.longest_fault_delay == 1.5


def test_the_old_faults_list_says_where_faults_went(tmp_path: Path) -> None:
    message = error(tmp_path, faults=[{"at": 1, "kind": "corrupt", "target": "b1",
                                       "field": "table.clear"}])
    assert "faults: scenario faults are a chaos experiment now" in message
    assert "chaos: {faults: [...]}" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.yaml: no such file"):
        load_scenario(tmp_path / "nope.yaml")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nduration: 10\ntopology: {kind: kary, m: 2\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml:4:1: YAML syntax error"):
        load_scenario(path)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(write(tmp_path, "- 1\n- 2\n"))


def test_unknown_field_lists_the_valid_ones(tmp_path: Path) -> None:
    routing = {"algoritm": "identity", "algorithm": "identity"}
    message = error(tmp_path, routing=routing)
    assert ("routing: unknown field 'algoritm' (did you mean 'algorithm'?; valid fields:"
            " algorithm, hierarchical") in message
    assert "(top level): unknown field 'durration' (did you mean 'duration'?" in error(
        tmp_path, durration=3)


def test_wrong_type(tmp_path: Path) -> None:
    assert "duration: Input should be a valid number" in error(tmp_path, duration="ten")
    message = error(tmp_path, topology={"kind": "kary", "m": "two", "levels": 2})
    assert "topology.m: Input should be a valid integer" in message  # no "kary" in the path


def test_missing_required_field(tmp_path: Path) -> None:
    data = {k: v for k, v in BASE.items() if k != "timing"}
    with pytest.raises(ScenarioError, match="timing: required field missing"):
        load_scenario(write(tmp_path, data))


def test_unknown_algorithm_lists_the_valid_ones(tmp_path: Path) -> None:
    message = error(tmp_path, routing={"algorithm": "idnetity"})
    assert "routing.algorithm:" in message
    for name in ("flooding", "simple", "identity", "covering1", "merging2"):
        assert name in message


def test_unknown_topology_kind(tmp_path: Path) -> None:
    message = error(tmp_path, topology={"kind": "star", "brokers": 3})
    assert "topology.kind: unknown kind 'star' (kinds: kary, random, edges, chain)" in message


@pytest.mark.parametrize(
    ("edges", "problem"),
    [
        ([["a", "b"], ["b", "c"], ["c", "a"]], "topology: not a tree: cycle a-b-c-a"),
        ([["a", "b"], ["b", "b"]], "topology: self-loop on broker 'b'"),
        ([["a", "b"], ["c", "d"]], "topology: not a tree: disconnected"),
    ],
)
def test_topology_not_a_tree(tmp_path: Path, edges: list, problem: str) -> None:
    assert problem in error(tmp_path, topology={"kind": "edges", "edges": edges})


def test_unknown_root(tmp_path: Path) -> None:
    assert "root: unknown broker 'b99'" in error(tmp_path, root="b99")


def test_pi_too_small_names_the_condition(tmp_path: Path) -> None:
    # d = 4: identity needs pi > rho + d*(delta_max - delta_min) = 10.16
    timing = {**BASE["timing"], "pi": 10.1}
    message = error(tmp_path, timing=timing)
    assert "timing.pi: identity needs pi > rho + d*(delta_max - delta_min) = 10.16" in message
    wrapper = {**BASE["routing"], "wrapper": True}
    assert "rho + 2*d*delta_max" in error(tmp_path, routing=wrapper)
    bad = {**BASE["timing"], "delta_min": 0.1, "delta_max": 0.05}
    assert "timing.delta_min/delta_max" in error(tmp_path, timing=bad)


def test_malformed_filter(tmp_path: Path) -> None:
    subs = [{"client": "al", "broker": "b3", "filter": "class === 3"}]
    message = error(tmp_path, subscriptions=subs)
    assert "subscriptions[0].filter: 'class === 3':" in message
    assert "position" in message  # the FilterSyntaxError's own explanation


def test_unknown_broker_in_a_subscription(tmp_path: Path) -> None:
    subs = [{"client": "al", "broker": "b3", "filter": "class == 3"},
            {"client": "al", "broker": "b9", "filter": "class == 3"}]
    assert "subscriptions[1].broker: unknown broker 'b9'" in error(tmp_path, subscriptions=subs)


def test_reserved_and_broker_client_names(tmp_path: Path) -> None:
    for client in ("b1", "c17", "pb3"):
        subs = [{"client": client, "broker": "b3", "filter": "class == 3"}]
        assert "subscriptions[0].client" in error(tmp_path, subscriptions=subs)


def test_subscription_end_before_start(tmp_path: Path) -> None:
    subs = [{"client": "al", "broker": "b3", "filter": "x == 1", "start": 5, "end": 2}]
    assert "subscriptions[0].end" in error(tmp_path, subscriptions=subs)


def test_a_sub_id_in_use_by_the_same_client(tmp_path: Path) -> None:
    """A sub_id is unique per client (R1): another client may share it, and the same client
    may reuse it once its subscription ended, but not while it lives (nor the one the workload
    names its subscription by)."""
    ok = [{"client": "al", "broker": "b3", "filter": "x == 1", "sub_id": "s", "end": 5},
          {"client": "al", "broker": "b3", "filter": "x == 2", "sub_id": "s", "start": 5},
          {"client": "bo", "broker": "b3", "filter": "x == 3", "sub_id": "s"}]
    load_scenario(write(tmp_path, {**BASE, "subscriptions": ok}))
    clash = [*ok, {"client": "bo", "broker": "b3", "filter": "x == 4", "sub_id": "s",
                   "start": 3}]
    assert "subscriptions[3].sub_id: 's' of client 'bo' is in use by subscriptions[2]" in \
        error(tmp_path, subscriptions=clash)
    named = [{"client": "al", "broker": "b3", "filter": "x == 1", "sub_id": "al/1"},
             {"client": "al", "broker": "b3", "filter": "x == 2"}]  # the workload's al/1
    assert "subscriptions[1].sub_id: 'al/1'" in error(tmp_path, subscriptions=named)
    # the brokers hold al's `s` as `al/s` (core.events.network_id): the same subscription
    qualified = [ok[0], {"client": "al", "broker": "b3", "filter": "x == 2", "sub_id": "al/s",
                         "start": 3}]
    assert "subscriptions[1].sub_id: 'al/s' of client 'al' is in use by subscriptions[0]" in \
        error(tmp_path, subscriptions=qualified)


def test_a_client_id_with_a_slash(tmp_path: Path) -> None:
    """`/` separates a client from its sub id in the brokers' ids: `a/b`'s `c` and `a`'s
    `b/c` would be one subscription."""
    subs = [{"client": "a/b", "broker": "b3", "filter": "x == 1", "sub_id": "c"}]
    assert "subscriptions[0].client: client id 'a/b' contains '/'" in \
        error(tmp_path, subscriptions=subs)


def chaos_error(tmp_path: Path, *faults: dict) -> str:
    return error(tmp_path, chaos={"faults": list(faults)})


def test_unknown_broker_in_faults(tmp_path: Path) -> None:
    corrupt = {"at": 1, "kind": "corrupt", "target": "b7", "field": "clock", "value": 1}
    assert "chaos.faults[0].target: unknown broker 'b7'" in chaos_error(tmp_path, corrupt)
    drop = {"at": 1, "kind": "drop", "link": ["b0", "b9"], "duration": 1}
    assert "chaos.faults[0].link: unknown broker 'b9'" in chaos_error(tmp_path, drop)
    not_adjacent = {"at": 1, "kind": "drop", "link": ["b1", "b2"], "duration": 1}
    assert "chaos.faults[0].link: b1 and b2 are not neighbours" in chaos_error(tmp_path,
                                                                              not_adjacent)
    too_many = {"at": 1, "kind": "corrupt", "target": {"random": 8}, "field": "table.clear"}
    assert ("chaos.faults[0].target: random: 8 brokers asked, but only 7 to draw from"
            in chaos_error(tmp_path, too_many))


def test_bad_faults(tmp_path: Path) -> None:
    field = {"at": 1, "kind": "corrupt", "target": "b1", "field": "clok"}
    message = chaos_error(tmp_path, field)
    assert "chaos.faults[0].field: unknown RAM field 'clok'" in message
    assert "entry.flag" in message
    kind = {"at": 1, "kind": "explode", "target": "b1"}
    assert "chaos.faults[0].kind: unknown kind 'explode' (kinds: corrupt," in chaos_error(
        tmp_path, kind)
    late = {"at": 11, "kind": "corrupt", "target": "b1", "field": "table.clear"}
    assert "chaos.faults[0].at: starts at 11 s, after the end of the run (10 s)" in chaos_error(
        tmp_path, late)
    crash = {"at": 1, "kind": "client_crash", "clients": "bob"}
    assert "chaos.faults[0].clients: unknown client 'bob'" in chaos_error(tmp_path, crash)
    probability = {"at": 1, "kind": "drop", "link": ["b0", "b1"], "duration": 2,
                   "probability": 2}
    assert ("chaos.faults[0].probability: Input should be less than or equal to 1"
            in chaos_error(tmp_path, probability))


def test_unknown_fields_are_named_where_they_are(tmp_path: Path) -> None:
    """A typo names the unknown field and its place, before the "missing" it causes."""
    typo = {"at": 1, "kind": "drop", "link": ["b0", "b1"], "duration": 2, "probabilty": 0.5}
    assert ("chaos.faults[0]: unknown field 'probabilty' (did you mean 'probability'?"
            in chaos_error(tmp_path, typo))
    ok = {"at": 1, "kind": "clock", "target": "b1"}
    missing = {"at": 2, "kind": "corrupt", "target": "b1", "fild": "table.clear"}
    first = chaos_error(tmp_path, ok, ok, missing).split(": ", 1)[1]
    assert first.startswith("chaos.faults[2]: unknown field 'fild' (did you mean 'field'?")
    assert "chaos.faults[2].field: required field missing" in first
    message = error(tmp_path, routing={"algorithm": "identity", "hierarchcal": True})
    assert "routing: unknown field 'hierarchcal' (did you mean 'hierarchical'?" in message
    assert "(top level): unknown field 'durration'" in error(tmp_path, durration=3)


# ---- the stabilization mode (issue 14) ------------------------------------------------------


def test_mode_defaults_to_leasing_and_reaches_every_rom(tmp_path: Path) -> None:
    from weeble.core.rom import Mode
    from weeble.runtime.config import BrokerConfig

    s = load_scenario(write(tmp_path, BASE))
    assert s.mode is Mode.LEASING
    rom = s.roms()["b1"]
    assert rom.mode is Mode.LEASING
    fields = BrokerConfig.rom_fields(rom)
    assert fields["mode"] is Mode.LEASING and fields["anti_entropy"] is None


def test_unknown_mode_names_the_key_and_the_modes(tmp_path: Path) -> None:
    message = error(tmp_path, mode="antientropy")
    assert "mode:" in message and "'anti_entropy'" in message and "'skip_ring'" in message


def test_anti_entropy_knobs_need_the_mode(tmp_path: Path) -> None:
    message = error(tmp_path, anti_entropy={"period": 2})
    assert "anti_entropy: only the anti_entropy mode has it" in message


def test_cli_mode_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    from weeble.cli import main

    with pytest.raises(SystemExit) as info:
        main(["simulate", str(SCENARIOS / "sim-small.yaml"), "--out", "/nonexistent",
              "--mode", "lease"])
    assert info.value.code == 2
    assert "--mode: invalid choice: 'lease'" in capsys.readouterr().err


def test_anti_entropy_needs_simple_routing_and_sketch_faults_need_the_mode(
        tmp_path: Path) -> None:
    message = error(tmp_path, mode="anti_entropy")  # BASE routes hierarchically by identity
    assert "routing: the anti_entropy mode keeps seed 002's tables: peer-to-peer" in message
    simple = {"algorithm": "simple"}
    s = load_scenario(write(tmp_path, {**BASE, "routing": simple, "mode": "anti_entropy",
                                       "anti_entropy": {"period": 2, "full_every": 0}}))
    rom = s.roms()["b2"]
    assert rom.mode.value == "anti_entropy" and rom.anti_entropy.period == 2
    assert s.bound == rom.anti_entropy.bound(s.params) > 2 * s.params.pi
    # only client entries are leased (like flooding): π ≥ ρ suffices, where leasing needs more
    short = {**BASE["timing"], "pi": 10.05}
    assert "timing.pi: identity needs pi >" in error(tmp_path, timing=short)
    load_scenario(write(tmp_path, {**BASE, "routing": {"algorithm": "identity"},
                                   "mode": "anti_entropy", "timing": short}))
    chaos = {"faults": [{"kind": "corrupt", "field": "sketch.bits", "target": "b1", "at": 1}]}
    message = error(tmp_path, routing=simple, chaos=chaos)
    assert "chaos.faults[0].field: sketch.bits: only brokers of the anti_entropy mode" in message


def test_paper_scenario_is_seed000_live_and_no_live_limit_cuts_it() -> None:
    """scenarios/paper.yaml (issue 25): the seed-000 setup of seed000.yaml at N_s = 10,000,
    traced, 60 s judged, with one table corruption at the root; its whole plan fits its live
    bounds (a cut would be said, but the paper's workload is meant to run whole)."""
    from weeble.model.workload import Publish, workload_plan
    from weeble.runtime.config import Tuning

    paper = load_scenario(SCENARIOS / "paper.yaml")
    seed = load_scenario(SCENARIOS / "seed000.yaml")
    topology = paper.build_topology()
    assert len(topology.brokers) == 121 and paper.params.d == 8
    assert paper.topology == seed.topology and paper.routing == seed.routing
    assert paper.timing == seed.timing  # π 60.2, ρ 60, δ 25 ms
    # the link layer adds less than δ: loopback and the brokers add the rest, and the whole hop
    # stays inside [δmin - τ, δmax] (R13(a)), also summed over a path (R13(d): h·δmax + τ)
    from weeble.check.rules import TIMING_TOLERANCE
    added = paper.live.links.delay_ms / 1000
    assert paper.timing.delta_min - TIMING_TOLERANCE <= added < paper.timing.delta_max
    assert paper.bound == pytest.approx(120.6)
    w, ws = paper.workload, seed.workload
    assert w is not None and ws is not None
    assert (w.filter_classes, w.publish_rate, w.mean_lifetime) == (
        ws.filter_classes, ws.publish_rate, ws.mean_lifetime)
    assert (w.subscriber_placement, w.publisher_placement) == ("leaves", "leaves")
    assert w.subscriptions == 10_000 and paper.trace.enabled
    # 60 s judged: deliveries are owed once a subscription is A = ρ + d·δmax old
    activation = paper.timing.rho + paper.params.d * paper.timing.delta_max
    assert paper.duration - activation >= 59
    assert paper.chaos is not None and len(paper.chaos.faults) == 1
    fault = paper.chaos.faults[0]
    assert isinstance(fault, CorruptFault) and fault.target.named == "root"
    assert fault.at is not None and activation < fault.at < paper.duration

    subs = pubs = 0
    streams: dict[str, int] = {}  # subscribe streams per broker, at most (all from one host)
    for action in workload_plan(paper):
        if type(action) is Publish:
            pubs += 1
        else:
            subs += 1
            streams[action.broker] = streams.get(action.broker, 0) + 1
    assert 10_000 < subs <= paper.live.max_subscriptions, subs
    assert 100_000 < pubs <= paper.live.max_publications, pubs
    leaves = set(topology.leaves(paper.root_broker))
    assert set(streams) <= leaves and len(leaves) == 81
    # one publish stream per leaf + its subscribe streams, all from the runner's host
    assert max(streams.values()) + 1 <= Tuning().max_streams_per_peer
