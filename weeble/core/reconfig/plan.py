"""Reconfiguration as data (thesis 4.2, spec ch4 §1): operations, trees and plans. Pure.

The three elementary reconfigurations (4.2.2):
- AddLeaf(new, attach): a new broker joins as a leaf of `attach`;
- RemoveLeaf(leaf): a leaf withdraws what it contributed and leaves;
- ExchangeLink(remove=r, add=a): r leaves, a joins, and the result is again a spanning tree
  (r lies on the tree path between a's endpoints: the reconfiguration cycle).
Complex ones are plans of elementary ones (4.2.3): inserting an inner broker (AddLeaf, then
exchanges), removing one (exchanges until it is a leaf, then RemoveLeaf), and moving to any
target tree with exactly D(T1, T2) = |E2 \\ E1| exchanges (Def. 7, Theorem 2), each step's r
chosen on the cycle its a closes, so every intermediate graph is a spanning tree.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

Edge = tuple[str, str]


class PlanError(ValueError):
    """An operation whose precondition does not hold on the tree it is applied to."""


def edge(a: str, b: str) -> Edge:
    """The undirected link a–b, in a canonical order."""
    if a == b:
        raise PlanError(f"a link needs two brokers, got {a!r} twice")
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True, slots=True)
class AddLeaf:
    new: str
    attach: str


@dataclass(frozen=True, slots=True)
class RemoveLeaf:
    leaf: str


@dataclass(frozen=True, slots=True)
class ExchangeLink:
    remove: Edge
    add: Edge


Op = AddLeaf | RemoveLeaf | ExchangeLink


@dataclass(frozen=True, slots=True)
class Tree:
    """A spanning tree on `nodes`: connected, acyclic, |edges| = |nodes| − 1 (checked)."""

    nodes: frozenset[str]
    edges: frozenset[Edge]

    @classmethod
    def of(cls, edges: Iterable[tuple[str, str]], nodes: Iterable[str] = ()) -> Tree:
        es = frozenset(edge(a, b) for a, b in edges)
        ns = frozenset(nodes) | {v for e in es for v in e}
        tree = cls(ns, es)
        problem = tree.problem()
        if problem:
            raise PlanError(problem)
        return tree

    def problem(self) -> str | None:
        """Why this is not a spanning tree, or None."""
        if not self.nodes:
            return "a tree needs at least one broker"
        for a, b in self.edges:
            if a not in self.nodes or b not in self.nodes:
                return f"link {a}–{b} names a broker that is not in the tree"
        if len(self.edges) != len(self.nodes) - 1:
            return (f"{len(self.nodes)} brokers need {len(self.nodes) - 1} links, "
                    f"got {len(self.edges)}")
        start = min(self.nodes)
        seen = {start}
        todo = [start]
        adj = self.adjacency()
        while todo:
            for n in adj[todo.pop()]:
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        if seen != self.nodes:
            return f"not connected: {sorted(self.nodes - seen)} cannot be reached"
        return None

    def adjacency(self) -> dict[str, list[str]]:
        adj: dict[str, list[str]] = {v: [] for v in self.nodes}
        for a, b in sorted(self.edges):
            adj[a].append(b)
            adj[b].append(a)
        return adj

    def neighbors(self, v: str) -> list[str]:
        return sorted(b if a == v else a for a, b in self.edges if v in (a, b))

    def path(self, u: str, v: str) -> tuple[str, ...]:
        """The tree path from u to v (both included)."""
        if u not in self.nodes or v not in self.nodes:
            raise PlanError(f"path: {u!r} or {v!r} is not in the tree")
        adj = self.adjacency()
        back: dict[str, str | None] = {u: None}
        todo = [u]
        while todo and v not in back:
            x = todo.pop(0)
            for n in adj[x]:
                if n not in back:
                    back[n] = x
                    todo.append(n)
        out = [v]
        while back[out[-1]] is not None:
            out.append(back[out[-1]])  # type: ignore[arg-type]
        return tuple(reversed(out))

    def parents(self, root: str) -> dict[str, str | None]:
        """Each broker's neighbour towards `root` (None at the root)."""
        adj = self.adjacency()
        parent: dict[str, str | None] = {root: None}
        todo = [root]
        while todo:
            x = todo.pop(0)
            for n in adj[x]:
                if n not in parent:
                    parent[n] = x
                    todo.append(n)
        return parent

    def is_leaf(self, v: str) -> bool:
        return sum(1 for e in self.edges if v in e) <= 1


