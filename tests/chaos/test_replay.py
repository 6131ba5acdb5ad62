"""`weeble replay`: a shrunk scenario on live brokers (local backend), per try whether the same
rule failed, with the timing model's figures of the try."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weeble.chaos.replay import expected_rule, timing_figures
from weeble.cli import main
from weeble.model.scenario import (
    emulated_delay_ms,
    load_scenario,
    parse_scenario,
    with_link_delays,
)
from weeble.orchestrator.backend import BrokerAddress, Placement
from weeble.orchestrator.testbed import broker_configs
from weeble.runtime.linkshaper import LinkShape

DATA = Path(__file__).resolve().parent / "data" / "shrunk"
# leasing without the second chance: every overrun deletes the valid entries, without any
# fault, a failure of the protocol's structure, not of its timing: it reproduces live (5 of 5
# tries, docs/guide/explore.md). test_shrink.py shrinks the same ablation to this scenario.
ABLATION = DATA / "ablation-second-chance-seed1.yaml"


def test_the_rule_comes_from_the_comment_shrink_writes() -> None:
    text = ABLATION.read_text()
    rule = expected_rule(text)
    assert rule is not None and rule.startswith("R")
    assert json.loads(ABLATION.with_suffix(".expect.json").read_text())["rule"] == rule
    assert expected_rule("name: x\n") is None


def test_timing_figures_are_the_checkers_scalars_and_worst_values() -> None:
    report = {"timing": {"tolerance": 0.01, "violations": 2, "measured": {"hop": 3},
                         "worst": {"hop": 0.004, "refresh": 6.1},
                         "retimed": {"bound": 14.0, "why": "hop"}}}
    assert timing_figures(report) == {"tolerance": 0.01, "violations": 2, "worst_hop": 0.004,
                                      "worst_refresh": 6.1,
                                      "retimed": {"bound": 14.0, "why": "hop"}}


def test_replay_reproduces_the_shrunk_ablation_on_live_brokers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Live timing is not the model's. On a loaded machine a try can leave the timing model
    (a hop or a timer late by more than the tolerance: the checker then excuses what it would
    have failed, 'assumptions violated'), or its clients can start late: the subscription
    came 0.8 s late at load 30, so the one publication, 6.5 s after it in the scenario, fell
    within the activation delay A = 6.2 s and was judged against nobody (a vacuous pass, with
    no violation: the timing model has no bound on a client's start). So: up to 3 tries, until
    one reproduces; a try that does not must be one of those two, never a pass that judged
    the publication; and only when every try was one of them may none reproduce."""
    from weeble.check.history import check_run

    for _ in range(3):
        main(["replay", str(ABLATION), "--backend", "local", "--tries", "1",
              "--runs-dir", str(tmp_path), "--json"])
        report = json.loads(capsys.readouterr().out)
        (only,) = report["per_try"]
        assert only["error"] is None, only
        assert "worst_hop" in only["timing"] and "violations" in only["timing"]
        assert Path(only["run_dir"], "trace").is_dir()
        if only["reproduced"]:
            break
        d = check_run(only["run_dir"])["deliveries"]
        if only["status"] == "assumptions violated":
            assert only["timing"]["violations"], only
        else:  # a pass: only one whose publication nobody had subscribed to for A
            assert only["status"] == "pass" and d["judged"] == 1 and d["expected"] == 0, \
                (only, d)


def test_a_scenario_without_its_rule_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(line for line in ABLATION.read_text().splitlines()
                               if not line.startswith("#")))
    assert main(["replay", str(plain), "--tries", "1", "--runs-dir", str(tmp_path)]) == 2


def test_a_live_subscriber_takes_its_refresh_phase_within_rho() -> None:
    from weeble.runtime.client import Subscriber

    assert Subscriber("127.0.0.1:1", "x", rho=2.0, first_refresh=0.5).first_refresh == 0.5
    assert Subscriber("127.0.0.1:1", "x", rho=2.0).first_refresh == 2.0
    with pytest.raises(ValueError, match="first_refresh: must be in"):
        Subscriber("127.0.0.1:1", "x", rho=2.0, first_refresh=3.0)


