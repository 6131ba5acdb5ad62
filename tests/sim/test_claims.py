"""Spec ch3 §7, claims 1–7 and 15, proven in simulation.

The central property: for every algorithm, from a randomly corrupted state (hypothesis draws the
topology, the subscriptions, the faults and when they strike), the brokers are in the legitimate
configuration from Δ after the last fault on, stay there, and every notification published from
then on reaches exactly the subscribers it should, once.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from weeble.core.events import Corrupt
from weeble.core.filters import Filter
from weeble.core.messages import Notification, Notify, Sub, Switch, Unsub
from weeble.core.rom import Algorithm, Options, Params
from weeble.model.topology import chain, kary_tree, random_tree
from weeble.sim.simulation import Simulation as SimNetwork  # the one simulation

# Filters that identify, cover and merge one another, so every algorithm has work to do.
POOL = [Filter.parse(t) for t in (
    "class == 1", "class == 2", "class == 3", "price range [0, 10]", "price range [10, 20]",
    "price range [20, 30]", "price < 30", "price < 15", "class == 1 && price < 15", "true",
)]
ATTRS = [{"class": 1}, {"class": 2}, {"class": 3}, {"price": 5}, {"price": 10}, {"price": 25},
         {"class": 1, "price": 12}, {"price": 40}]

PI, RHO, DMIN, DMAX = 10.0, 4.0, 0.01, 0.2

COMBOS = [(Algorithm.FLOODING, False, False)] + [
    (alg, hier, wrap)
    for alg in list(Algorithm)[1:]
    for hier in (False, True)
    for wrap in (False, True)
]


def _ids(combo: tuple[Algorithm, bool, bool]) -> str:
    alg, hier, wrap = combo
    return f"{alg.value}-{'hier' if hier else 'p2p'}{'-wrapper' if wrap else ''}"


def _publish_regularly(net: SimNetwork, rng: random.Random, start: float, end: float) -> None:
    brokers = net.topology.brokers
    t = start
    while t < end:
        net.publish(t, rng.choice(brokers), rng.choice(ATTRS), publisher="pub")
        t += 0.5


@pytest.mark.parametrize("combo", COMBOS, ids=_ids)
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_stabilizes_within_its_bound_from_a_corrupted_state(combo, data) -> None:
    alg, hierarchical, wrapper = combo
    seed = data.draw(st.integers(0, 10**6), label="seed")
    topo = random_tree(data.draw(st.integers(3, 9), label="brokers"), seed)
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    params.validate(alg, wrapper)
    net = SimNetwork(topo, algorithm=alg, params=params, hierarchical=hierarchical,
                     wrapper=wrapper, delay="uniform", seed=seed)
    rng = random.Random(seed)
    brokers = topo.brokers
    for i in range(data.draw(st.integers(1, 8), label="subscriptions")):
        net.subscribe(0.0, f"c{i}", rng.choice(brokers), rng.choice(POOL))
    # the faults: random state corruption anywhere, bogus messages on links
    first = 2 * PI + data.draw(st.floats(0, PI), label="first fault")
    faults = data.draw(st.lists(st.tuples(st.integers(0, len(brokers) - 1),
                                          st.floats(0, PI), st.integers(0, 2**31)),
                                min_size=1, max_size=12), label="faults")
    last = first
    for b, dt, fseed in faults:
        t = first + dt
        last = max(last, t)
        frng = random.Random(fseed)
        if fseed % 5 == 0:  # F7/F8/F15: a message nobody sent appears on a link
            src = frng.choice(topo.neighbors(brokers[b]) or [brokers[b]])
            msg = frng.choice([Sub(f"bogus{fseed}", frng.choice(POOL), frng.randrange(2)),
                               Unsub(f"c{frng.randrange(8)}/0", frng.choice(POOL)),
                               Notify(Notification("ghost", fseed, frng.choice(ATTRS))),
                               Switch(frng.randrange(2))])
            net.inject_message(t, src, brokers[b], msg)
        else:
            net.corrupt_randomly(t, brokers[b], frng, POOL)
    _publish_regularly(net, rng, 0.0, last + net.bound + 2 * PI)

    deadline = last + net.bound
    net.run(deadline)
    t = deadline
    while t <= deadline + 2 * PI:  # legitimate at Δ, and it stays so (closure)
        net.run(t)
        problems = net.legitimacy()
        assert problems == [], f"not legitimate at {t:.2f} (last fault {last:.2f}): {problems[:5]}"
        t += 0.5
    # claim 15: after Δ no duplicate, spurious or missing delivery
    settle = params.d * params.delta_max
    assert net.delivery_errors(published_from=deadline, settle=settle,
                               until=deadline + 2 * PI - 1) == []


def _wellformed(alg: Algorithm, *, hierarchical: bool = True, pi: float = PI,
                topo=None, delay: str = "uniform", options: Options | None = None,
                seed: int = 1) -> SimNetwork:
    topo = topo or kary_tree(3, 3)
    params = Params(pi=pi, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    return SimNetwork(topo, algorithm=alg, params=params, hierarchical=hierarchical,
                      delay=delay, seed=seed, options=options)


# ---- claim 1: second chance -----------------------------------------------------------------


@settings(max_examples=30, deadline=None, derandomize=True)
@given(at=st.floats(PI, 4 * PI))  # after the broker has booted (within the first π)
def test_unrefreshed_entry_lives_more_than_pi_and_at_most_2pi(at: float) -> None:
    net = _wellformed(Algorithm.SIMPLE, topo=chain(1))
    sub = net.subscribe(at, "c", "b0", "class == 1", phase=1e9)  # never refreshed
    net.run(at + 3 * PI)
    (t_expired,) = [t for t, _, e in net.expirations() if e["sub_id"] == sub]
    assert PI < t_expired - at <= 2 * PI


def test_corrupted_flag0_entry_is_gone_within_pi() -> None:
    net = _wellformed(Algorithm.SIMPLE, topo=chain(1))
    net.corrupt(3.0, "b0", Corrupt("entry.insert", {"sub_id": "x", "filter": "true",
                                                     "dest": "ghost", "flag": 0}))
    net.run(3.0)
    assert len(net.brokers["b0"].ram.tables[0]) == 1
    net.run(3.0 + PI)
    assert len(net.brokers["b0"].ram.tables[0]) == 0


@pytest.mark.parametrize("second_chance", [True, False])
def test_refreshed_entries_are_never_removed_and_without_second_chance_they_are(
        second_chance: bool) -> None:
    """Claim 1's second half, and its ablation (issue 28): without the second chance every
    overrun deletes the entries refreshed since the last one, and until the next refresh the
    subscriber misses what is published."""
    net = _wellformed(Algorithm.SIMPLE, topo=chain(3),
                      options=Options(second_chance=second_chance))
    net.subscribe(0.0, "c", "b2", "class == 1", phase=1.0)
    _publish_regularly(net, random.Random(1), 1.0, 6 * PI)
    net.run(6 * PI)
    errors = net.delivery_errors(published_from=2 * PI, settle=1.0)
    if second_chance:
        assert list(net.expirations()) == [] and errors == []
    else:
        assert list(net.expirations()) and any("missing" in e for e in errors)


# ---- claim 2: flooding ----------------------------------------------------------------------


def test_flooding_needs_no_leasing_messages_and_works_with_rho_equal_pi() -> None:
    topo = kary_tree(2, 3)
    params = Params(pi=RHO, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())  # ρ = π
    params.validate(Algorithm.FLOODING, False)
    net = SimNetwork(topo, algorithm=Algorithm.FLOODING, params=params, seed=3)
    for i, b in enumerate(topo.brokers):
        net.subscribe(0.0, f"c{i}", b, POOL[i % 3])
    _publish_regularly(net, random.Random(3), 1.0, 60.0)
    net.run(61.0)
    assert net.engine.sent[Sub] == 0 and net.engine.sent[Unsub] == 0
    assert list(net.expirations()) == []
    assert net.delivery_errors(published_from=0.0, settle=0.0) == []


# ---- claim 3: simple routing and condition (3.3) --------------------------------------------


def _leasing_under_adversarial_delays(alg: Algorithm, pi: float, seed: int) -> SimNetwork:
    topo = chain(6)
    # d·(δmax − δmin) = 4.95 s
    params = Params(pi=pi, rho=RHO, delta_min=0.01, delta_max=1.0, d=topo.diameter())
    net = SimNetwork(topo, algorithm=alg, params=params, delay="adversarial", seed=seed)
    rng = random.Random(seed)
    # Subscriptions flow b0→b5, notifications b5→b0: FIFO never queues a fast renewal behind
    # a slow notification, so the adversary keeps its power.
    # One subscriber per class, so an expired entry is not masked by an identical one.
    for i in range(12):
        net.subscribe(rng.uniform(0, 20), f"c{i}", "b0", Filter.equals("class", i))
    for k in range(2400):  # a publication every 0.1 s at the far end, where entries expire
        net.publish(k * 0.1, "b5", {"class": k % 12}, publisher="pub")
    net.run(240.0)
    return net


def test_no_valid_entry_expires_when_pi_satisfies_condition_3_3() -> None:
    pi = RHO + 5 * (1.0 - 0.01) + 0.1
    for seed in range(3):
        net = _leasing_under_adversarial_delays(Algorithm.SIMPLE, pi, seed)
        assert list(net.expirations()) == []
        assert net.delivery_errors(published_from=0.0, settle=5 * 1.0) == []


def test_valid_entries_expire_and_notifications_are_missed_when_pi_is_too_small() -> None:
    pi = RHO + 1.0  # well under ρ + d·(δmax − δmin) = 8.95
    expired = missed = 0
    for seed in range(3):
        net = _leasing_under_adversarial_delays(Algorithm.SIMPLE, pi, seed)
        live = set(net.subscriptions)  # nobody unsubscribes: every expired entry was valid
        expired += sum(e["sub_id"] in live for _, _, e in net.expirations())
        missed += sum("missing" in e for e in net.delivery_errors(0.0, settle=5.0))
    assert expired > 0 and missed > 0


# ---- claim 4: identity-based routing needs the flag rule ------------------------------------


def _identical_subscribers(options: Options) -> SimNetwork:
    net = _wellformed(Algorithm.IDENTITY, options=options)
    leaf = net.topology.leaves(net.root)[0]
    net.subscribe(0.0, "c1", leaf, "class == 1", phase=1.0)
    net.subscribe(0.5, "c2", leaf, "class == 1", phase=2.0)
    _publish_regularly(net, random.Random(0), 1.0, 8 * PI)
    net.run(8 * PI)
    return net


def test_identity_with_the_flag_rule_loses_nothing() -> None:
    net = _identical_subscribers(Options())
    assert net.delivery_errors(published_from=1.0, settle=1.0) == []
    assert net.legitimacy() == []


def test_identity_without_the_flag_rule_loses_notifications() -> None:
    net = _identical_subscribers(Options(flag_rule=False, renew_forwarded=False))
    errors = net.delivery_errors(published_from=1.0, settle=1.0)
    assert any("missing" in e for e in errors)
    assert net.legitimacy() != []


# ---- claims 5 and 6: covering and merging under their adversarial faults --------------------


def _f13(alg: Algorithm) -> SimNetwork:
    """F13: an all-covering entry at one broker, every other table initialized."""
    net = _wellformed(alg, hierarchical=False, seed=5)
    rng = random.Random(5)
    for i, b in enumerate(net.topology.brokers):
        net.subscribe(0.0, f"c{i}", b, POOL[i % 8])
    _publish_regularly(net, rng, 0.0, 12 * PI)
    victim = net.topology.brokers[4]
    t = 3 * PI
    for b in net.topology.brokers:
        if b != victim:
            net.corrupt(t, b, Corrupt("table.clear"))
    dest = net.topology.neighbors(victim)[0]
    net.corrupt(t, victim, Corrupt("entry.insert", {"sub_id": "fa", "filter": "true",
                                                     "dest": dest, "flag": 1}))
    net.run(12 * PI)
    return net


def test_covering_variant1_recovers_from_f13_within_its_bound() -> None:
    net = _f13(Algorithm.COVERING1)
    t_fault = 3 * PI
    assert net.params.bound(Algorithm.COVERING1, False) == 2 * PI + net.params.d * DMAX
    assert net.legitimacy() == []
    assert net.delivery_errors(t_fault + net.bound, settle=0.0) == []


def test_covering_variant2_recovers_within_its_longer_bound() -> None:
    net = _f13(Algorithm.COVERING2)
    assert net.bound == 2 * PI + RHO + net.params.d * DMAX
    assert net.legitimacy() == []
    assert net.delivery_errors(3 * PI + net.bound, settle=0.0) == []


def test_covering_variant2_sends_no_more_refreshes_than_variant1() -> None:
    counts = {}
    for alg in (Algorithm.COVERING1, Algorithm.COVERING2):
        net = _wellformed(alg, hierarchical=False, seed=9)
        rng = random.Random(9)
        for i in range(20):
            net.subscribe(0.0, f"c{i}", rng.choice(net.topology.brokers), rng.choice(POOL))
        net.run(10 * PI)
        counts[alg] = net.engine.sent[Sub]
    assert counts[Algorithm.COVERING2] < counts[Algorithm.COVERING1]


def test_merging_variant2_sends_fewer_subscription_messages() -> None:
    counts = {}
    for alg in (Algorithm.MERGING1, Algorithm.MERGING2):
        net = _wellformed(alg, seed=11)
        leaves = net.topology.leaves(net.root)
        for i in range(12):  # each leaf holds three ranges that merge into one
            lo = 10 * (i % 3)
            net.subscribe(0.0, f"c{i}", leaves[(i // 3) % 3], f"price range [{lo}, {lo + 10}]")
        net.run(10 * PI)
        assert net.legitimacy() == []
        counts[alg] = net.engine.sent[Sub]
    assert counts[Algorithm.MERGING2] < counts[Algorithm.MERGING1]


def test_merging_recovers_from_a_false_merger_f14() -> None:
    for alg in (Algorithm.MERGING1, Algorithm.MERGING2):
        net = _wellformed(alg, seed=13)
        leaves = net.topology.leaves(net.root)
        for i in range(6):
            lo = 10 * (i % 3)
            net.subscribe(0.0, f"c{i}", leaves[i % 2], f"price range [{lo}, {lo + 10}]")
        _publish_regularly(net, random.Random(13), 0.0, 10 * PI)
        t = 3 * PI
        victim = net.topology.parent_map(net.root)[leaves[0]]
        for b in net.topology.brokers:
            if b != victim:
                net.corrupt(t, b, Corrupt("table.clear"))
        net.corrupt(t, victim, Corrupt("merger.insert", {
            "filter": "true", "dest": leaves[0], "flag": 1,
            "constituents": [str(f) for f in POOL]}))
        net.run(t + net.bound)
        assert net.legitimacy() == [], alg
        assert net.delivery_errors(t + net.bound, settle=0.0) == []


# ---- claim 7: the periodic-rebuild wrapper --------------------------------------------------


def test_lemma1_no_old_tagged_control_message_after_the_next_same_tag_switch() -> None:
    """Lemma 1 (π > 2·d·δ_max): a control message tagged x, sent while x was current, arrives
    before the root issues the next switch(x)."""
    topo = random_tree(10, 4)
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    sent: dict[tuple[str, str, int], float] = {}
    root_switches: dict[int, list[float]] = {0: [], 1: []}
    received: list[tuple[float, float, int]] = []  # (sent at, received at, tag)

    def on_link(t: float, kind: str, src: str, dst: str, msg: object) -> None:
        key = (src, dst, id(msg))
        if kind == "send":
            sent[key] = t
            if isinstance(msg, Switch) and src == topo.brokers[0]:
                root_switches[msg.tag].append(t)
        elif kind == "receive" and isinstance(msg, Sub | Unsub):
            received.append((sent[key], t, msg.tag))

    net = SimNetwork(topo, algorithm=Algorithm.IDENTITY, params=params, wrapper=True,
                     delay="uniform", seed=4, on_link=on_link)
    rng = random.Random(4)
    for i in range(15):
        sub = net.subscribe(rng.uniform(0, 30), f"c{i}", rng.choice(topo.brokers),
                            rng.choice(POOL))
        if i % 3 == 0:
            net.unsubscribe(rng.uniform(30, 60), sub)
    net.run(100.0)
    assert len(root_switches[0]) + len(root_switches[1]) >= 9
    assert len(received) > 100
    late = [(s, r, tag) for s, r, tag in received
            if any(s < w <= r for w in root_switches[tag])]
    assert late == []


# ---- a defect of the printed algorithm, and its fix ----------------------------------------


def _identical_fault_free(renew_forwarded: bool) -> tuple[int, int]:
    """Fault-free: several identical subscribers at leaves; count legitimacy violations and
    deliveries missed over 30 leasing periods."""
    violations = missed = 0
    for seed in range(4):
        net = _wellformed(Algorithm.IDENTITY, seed=seed,
                          options=Options(renew_forwarded=renew_forwarded))
        rng = random.Random(seed)
        leaves = net.topology.leaves(net.root)
        for i, leaf in enumerate(leaves):  # two identical subscribers per leaf, own classes
            net.subscribe(0.0, f"x{i}", leaf, Filter.equals("class", i))
            net.subscribe(0.0, f"y{i}", leaf, Filter.equals("class", i))
        for k in range(int(30 * PI / 0.1)):
            net.publish(k * 0.1, rng.choice(leaves), {"class": k % len(leaves)},
                        publisher="pub")
        t = 2 * PI
        while t < 30 * PI:
            net.run(t)
            violations += bool(net.legitimacy())
            t += 0.5
        missed += len(net.delivery_errors(published_from=2 * PI, settle=0.0))
    return violations, missed


def test_printed_identity_rule_lets_valid_upstream_entries_expire_without_any_fault() -> None:
    """Only the first refresh per overrun period goes up, so two renewals of the upstream entry
    can be π + ρ apart while the entry is only sure to live π."""
    violations, missed = _identical_fault_free(renew_forwarded=False)
    assert violations > 0 and missed > 0


def test_renewing_the_forwarded_subscription_keeps_upstream_entries_alive() -> None:
    assert _identical_fault_free(renew_forwarded=True) == (0, 0)


def test_a_bogus_constituent_is_gone_within_the_printed_merging_bound() -> None:
    """(3.8) holds: a bogus entry that merges with a genuine one travels upstream inside the
    merger while it lives (≤ 2π); when it expires the merger is dissolved and withdrawn upstream
    at once. (Before, the merger's upstream entries outlived it by up to 2π more, and the bound
    was 4π + d·δ_max; see the nested case below for why that was not enough either.)"""
    for seed in range(6):
        net = _wellformed(Algorithm.MERGING1, topo=chain(3), hierarchical=False, seed=seed)
        assert net.bound == 2 * PI + net.params.d * DMAX
        net.subscribe(0.0, "c", "b0", "price range [10, 20]")
        t = 3 * PI
        net.corrupt(t, "b1", Corrupt("entry.insert", {
            "sub_id": "bogus", "filter": "price range [20, 30]", "dest": "b0", "flag": 1}))
        last_bad = t
        now = t
        while now < t + 5 * PI:
            now += 0.1
            net.run(now)
            if net.legitimacy():
                last_bad = now
        assert last_bad - t <= net.bound


@pytest.mark.parametrize("alg", [Algorithm.MERGING1, Algorithm.MERGING2])
def test_nested_mergers_do_not_outlive_a_bogus_constituent(alg: Algorithm) -> None:
    """Found by hypothesis (seed 379): a bogus `true` subscription at b1 merges there, the
    merger merges again at b0, and that one is forwarded to b2. With expiry alone each level
    added up to 2π + ρ (legitimate only ~6π later); dissolving on expiry withdraws the chain."""
    topo = random_tree(5, 379)
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    net = SimNetwork(topo, algorithm=alg, params=params, delay="uniform", seed=379)
    net.subscribe(0.0, "c0", "b0", "price range [0, 10]")
    net.subscribe(0.0, "c1", "b4", "class == 1 && price < 15")
    t = 2 * PI
    net.inject_message(t, "b4", "b1", Sub("bogus75", Filter.everything(), 1))
    net.run(t + 1.0)
    assert any(e.filter == Filter.everything() for _, e in net.brokers["b2"].entries())
    net.run(t + net.bound)
    assert net.legitimacy() == []



@pytest.mark.parametrize("alg", [Algorithm.MERGING1, Algorithm.MERGING2])
@pytest.mark.parametrize("seed", [0, 1])
def test_bogus_all_covering_entries_at_three_brokers_of_31_are_gone_within_the_bound(
        alg: Algorithm, seed: int) -> None:
    """Issue 23 item 3: a binary tree of 31 brokers, peer-to-peer, range subscriptions that
    merge, subscriptions coming and going around the fault (mergers are dissolved and formed
    again meanwhile), and a bogus `true` entry at three brokers: the state is legitimate from
    the printed bound (3.8)/(3.9) after the fault on."""
    pi, rho, dmax = 8.3, 7.5, 0.08  # Δ(merging1) = 17.24 s, the run
    topo = kary_tree(2, 5)
    params = Params(pi=pi, rho=rho, delta_min=DMIN, delta_max=dmax, d=topo.diameter())
    net = SimNetwork(topo, algorithm=alg, params=params, delay="uniform", seed=seed)
    rng = random.Random(seed)
    ranges = ["price range [0, 10]", "price range [10, 20]", "price range [20, 30]",
              "price < 15", "class == 1", "class == 1 && price < 15", "price range [0, 20]"]
    for i, b in enumerate(topo.brokers):
        for j in range(3):
            net.subscribe(0.0, f"c{i}-{j}", b, rng.choice(ranges))
    t = 3 * pi
    for k in range(60):
        start = rng.uniform(t - 2 * pi, t + 2 * pi)
        sub = net.subscribe(start, f"x{k}", rng.choice(topo.brokers), rng.choice(ranges))
        net.unsubscribe(start + rng.uniform(0.5, 2 * pi), sub)
    for b in rng.sample(topo.brokers, 3):
        net.corrupt(t, b, Corrupt("entry.insert", {
            "sub_id": f"bogus-{b}", "filter": "true", "dest": rng.choice(topo.neighbors(b)),
            "flag": 1}))
    settle, linger = params.d * dmax + 0.05, 2 * pi + params.d * dmax
    last_bad = now = t
    while now < t + net.bound + 2 * pi:
        now += 0.25
        net.run(now)
        if net.legitimacy(settle=settle, linger=linger):
            last_bad = now
    assert last_bad - t <= net.bound

# ---- closure under churn: no fault, subscriptions come and go, the state stays legitimate ---


# Merging variant 1, peer-to-peer, under the wrapper used to leave a transient coverage hole
# after an unsubscription (an xfail here): a dissolved merger withdrew its filter upstream although
# a constituent with that very filter stayed. Fixed in core/routing/merging.py (_dissolve).
CHURN_COMBOS = [pytest.param(c, id=_ids(c)) for c in COMBOS]


@pytest.mark.parametrize("combo", CHURN_COMBOS)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(3, 10))
@example(seed=89, n=10)  # the known gap's case, so that its xfail never hangs on the draw
def test_fault_free_churn_keeps_the_configuration_legitimate(combo, seed: int, n: int) -> None:
    alg, hierarchical, wrapper = combo
    topo = random_tree(n, seed)
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    net = SimNetwork(topo, algorithm=alg, params=params, hierarchical=hierarchical,
                     wrapper=wrapper, delay="uniform", seed=seed)
    rng = random.Random(seed)
    for i in range(25):
        start = rng.uniform(0, 6 * PI)
        sub = net.subscribe(start, f"c{i}", rng.choice(topo.brokers), rng.choice(POOL))
        if rng.random() < 0.5:
            net.unsubscribe(start + rng.uniform(1, 3 * PI), sub)
    _publish_regularly(net, rng, 0.0, 8 * PI)
    path = params.d * DMAX
    t = PI  # every broker has booted
    while t < 8 * PI:
        net.run(t)
        # an ended subscription may leave entries behind for up to the algorithm's Δ
        problems = net.legitimacy(settle=path + 0.05, linger=net.bound)
        assert problems == [], f"at {t:.2f}: {problems[:4]}"
        t += 0.5
    assert net.delivery_errors(published_from=PI, settle=path + 0.05) == []
