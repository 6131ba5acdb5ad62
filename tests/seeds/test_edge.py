"""Edge stabilization of seed 002 (spec C.2-1..3, B.3, B.5 timers), on the interim driver."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds.driver import SketchWorld
from weeble.broker.core.sketch.bloom import SketchParams
from weeble.broker.core.sketch.edge import AntiEntropyParams, TimerPolicy
from weeble.broker.core.sketch.routing import (
    SimpleRouter,
    all_locally_legal,
    globally_legal,
    subtree_subscriptions,
)

UNIVERSE = [f"s{i}" for i in range(6)]


def random_tree(n: int, rng: random.Random) -> list[tuple[str, str]]:
    return [(f"b{i}", f"b{rng.randrange(i)}") for i in range(1, n)]


def adjacency(edges: list[tuple[str, str]]) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return adj


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(2, 9))
def test_theorem_1_local_legality_iff_global_legality(data: st.DataObject, n: int) -> None:
    """C.2-1: on a tree with nothing in transit, every directed edge locally legal ⇔ every edge
    globally legal. Tables start legal and get a random number of random perturbations."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    tree = adjacency(random_tree(n, rng))
    local = {v: set(rng.sample(UNIVERSE, rng.randrange(3))) for v in tree}
    held = {e: set(s) for e, s in subtree_subscriptions(tree, local).items()}
    for _ in range(data.draw(st.integers(0, 3))):
        e = rng.choice(sorted(held))
        s = rng.choice(UNIVERSE)
        held[e].symmetric_difference_update({s})
    assert all_locally_legal(tree, held, local) == globally_legal(tree, held, local)


def test_simple_router_forwards_exactly_what_enters_or_leaves_an_advertisement() -> None:
    r = SimpleRouter("a", ["x", "y", "z"])
    assert r.on_sub("x", "s") == [("y", "s"), ("z", "s")]
    assert r.on_sub("y", "s") == [("x", "s")]  # x had not been told: only y held it
    assert r.on_sub("z", "s") == []  # a duplicate for everyone
    assert r.on_unsub("x", "s") == []
    assert r.on_unsub("y", "s") == [("z", "s")]  # now only z holds it: z loses it
    assert r.local_sub("s") == [("z", "s")]
    assert r.advertisement("z") == {"s"} and r.advertisement("x") == {"s"}
    assert r.route("s", "x") == (True, ["z"])


def world(edges: list[tuple[str, str]], *, sketch: str = "bloom", period: float = 1.0,
          seed: int = 0, kind: str = "static",
          delay: tuple[float, float] = (0.005, 0.02)) -> SketchWorld:
    params = AntiEntropyParams(sketch=sketch, timer=TimerPolicy(kind, period),  # type: ignore[arg-type]
                               bloom=SketchParams(bits_per_element=4, hashes=2))
    return SketchWorld(edges, params=params, seed=seed, delay=delay)


def subscribe_randomly(w: SketchWorld, rng: random.Random, per_node: int = 3) -> None:
    for v in sorted(w.nodes):
        for _ in range(per_node):
            w.emit(v, w.nodes[v].subscribe(f"s{rng.randrange(40)}"))


def corrupt_tables(w: SketchWorld, rng: random.Random) -> None:
    for node in w.nodes.values():
        held = {n: set(s) for n, s in node.router.held.items()}
        for n in held:
            if rng.random() < 0.5:
                held[n] = {f"s{rng.randrange(60)}" for _ in range(rng.randrange(6))}
        node.router.load(held=held, local=node.router.local)


def test_legal_system_sees_two_messages_per_edge_and_period_and_no_corrections() -> None:
    """C.2-3."""
    rng = random.Random(5)
    edges = random_tree(25, rng)
    w = world(edges, period=1.0)
    subscribe_randomly(w, rng)
    w.net.run(5)
    assert w.legal()
    w.net.reset_counts()
    w.net.run(25)  # 20 periods
    directed = 2 * len(edges)
    assert set(w.net.kinds) == {"Observe", "ObserveReply"}
    assert abs(w.net.kinds["Observe"] - 20 * directed) <= directed
    assert abs(w.net.kinds["ObserveReply"] - w.net.kinds["Observe"]) <= directed
    assert sum(n.stats.corrections for n in w.nodes.values()) == 0


