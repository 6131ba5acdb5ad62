"""Topologies: the builders make the trees the experiments assume; validation names the problem."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weeble.core.rom import ConfigError
from weeble.model.topology import Topology, chain, from_edges, kary_tree, random_tree


def test_kary_tree_matches_the_thesis_setup() -> None:
    t = kary_tree(3, 5)  # spec ch3 §4.1: 121 brokers, 81 leaves, 120 links, d = 8
    t.validate_tree()
    assert len(t.brokers) == 121
    assert len(t.links) == 120
    assert len(t.leaves("b0")) == 81
    assert t.diameter() == 8
    assert t.height("b0") == 4


def test_kary_tree_ids_are_in_bfs_order() -> None:
    t = kary_tree(3, 3)
    assert t.brokers[:5] == ("b0", "b1", "b2", "b3", "b4")
    assert t.neighbors("b0") == ("b1", "b2", "b3")
    assert t.neighbors("b1") == ("b0", "b4", "b5", "b6")
    parents = t.parent_map("b0")
    assert parents["b0"] is None
    assert parents["b12"] == "b3"
    assert t.leaves("b0") == [f"b{i}" for i in range(4, 13)]


def test_depth_height_and_leaves_depend_on_the_root() -> None:
    t = chain(5)
    assert t.depth("b0") == {"b0": 0, "b1": 1, "b2": 2, "b3": 3, "b4": 4}
    assert t.height("b0") == 4
    assert t.height("b2") == 2
    assert t.leaves("b0") == ["b4"]
    assert t.leaves("b2") == ["b0", "b4"]
    assert t.diameter() == 4


def test_single_broker() -> None:
    t = kary_tree(3, 1)
    t.validate_tree()
    assert t.brokers == ("b0",)
    assert t.diameter() == 0
    assert t.leaves("b0") == ["b0"]


def test_from_edges_keeps_first_appearance_order() -> None:
    t = from_edges([("x", "y"), ("y", "z"), ("w", "y")])
    t.validate_tree()
    assert t.brokers == ("x", "y", "z", "w")
    assert t.parent_map("y") == {"y": None, "x": "y", "z": "y", "w": "y"}
    assert t.diameter() == 2


@pytest.mark.parametrize(
    ("edges", "extra", "message"),
    [
        ([("a", "b"), ("b", "c"), ("c", "a")], [], "cycle a-b-c-a"),
        ([("a", "b"), ("a", "b")], [], "cycle"),
        ([("a", "b"), ("b", "b")], [], "self-loop on broker 'b'"),
        ([("a", "b")], ["c"], "disconnected; not reachable from a: ['c']"),
    ],
)
def test_validate_tree_names_the_problem(edges, extra, message) -> None:
    t = from_edges(edges)
    for b in extra:
        t.add_broker(b)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        t.validate_tree()


def test_validate_tree_rejects_a_link_to_an_unknown_broker() -> None:
    t = Topology()
    t.add_broker("a")
    t.add_link("a", "ghost")
    with pytest.raises(ConfigError, match="unknown broker 'ghost'"):
        t.validate_tree()


def test_empty_topology_and_duplicate_broker() -> None:
    with pytest.raises(ConfigError, match="no brokers"):
        Topology().validate_tree()
    t = Topology()
    t.add_broker("a")
    with pytest.raises(ConfigError, match="added twice"):
        t.add_broker("a")


@given(n=st.integers(1, 60), seed=st.integers(0, 2**32))
def test_random_tree_is_a_tree_and_deterministic(n: int, seed: int) -> None:
    t = random_tree(n, seed)
    t.validate_tree()
    assert len(t.brokers) == n
    assert t.links == random_tree(n, seed).links


def test_random_trees_differ_by_seed() -> None:
    assert random_tree(30, 1).links != random_tree(30, 2).links


def test_diameter_of_a_random_tree_matches_brute_force() -> None:
    t = random_tree(40, 7)
    brute = max(max(t.depth(b).values()) for b in t.brokers)
    assert t.diameter() == brute
