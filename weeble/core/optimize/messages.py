"""The tree optimizer's messages (thesis ch. 5; layer `optimize`, optimize/layer.py): they
pass beside the coordinated link exchange (they are not routing messages)."""

from __future__ import annotations

from dataclasses import dataclass

from weeble.core.sketch.bloom import BloomFilter


@dataclass(slots=True)
class Broadcast:
    """m^K (Alg. 17): the originator path[0]'s interest summary, flooded η hops through the tree.

    `p[q]` is the processing cost of path[q]; `c[q]` the cost of link path[q]–path[q+1]. Each
    forwarder appends itself, its p and the cost of the link the message came over."""

    path: tuple[str, ...]
    p: tuple[float, ...]
    c: tuple[float, ...]
    summary: BloomFilter


@dataclass(slots=True)
class Propose:
    """m^Q (Alg. 18): Bi = path[0] proposes the link to Bj = path[-1]; the request travels the
    tree path to Bj and every broker of the cycle adds its cost_R(e) for every edge e.

    `c[t]` is the cost of edge t of the cycle (t = n−1: the new link, which the others could not
    know, spec ch5 §2.6 [INFERRED]); `cost[t]` the sum of cost_R(e_t, B) so far."""

    rid: str
    path: tuple[str, ...]
    p: tuple[float, ...]
    c: tuple[float, ...]
    cost: tuple[float, ...]


OPTIMIZING: tuple[type, ...] = (Broadcast, Propose)