@pytest.mark.parametrize("sketch", ["bloom", "full"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_converges_from_corrupted_tables(sketch: str, seed: int) -> None:
    """C.2-2 (Theorem 2): arbitrary tables, no new faults → a legal state."""
    rng = random.Random(seed)
    w = world(random_tree(30, rng), sketch=sketch, seed=seed)
    subscribe_randomly(w, rng)
    w.net.run(5)
    corrupt_tables(w, rng)
    assert not w.legal()
    took = w.run_until_legal(60)
    assert took is not None
    w.net.reset_counts()
    w.net.run(w.net.now + 10)
    assert w.legal()
    assert not {"Correct", "Subscription", "Unsubscription"} & set(w.net.kinds)


def test_bloom_misses_are_caught_by_later_rounds_or_the_full_exchange() -> None:
    """A single wrong entry escapes a 1-bit-per-element filter often; re-salting each round and the
    full exchange every K rounds still find it."""
    rng = random.Random(9)
    edges = random_tree(10, rng)
    params = AntiEntropyParams(timer=TimerPolicy("static", 1.0), full_every=0,
                               bloom=SketchParams(bits_per_element=1, hashes=1, min_bits=8))
    w = SketchWorld(edges, params=params, seed=9)
    subscribe_randomly(w, rng, per_node=4)
    w.net.run(5)
    a, b = edges[0]
    w.nodes[a].router.held[b].add("intruder")
    w.nodes[a].router.load(held=w.nodes[a].router.held, local=w.nodes[a].router.local)
    assert not w.legal()
    assert w.run_until_legal(40) is not None


def test_time_to_legal_grows_with_the_diameter() -> None:
    """C.2-2: time to legality grows with the diameter (corrections travel hop by hop): wiped
    tables on a path of 16 take longer than on a star of 16, with link delays near the period."""
    n = 16
    path = [(f"b{i}", f"b{i - 1}") for i in range(1, n)]
    star = [(f"b{i}", "b0") for i in range(1, n)]
    times = {}
    for name, edges in (("path", path), ("star", star)):
        w = world(edges, sketch="full", period=1.0, seed=4, delay=(0.2, 0.3))
        for i in range(n):
            w.emit(f"b{i}", w.nodes[f"b{i}"].subscribe(f"s{i}"))
        w.net.run(5)
        # every broker forgets everything it holds for its neighbours
        for node in w.nodes.values():
            node.router.load(held={k: set() for k in node.router.held}, local=node.router.local)
        times[name] = w.run_until_legal(80, step=0.25)
    assert times["path"] is not None and times["star"] is not None
    assert times["path"] > 2 * times["star"]


def test_corrections_do_not_undo_subscriptions_sent_during_the_round() -> None:
    """The snapshot race (spec B.3): churn while rounds are in flight never loses a subscription."""
    rng = random.Random(11)
    edges = random_tree(12, rng)
    w = world(edges, period=0.05, seed=11)  # rounds far more often than the link delay
    for _ in range(200):
        v = f"b{rng.randrange(12)}"
        item = f"s{rng.randrange(10)}"
        node = w.nodes[v]
        w.emit(v, node.unsubscribe(item) if item in node.router.local else node.subscribe(item))
        w.net.run(w.net.now + 0.01)
    w.net.run(w.net.now + 0.3)
    assert w.legal()


def test_timer_policies_on_a_link_failure() -> None:
    """B.5: strawman stabilizes at once, static keeps its period, adaptive waits for unwanted
    events (or the link) before unsubscribing the obsolete side."""
    edges = [("b1", "b0"), ("b2", "b1"), ("b3", "b2")]
    results = {}
    for kind in ("strawman", "static", "adaptive"):
        w = world(edges, period=10.0, seed=1, kind=kind)
        w.emit("b3", w.nodes["b3"].subscribe("x"))
        w.net.run(30)
        assert "x" in w.nodes["b0"].router.held["b1"]
        w.cut("b2", "b3")
        w.net.run(w.net.now + 1.0)
        results[kind] = "x" in w.nodes["b0"].router.held["b1"]
        if kind == "adaptive":
            for _ in range(5):  # unwanted events from b0 reach b2 and go nowhere
                w.emit("b0", w.nodes["b0"].publish(w.net.now, "x"))
            w.net.run(w.net.now + 1.0)
            results["adaptive after events"] = "x" in w.nodes["b0"].router.held["b1"]
    assert results == {"strawman": False, "static": True, "adaptive": True,
                       "adaptive after events": False}
