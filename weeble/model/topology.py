"""Broker topologies: a small graph object plus builders for the trees the experiments use.

The routing algorithms of the thesis need an acyclic overlay (spec ch3 §1.2), so `validate_tree` is
the gate every scenario passes. Broker ids keep insertion order everywhere: iteration order then
never depends on string hashing, which Python randomizes per process.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable

from weeble.core.rom import ConfigError


class Topology:
    def __init__(self) -> None:
        self._adjacent: dict[str, list[str]] = {}
        self._links: list[tuple[str, str]] = []

    def add_broker(self, broker: str) -> None:
        if broker in self._adjacent:
            raise ConfigError(f"broker {broker!r} added twice")
        self._adjacent[broker] = []

    def add_link(self, a: str, b: str) -> None:
        # Accepted unchecked so that validate_tree can report every problem in one place.
        self._links.append((a, b))
        for x, y in ((a, b), (b, a)):
            if x in self._adjacent and y != x:
                self._adjacent[x].append(y)

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(self._adjacent)

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._links)

    def neighbors(self, broker: str) -> tuple[str, ...]:
        return tuple(self._adjacent[broker])

    def validate_tree(self) -> None:
        """Raise ConfigError unless the brokers and links form one tree."""
        if not self._adjacent:
            raise ConfigError("no brokers")
        forest: dict[str, list[str]] = {b: [] for b in self._adjacent}  # links accepted so far
        component = {b: b for b in self._adjacent}  # union-find: a representative per tree

        def find(b: str) -> str:
            while component[b] != b:
                component[b] = component[component[b]]
                b = component[b]
            return b

        for a, b in self._links:
            for end in (a, b):
                if end not in self._adjacent:
                    raise ConfigError(f"link {a}-{b} names unknown broker {end!r}")
            if a == b:
                raise ConfigError(f"self-loop on broker {a!r}")
            if find(a) == find(b):  # a and b are already connected: this link closes a cycle
                cycle = _path(forest, b, a)
                raise ConfigError(f"not a tree: cycle {'-'.join([*cycle, b])}")
            component[find(a)] = find(b)
            forest[a].append(b)
            forest[b].append(a)
        reached = self._distances(self.brokers[0])
        if len(reached) < len(self._adjacent):
            missing = [b for b in self._adjacent if b not in reached]
            raise ConfigError(
                f"not a tree: disconnected; not reachable from {self.brokers[0]}: {missing}"
            )

    def parent_map(self, root: str) -> dict[str, str | None]:
        """Each broker's neighbour towards `root` (None for the root itself)."""
        parent: dict[str, str | None] = {root: None}
        queue = deque([root])
        while queue:
            node = queue.popleft()
            for child in self._adjacent[node]:
                if child not in parent:
                    parent[child] = node
                    queue.append(child)
        return parent

    def depth(self, root: str) -> dict[str, int]:
        """Hop distance of every broker from `root`."""
        return self._distances(root)

    def height(self, root: str) -> int:
        return max(self._distances(root).values())

    def leaves(self, root: str) -> list[str]:
        """Brokers without children when the tree hangs from `root` (the root only if alone)."""
        parent = self.parent_map(root)
        has_child = {p for p in parent.values() if p is not None}
        return [b for b in self._adjacent if b not in has_child]

    def diameter(self) -> int:
        """Longest shortest path in hops: the d of the stabilization bounds."""
        # Two sweeps find a tree's diameter: the farthest node from anywhere is a path end.
        far = self._farthest(self.brokers[0])
        return self._distances(far)[self._farthest(far)]

    def _distances(self, start: str) -> dict[str, int]:
        dist = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for nxt in self._adjacent[node]:
                if nxt not in dist:
                    dist[nxt] = dist[node] + 1
                    queue.append(nxt)
        return dist

    def _farthest(self, start: str) -> str:
        dist = self._distances(start)
        return max(dist, key=dist.__getitem__)  # first maximum in BFS order: deterministic



def _path(adjacent: dict[str, list[str]], start: str, goal: str) -> list[str]:
    """The path from start to goal in a forest (they are known to be connected)."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in adjacent[node]:
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    path: list[str] = []
    step: str | None = goal
    while step is not None:
        path.append(step)
        step = previous[step]
    return path[::-1]


def from_edges(edges: Iterable[tuple[str, str]]) -> Topology:
    """A topology with exactly the brokers the edges name, in order of first appearance (of a
    set of edges, such as a `Tree`'s, in sorted order: a set's order follows string hashing,
    and the broker order seeds the simulator's draws)."""
    edges = sorted(edges) if isinstance(edges, (set, frozenset)) else list(edges)
    topo = Topology()
    for end in dict.fromkeys(end for edge in edges for end in edge):
        topo.add_broker(end)
    for a, b in edges:
        topo.add_link(a, b)
    return topo


def kary_tree(m: int, levels: int) -> Topology:
    """Complete m-ary tree with `levels` levels; ids b0.. in BFS order, so bi's children are
    b(m*i+1) .. b(m*i+m) and b0 is the root."""
    if m < 1 or levels < 1:
        raise ConfigError(f"kary tree needs m >= 1 and levels >= 1, got m={m}, levels={levels}")
    n = sum(m**level for level in range(levels))
    topo = _numbered(n)
    for child in range(1, n):
        topo.add_link(f"b{(child - 1) // m}", f"b{child}")
    return topo


def chain(n: int) -> Topology:
    topo = _numbered(n)
    for i in range(1, n):
        topo.add_link(f"b{i - 1}", f"b{i}")
    return topo


def random_tree(n: int, seed: int) -> Topology:
    """A uniformly random labelled tree on b0..b(n-1), decoded from a random Prüfer sequence."""
    topo = _numbered(n)
    if n < 2:
        return topo
    rng = random.Random(seed)
    code = [rng.randrange(n) for _ in range(n - 2)]
    degree = [1] * n
    for x in code:
        degree[x] += 1
    for x in code:
        leaf = degree.index(1)  # the smallest current leaf, as the decoding requires
        topo.add_link(f"b{leaf}", f"b{x}")
        degree[leaf] -= 1
        degree[x] -= 1
    u, v = (i for i in range(n) if degree[i] == 1)
    topo.add_link(f"b{u}", f"b{v}")
    return topo


def _numbered(n: int) -> Topology:
    if n < 1:
        raise ConfigError(f"a topology needs at least 1 broker, got {n}")
    topo = Topology()
    for i in range(n):
        topo.add_broker(f"b{i}")
    return topo
