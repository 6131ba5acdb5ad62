"""The legality predicates of seed 002 (§2: Definitions 2–4, Theorem 1), over the tables as sets:
what the anti-entropy mode (routing/edges.py, sketch/layer.py) keeps and the property test of
Theorem 1 checks.

Brokers form one tree over FIFO links; `held[(a, b)]` is F_{a→b}, the subscriptions a received
from neighbour b, and `local[v]` is L_v. Simple routing (§2): a subscription enters what v
advertises to neighbour y, ⋃_{n≠y} F_{v→n} ∪ L_v, and is forwarded there.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

Item = Hashable


# ---- legality (Definitions 2–4) over a quiescent system -------------------------------------

Tree = Mapping[str, Iterable[str]]


def subtree_subscriptions(tree: Tree, local: Mapping[str, Iterable[Item]]) -> dict[
        tuple[str, str], frozenset[Item]]:
    """S_b^a for every directed edge (a, b): the subscriptions of the nodes on b's side."""
    nbrs = {v: set(ns) for v, ns in tree.items()}
    out: dict[tuple[str, str], frozenset[Item]] = {}
    for a, ns in nbrs.items():
        for b in ns:
            seen, stack, acc = {a, b}, [b], set(local.get(b, ()))
            while stack:
                u = stack.pop()
                for w in nbrs[u]:
                    if w not in seen:
                        seen.add(w)
                        stack.append(w)
                        acc |= set(local.get(w, ()))
            out[(a, b)] = frozenset(acc)
    return out


def globally_legal(tree: Tree, held: Mapping[tuple[str, str], Iterable[Item]],
                   local: Mapping[str, Iterable[Item]]) -> bool:
    """Definition 4 on every edge: F_{a→b} = S_b^a (held[(a, b)] is F_{a→b})."""
    expected = subtree_subscriptions(tree, local)
    return all(set(held.get(e, ())) == s for e, s in expected.items())


def locally_legal(tree: Tree, held: Mapping[tuple[str, str], Iterable[Item]],
                  local: Mapping[str, Iterable[Item]], a: str, b: str) -> bool:
    """Definition 2 for (a, b) with nothing in transit: F_{a→b} = ⋃_{n ∈ N(b)−a} F_{b→n} ∪ L_b."""
    adv = set(local.get(b, ()))
    for n in tree[b]:
        if n != a:
            adv |= set(held.get((b, n), ()))
    return set(held.get((a, b), ())) == adv


def all_locally_legal(tree: Tree, held: Mapping[tuple[str, str], Iterable[Item]],
                      local: Mapping[str, Iterable[Item]]) -> bool:
    return all(locally_legal(tree, held, local, a, b) for a, ns in tree.items() for b in ns)
