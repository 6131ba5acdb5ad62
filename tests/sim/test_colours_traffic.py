"""The 3-colour scheme under traffic (thesis 4.5; spec ch4 §6.3): reconfigurations through the
colours lose and duplicate nothing when Eq. 4.2 holds (TC-26) and lose when it does not (TC-31);
the ordering extensions (TC-32); the race of a subscription across a link added in round k
(TC-34: a whole round lost without E4); the same reconfiguration through the coordinated link
exchange for comparison; and the property: random trees, random faults on every RAM variable of
the coloured overlay, random reconfiguration requests: legitimate within ∆r, then no loss.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_exchange import Net, ordering_violations
from weeble.core.filters import Filter
from weeble.core.reconfig.plan import (
    AddLeaf,
    ExchangeLink,
    Op,
    RemoveLeaf,
    Tree,
    apply,
    edge,
    random_exchange,
    random_tree,
)
from weeble.core.reconfig.recolor_faults import random_colour_fault
from weeble.core.rom import Algorithm, Colours, Ordering, Params
from weeble.core.routing.faults import random_fault
from weeble.model.topology import from_edges
from weeble.sim.reconfigure import Reconfigurator
from weeble.sim.simulation import Simulation

XI, RHO, DMIN, DMAX = 1.0, 0.4, 0.005, 0.02
H = 10  # trees of at most 11 brokers: h ≤ η − 1
P = Params(pi=1.0, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=2 * H)
C = Colours(xi=XI, height=H)
FILTERS = ["class == 1", "price < 50", "class == 1 && price < 20", "price range [10, 30]"]
ALGORITHMS = [Algorithm.FLOODING, Algorithm.SIMPLE, Algorithm.IDENTITY, Algorithm.COVERING1,
              Algorithm.COVERING2, Algorithm.MERGING1, Algorithm.MERGING2]


def _ops(tree: Tree, rng: random.Random, count: int) -> tuple[list[Op], Tree]:
    """Exchanges, a leaf that joins and one that leaves (planned one after the other)."""
    ops: list[Op] = []
    for i in range(count):
        if i == 1:
            op: Op = AddLeaf(f"n{i}", rng.choice(sorted(tree.nodes)))
        elif i == 3 and any(v.startswith("n") and tree.is_leaf(v) for v in tree.nodes):
            op = RemoveLeaf(next(v for v in sorted(tree.nodes) if v.startswith("n")))
        else:
            op = random_exchange(tree, rng)
        tree = apply(tree, op)
        ops.append(op)
    return ops, tree


def _traffic(net: Simulation, rng: random.Random, brokers: list[str], until: float,
             every: float = 0.02) -> None:
    t = 0.5
    while t < until:
        net.publish(t, rng.choice(brokers), {"class": rng.choice([1, 2]),
                                             "price": rng.uniform(0, 60)})
        t += every


def _reconfigured(alg: Algorithm, seed: int, params: Params = P,
                  colours: Colours = C) -> tuple[Simulation, Reconfigurator, Tree]:
    rng = random.Random(seed)
    tree = random_tree([f"b{i}" for i in range(9)], rng)
    net = Simulation(from_edges(tree.edges), algorithm=alg, params=params, colours=colours,
                     seed=seed, root="b0")
    reconf = Reconfigurator(net, tree, colours=True, seed=seed)
    for i, b in enumerate(sorted(tree.nodes)):
        net.subscribe(0.0, f"s{i}", b, rng.choice(FILTERS))
    ops, final = _ops(tree, rng, 5)
    reconf.run_plan(4.0, ops)
    reconf.move_to(16.0, random_tree(sorted(final.nodes), rng))  # a whole tree, one request
    _traffic(net, rng, sorted(tree.nodes), 24.0)
    net.run(26.0)
    return net, reconf, final


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_tc26_no_loss_no_duplicate_across_colour_reconfigurations(alg: Algorithm) -> None:
    for seed in range(2):
        net, reconf, _ = _reconfigured(alg, seed)
        assert [r.outcome for r in reconf.records] == ["done"] * 6
        assert net.delivery_errors(published_from=3 * XI, settle=3 * XI) == []
        assert net.overlay_legitimacy() == []
        assert net.legitimacy(settle=3 * XI) == []
        tree = {(min(a, b), max(a, b)) for a in net.brokers for b in net.brokers[a].neighbors}
        assert tree == set(reconf.tree.edges)  # the requested tree, persistent
        assert not any(tr.kind == "rejoin" for _, _, tr in net.traces)


def test_tc31_with_eq_4_2_violated_notifications_are_lost_after_a_switch() -> None:
    slow = Params(pi=1.0, rho=1.3 * XI, delta_min=DMIN, delta_max=DMAX, d=2 * H)
    with pytest.raises(ValueError, match=r"Eq\. 4\.2"):
        C.validate(slow)
    net, _, _ = _reconfigured(Algorithm.IDENTITY, 0, params=slow)
    assert len(net.delivery_errors(published_from=3 * XI, settle=3 * XI)) > 100
    assert net.legitimacy(settle=3 * XI) != []  # T^{c_cur} incomplete


# ---- TC-32: ordering --------------------------------------------------------------------------


def _ordering_run(ordering: Ordering, seed: int) -> Net:
    """A chain b0…b7; the exchange of b3–b4 for b0–b7 makes the far end near. Publishers at
    b7 and b4; a client at b2 publishes whenever it gets one of p4's (a causal chain)."""
    edges = [(f"b{i}", f"b{i + 1}") for i in range(7)]
    net = Net(from_edges(edges), algorithm=Algorithm.IDENTITY, params=P, colours=C, seed=seed,
              root="b0", ordering=ordering)
    net.reactors["s2"] = ("b2", "p4")
    reconf = Reconfigurator(net, Tree.of(edges), colours=True)
    for i in range(8):
        net.subscribe(0.0, f"s{i}", f"b{i}", "class == 1")
    reconf.start(4.2, ExchangeLink(remove=edge("b3", "b4"), add=("b0", "b7")))
    t = 0.5
    while t < 9.0:
        net.publish(t, "b7", {"class": 1, "price": 1}, publisher="p7")
        net.publish(t, "b4", {"class": 1, "price": 1}, publisher="p4")
        t += 0.005
    net.run(10.0)
    assert [r.outcome for r in reconf.records] == ["done"]
    assert net.delivery_errors(published_from=1.0, settle=3 * XI) == []
    return net


