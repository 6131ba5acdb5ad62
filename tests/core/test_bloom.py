"""Bloom sketches of seed 002 §4: properties and the equality false-positive rate (spec seed23
§C.2-4/5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weeble.core.rom import AntiEntropy
from weeble.core.sketch.bloom import (
    BloomFilter,
    equality_false_positive_bound,
    estimate_equality_false_positive,
    printed_equality_false_positive_bound,
    round_seed,
)

keys = st.sets(st.binary(min_size=1, max_size=12), max_size=40)


@settings(max_examples=60, deadline=None)
@given(a=keys, b=keys, seed=st.integers(0, 2**32 - 1))
def test_union_is_or_and_unequal_filters_prove_unequal_sets(a: set[bytes], b: set[bytes],
                                                             seed: int) -> None:
    fa = BloomFilter.of(a, m=256, k=3, seed=seed)
    fb = BloomFilter.of(b, m=256, k=3, seed=seed)
    assert BloomFilter.of(a | b, m=256, k=3, seed=seed).bits == fa.union(fb).bits
    if not fa.same_bits(fb):
        assert a != b
    if a == b:
        assert fa.same_bits(fb)
    for x in a:
        assert fa.might_contain(x)


def test_equality_misses_exactly_when_every_extra_element_is_a_member() -> None:
    base = [b"b%d" % i for i in range(100)]
    fb = BloomFilter.of(base, m=400, k=2, seed=7)
    for j in range(300):
        extra = [b"x%d/%d" % (j, i) for i in range(2)]
        fa = BloomFilter.of(base + extra, m=400, k=2, seed=7)
        assert fa.same_bits(fb) == all(fb.might_contain(x) for x in extra)


@pytest.mark.parametrize(("m_per_n", "k", "diff", "expected"), [
    (4, 2, 1, 0.155), (4, 2, 3, 0.0037), (8, 2, 3, 0.00012)])
def test_false_positive_rate_matches_corrected_theorem_3(m_per_n: int, k: int, diff: int,
                                                          expected: float) -> None:
    bound = equality_false_positive_bound(m=m_per_n * 1000, k=k, size_a=1000 + diff,
                                          size_b=1000, a_minus_b=diff, b_minus_a=0)
    assert bound == pytest.approx(expected, rel=0.03)
    est = estimate_equality_false_positive(bits_per_element=m_per_n, k=k, difference=diff,
                                           n=1000, filters=60, keys_per_filter=1000, seed=3)
    # Monte-Carlo error: within 4 standard errors of the theorem (the bound is tight here)
    assert abs(est.rate - bound) <= 4 * est.stderr + 0.02 * bound, (est, bound)


def test_printed_theorem_3_is_wrong_and_falls_the_wrong_way() -> None:
    """As printed (α = e^{−k|B|/m}) the bound grows with m/n, against the paper's own text."""
    def printed(m_per_n: int) -> float:
        return printed_equality_false_positive_bound(m=m_per_n * 1000, k=2, size_a=1003,
                                                     size_b=1000, a_minus_b=3, b_minus_a=0)

    assert printed(8) > printed(4)
    est = estimate_equality_false_positive(bits_per_element=8, k=2, difference=3, filters=30,
                                           keys_per_filter=800, seed=1)
    assert printed(8) > 100 * est.rate


def test_corrected_bound_falls_with_difference_and_bits_per_element() -> None:
    def p(m_per_n: int, d: int) -> float:
        return equality_false_positive_bound(m=m_per_n * 1000, k=2, size_a=1000 + d,
                                             size_b=1000, a_minus_b=d, b_minus_a=0)

    assert p(4, 1) > p(4, 2) > p(4, 3) > p(4, 4)
    assert p(4, 3) > p(8, 3) > p(16, 3)
    # a side with no extra elements constrains nothing; equal sets are refused
    both = equality_false_positive_bound(m=4000, k=2, size_a=1001, size_b=1001, a_minus_b=1,
                                         b_minus_a=1)
    assert both == pytest.approx(p(4, 1), rel=0.01)
    with pytest.raises(ValueError, match="equal sets"):
        equality_false_positive_bound(m=4000, k=2, size_a=5, size_b=5, a_minus_b=0, b_minus_a=0)


def test_sketch_is_about_64_times_smaller_than_the_table() -> None:
    """C.2-5: m/8 bytes per check instead of |F| × (size per subscription)."""
    n, sub_bytes = 1000, 32
    f = BloomFilter(m=AntiEntropy(bits_per_element=4, hashes=2).bits_for(n), k=2, seed=0)
    assert f.size_bytes == 500
    assert n * sub_bytes / f.size_bytes == 64


def test_round_seeds_differ_and_parameters_are_checked() -> None:
    seeds = {round_seed("a>b", r) for r in range(1000)}
    assert len(seeds) == 1000
    assert round_seed("a>b", 1) != round_seed("b>a", 1)
    with pytest.raises(ValueError, match="m >= 1"):
        BloomFilter(m=0, k=1, seed=0)
    with pytest.raises(ValueError, match="same m, k and seed"):
        BloomFilter(m=8, k=1, seed=0).union(BloomFilter(m=8, k=1, seed=1))
    with pytest.raises(ValueError, match="bits set beyond"):
        BloomFilter.from_bytes(b"\xff\xff", m=9, k=1, seed=0)
    f = BloomFilter.of([b"x", b"y"], m=100, k=3, seed=5)
    assert BloomFilter.from_bytes(f.to_bytes(), m=100, k=3, seed=5) == f