def distance(t1: Tree, t2: Tree) -> int:
    """D(T1, T2) = |E2 \\ E1| (Def. 7); symmetric on one node set (Lemma 2)."""
    if t1.nodes != t2.nodes:
        raise PlanError("distance: both trees must span the same brokers")
    return len(t2.edges - t1.edges)


def cycle(tree: Tree, op: ExchangeLink) -> tuple[str, ...]:
    """The reconfiguration cycle as the initiator numbers it: ⟨B1 … Br1, Br2 … Bn⟩, the tree
    path from a's first endpoint B1 to its second Bn. Raises PlanError if r is not on it."""
    a1, a2 = op.add
    r1, r2 = op.remove
    if edge(r1, r2) not in tree.edges:  # name what is missing: the link, not a broker
        missing = [b for b in (r1, r2) if b not in tree.nodes]
        why = (f" ({' and '.join(repr(b) for b in missing)} "
               f"{'is' if len(missing) == 1 else 'are'} not a broker of it)" if missing else "")
        raise PlanError(f"exchange: the link {r1}–{r2} to remove is not in the tree{why}")
    missing = [b for b in (a1, a2) if b not in tree.nodes]
    if missing:
        raise PlanError(f"exchange: the link {a1}–{a2} to add names "
                        f"{' and '.join(repr(b) for b in missing)}, not a broker of the tree")
    if edge(a1, a2) in tree.edges:
        raise PlanError(f"exchange: {a1}–{a2} is already a link")
    path = tree.path(a1, a2)
    links = {edge(x, y) for x, y in pairwise(path)}
    if edge(*op.remove) not in links:
        raise PlanError(f"exchange: {op.remove[0]}–{op.remove[1]} is not on the cycle "
                        f"{'–'.join(path)} that {a1}–{a2} closes")
    return path


def apply(tree: Tree, op: Op) -> Tree:
    """The tree after `op`; PlanError if its precondition does not hold."""
    if isinstance(op, AddLeaf):
        if op.new in tree.nodes:
            raise PlanError(f"add leaf: {op.new!r} is already in the tree")
        if op.attach not in tree.nodes:
            raise PlanError(f"add leaf: {op.attach!r} is not in the tree")
        return Tree(tree.nodes | {op.new}, tree.edges | {edge(op.new, op.attach)})
    if isinstance(op, RemoveLeaf):
        if op.leaf not in tree.nodes:
            raise PlanError(f"remove leaf: {op.leaf!r} is not in the tree")
        if not tree.is_leaf(op.leaf) or len(tree.nodes) == 1:
            raise PlanError(f"remove leaf: {op.leaf!r} is not a leaf")
        return Tree(tree.nodes - {op.leaf}, frozenset(e for e in tree.edges if op.leaf not in e))
    cycle(tree, op)
    return Tree(tree.nodes, (tree.edges - {edge(*op.remove)}) | {edge(*op.add)})


def run(tree: Tree, ops: Sequence[Op]) -> list[Tree]:
    """Every intermediate tree of a plan, the first and the last included."""
    trees = [tree]
    for op in ops:
        trees.append(apply(trees[-1], op))
    return trees


def exchanges(t1: Tree, t2: Tree) -> list[ExchangeLink]:
    """Theorem 2: exactly D(T1, T2) exchanges from T1 to T2 (same brokers).

    Each step takes the first link a of E2 \\ E(T) (in sorted order), and removes from the cycle
    a closes a link r of E(T) \\ E2; one exists because T2 has no cycle. An arbitrary pair from
    the two difference sets would not do: r must lie on a's cycle.
    """
    if t1.nodes != t2.nodes:
        raise PlanError("exchanges: both trees must span the same brokers (see plan())")
    ops: list[ExchangeLink] = []
    tree = t1
    while tree.edges != t2.edges:
        a = min(t2.edges - tree.edges)
        path = tree.path(*a)
        r = next(e for e in (edge(x, y) for x, y in pairwise(path))
                 if e not in t2.edges)
        op = ExchangeLink(remove=r, add=a)
        tree = apply(tree, op)
        ops.append(op)
    return ops


