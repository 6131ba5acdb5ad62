"""Interest summaries (thesis 5.5.1, Alg. 16; spec ch5 §2.2-2.3): what a broker consumed,
as a ring buffer of notification ids and a Bloom filter of it.

The filter is the project's one Bloom filter (`core.sketch.bloom`: mmh3, double hashing), with
the same (m, k, seed) on every broker so summaries can be compared and ANDed. Counting how many
of my cached ids another broker's summary holds is I_{me,X} (Alg. 17 line 6); against the AND of
two summaries it is I_{me,K,X}. The positions of each cached id are computed once, when it is
recorded, and the counting is vectorized (numpy): a broker counts once per summary it receives.
"""

from __future__ import annotations

import numpy as np

from weeble.core.sketch.bloom import BloomFilter, positions

SEED = 0xC1  # every broker hashes with the same seed: summaries must be comparable


class Cache:
    """cacheSize most recent consumed notification ids, each once (a ring buffer: the oldest is
    overwritten), with their k Bloom positions in a filter of m bits."""

    __slots__ = ("_index", "_next", "_pos", "ids", "k", "m", "size")

    def __init__(self, *, size: int, m: int, k: int) -> None:
        self.size, self.m, self.k = size, m, k
        self.ids: list[str | None] = [None] * size
        self._pos = np.zeros((size, k), dtype=np.int64)
        self._index: dict[str, int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, nid: str) -> bool:
        return nid in self._index

    def record(self, nid: str) -> None:
        if nid in self._index:
            return  # one entry per notification, however many local clients consumed it
        slot = self._next
        old = self.ids[slot]
        if old is not None:
            del self._index[old]
        self.ids[slot] = nid
        self._index[nid] = slot
        self._pos[slot] = positions(nid.encode(), self.m, self.k, SEED)
        self._next = (slot + 1) % self.size

    def _filled(self) -> np.ndarray:
        n = len(self._index)
        return self._pos if n == self.size else self._pos[:n]

    def summary(self) -> BloomFilter:
        """The Bloom filter of what the cache holds now (rebuilt: a ring buffer forgets, a
        Bloom filter cannot)."""
        bits = np.zeros(self.m, dtype=np.uint8)
        bits[self._filled().ravel()] = 1
        packed = np.packbits(bits, bitorder="little").tobytes()
        return BloomFilter(m=self.m, k=self.k, seed=SEED, bits=int.from_bytes(packed, "little"))

    def count(self, bits: np.ndarray) -> int:
        """How many cached ids test positive in `bits` (an unpacked filter, `unpack`)."""
        if not self._index:
            return 0
        return int(bits[self._filled()].all(axis=1).sum())


def unpack(f: BloomFilter) -> np.ndarray:
    """A filter as one bool per bit, for counting."""
    raw = np.frombuffer(f.to_bytes(), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:f.m].astype(bool)