def test_the_timing_models_link_delays_are_emulated_on_every_link(tmp_path: Path) -> None:
    """`weeble replay` runs each try with `weeble run --link-delays`: the brokers' link shapers
    delay every broker-to-broker message as the simulator did, the links a reconfiguration
    makes at run time too (a link exchange's new link: Qnot's overtaking happens on it)."""
    qnot = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "explore" /
                         "shrunk-qnot-seed7.yaml")  # uniform in [10, 50] ms
    shaped = with_link_delays(qnot)  # [10, 50] ms less the 5 ms left for processing
    assert (shaped.live.links.delay_ms, shaped.live.links.jitter_ms) == (25.0, 20.0)
    constant = with_link_delays(parse_scenario(yaml_of(qnot, delay="constant")))
    assert (constant.live.links.delay_ms, constant.live.links.jitter_ms) == (45.0, 0.0)
    # scenarios/paper.yaml's constant 25 ms is shaped at 20 ms; a short δmax keeps four fifths
    assert emulated_delay_ms(delta_min=0.025, delta_max=0.025) == (20.0, 20.0)
    assert emulated_delay_ms(delta_min=0.0, delta_max=0.01) == (0.0, 8.0)
    own = parse_scenario({**yaml_of(qnot), "live": {"links": {"delay_ms": 5}}})
    assert with_link_delays(own).live.links.delay_ms == 5  # the scenario's own shaping stays
    brokers = list(shaped.build_topology().brokers)
    places = {b: Placement(f"127.0.0.{i + 2}:7000", f"127.0.0.{i + 2}:7001", None,
                           BrokerAddress(b, f"127.0.0.{i + 2}:7000", f"127.0.0.{i + 2}:7001",
                                         None)) for i, b in enumerate(brokers)}
    configs = broker_configs(shaped, places, lambda n, b: places[n].listen,
                             admin_token="t" * 32, link_token="l" * 32,
                             client_secret="c" * 32, tls=None,
                             trace_path=lambda b: tmp_path / b,
                             address_book=lambda b: places[b].listen)
    want = LinkShape(delay_ms=25.0, jitter_ms=20.0)
    for b, config in configs.items():
        assert set(config.links) == set(brokers) - {b}  # neighbours and the address book
        assert set(config.links.values()) == {want}
    assert "b1" in configs["b6"].peers  # the exchange's new link b6-b1 is shaped too
    unshaped = broker_configs(qnot, places, lambda n, b: places[n].listen,
                              admin_token="t" * 32, link_token="l" * 32,
                              client_secret="c" * 32, tls=None,
                              trace_path=lambda b: tmp_path / b,
                              address_book=lambda b: places[b].listen)
    assert all(c.links == {} for c in unshaped.values())


def test_the_qnot_burst_fails_by_its_ablation_in_the_simulator(tmp_path: Path) -> None:
    """scenarios/explore/qnot-burst.yaml, which replays live with the link delays emulated
    (docs/guide/explore.md): the rule its comment names fails without Qnot and not with it."""
    import yaml

    from weeble.chaos.explore import broken_rules, simulate_data

    path = Path(__file__).resolve().parents[2] / "scenarios" / "explore" / "qnot-burst.yaml"
    data = yaml.safe_load(path.read_text())
    rule = expected_rule(path.read_text())
    assert rule in [r["rule"] for r in broken_rules(simulate_data(data, tmp_path / "off"))]
    data["reconfigurations"]["qnot"] = True
    assert simulate_data(data, tmp_path / "on")["verdict"]["status"] == "pass"


def yaml_of(scenario: object, **timing: object) -> dict:
    data = scenario.model_dump(mode="json", exclude_unset=True)  # type: ignore[attr-defined]
    data["timing"] = {**data["timing"], **timing}
    return data