def plan(t1: Tree, t2: Tree) -> list[Op]:
    """Move T1 to T2, possibly on other brokers (L3759-3766): add the new brokers as leaves,
    exchange links until the leaving brokers are leaves and the rest is T2, remove them."""
    ops: list[Op] = []
    tree = t1
    adding = sorted(t2.nodes - t1.nodes)
    while adding:
        # attach to a T2 neighbour already present when there is one (fewer exchanges later)
        ready = [v for v in adding if any(n in tree.nodes for n in t2.neighbors(v))]
        v = ready[0] if ready else adding[0]
        near = [n for n in t2.neighbors(v) if n in tree.nodes]
        op = AddLeaf(v, near[0] if near else min(tree.nodes))
        tree = apply(tree, op)
        ops.append(op)
        adding.remove(v)
    leaving = sorted(t1.nodes - t2.nodes)
    target_edges = set(t2.edges)
    for v in leaving:  # a leaving broker ends as a leaf of a broker that stays
        stay = [n for n in t1.neighbors(v) if n in t2.nodes]
        target_edges.add(edge(v, stay[0] if stay else min(t2.nodes)))
    target = Tree.of(target_edges, tree.nodes)
    ops.extend(exchanges(tree, target))
    ops.extend(RemoveLeaf(v) for v in leaving)
    return ops


def insert_inner(tree: Tree, new: str, between: Edge) -> list[Op]:
    """Insert `new` on the link `between` = (u, v): AddLeaf(new, u), then exchange u–v for
    new–v (TC-3)."""
    u, v = between
    if edge(u, v) not in tree.edges:
        raise PlanError(f"insert: {u}–{v} is not a link")
    return [AddLeaf(new, u), ExchangeLink(remove=edge(u, v), add=(new, v))]


def remove_inner(tree: Tree, broker: str, hub: str | None = None) -> list[Op]:
    """Remove an inner broker: its other neighbours move to `hub` (one of its neighbours,
    by default the first), one exchange each, then it leaves as a leaf (TC-3)."""
    around = tree.neighbors(broker)
    if not around:
        raise PlanError(f"remove: {broker!r} is not in the tree or has no links")
    hub = hub or around[0]
    if hub not in around:
        raise PlanError(f"remove: hub {hub!r} is not a neighbour of {broker!r}")
    ops: list[Op] = [ExchangeLink(remove=edge(broker, w), add=(hub, w)) for w in around
                     if w != hub]
    ops.append(RemoveLeaf(broker))
    return ops


def moves(t1: Tree, t2: Tree, root: str) -> tuple[tuple[str, str | None], ...]:
    """Per-broker parent pointers that turn T1 into T2 (both rooted at `root`): what a
    reconfiguration of the 3-colour scheme carries (spec ch4 §5.6). A broker of T2 whose
    parent differs (or that is new) gets its T2 parent; a broker only in T1 gets None (it
    leaves). T2 may be any tree on any brokers with the same root: one recolor round applies all.
    """
    if root not in t1.nodes or root not in t2.nodes:
        raise PlanError(f"moves: the root {root!r} must be in both trees")
    old, new = t1.parents(root), t2.parents(root)
    out: list[tuple[str, str | None]] = [(v, new[v]) for v in sorted(new)
                                         if (v != root and old.get(v, root) != new[v])
                                         or v not in old]
    out.extend((v, None) for v in sorted(t1.nodes - t2.nodes))
    return tuple(out)


def random_exchange(tree: Tree, rng: random.Random, length: int | None = None) -> ExchangeLink:
    """A random valid link exchange; with `length`, one whose cycle has that many brokers."""
    nodes = sorted(tree.nodes)
    pairs = [(u, v) for i, u in enumerate(nodes) for v in nodes[i + 1:]
             if edge(u, v) not in tree.edges]
    if length is not None:
        pairs = [p for p in pairs if len(tree.path(*p)) == length]
    if not pairs:
        raise PlanError(f"no link exchange with a cycle of {length} brokers in this tree")
    u, v = rng.choice(pairs)
    if rng.random() < 0.5:
        u, v = v, u  # either endpoint may initiate
    path = tree.path(u, v)
    i = rng.randrange(len(path) - 1)
    return ExchangeLink(remove=edge(path[i], path[i + 1]), add=(u, v))


def random_tree(nodes: Sequence[str], rng: random.Random) -> Tree:
    """A uniformly random attachment tree on `nodes` (each joins a random earlier one)."""
    order = list(nodes)
    rng.shuffle(order)
    return Tree.of([(v, rng.choice(order[:i])) for i, v in enumerate(order) if i], order)