def _latency(net: Net, publisher: str, client: str) -> float:
    return max(t - p.notification.published_at for p in net.publications.values()
               if p.notification.publisher == publisher for t, c in p.deliveries if c == client)


def test_tc32_ordering_with_and_without_the_extensions() -> None:
    violations = {o: [ordering_violations(_ordering_run(o, seed)) for seed in range(2)]
                  for o in Ordering}
    # a FIFO violation is a causal one too, counted once, as FIFO (R15, since 45631bf)
    assert all(fifo > 0 for fifo, _ in violations[Ordering.NONE]), violations
    assert violations[Ordering.FIFO] == [(0, 0), (0, 0)]  # (found: FIFO keeps causal too)
    assert violations[Ordering.CAUSAL] == [(0, 0), (0, 0)]


def test_tc32_fifo_delays_only_what_crosses_the_new_link_causal_delays_every_publication() -> None:
    fifo, causal = _ordering_run(Ordering.FIFO, 0), _ordering_run(Ordering.CAUSAL, 0)
    # p4 → s5 never crosses the new link b0–b7
    assert _latency(fifo, "p4", "s5") < 4 * DMAX
    assert _latency(causal, "p4", "s5") > XI / 2
    # p7 → s0 crosses it: both hold it for about one recolor period
    assert _latency(fifo, "p7", "s0") > XI / 2 and _latency(causal, "p7", "s0") > XI / 2


# ---- TC-34: a subscription across a link added in round k -------------------------------------


