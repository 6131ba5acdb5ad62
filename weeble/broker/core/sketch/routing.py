"""The routing model of seed 002 (§2) and its legality predicates (Definitions 2–4, Theorem 1).

Brokers form one tree over FIFO links. A routing table is the set of pairs (sub, R), R the
neighbours sub was received from; here `held[n]` is F_{me→n}, the subscriptions received from
neighbour n, and `local` is L_me. Simple routing: a subscription is forwarded to every other
neighbour unless it is a duplicate, i.e. exactly when it enters what we advertise to that
neighbour, Adv(me→y) = ⋃_{n≠y} F_{me→n} ∪ L_me; an unsubscription when it leaves it. Events
match subscriptions by equality (the paper's simulation: random 3-character strings), so routing
is a lookup.

RAM: `neighbours` (the live tree edges at this broker), `held`, `local`. `_sources` is an index
over them (who holds each item), rebuilt by `load` after a corruption.

When a link fails, the subscriptions received over it are obsolete but kept aside (`detached`): the
paper's point (§5) is that if the link comes back soon, they are useful again; the stabilization
rounds, not the failure itself, decide when the rest of the tree unsubscribes them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

Item = Hashable
LOCAL = ""  # the source name of the local clients in the index


class SimpleRouter:
    def __init__(self, me: str, neighbours: Iterable[str]) -> None:
        self.me = me
        self.neighbours: set[str] = set(neighbours)
        self.held: dict[str, set[Item]] = {n: set() for n in self.neighbours}
        self.detached: dict[str, set[Item]] = {}
        self.local: set[Item] = set()
        self._sources: dict[Item, set[str]] = {}

    # ---- RAM -----------------------------------------------------------------------------------

    def load(self, *, held: Mapping[str, Iterable[Item]], local: Iterable[Item]) -> None:
        """Overwrite the tables (an arbitrary state) and reindex."""
        self.held = {n: set(held.get(n, ())) for n in self.neighbours}
        self.local = set(local)
        self._reindex()

    def _reindex(self) -> None:
        src: dict[Item, set[str]] = {}
        for n, items in self.held.items():
            if n in self.neighbours:
                for s in items:
                    src.setdefault(s, set()).add(n)
        for s in self.local:
            src.setdefault(s, set()).add(LOCAL)
        self._sources = src

    # ---- what we tell each neighbour -----------------------------------------------------------

    def advertisement(self, to: str) -> set[Item]:
        """S(me) for the edge (me, to): ⋃_{n ∈ N(me), n ≠ to} F_{me→n} ∪ L_me."""
        return {s for s, src in self._sources.items() if len(src) > 1 or to not in src}

    def _gain(self, s: Item, source: str) -> list[tuple[str, Item]]:
        """Add a source of s; the neighbours whose advertisement s enters."""
        src = self._sources.setdefault(s, set())
        if source in src:
            return []
        before = set(src)
        src.add(source)
        if not before:
            targets = [y for y in self.neighbours if y != source]
        elif len(before) == 1 and (only := next(iter(before))) != LOCAL and only != source:
            targets = [only]
        else:
            targets = []
        return [(y, s) for y in sorted(targets)]

    def _lose(self, s: Item, source: str) -> list[tuple[str, Item]]:
        """Remove a source of s; the neighbours whose advertisement s leaves."""
        src = self._sources.get(s)
        if not src or source not in src:
            return []
        src.discard(source)
        if not src:
            del self._sources[s]
            targets = [y for y in self.neighbours if y != source]
        elif len(src) == 1 and (only := next(iter(src))) != LOCAL:
            targets = [only] if only != source else []
        else:
            targets = []
        return [(y, s) for y in sorted(targets)]

    # ---- subscriptions (each returns the (neighbour, item) pairs to forward) --------------------

    def on_sub(self, frm: str, s: Item) -> list[tuple[str, Item]]:
        if frm not in self.neighbours:
            return []
        self.held[frm].add(s)
        return self._gain(s, frm)

    def on_unsub(self, frm: str, s: Item) -> list[tuple[str, Item]]:
        if frm not in self.neighbours or s not in self.held[frm]:
            return []
        self.held[frm].discard(s)
        return self._lose(s, frm)

    def local_sub(self, s: Item) -> list[tuple[str, Item]]:
        self.local.add(s)
        return self._gain(s, LOCAL)

    def local_unsub(self, s: Item) -> list[tuple[str, Item]]:
        if s not in self.local:
            return []
        self.local.discard(s)
        return self._lose(s, LOCAL)

    # ---- events --------------------------------------------------------------------------------

    def route(self, event: Item, frm: str | None) -> tuple[bool, list[str]]:
        """(deliver to a local client?, neighbours to forward to) for an event from `frm`."""
        src = self._sources.get(event, ())
        return LOCAL in src, sorted(n for n in src if n != LOCAL and n != frm)

    # ---- the tree changes ----------------------------------------------------------------------

    def link_down(self, b: str) -> None:
        if b not in self.neighbours:
            return
        self.neighbours.discard(b)
        self.detached[b] = self.held.pop(b, set())
        self._reindex()

    def link_up(self, b: str) -> None:
        if b in self.neighbours:
            return
        self.neighbours.add(b)
        self.held[b] = self.detached.pop(b, set())
        self._reindex()


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
