"""Labels and the topology SR(n) of seed 003 (spec seed23 §C.1-1..5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weeble.core.overlay.skipring.labels import (
    MAX_LABEL,
    bits,
    check_label,
    diameter,
    dyadic,
    index_of,
    length,
    ring_neighbours,
    shortcut_labels,
    skip_ring_edges,
    skip_ring_neighbours,
    top_level,
)


def test_label_function_table() -> None:
    assert [bits(i) for i in range(16)] == [
        "0", "1", "01", "11", "001", "011", "101", "111", "0001", "0011", "0101", "0111",
        "1001", "1011", "1101", "1111"]
    assert [bits(i) for i in (16, 17, 18)] == ["00001", "00011", "00101"]
    assert index_of("011") == 5


@given(st.integers(0, 10**6))
def test_label_inverse_and_length(i: int) -> None:
    assert index_of(bits(i)) == i
    assert length(i) == max(1, i.bit_length()) == len(bits(i))


def test_new_labels_are_the_odd_multiples_between_old_ones() -> None:
    for k in range(1, 10):
        vals = {dyadic(i) for i in range(2**k, 2 ** (k + 1))}
        assert vals == {(j, k + 1) for j in range(1, 2 ** (k + 1), 2)}


def test_bad_labels_are_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="outside"):
        check_label(-1)
    with pytest.raises(ValueError, match="outside"):
        check_label(MAX_LABEL + 1)
    with pytest.raises(ValueError, match="int index"):
        check_label("3")
    with pytest.raises(ValueError, match="end in 1"):
        index_of("010")


@pytest.mark.parametrize(("n", "diam"), [(16, 4), (100, 6), (1024, 10), (4096, 12)])
def test_exact_counts_of_sr_n(n: int, diam: int) -> None:
    """C.1-3: 2n − 3 edges, average degree 4 − 6/n, degree ≤ 2⌈log₂ n⌉ − 1, ≥ 2, diameter."""
    nbrs = skip_ring_neighbours(n)
    assert len(skip_ring_edges(n)) == 2 * n - 3
    degrees = [len(s) for s in nbrs.values()]
    assert sum(degrees) == 4 * n - 6
    assert max(degrees) <= 2 * top_level(n) - 1
    assert min(degrees) == 2
    assert diameter(nbrs) == diam <= top_level(n)


def test_level_rings_complete_and_edge_count_for_all_small_n() -> None:
    """C.1-2/3: for every n, level-k rings below L are complete and the edge count is 2n − 3."""
    for n in range(3, 200):
        assert len(skip_ring_edges(n)) == 2 * n - 3
        assert diameter(skip_ring_neighbours(n)) <= top_level(n)


def test_shortcuts_from_ring_neighbours_alone_match_the_definition() -> None:
    """C.1-4, and the worked example of spec seed23 §A.6 (n = 16, v = 1/4)."""
    for n in range(3, 300):
        nbrs = skip_ring_neighbours(n)
        for v, (p, s) in ring_neighbours(n).items():
            assert shortcut_labels(v, p, s) | {p, s} == nbrs[v], (n, v)
    p, s = ring_neighbours(16)[2]
    # {0, 1/2, 1/8, 3/8}: ring neighbours 3/16 and 5/16
    assert sorted(dyadic(i) for i in shortcut_labels(2, p, s)) == [(0, 1), (1, 1), (1, 3),
                                                                   (3, 3)]


def test_join_locality() -> None:
    """C.1-5: each join adds 2 edges and removes none; ≤ 2 existing nodes change ring neighbours;
    in a doubling epoch every older node but "0" changes at two consecutive joins."""
    changes: dict[int, list[int]] = {}
    prev_edges = skip_ring_edges(3)
    prev_ring = ring_neighbours(3)
    for n in range(4, 257):
        edges = skip_ring_edges(n)
        assert prev_edges <= edges and len(edges - prev_edges) == 2
        ring = ring_neighbours(n)
        moved = [v for v in prev_ring if prev_ring[v] != ring[v]]
        assert len(moved) <= 2
        for v in moved:
            changes.setdefault(v, []).append(n)
        prev_edges, prev_ring = edges, ring
    # joins 129..256 (labels 128..255): older nodes 1..127 change twice, at consecutive joins
    for v in range(1, 128):
        epoch = [n for n in changes.get(v, []) if 128 < n <= 256]
        assert len(epoch) == 2 and epoch[1] == epoch[0] + 1, (v, epoch)