def _race(early_control: bool, alg: Algorithm) -> Simulation:
    """Chain b0…b6, exchange b5–b6 for b1–b6; s at b0 refreshes just after R's recolor k, so
    b1 forwards it over the new link before b6 has recolor k."""
    edges = [(f"b{i}", f"b{i + 1}") for i in range(6)]
    colours = Colours(xi=XI, height=6, early_control=early_control)
    net = Simulation(from_edges(edges), algorithm=alg, params=P, colours=colours, seed=0,
                     root="b0", delay="constant")
    reconf = Reconfigurator(net, Tree.of(edges), colours=True)
    net.run(5.0)
    rounds = [t for t, n, tr in net.traces if tr.kind == "recolor" and n == "b0"]
    k = rounds[-1] + XI
    while k < 5.5:
        k += XI  # the recolor that will carry the exchange (submitted at 5.5)
    net.subscribe(5.0, "s", "b0", "class == 1", phase=(k + 0.001 - 5.0) % RHO)
    reconf.start(5.5, ExchangeLink(remove=edge("b5", "b6"), add=("b1", "b6")))
    t = 5.0
    while t < 11:
        net.publish(t, "b6", {"class": 1})
        t += 0.01
    net.run(12.0)
    return net


@pytest.mark.parametrize("alg", [Algorithm.SIMPLE, Algorithm.IDENTITY, Algorithm.COVERING1])
def test_tc34_a_subscription_racing_recolor_k_over_a_new_link_loses_a_round_without_e4(
        alg: Algorithm) -> None:
    """Found: the early copy is lost at b6 (not a neighbour in its old colour-k pointers, and
    T^k is reset at recolor k anyway), and the refreshes later in the round never follow it:
    b1 forwards a subscription once per colour and period (the wrapper's A7). T^k at b6 misses
    it for the whole round it is current. E4 (hold it until recolor k) loses nothing."""
    lost = {e4: len(_race(e4, alg).delivery_errors(published_from=7.0, settle=2 * XI))
            for e4 in (True, False)}
    assert lost[True] == 0 and lost[False] >= 0.8 * XI / 0.01, lost


# ---- the same reconfiguration through the coordinated link exchange ---------------------------


def test_the_same_exchanges_through_colours_and_through_the_coordinated_exchange() -> None:
    """Both lose nothing; the coordinated exchange is active within a few message delays, the
    colours take two recolor rounds; the exchange locks the cycle, the colours send no message
    beyond the recolors they send anyway."""
    rng = random.Random(4)
    tree = random_tree([f"b{i}" for i in range(9)], rng)
    ops: list[Op] = []
    t2 = tree
    for _ in range(3):
        ops.append(random_exchange(t2, rng))
        t2 = apply(t2, ops[-1])
    result = {}
    for colours in (True, False):
        params = P if colours else Params(pi=10.0, rho=RHO, delta_min=DMIN, delta_max=DMAX,
                                          d=2 * H)
        kw: dict[str, Any] = {"colours": C} if colours else {}
        net = Simulation(from_edges(tree.edges), algorithm=Algorithm.IDENTITY, params=params,
                         seed=4, root="b0", **kw)
        reconf = Reconfigurator(net, tree, colours=colours)
        for i, b in enumerate(sorted(tree.nodes)):
            net.subscribe(0.0, f"s{i}", b, FILTERS[i % 4])
        reconf.run_plan(4.0, ops)
        _traffic(net, rng, sorted(tree.nodes), 14.0)
        net.run(16.0)
        assert [r.outcome for r in reconf.records] == ["done"] * 3
        assert reconf.tree == t2
        assert net.delivery_errors(published_from=3 * XI, settle=3 * XI) == []
        result[colours] = max(r.duration or 0 for r in reconf.records)
    assert result[False] < 0.5 * XI < XI < result[True] <= 3 * XI, result


# ---- the property -----------------------------------------------------------------------------


