"""The anti-entropy mode of seed 002 (Shen and Tirthapura) in the real brokers and the one
Simulation: spec seed23 §C.2 claims 1-3 (Theorem 1, convergence, no corrective traffic in a legal
state), the sketch faults, the race rule under churn, and the timer strategies of §5. Claims 4-5
(the Bloom filters) are tests/core/test_bloom.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weeble.analytics.reproduce.sketches import (
    convergence,
    legal_traffic,
    mode_simulation,
)
from weeble.analytics.reproduce.sketches import subscribe_all as subscribe
from weeble.chaos.runner import in_simulation
from weeble.core.events import Corrupt
from weeble.core.filters import Filter
from weeble.core.rom import Algorithm, AntiEntropy, Params
from weeble.core.sketch.legality import (
    all_locally_legal,
    globally_legal,
    subtree_subscriptions,
)
from weeble.core.sketch.messages import AeReply
from weeble.model import topology as topo
from weeble.model.scenario import load_scenario, parse_scenario
from weeble.sim.run import simulate
from weeble.sim.simulation import Simulation

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
UNIVERSE = [f"s{i}" for i in range(6)]
PARAMS = Params(pi=3.0, rho=1.5, delta_min=0.005, delta_max=0.02, d=8)


# ---- C.2-1: Theorem 1 -----------------------------------------------------------------------


def random_tree(n: int, rng: random.Random) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {f"b{i}": set() for i in range(n)}
    for i in range(1, n):
        a, b = f"b{i}", f"b{rng.randrange(i)}"
        adj[a].add(b)
        adj[b].add(a)
    return adj


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(2, 9))
def test_theorem_1_local_legality_iff_global_legality(data: st.DataObject, n: int) -> None:
    """C.2-1: on a tree with nothing in transit, every directed edge locally legal ⇔ every edge
    globally legal. Tables start legal and get a random number of random perturbations."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    tree = random_tree(n, rng)
    local = {v: set(rng.sample(UNIVERSE, rng.randrange(3))) for v in tree}
    held = {e: set(s) for e, s in subtree_subscriptions(tree, local).items()}
    for _ in range(data.draw(st.integers(0, 3))):
        e = rng.choice(sorted(held))
        held[e].symmetric_difference_update({rng.choice(UNIVERSE)})
    assert all_locally_legal(tree, held, local) == globally_legal(tree, held, local)


# ---- the mode in the Simulation (weeble reproduce sketches runs the same) ---------------------

sim = mode_simulation


@pytest.mark.parametrize("algorithm", [Algorithm.IDENTITY, Algorithm.SIMPLE])
def test_a_legal_system_sends_two_messages_per_edge_and_period_and_nothing_else(
        algorithm: Algorithm) -> None:
    """C.2-3: no corrective traffic in a legal state: per directed edge and period exactly an
    Observe and its reply, no (un)subscription (the clients' refreshes stay at their broker);
    20 periods, of which 5 exact rounds per edge."""
    r = legal_traffic(algorithm, periods=20)
    assert r["legal"] == 1.0  # before and after
    assert r["observes_per_edge_period"] == pytest.approx(1.0, abs=0.05)
    assert r["messages_per_edge_period"] == pytest.approx(2.0, abs=0.1)
    assert r["corrective"] == 0  # no Sub, Unsub, AeCorrect, nor a correction counted


@pytest.mark.parametrize("algorithm", [Algorithm.IDENTITY, Algorithm.SIMPLE])
@pytest.mark.parametrize("shape", ["path", "star"])
@pytest.mark.parametrize("seed", [1, 2])
def test_converges_from_corrupted_tables_within_the_bound(shape: str, seed: int,
                                                         algorithm: Algorithm) -> None:
    """C.2-2 (Theorem 2): arbitrary table faults at every broker, no new faults → legal within
    the mode's Δ, on a path and on a star of the same size, and legal 5 s later (closure)."""
    r = convergence(shape, 12, seed, algorithm)
    assert r["broken"] == 1.0, "the faults should leave the tables illegitimate"
    assert 0 <= r["took"] <= r["bound"]
    assert r["closed"] == 1.0


def test_sketch_faults_are_repaired() -> None:
    """Corrupted sketches (flipped bits, round counters, a suspension, a wrong belief that a link
    failed) cost at most some corrections: the tables are legal again within Δ."""
    rng = random.Random(9)
    t = topo.kary_tree(2, 3)
    s = sim(t, seed=9)
    subscribe(s, rng)
    s.run(4.0)
    assert not s.legitimacy()
    faults = [("b0", Corrupt("sketch.bits", 16)), ("b1", Corrupt("sketch.round", 7)),
              ("b2", Corrupt("sketch.suspended", True)),
              ("b1", Corrupt("sketch.detached", ["b3", "b0"]))]
    for b, fault in faults:
        s.engine.inject(s.now, b, fault)
    assert s.brokers["b1"].ram.routing.detached == {"b0", "b3"}
    s.run(s.now + s.bound)
    assert not s.legitimacy()
    assert s.brokers["b1"].ram.routing.detached == set()  # their messages proved the links work
    stats = [b.anti_entropy.ram.stats for b in s.brokers.values()]
    assert sum(x["corrections"] for x in stats) >= 1  # the flipped bits were noticed


