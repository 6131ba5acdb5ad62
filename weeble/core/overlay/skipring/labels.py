"""Labels of the supervised skip ring (seed 003 §2.1) and the topology SR(n) they define.

The supervisor hands out labels r(0), r(1), r(2), … in arrival order. r(x) writes x in binary
without leading zeros and moves the leading bit to the units place: r(0)="0", r(1)="1",
r(2)="01", r(3)="11", r(4)="001", … . Read as a binary fraction 0.ℓ1ℓ2…, label r(i) has value
j/2^k with j odd (index 2^{k−1} + (j−1)/2, length k), so every new label lands in the middle of a
gap between two older ones.

A label is stored as its index i = r⁻¹(label): a plain int, never a float or a string. Its value
is compared as a fixed-point integer `position(i)` = value · 2^POSITION_BITS, exact for every label
of at most POSITION_BITS bits; longer labels are not labels of this system (`check_label`).
"""

from __future__ import annotations

from collections.abc import Iterable

POSITION_BITS = 62
MAX_LABEL = (1 << (POSITION_BITS - 1)) - 1  # the largest index with a label of ≤ 62 bits
ONE = 1 << POSITION_BITS  # the value 1.0 (≡ 0 on the ring)


def check_label(index: object) -> int:
    """`index` as a label index, or ValueError naming the problem (labels arrive in messages)."""
    if not isinstance(index, int) or isinstance(index, bool):
        raise ValueError(f"a skip-ring label is an int index, got {type(index).__name__}")
    if not 0 <= index <= MAX_LABEL:
        raise ValueError(f"skip-ring label index {index} outside 0..{MAX_LABEL}")
    return index


def length(index: int) -> int:
    """|r(i)|: 1 for i = 0 and 1, else the bit length of i."""
    return max(1, index.bit_length())


def bits(index: int) -> str:
    """r(i) as a bit string: the leading bit of i moved to the units place."""
    if index < 2:
        return str(index)
    b = format(index, "b")
    return b[1:] + b[0]


def index_of(label_bits: str) -> int:
    """r⁻¹: move the last bit back to the front and read binary."""
    if not label_bits or set(label_bits) - {"0", "1"}:
        raise ValueError(f"not a label: {label_bits!r}")
    if len(label_bits) == 1:
        return int(label_bits)
    if label_bits[-1] != "1":
        raise ValueError(f"labels longer than one bit end in 1: {label_bits!r}")
    return int(label_bits[-1] + label_bits[:-1], 2)


def dyadic(index: int) -> tuple[int, int]:
    """(j, k) with value(r(i)) = j / 2^k (k = |r(i)|; j odd except for index 0)."""
    if index == 0:
        return 0, 1
    k = index.bit_length()
    return 2 * (index - (1 << (k - 1))) + 1, k


def position(index: int) -> int:
    """value(r(i)) · 2^POSITION_BITS, exact."""
    j, k = dyadic(index)
    return j << (POSITION_BITS - k)


def index_at(pos: int) -> int:
    """The label index whose position is `pos` (a dyadic point of the ring), inverse of position."""
    pos %= ONE
    if pos == 0:
        return 0
    tz = (pos & -pos).bit_length() - 1  # value = (pos >> tz) / 2^(POSITION_BITS − tz)
    j, k = pos >> tz, POSITION_BITS - tz
    return (1 << (k - 1)) + (j - 1) // 2


def step(index: int, level: int, direction: int) -> int:
    """The label at value(r(i)) ± 2^{−level} (mod 1): a node's level-`level` neighbour slot."""
    return index_at(position(index) + direction * (ONE >> level))


def top_level(n: int) -> int:
    """L = ⌈log₂ n⌉: the longest label among n nodes, the level of the ring edges."""
    return max(1, (n - 1).bit_length())


# ---- SR(n) from the definition ----------------------------------------------------------------


def ring_order(indices: Iterable[int]) -> list[int]:
    return sorted(indices, key=position)


def skip_ring_neighbours(n: int) -> dict[int, set[int]]:
    """SR(n) by definition: each level-k ring over V_k = {labels of length ≤ k}, k = 1…L."""
    if n < 1:
        raise ValueError("SR(n) needs n >= 1")
    nbrs: dict[int, set[int]] = {i: set() for i in range(n)}
    if n == 1:
        return nbrs
    for k in range(1, top_level(n) + 1):
        level = ring_order(i for i in range(n) if length(i) <= k)
        if len(level) < 2:
            continue
        for a, b in zip(level, level[1:] + level[:1], strict=True):
            if a != b:
                nbrs[a].add(b)
                nbrs[b].add(a)
    return nbrs


def skip_ring_edges(n: int) -> set[tuple[int, int]]:
    """Undirected edges of SR(n) as (smaller index, larger index)."""
    return {(min(a, b), max(a, b)) for a, ns in skip_ring_neighbours(n).items() for b in ns}


def diameter(nbrs: dict[int, set[int]]) -> int:
    """Longest shortest path (hops): all-pairs breadth-first search, bit-parallel.

    reach[v] is the set of nodes within h hops of v as an int bitset; one round ORs in the
    neighbours' sets. The number of rounds until every set is full is the diameter.
    """
    nodes = list(nbrs)
    slot = {v: i for i, v in enumerate(nodes)}
    full = (1 << len(nodes)) - 1
    reach = [1 << i for i in range(len(nodes))]
    adj = [[slot[u] for u in nbrs[v]] for v in nodes]
    hops = 0
    while any(r != full for r in reach):
        nxt = reach[:]
        for i, ns in enumerate(adj):
            r = nxt[i]
            for j in ns:
                r |= reach[j]
            nxt[i] = r
        if nxt == reach:
            raise ValueError("graph is not connected")
        reach = nxt
        hops += 1
    return hops


def shortcut_labels(own: int, left: int | None, right: int | None) -> set[int]:
    """v's shortcut labels from its own label and its two ring neighbours' labels only (§3.2.2).

    A neighbour y longer than v was inserted between y ∓ 2^{−|y|}; v is one end, the other end is
    a shortcut of v. Repeat from there until a label no longer than v's is reached. Ring
    neighbours themselves are not shortcuts. A node need not know n.
    """
    k = length(own)
    out: set[int] = set()
    for nb, direction in ((left, -1), (right, +1)):
        y = nb
        while y is not None and length(y) > k:
            y = step(y, length(y), direction)
            if y == own:
                break
            out.add(y)
    out.discard(own)
    if left is not None:
        out.discard(left)
    if right is not None:
        out.discard(right)
    return out


def ring_neighbours(n: int) -> dict[int, tuple[int, int]]:
    """(pred, succ) of every label of SR(n) on the sorted cycle."""
    order = ring_order(range(n))
    return {v: (order[i - 1], order[(i + 1) % n]) for i, v in enumerate(order)}


def plausible_pair(a: int, b: int) -> bool:
    """Two ring neighbours of a legitimate SR(n) lie 2^{−max(|a|,|b|)} apart: the newer was put in
    the middle of a gap bounded by the older (used as a cheap local hint that a label is wrong)."""
    gap = (position(b) - position(a)) % ONE
    return gap in (ONE >> max(length(a), length(b)), ONE - (ONE >> max(length(a), length(b))))