def run_faults_and_requests(seed: int, brokers: int, alg: Algorithm, degree: int,
                            subscriptions: int, requests: int, faults: int,
                            order: list[tuple[str, str]] | None = None) -> Simulation:
    """Random tree, traffic, random reconfiguration requests and faults on the coloured
    overlay's RAM; asserts: legitimate within ∆r of the last fault or activation, and no loss.
    `order`: the tree's links in the order the simulator gets them (default: the tree's set of
    links, which `from_edges` sorts). Also tests/sim/sim_hashorder.py's run."""
    rng = random.Random(seed)
    tree = random_tree([f"b{i}" for i in range(brokers)], rng)
    assert order is None or Tree.of(order) == tree
    colours = Colours(xi=XI, height=H, degree=degree)
    net = Simulation(from_edges(order or tree.edges), algorithm=alg, params=P,
                     colours=colours, seed=seed, root="b0")
    reconf = Reconfigurator(net, tree, colours=True, seed=seed)
    names = sorted(tree.nodes)
    for i in range(subscriptions):
        net.subscribe(0.0, f"s{i}", rng.choice(names), rng.choice(FILTERS))
    _traffic(net, rng, names, 30.0, every=0.05)
    planned = tree
    for _ in range(requests):
        op = random_exchange(planned, rng)
        planned = apply(planned, op)
        reconf.start(4.0 + rng.uniform(0, 6), op)  # in any order: some may fail (PlanError)
    last = 4.0
    filters = [Filter.parse(f) for f in FILTERS]
    for _ in range(faults):
        at = 4.0 + rng.uniform(0, 6)
        last = max(last, at)

        def strike(now: float, b: str, _: Any) -> None:
            broker = net.brokers[b]
            fault = (random_colour_fault(broker, rng, names) if rng.random() < 0.7
                     else random_fault(broker, rng, filters))
            net.engine.inject(now, b, fault)

        net.engine.schedule(at, strike, rng.choice(names), None)
    net.run(last)
    bound = colours.bound(P)
    overlay_since = routing_since = None
    overlay: list[str] = []
    while net.now < last + 2 * bound + 3 * XI:
        net.run(net.now + 0.05)
        overlay = net.overlay_legitimacy()
        routing = net.legitimacy(settle=3 * XI)
        overlay_since = None if overlay else (overlay_since or net.now)
        routing_since = None if (overlay or routing) else (routing_since or net.now)
    activated = [t for t, _, tr in net.traces
                 if tr.kind == "reconfig" and tr.fields["phase"] == "activated"]
    start = max([last, *activated])
    assert overlay_since is not None and overlay_since - start <= bound, overlay
    assert routing_since is not None and routing_since - start <= bound, (
        f"routing legitimate {routing_since and routing_since - start} s after {start:.2f} s, "
        f"∆r = {bound:.2f} s")
    assert {r.outcome for r in reconf.records} <= {"done", "failed"}, reconf.records
    assert net.delivery_errors(published_from=routing_since, settle=3 * XI) == []
    return net


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_from_random_faults_and_requests_legitimate_within_delta_r_then_no_loss(
        data: st.DataObject) -> None:
    run_faults_and_requests(
        seed=data.draw(st.integers(0, 10**6), label="seed"),
        brokers=data.draw(st.integers(3, 10), label="brokers"),
        alg=data.draw(st.sampled_from(ALGORITHMS[1:]), label="algorithm"),
        degree=data.draw(st.sampled_from([0, 2, 3]), label="degree"),
        subscriptions=data.draw(st.integers(1, 6), label="subscriptions"),
        requests=data.draw(st.integers(0, 3), label="requests"),
        faults=data.draw(st.integers(1, 8), label="faults"))


def test_a_corrupted_leaving_flag_does_not_keep_a_broker_out_for_good() -> None:
    """The example that failed under two string-hash orders (CI, hash seeds 10 and 14; the
    order of the tree's links decided the brokers' boot times): the root's c_new corrupted at
    5.45 s, b2's `recolor.leaving` set at 5.98 s; r2, planned on the tree before r1, makes a
    pointer cycle b2–b3–b4 (a fault the scheme repairs), b2 times out at 10.45 s and used to
    stop for good ("b2: ... not connected to the root"). Now an accepted recolor clears the
    flag, and a broker that left but still runs joins again."""
    order = [("b3", "b4"), ("b4", "b5"), ("b2", "b4"), ("b0", "b4"), ("b0", "b6"),
             ("b0", "b1")]
    run_faults_and_requests(seed=1659, brokers=7, alg=Algorithm.SIMPLE, degree=0,
                         subscriptions=3, requests=2, faults=3, order=order)