def test_workload_churn_needs_no_corrections_and_loses_nothing(tmp_path: Path) -> None:
    """The race rule: subscriptions and unsubscriptions cross the edges while rounds run, yet
    no round undoes one (zero corrections) and every notification arrives (the checker)."""
    data = load_scenario(SCENARIOS / "anti-entropy.yaml").model_dump(mode="json")
    data.pop("chaos")
    data["workload"] = {**data["workload"], "mean_lifetime": 4, "subscriptions": 20}
    data["trace"] = {"sends": True}
    summary = simulate(parse_scenario(data), tmp_path, progress=False)
    assert summary.deliveries["missing"] == summary.deliveries["spurious"] == 0
    assert summary.messages["sub"] > 50 and summary.messages["unsub"] > 50  # churn
    assert summary.messages.get("aecorrect", 0) == 0
    assert summary.verdict["status"] == "pass"


def test_the_scenario_passes_under_both_modes_with_the_same_faults(tmp_path: Path) -> None:
    """`weeble simulate` in the anti-entropy mode (a table corruption, a crash) and the same
    scenario under leasing: both pass, anti-entropy without refresh traffic."""
    s = load_scenario(SCENARIOS / "anti-entropy.yaml")
    ae = simulate(s, tmp_path / "ae", progress=False, faults=in_simulation(s))
    from weeble.model.scenario import with_mode

    lease = with_mode(s, "leasing")
    le = simulate(lease, tmp_path / "lease", progress=False, faults=in_simulation(lease))
    for summary in (ae, le):
        assert summary.verdict["status"] == "pass", summary.verdict["reasons"]
        assert [f["took_effect"] for f in summary.verdict["faults"]] == [True, True]
    assert ae.messages["aecorrect"] >= 1  # the corruption was found by a round
    assert ae.messages["sub"] < le.messages["sub"] / 3  # no end-to-end refreshes


# ---- the timer strategies of §5 -------------------------------------------------------------


def _cut_world(timer: str, period: float) -> tuple[Simulation, str]:
    """A chain b0-b1-b2-b3; a subscription at b3; the link b1-b2 fails at t = 5."""
    s = sim(topo.chain(4), timer=timer, period=period, threshold=3, full_every=0)
    sub = s.subscribe(0.0, "far", "b3", "class == 1")
    s.run(5.0)
    assert any(e.sub_id == sub for e in s.brokers["b0"].ram.tables[0])
    return s, sub


@pytest.mark.parametrize(("timer", "gone_by"), [("strawman", 0.5), ("static", None),
                                                ("adaptive", None)])
def test_timer_strategies_after_a_link_failure(timer: str, gone_by: float | None) -> None:
    """Strawman unsubscribes the far side's subscriptions at once; static waits for its period
    (10 s here); adaptive waits until unwanted events arrive (3 here), then stabilizes."""
    s, sub = _cut_world(timer, 10.0)
    s.engine.set_link_fault("b1", "b2", drop=1.0)
    s.engine.report_link("b1", "b2", up=False)
    s.run(s.now + 0.5)
    held = any(e.sub_id == sub for e in s.brokers["b0"].ram.tables[0])
    assert held == (gone_by is None), timer
    if timer == "adaptive":
        for i in range(3):  # events for the far subscriber: unwanted at b1
            s.publish(s.now + 0.1 * (i + 1), "b0", {"class": 1})
        s.run(s.now + 1.0)
        assert not any(e.sub_id == sub for e in s.brokers["b0"].ram.tables[0])
        assert s.brokers["b1"].anti_entropy.ram.stats["unwanted"] >= 3


def test_a_sketch_reply_on_the_wire_is_m_over_8_bytes_not_the_table() -> None:
    """C.2-5 on the wire (weeble.v1 Envelope): the reply of a round over 1,000 subscriptions
    of ~30 bytes is m/8 bytes plus a few, the exact round's reply the whole table."""
    from weeble.codec.wire import wire_size
    from weeble.core.routing.edges import encode
    from weeble.core.sketch.bloom import BloomFilter

    ae = AntiEntropy(bits_per_element=4, hashes=2)
    keys = [Filter.parse(f'topic == "news/{i:05d}" && prio > {i % 7}') for i in range(1000)]
    m = ae.bits_for(len(keys))
    sketch = BloomFilter.of((encode(k) for k in keys), m=m, k=ae.hashes, seed=99)
    small = wire_size(AeReply(1, len(keys), sketch))
    full = wire_size(AeReply(1, len(keys), None, tuple(("", k) for k in keys)))
    assert m // 8 <= small <= m // 8 + 24
    assert full / small > 50  # 4 bits per ~35-byte filter: about 64x (spec seed23 §C.2-5)
