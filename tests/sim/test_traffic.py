"""Leasing traffic stays proportional to the routing state it keeps alive.

Issue 7 item 7: under merging 1, peer-to-peer, every broker used to re-send its merger once per
incoming subscription, relayed upstream mergers included, so subscription traffic grew about
1.5× per hop along a chain (22, 36, 59, … 614 Subs per link per 100 s on a chain of 10). For
every algorithm, in a fault-free run on a chain of 10, the Subs a link carries per ρ must stay
within a constant of the entries they keep alive at the far end, at every hop.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest

from weeble.core.messages import Sub
from weeble.core.rom import Algorithm, Params
from weeble.model.topology import Topology, chain, kary_tree
from weeble.sim.simulation import Simulation as SimNetwork  # the one simulation

PI, RHO, DMIN, DMAX = 10.0, 4.0, 0.01, 0.2
FILTERS = ["price range [0, 10]", "price range [10, 20]", "price range [20, 30]",
           "price < 15", "class == 1", "class == 2", "class == 1 && price < 15"]
COMBOS = [(alg, hier) for alg in Algorithm for hier in (False, True)
          if not (alg is Algorithm.FLOODING and hier)]
PER_ENTRY = 2.0  # refreshes per entry per ρ: one, plus a merger's or a hand-over's extra
SLACK = 2.0


@pytest.mark.parametrize(("alg", "hierarchical"), COMBOS,
                         ids=[f"{a.value}-{'hier' if h else 'p2p'}" for a, h in COMBOS])
def test_subscriptions_per_link_stay_proportional_to_the_entries_they_renew(
        alg: Algorithm, hierarchical: bool) -> None:
    topo = chain(10)
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    start, end = 3 * PI, 3 * PI + 25 * RHO
    subs: Counter[tuple[str, str]] = Counter()

    def count(t: float, kind: str, src: str, dst: str, msg: object) -> None:
        if kind == "send" and type(msg) is Sub and start <= t < end:
            subs[src, dst] += 1

    net = SimNetwork(topo, algorithm=alg, params=params, hierarchical=hierarchical,
                     delay="uniform", seed=7, on_link=count)
    rng = random.Random(7)
    for i, b in enumerate(topo.brokers):
        for j in range(3):
            net.subscribe(0.0, f"c{i}-{j}", b, rng.choice(FILTERS))
    pt = 0.0
    while pt < end:  # the renewals must keep every subscriber served
        net.publish(pt, rng.choice(topo.brokers), {"price": rng.uniform(0, 30), "class": 1},
                    publisher="pub")
        pt += 0.5
    entries: Counter[tuple[str, str]] = Counter()
    t = start
    while t < end:  # the entries each link renews, sampled once per ρ
        net.run(t)
        for v, broker in net.brokers.items():
            for _, e in broker.entries():
                if e.dest in broker.neighbors:
                    entries[e.dest, v] += 1
        t += RHO
    net.run(end)
    periods = (end - start) / RHO
    hops = list(zip(topo.brokers, topo.brokers[1:], strict=False))
    for u, v in hops + [(v, u) for u, v in hops]:
        per_rho = subs[u, v] / periods
        held = entries[u, v] / periods
        assert per_rho <= PER_ENTRY * held + SLACK, (
            f"{u}→{v}: {per_rho:.1f} Subs per ρ to keep {held:.1f} entries alive at {v}")
    assert net.delivery_errors(published_from=2 * PI, settle=PI) == []


SHAPES = {"chain": lambda: chain(10), "tree": lambda: kary_tree(2, 4)}


@pytest.mark.parametrize("shape", SHAPES)
def test_relayed_mergers_do_not_multiply_along_a_path(shape: str) -> None:
    """Issue 23 item 3, merging 1 peer-to-peer: a broker whose merger had the filter of a merger
    it received (that filter covers the rest of its destination's) forwarded its own merger
    beside the received one, which variant 1 forwards as a constituent while its merger's flag
    is 0: each hop added an id, and b9 of this chain of 10 held 8 merger ids of `price <= 30`
    towards b8 (up to 5 per link and filter on the binary tree of 15). Fault-free, once the
    start-up mergers have expired (from 8π on), a link carries at most two merger ids per
    filter, however far the subscribers are."""
    topo: Topology = SHAPES[shape]()
    params = Params(pi=PI, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=topo.diameter())
    net = SimNetwork(topo, algorithm=Algorithm.MERGING1, params=params, delay="uniform",
                     seed=7)
    rng = random.Random(7)
    for i, b in enumerate(topo.brokers):
        for j in range(3):
            net.subscribe(0.0, f"c{i}-{j}", b, rng.choice(FILTERS))
    relayed = 0
    worst: dict[tuple[str, str, str], int] = {}
    t = 8 * PI
    while t < 8 * PI + 25 * RHO:
        net.run(t)
        for v, broker in net.brokers.items():
            ids: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
            for _, e in broker.entries():  # an id no client subscribed with is a merger's
                if e.dest in broker.neighbors and e.sub_id not in net.subscriptions:
                    ids[e.dest, str(e.filter)].add(e.sub_id)
            for (u, f), held in ids.items():
                relayed += 1
                worst[u, v, f] = max(worst.get((u, v, f), 0), len(held))
        t += RHO
    assert relayed > 100, "the workload hardly merges"
    over = {k: n for k, n in worst.items() if n > 2}
    assert over == {}, f"merger ids per (sender, receiver, filter): {over}"
