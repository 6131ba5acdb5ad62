"""Issue 24, finding 4: every count a peer chooses has a bound, checked when its envelope is
decoded. Each bound is accepted as it is and refused at bound + 1, naming the bound."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from weeble.codec.wire import (
    MAX_ITEMS,
    MAX_MOVES,
    MAX_PATH,
    MAX_RIDS,
    WireError,
    envelope_to_message,
)
from weeble.core.sketch.bloom import MAX_BITS, MAX_HASHES, BloomFilter
from weeble.proto.v1 import link_pb2

Build = Callable[[int], link_pb2.Envelope]


def _lock(n: int) -> link_pb2.Envelope:
    path = [f"b{i}" for i in range(n)]
    return link_pb2.Envelope(lock=link_pb2.LockMsg(rid="r", path=path, edge_a="b0",
                                                   edge_b="b1"))


def _moves(n: int) -> list[link_pb2.MoveMsg]:
    return [link_pb2.MoveMsg(broker=f"b{i}", parent="b0") for i in range(n)]


def _broadcast(n: int) -> link_pb2.Envelope:
    f = BloomFilter(m=64, k=3, seed=1)
    return link_pb2.Envelope(opt_broadcast=link_pb2.OptBroadcastMsg(
        path=[f"b{i}" for i in range(n)], p=[0.0] * n, c=[1.0] * (n - 1),
        summary=f.to_bytes(), m=f.m, k=f.k, seed=1))


def _propose(n: int) -> link_pb2.Envelope:
    return link_pb2.Envelope(opt_propose=link_pb2.OptProposeMsg(
        rid="r", path=[f"b{i}" for i in range(n)], p=[0.0] * n, c=[1.0] * n, cost=[1.0] * n))


def _items(n: int) -> list[link_pb2.AeItem]:
    return [link_pb2.AeItem(sub_id=f"s{i}", filter="k == 1") for i in range(n)]


def _observe(m: int, k: int) -> link_pb2.Envelope:
    return link_pb2.Envelope(ae_observe=link_pb2.AeObserveMsg(round=1, m=m, k=k, seed=3))


def _reply_sketch(m: int, k: int) -> link_pb2.Envelope:
    return link_pb2.Envelope(ae_reply=link_pb2.AeReplyMsg(
        round=1, cardinality=0, sketch=bytes((m + 7) // 8), m=m, k=k, seed=3, has_sketch=True))


def _skip_ring_entries(n: int) -> link_pb2.Envelope:
    env = link_pb2.Envelope(skip_ring=link_pb2.SkipRingMsg(topic="t", node="b1"))
    env.skip_ring.check_trie.entries.extend(link_pb2.SrSummary(hash=bytes(16)) for _ in range(n))
    return env


def _skip_ring_pubs(n: int) -> link_pb2.Envelope:
    env = link_pb2.Envelope(skip_ring=link_pb2.SkipRingMsg(topic="t", node="b1"))
    env.skip_ring.deliver_publications.pubs.extend(
        link_pb2.SrPublication(publisher="p", seq=i) for i in range(n))
    return env


CASES: list[tuple[str, int, Build]] = [
    ("lock.path: ", MAX_PATH, _lock),
    ("separator.brokers: ", MAX_PATH, lambda n: link_pb2.Envelope(
        separator=link_pb2.SeparatorMsg(rid="r", brokers=[f"b{i}" for i in range(n)]))),
    ("recolor.moves: ", MAX_MOVES, lambda n: link_pb2.Envelope(
        recolor=link_pb2.RecolorMsg(color=1, moves=_moves(n)))),
    ("recolor.rids: ", MAX_RIDS, lambda n: link_pb2.Envelope(
        recolor=link_pb2.RecolorMsg(color=1, rids=[f"r{i}" for i in range(n)]))),
    ("reconfigure.moves: ", MAX_MOVES, lambda n: link_pb2.Envelope(
        reconfigure=link_pb2.ReconfigureMsg(rid="r", moves=_moves(n)))),
    ("opt_broadcast.path: ", MAX_PATH, _broadcast),
    ("opt_propose.path: ", MAX_PATH, _propose),
    ("ae_reply.items: ", MAX_ITEMS, lambda n: link_pb2.Envelope(
        ae_reply=link_pb2.AeReplyMsg(round=1, items=_items(n)))),
    ("ae_correct.subscribe: ", MAX_ITEMS, lambda n: link_pb2.Envelope(
        ae_correct=link_pb2.AeCorrectMsg(round=1, subscribe=_items(n)))),
    ("skip_ring.check_trie.entries: ", MAX_ITEMS, _skip_ring_entries),
    ("skip_ring.deliver_publications.pubs: ", MAX_ITEMS, _skip_ring_pubs),
    ("ae_observe.k: ", MAX_HASHES, lambda k: _observe(64, k)),
    ("ae_observe.m: ", MAX_BITS, lambda m: _observe(m, 7)),
    ("sketch.k: ", MAX_HASHES, lambda k: _reply_sketch(64, k)),
    ("sketch.m: ", MAX_BITS, lambda m: _reply_sketch(m, 7)),
]


@pytest.mark.parametrize(("field", "bound", "build"), CASES, ids=[c[0] for c in CASES])
def test_each_bound_is_accepted_and_refused_one_above(field: str, bound: int,
                                                      build: Build) -> None:
    envelope_to_message(build(bound))  # at the bound: decoded
    with pytest.raises(WireError) as err:
        envelope_to_message(build(bound + 1))
    assert str(err.value).startswith(field) and f"= {bound}" in str(err.value), err.value


def test_a_sketch_costs_positions_not_copies_of_its_bits() -> None:
    # built bit by bit (`bits |= 1 << i`), each position copied all m bits: at m = 2^27 a
    # position cost 6 ms. The largest sketch a peer may ask for, of many elements, is built
    # from the same positions either way
    keys = [b"s%d" % i for i in range(2000)]
    f = BloomFilter.of(keys, m=MAX_BITS, k=MAX_HASHES, seed=5)
    small = BloomFilter.of(keys[:50], m=1000, k=7, seed=5)
    slow = BloomFilter(m=1000, k=7, seed=5)
    for key in keys[:50]:
        slow.add(key)
    assert small.bits == slow.bits and f.bits.bit_count() > 2000
