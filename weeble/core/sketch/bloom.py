"""Bloom filters as sketches of routing tables, and the equality test of seed 002 §4.

A routing-table check (seed 002 §3.2) asks whether two sets are *equal*: S(a), what a should have
told b, against F_{b→a}, what b holds for a. Shipping F_{b→a} costs |F| × (tens of bytes); a Bloom
filter of it costs m/8 bytes. Equal sets always give equal filters built with the same (m, k,
seed), so differing filters prove the sets differ; equal filters may hide a difference (the
equality test's false positive, Theorem 3).

Choices (spec seed23 §D.2):
- Positions by double hashing of one 128-bit MurmurHash3 of the element's canonical bytes:
  g_i = (h1 + i·h2) mod m, h1 and h2 the two 64-bit halves.
- The observer picks m from the cardinality it advertises, k, and a fresh seed every round, and
  sends them along: both ends build with the same parameters. A difference the filter hides in
  one round escapes the next round's independent filter with probability p again, so a persistent
  difference is found within an expected 1/(1−p) rounds.
- The cardinality |F| travels beside the bits: a cardinality mismatch proves inequality for free.

The bits are a Python int: OR is the union (property 4 of the paper), == is the equality test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import mmh3

_MASK64 = (1 << 64) - 1
# What a sketch may cost, whoever asks for it (a neighbour's AeObserve names m and k): building
# one costs k positions per element and m/8 bytes; a larger one could not cross a link in one
# message anyway (2 MiB of bits). The probe: m = 2^27, k = 1,000 stalled a broker 14 s.
MAX_BITS = 1 << 24
MAX_HASHES = 32


def positions(key: bytes, m: int, k: int, seed: int) -> list[int]:
    """The k bit positions of `key` in a filter of m bits under hash seed `seed`."""
    h = mmh3.hash128(key, seed & 0xFFFFFFFF, signed=False)
    h1, h2 = h & _MASK64, h >> 64
    return [(h1 + i * h2) % m for i in range(k)]


def false_positive_rate(*, m: int, k: int, n: int) -> float:
    """(1 − e^{−kn/m})^k: the membership false-positive probability of n elements in m bits."""
    return (1.0 - math.exp(-k * n / m)) ** k


def round_seed(edge: str, round_no: int) -> int:
    """The hash seed of one round on one directed edge: a new, independent filter each round."""
    return mmh3.hash(f"{edge}|{round_no}".encode(), 0x5EED, signed=False)


@dataclass(slots=True)
class BloomFilter:
    """m bits, k hash functions, one seed; `bits` bit i set iff some element hashed to i."""

    m: int
    k: int
    seed: int
    bits: int = 0

    def __post_init__(self) -> None:
        if self.m < 1 or self.k < 1:
            raise ValueError(f"a Bloom filter needs m >= 1 bits and k >= 1 hashes, got m={self.m}, "
                             f"k={self.k}")

    @classmethod
    def of(cls, keys: Iterable[bytes], *, m: int, k: int, seed: int) -> BloomFilter:
        f = cls(m=m, k=k, seed=seed)
        # the bits set in a buffer, made an int once: `bits |= 1 << i` copies all m bits for
        # each position (6 ms a position at m = 2^27)
        buf = bytearray((m + 7) // 8)
        for key in keys:
            for i in positions(key, m, k, seed):
                buf[i >> 3] |= 1 << (i & 7)
        f.bits = int.from_bytes(buf, "little")
        return f

    def add(self, key: bytes) -> None:
        for i in positions(key, self.m, self.k, self.seed):
            self.bits |= 1 << i

    def might_contain(self, key: bytes) -> bool:
        """False means certainly absent; True means present or a membership false positive."""
        bits = self.bits
        return all(bits >> i & 1 for i in positions(key, self.m, self.k, self.seed))

    def compatible(self, other: BloomFilter) -> bool:
        return (self.m, self.k, self.seed) == (other.m, other.k, other.seed)

    def union(self, other: BloomFilter) -> BloomFilter:
        """B(A ∪ B) = B(A) | B(B) for the same m, k and seed (seed 002, sketch property 4)."""
        if not self.compatible(other):
            raise ValueError("the union of Bloom filters needs the same m, k and seed")
        return BloomFilter(m=self.m, k=self.k, seed=self.seed, bits=self.bits | other.bits)

    def intersection(self, other: BloomFilter) -> BloomFilter:
        """B(A) & B(B): a superset of B(A ∩ B), so no element of A ∩ B is lost (spec ch5
        §2.3: it may keep a bit two different elements set, so it is not B(A ∩ B) itself)."""
        if not self.compatible(other):
            raise ValueError("the intersection of Bloom filters needs the same m, k and seed")
        return BloomFilter(m=self.m, k=self.k, seed=self.seed, bits=self.bits & other.bits)

    def same_bits(self, other: BloomFilter) -> bool:
        """The equality test: False proves the sets differ; True may be a false positive."""
        if not self.compatible(other):
            raise ValueError("only filters built with the same m, k and seed can be compared")
        return self.bits == other.bits

    @property
    def size_bytes(self) -> int:
        return (self.m + 7) // 8

    def to_bytes(self) -> bytes:
        return self.bits.to_bytes(self.size_bytes, "little")

    @classmethod
    def from_bytes(cls, data: bytes, *, m: int, k: int, seed: int) -> BloomFilter:
        if len(data) != (m + 7) // 8:
            raise ValueError(f"a filter of m={m} bits has {(m + 7) // 8} bytes, got {len(data)}")
        bits = int.from_bytes(data, "little")
        if bits >> m:
            raise ValueError(f"bits set beyond position m={m}")
        return cls(m=m, k=k, seed=seed, bits=bits)


# ---- Theorem 3 (seed 002): the false-positive probability of the equality test --------------


def _product_bound(fill: float, positions_count: int, m: int) -> float:
    """fill · Π_{i=2}^{P} ((i−1)/m + (1 − (i−1)/m) · fill), the chance that P positions all hit set
    bits (each either repeats an earlier position or is a fresh one, set with probability fill)."""
    if positions_count == 0:
        return 1.0
    p = fill
    for i in range(2, positions_count + 1):
        repeat = (i - 1) / m
        p *= repeat + (1.0 - repeat) * fill
    return p


def equality_false_positive_bound(*, m: int, k: int, size_a: int, size_b: int, a_minus_b: int,
                                  b_minus_a: int) -> float:
    """Theorem 3 of seed 002 as corrected: p ≤ min{p_A, p_B} with α = 1 − e^{−k|B|/m} and
    β = 1 − e^{−k|A|/m}, the chances that a given bit is set in B_B and in B_A.

    The paper prints α = e^{−k|B|/m} (no "1 −"): that is the chance a bit is still *clear*, which
    makes p grow with m/n, against the paper's own text and against measurement (see
    `printed_equality_false_positive_bound`). A side with no extra elements constrains nothing
    (its factor is 1, not α).
    """
    if a_minus_b == 0 and b_minus_a == 0:
        raise ValueError("equal sets have no false positive: give a non-zero difference")
    alpha = 1.0 - math.exp(-k * size_b / m)
    beta = 1.0 - math.exp(-k * size_a / m)
    return min(_product_bound(alpha, k * a_minus_b, m), _product_bound(beta, k * b_minus_a, m))


def printed_equality_false_positive_bound(*, m: int, k: int, size_a: int, size_b: int,
                                          a_minus_b: int, b_minus_a: int) -> float:
    """Theorem 3 as printed in seed 002 (α = e^{−k|B|/m}), kept to show where it is wrong."""
    if a_minus_b == 0 and b_minus_a == 0:
        raise ValueError("equal sets have no false positive: give a non-zero difference")
    alpha = math.exp(-k * size_b / m)
    beta = math.exp(-k * size_a / m)
    return min(_product_bound(alpha, k * a_minus_b, m), _product_bound(beta, k * b_minus_a, m))


@dataclass(frozen=True, slots=True)
class FalsePositiveEstimate:
    rate: float
    stderr: float
    filters: int
    keys_per_filter: int


def estimate_equality_false_positive(*, bits_per_element: float, k: int, difference: int,
                                     n: int = 1000, filters: int = 200,
                                     keys_per_filter: int = 1000,
                                     seed: int = 0) -> FalsePositiveEstimate:
    """Monte-Carlo rate of B(A) = B(B) for B of n random elements and A = B plus `difference` more.

    For each of `filters` independent filters of B (fresh seed each, as a re-salted round), draw
    `keys_per_filter` fresh keys and count the c whose k positions are all set in B(B). With
    B ⊂ A, B(A) = B(B) exactly when every extra element's positions are already set, so the
    fraction of `difference`-subsets of the fresh keys that go unnoticed is C(c, d) / C(M, d): an
    unbiased estimate over all subsets at once (a U-statistic), averaged over filters.
    """
    if difference < 1 or n < 1 or filters < 2 or keys_per_filter < difference:
        raise ValueError("need difference >= 1, n >= 1, filters >= 2, keys_per_filter >= "
                         "difference")
    m = math.ceil(bits_per_element * n)
    total = math.comb(keys_per_filter, difference)
    rates: list[float] = []
    for f in range(filters):
        salt = round_seed(f"estimate/{seed}", f)
        base = BloomFilter.of((b"b%d/%d" % (f, i) for i in range(n)), m=m, k=k, seed=salt)
        unnoticed = sum(base.might_contain(b"x%d/%d" % (f, j)) for j in range(keys_per_filter))
        rates.append(math.comb(unnoticed, difference) / total)
    mean = sum(rates) / filters
    var = sum((r - mean) ** 2 for r in rates) / (filters - 1)
    return FalsePositiveEstimate(rate=mean, stderr=math.sqrt(var / filters), filters=filters,
                                 keys_per_filter=keys_per_filter)
