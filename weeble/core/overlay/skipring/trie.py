"""The publication store of a skip-ring subscriber: a binary Patricia trie with Merkle-like hashes
(seed 003 §4.2).

Every publication p of publisher `id` has the key h(p, id): a KEY_BITS-bit MurmurHash3 of the
publisher, its sequence number and the payload. Leaves hold publications; unary chains are
compressed, so every inner node has two children and its label is the longest common prefix of
theirs. A node's hash is h′(key) for a leaf and h′(hash(c0) ∥ hash(c1)) for an inner node, so two
subtries with one label and one hash hold the same publications (up to a 2^-128 collision).

RAM is the set of publications; the trie and its hashes are an index over it, rebuilt from the set
(`rebuild`) after a corruption, so a corrupted hash cannot outlive its next rebuild. The key is
always computed from the content, never stored apart from it. A corrupted payload is therefore a
different (bogus) publication, and like the paper we never delete publications: a bogus one
spreads to every subscriber (spec seed23 §A.13-6), which the legitimacy check reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import mmh3

KEY_BITS = 128
_HASH_SEED = 0x7E1E


@dataclass(frozen=True, slots=True)
class Publication:
    """One publication of a topic: (publisher, seq) identify it; the key hashes all three."""

    publisher: str
    seq: int
    payload: bytes

    @property
    def key(self) -> int:
        return publication_key(self.publisher, self.seq, self.payload)


def publication_key(publisher: str, seq: int, payload: bytes) -> int:
    return mmh3.hash128(b"%s\x00%d\x00%s" % (publisher.encode(), seq, payload), 0, signed=False)


@dataclass(frozen=True, slots=True)
class Prefix:
    """A bit string of `length` bits, value `bits` (the node labels of the trie; ε is length 0)."""

    bits: int
    length: int

    def covers(self, key: int) -> bool:
        return key >> (KEY_BITS - self.length) == self.bits

    def is_prefix_of(self, other: Prefix) -> bool:
        return (self.length <= other.length
                and other.bits >> (other.length - self.length) == self.bits)


@dataclass(frozen=True, slots=True)
class Summary:
    """What CheckTrie carries about a node: its label and its hash, never its children."""

    label: Prefix
    hash: int


def _leaf_hash(key: int) -> int:
    return mmh3.hash128(key.to_bytes(16, "big"), _HASH_SEED, signed=False)


def _inner_hash(h0: int, h1: int) -> int:
    return mmh3.hash128(h0.to_bytes(16, "big") + h1.to_bytes(16, "big"), _HASH_SEED, signed=False)


class _Node:
    __slots__ = ("children", "hash", "label", "pub")

    def __init__(self, label: Prefix, pub: Publication | None = None,
                 children: list[_Node] | None = None) -> None:
        self.label = label
        self.pub = pub
        self.children = children
        self.hash = 0
        self.rehash()

    def rehash(self) -> None:
        if self.children is None:
            self.hash = _leaf_hash(self.label.bits)
        else:
            self.hash = _inner_hash(self.children[0].hash, self.children[1].hash)


def _bit(key: int, i: int) -> int:
    """Bit i (0 = most significant) of a KEY_BITS-bit key."""
    return key >> (KEY_BITS - 1 - i) & 1


class PublicationTrie:
    """A Patricia trie over publication keys with per-node hashes."""

    def __init__(self, pubs: Iterable[Publication] = ()) -> None:
        self._root: _Node | None = None
        self._pubs: dict[int, Publication] = {}
        for p in pubs:
            self.insert(p)

    # ---- the set -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._pubs)

    def __contains__(self, key: int) -> bool:
        return key in self._pubs

    def __iter__(self) -> Iterator[Publication]:
        return iter(self._pubs.values())

    def keys(self) -> set[int]:
        return set(self._pubs)

    def insert(self, pub: Publication) -> bool:
        """Add `pub`; False if it is already held."""
        key = pub.key
        if key in self._pubs:
            return False
        self._pubs[key] = pub
        leaf = _Node(Prefix(key, KEY_BITS), pub=pub)
        if self._root is None:
            self._root = leaf
            return True
        path: list[_Node] = []
        parent: _Node | None = None
        node = self._root
        while True:
            lab = node.label
            common = lab.length - ((key >> (KEY_BITS - lab.length)) ^ lab.bits).bit_length()
            if common < lab.length:
                # split: a new inner node labelled with the common prefix takes both
                inner_label = Prefix(key >> (KEY_BITS - common), common)
                kids = [node, leaf] if _bit(key, common) else [leaf, node]
                inner = _Node(inner_label, children=kids)
                if parent is None:
                    self._root = inner
                else:
                    parent.children[parent.children.index(node)] = inner  # type: ignore[index]
                break
            path.append(node)
            parent = node
            node = node.children[_bit(key, lab.length)]  # type: ignore[index]
        for n in reversed(path):
            n.rehash()
        return True

    def rebuild(self, pubs: Iterable[Publication]) -> None:
        """Replace the content (and reindex): used when RAM was corrupted; bogus entries drop."""
        self._root = None
        self._pubs = {}
        for p in pubs:
            if isinstance(p, Publication):
                self.insert(p)

    # ---- navigation ----------------------------------------------------------------------------

    @property
    def root(self) -> Summary | None:
        r = self._root
        return None if r is None else Summary(r.label, r.hash)

    def find(self, label: Prefix) -> _Node | None:
        """The node labelled exactly `label`, if any."""
        node = self._root
        while node is not None:
            lab = node.label
            if lab.length >= label.length:
                return node if lab == label else None
            if not lab.is_prefix_of(label):
                return None
            node = node.children[_bit(label.bits << (KEY_BITS - label.length), lab.length)]  # type: ignore[index]
        return None

    def shortest_with_prefix(self, label: Prefix) -> _Node | None:
        """The node of shortest label that has `label` as a prefix (root of everything under it)."""
        node = self._root
        while node is not None:
            lab = node.label
            if lab.length >= label.length:
                return node if label.is_prefix_of(lab) else None
            if not lab.is_prefix_of(label):
                return None
            node = node.children[_bit(label.bits << (KEY_BITS - label.length), lab.length)]  # type: ignore[index]
        return None

    def under(self, label: Prefix, *, excluding: Prefix | None = None) -> list[Publication]:
        """Every publication whose key starts with `label` but not with `excluding`."""
        top = self.shortest_with_prefix(label)
        out: list[Publication] = []
        if top is None:
            return out
        stack = [top]
        while stack:
            n = stack.pop()
            if excluding is not None and excluding.is_prefix_of(n.label):
                continue
            if n.children is None:
                out.append(n.pub)  # type: ignore[arg-type]
            else:
                stack.extend(n.children)
        return out

    @staticmethod
    def summary(node: _Node) -> Summary:
        return Summary(node.label, node.hash)

    @staticmethod
    def child_summaries(node: _Node) -> tuple[Summary, ...]:
        if node.children is None:
            return ()
        return tuple(Summary(c.label, c.hash) for c in node.children)
