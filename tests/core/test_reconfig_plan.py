"""Reconfiguration as data (thesis 4.2, spec ch4 §6.1, TC-1 to TC-3), property-tested."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weeble.core.reconfig.plan import (
    AddLeaf,
    ExchangeLink,
    PlanError,
    RemoveLeaf,
    Tree,
    apply,
    cycle,
    distance,
    edge,
    exchanges,
    insert_inner,
    plan,
    random_exchange,
    random_tree,
    remove_inner,
    run,
)


def _names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


trees = st.builds(lambda n, seed: random_tree(_names(n), random.Random(seed)),
                  st.integers(1, 14), st.integers(0, 2**32))


def _every_step_is_a_spanning_tree(t1: Tree, ops: list) -> list[Tree]:
    steps = run(t1, ops)
    for tree in steps:
        assert tree.problem() is None
    return steps


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 14), s1=st.integers(0, 2**32), s2=st.integers(0, 2**32))
def test_tc1_exactly_d_exchanges_each_leaving_a_spanning_tree(n: int, s1: int, s2: int) -> None:
    t1, t2 = random_tree(_names(n), random.Random(s1)), random_tree(_names(n), random.Random(s2))
    ops = exchanges(t1, t2)
    assert len(ops) == distance(t1, t2)
    steps = _every_step_is_a_spanning_tree(t1, ops)
    assert steps[-1] == t2
    for tree, op in zip(steps, ops, strict=False):
        path = cycle(tree, op)  # r lies on the cycle its a closes
        assert edge(*op.remove) in {edge(x, y) for x, y in pairwise(path)}


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 14), s1=st.integers(0, 2**32), s2=st.integers(0, 2**32))
def test_tc2_distance_is_symmetric(n: int, s1: int, s2: int) -> None:
    t1, t2 = random_tree(_names(n), random.Random(s1)), random_tree(_names(n), random.Random(s2))
    assert distance(t1, t2) == distance(t2, t1)
    assert distance(t1, t1) == 0


@settings(max_examples=100, deadline=None)
@given(tree=trees, data=st.data())
def test_tc3_inner_insert_is_addleaf_then_exchanges(tree: Tree, data: st.DataObject) -> None:
    if not tree.edges:
        return
    u, v = data.draw(st.sampled_from(sorted(tree.edges)))
    ops = insert_inner(tree, "new", (u, v))
    assert isinstance(ops[0], AddLeaf) and all(isinstance(o, ExchangeLink) for o in ops[1:])
    final = _every_step_is_a_spanning_tree(tree, ops)[-1]
    assert set(final.neighbors("new")) == {u, v} and edge(u, v) not in final.edges


@settings(max_examples=100, deadline=None)
@given(tree=trees, data=st.data())
def test_tc3_inner_remove_is_exchanges_then_removeleaf(tree: Tree, data: st.DataObject) -> None:
    inner = [v for v in sorted(tree.nodes) if not tree.is_leaf(v)]
    if not inner:
        return
    victim = data.draw(st.sampled_from(inner))
    ops = remove_inner(tree, victim)
    assert isinstance(ops[-1], RemoveLeaf) and all(isinstance(o, ExchangeLink) for o in ops[:-1])
    final = _every_step_is_a_spanning_tree(tree, ops)[-1]
    assert final.nodes == tree.nodes - {victim}


@settings(max_examples=150, deadline=None)
@given(n1=st.integers(1, 10), n2=st.integers(1, 10), shift=st.integers(0, 6),
       s1=st.integers(0, 2**32), s2=st.integers(0, 2**32))
def test_any_tree_to_any_tree_on_other_brokers(n1: int, n2: int, shift: int, s1: int,
                                               s2: int) -> None:
    t1 = random_tree(_names(n1), random.Random(s1))
    t2 = random_tree([f"b{i + shift}" for i in range(n2)], random.Random(s2))
    if not t1.nodes & t2.nodes:
        return  # nothing in common: there is no tree to keep running through the change
    ops = plan(t1, t2)
    assert _every_step_is_a_spanning_tree(t1, ops)[-1] == t2
    added = [o for o in ops if isinstance(o, AddLeaf)]
    removed = [o for o in ops if isinstance(o, RemoveLeaf)]
    assert {o.new for o in added} == t2.nodes - t1.nodes
    assert {o.leaf for o in removed} == t1.nodes - t2.nodes
    # leaf adds first, leaf removals last (L3759-3766)
    kinds = [type(o) for o in ops]
    assert kinds == sorted(kinds, key=[AddLeaf, ExchangeLink, RemoveLeaf].index)


@settings(max_examples=100, deadline=None)
@given(tree=trees, seed=st.integers(0, 2**32))
def test_random_exchanges_are_valid(tree: Tree, seed: int) -> None:
    rng = random.Random(seed)
    if len(tree.nodes) < 3:
        with pytest.raises(PlanError):
            random_exchange(tree, rng)
        return
    for _ in range(5):
        tree = apply(tree, random_exchange(tree, rng))
        assert tree.problem() is None


def test_an_arbitrary_pair_from_the_difference_sets_is_not_always_an_exchange() -> None:
    # Why Theorem 2's "by symmetry" needs care: r must lie on the cycle a closes.
    t1 = Tree.of([("a", "b"), ("b", "c"), ("c", "d")])
    t2 = Tree.of([("a", "b"), ("b", "d"), ("a", "c")])
    with pytest.raises(PlanError, match="not on the cycle"):
        apply(t1, ExchangeLink(remove=("c", "d"), add=("a", "c")))
    assert len(exchanges(t1, t2)) == distance(t1, t2) == 2


@pytest.mark.parametrize(("edges", "why"), [
    ([("a", "b"), ("b", "c"), ("c", "a")], "3 brokers need 2 links"),
    ([("a", "b"), ("c", "d")], "need 3 links"),
    ([("a", "b"), ("b", "c")], None),
])
def test_trees_are_checked(edges: list[tuple[str, str]], why: str | None) -> None:
    if why is None:
        assert Tree.of(edges).problem() is None
    else:
        with pytest.raises(PlanError, match=why):
            Tree.of(edges)


def test_bad_operations_say_what_is_wrong() -> None:
    t = Tree.of([("a", "b"), ("b", "c")])
    with pytest.raises(PlanError, match="already in the tree"):
        apply(t, AddLeaf("a", "b"))
    with pytest.raises(PlanError, match="is not a leaf"):
        apply(t, RemoveLeaf("b"))
    with pytest.raises(PlanError, match="already a link"):
        apply(t, ExchangeLink(remove=("a", "b"), add=("b", "c")))
    # issue 23: the error names the missing link, not a broker (exchange b1-b9 b2-b9)
    with pytest.raises(PlanError, match=r"the link a–x to remove is not in the tree "
                                        r"\('x' is not a broker of it\)"):
        apply(t, ExchangeLink(remove=("a", "x"), add=("c", "x")))
    with pytest.raises(PlanError, match=r"the link a–c to remove is not in the tree$"):
        apply(t, ExchangeLink(remove=("a", "c"), add=("a", "c")))
    with pytest.raises(PlanError, match="the link a–y to add names 'y', not a broker"):
        apply(t, ExchangeLink(remove=("a", "b"), add=("a", "y")))
