"""Who a fault hits: broker and link selectors, resolved against the broker tree, seeded.

A selector is data, written in an experiment the way Chaos Mesh writes its selectors:

    target: b3                       # one broker
    target: [b3, b4]                 # several
    target: root | leaves | inner | all
    target: {random: 2}              # k brokers drawn at random (seeded)
    target: {random: 1, among: leaves}
    target: {subtree: b1}            # b1 and every broker below it

    link: [b0, b1]                   # one link
    link: [[b0, b1], [b1, b3]]       # several
    link: {random: 1}                # k links drawn at random (seeded)
    link: {of: b1}                   # every link of the brokers a broker selector names
    link: {random: 1, of: leaves}    # k of those

    clients: alice                   # a subscriber of the workload (client_crash)
    clients: [alice, c7]             # several
    clients: {random: 20}            # k of the clients subscribed at that moment (seeded)

Resolution takes a `Tree` (built from a live testbed or from a scenario's topology, then
following its reconfigurations: `Tree.follow`) and a `random.Random`; the experiment gives
every injection its own stream, derived from the seed, so a live run and its replay in
simulation hit the same brokers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

NAMED = ("root", "leaves", "inner", "all")


class SelectorError(ValueError):
    """A selector that names what the tree does not have (the message says what is there)."""


class Tree:
    """What selectors need to know of a broker tree: brokers in order, links, the root."""

    def __init__(self, brokers: Iterable[str], links: Iterable[tuple[str, str]],
                 root: str) -> None:
        self.brokers = tuple(brokers)
        self.links = tuple((a, b) for a, b in links)
        self.root = root
        self._adjacency: dict[str, list[str]] = {b: [] for b in self.brokers}
        for a, b in self.links:
            self._adjacency[a].append(b)
            self._adjacency[b].append(a)
        self._parent: dict[str, str | None] = {root: None}
        order = [root]
        for b in order:  # breadth first from the root
            for n in self._adjacency[b]:
                if n not in self._parent:
                    self._parent[n] = b
                    order.append(n)

    def follow(self, brokers: Iterable[str], links: Iterable[Iterable[str]]) -> Tree:
        """The tree a reconfiguration left (a link exchange, a leaf added or removed, an
        optimizer's exchange): a fault's selector is resolved against the overlay as it is when
        the fault strikes, not as the run was configured (issue 28: a link fault named a link
        an exchange had removed). `self` when nothing changed; else what stays keeps its place
        and what is new comes after it, sorted, so a seeded draw stays reproducible."""
        now = set(brokers)
        pairs = {_key(link) for link in links}
        if now == set(self.brokers) and pairs == {_key(link) for link in self.links}:
            return self
        kept = [link for link in self.links if _key(link) in pairs]
        added = sorted(pairs - {_key(link) for link in kept})
        return Tree([*(b for b in self.brokers if b in now), *sorted(now - set(self.brokers))],
                    [*kept, *added], self.root)

    def neighbors(self, broker: str) -> list[str]:
        return list(self._adjacency[broker])

    def parent(self, broker: str) -> str | None:
        return self._parent.get(broker)

    def children(self, broker: str) -> list[str]:
        return [n for n in self.neighbors(broker) if self.parent(n) == broker]

    def leaves(self) -> list[str]:
        """Brokers without children (the root only when it is alone)."""
        return [b for b in self.brokers
                if not self.children(b) and (b != self.root or len(self.brokers) == 1)]

    def subtree(self, top: str) -> list[str]:
        found, todo = [], [top]
        while todo:
            b = todo.pop()
            found.append(b)
            todo.extend(self.children(b))
        members = set(found)
        return [b for b in self.brokers if b in members]

    def link(self, a: str, b: str) -> tuple[str, str]:
        """The link a-b, as named (its order is the direction of an injected message);
        SelectorError if there is none."""
        for name in (a, b):
            self.check(name)
        if b not in self._adjacency[a]:
            raise SelectorError(f"{a} and {b} are not neighbours (no link {a}-{b})")
        return a, b

    def boundary(self, side: Iterable[str]) -> list[tuple[str, str]]:
        """Every link with exactly one end in `side`: what a partition of `side` cuts."""
        inside = set(side)
        return [(a, b) for a, b in self.links if (a in inside) != (b in inside)]

    def check(self, broker: str) -> None:
        if broker not in self.brokers:
            raise SelectorError(f"unknown broker {broker!r} (brokers: {listing(self.brokers)})")


def _key(link: Iterable[str]) -> tuple[str, str]:
    a, b = link
    return (a, b) if a <= b else (b, a)


def listing(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names) if len(names) <= 10 else f"{', '.join(names[:8])}, ... {names[-1]}"


class _Selector(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BrokerSelector(_Selector):
    """One of: broker ids, a named set, k random brokers (among another set), a subtree."""

    ids: tuple[str, ...] = ()
    named: Literal["root", "leaves", "inner", "all"] | None = None
    random: int | None = None
    among: BrokerSelector | None = None
    subtree: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"named": data} if data in NAMED else {"ids": (data,)}
        if isinstance(data, list | tuple):
            if not data or not all(isinstance(x, str) for x in data):
                raise ValueError("a list of brokers must hold broker ids, e.g. [b1, b2]")
            return {"ids": tuple(data)}
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v not in (None, (), [])}  # dumped form
            forms = [k for k in ("random", "subtree", "ids", "named") if k in data]
            if len(forms) != 1:
                raise ValueError("expected a broker id, a list of them, one of "
                                 f"{'/'.join(NAMED)}, {{random: k, among: ...}} or "
                                 "{subtree: broker}")
            if "among" in data and "random" not in data:
                raise ValueError("among: only with random: k")
            return data
        raise ValueError(f"expected a broker selector, got {data!r}")

    @model_validator(mode="after")
    def _positive(self) -> BrokerSelector:
        if self.random is not None and self.random < 1:
            raise ValueError(f"random: k must be >= 1, got {self.random}")
        return self

    def describe(self) -> str:
        if self.random is not None:
            among = f" among {self.among.describe()}" if self.among is not None else ""
            return f"random:{self.random}{among}"
        if self.subtree is not None:
            return f"subtree:{self.subtree}"
        return self.named or ",".join(self.ids)

    def population(self, tree: Tree, rng: random.Random) -> list[str]:
        """Every broker this selector could name (for random: the set it draws from)."""
        if self.random is not None:
            return self.among.resolve(tree, rng) if self.among else list(tree.brokers)
        if self.subtree is not None:
            tree.check(self.subtree)
            return tree.subtree(self.subtree)
        if self.named == "root":
            return [tree.root]
        if self.named == "leaves":
            return tree.leaves()
        if self.named == "inner":
            return [b for b in tree.brokers if b not in set(tree.leaves())]
        if self.named == "all":
            return list(tree.brokers)
        for b in self.ids:
            tree.check(b)
        return list(dict.fromkeys(self.ids))

    def resolve(self, tree: Tree, rng: random.Random) -> list[str]:
        pool = self.population(tree, rng)
        if self.random is None:
            return pool
        if self.random > len(pool):
            raise SelectorError(f"random: {self.random} brokers asked, but only {len(pool)} to"
                                f" draw from ({listing(pool)})")
        picked = set(rng.sample(pool, self.random))
        return [b for b in pool if b in picked]

    def validate_on(self, tree: Tree) -> None:
        self.resolve(tree, random.Random(0))


class LinkSelector(_Selector):
    """One of: explicit links, k random links, the links of the brokers a selector names."""

    pairs: tuple[tuple[str, str], ...] = ()
    random: int | None = None
    of: BrokerSelector | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, list | tuple) and len(data) == 2 and all(
                isinstance(x, str) for x in data):
            return {"pairs": (tuple(data),)}
        if isinstance(data, list | tuple):
            if not data or not all(isinstance(p, list | tuple) and len(p) == 2
                                   and all(isinstance(x, str) for x in p) for p in data):
                raise ValueError("expected a link [a, b] or a list of links [[a, b], [c, d]]")
            return {"pairs": tuple(tuple(p) for p in data)}
        if isinstance(data, dict):
            if not ({"random", "of", "pairs"} & set(data)):
                raise ValueError("expected [a, b], a list of links, {random: k}, {of: brokers}"
                                 " or {random: k, of: brokers}")
            return data
        raise ValueError(f"expected a link selector such as [b0, b1], got {data!r}")

    @model_validator(mode="after")
    def _positive(self) -> LinkSelector:
        if self.random is not None and self.random < 1:
            raise ValueError(f"random: k must be >= 1, got {self.random}")
        if self.pairs and (self.random is not None or self.of is not None):
            raise ValueError("explicit links cannot be combined with random/of")
        return self

    def describe(self) -> str:
        if self.pairs:
            return ",".join(f"{a}-{b}" for a, b in self.pairs)
        of = f"of:{self.of.describe()}" if self.of is not None else ""
        return " ".join(x for x in (f"random:{self.random}" if self.random else "", of) if x)

    def population(self, tree: Tree, rng: random.Random) -> list[tuple[str, str]]:
        if self.pairs:
            return list(dict.fromkeys(tree.link(a, b) for a, b in self.pairs))
        if self.of is None:
            return list(tree.links)
        ends = set(self.of.resolve(tree, rng))
        return [(a, b) for a, b in tree.links if a in ends or b in ends]

    def resolve(self, tree: Tree, rng: random.Random) -> list[tuple[str, str]]:
        pool = self.population(tree, rng)
        if self.random is None:
            return pool
        if self.random > len(pool):
            raise SelectorError(f"random: {self.random} links asked, but only {len(pool)} to"
                                " draw from")
        picked = set(rng.sample(pool, self.random))
        return [link for link in pool if link in picked]

    def validate_on(self, tree: Tree) -> None:
        self.resolve(tree, random.Random(0))


class ClientSelector(_Selector):
    """Subscribers of the run's workload: client ids, or k drawn from those subscribed when the
    fault strikes (known only then, so names are checked then too)."""

    ids: tuple[str, ...] = ()
    random: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"ids": (data,)}
        if isinstance(data, list | tuple):
            if not data or not all(isinstance(x, str) for x in data):
                raise ValueError("a list of clients must hold client ids, e.g. [alice, c7]")
            return {"ids": tuple(data)}
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v not in (None, (), [])}  # dumped form
            if len({"ids", "random"} & set(data)) != 1:
                raise ValueError("expected a client id, a list of them or {random: k}")
            return data
        raise ValueError(f"expected a client selector, got {data!r}")

    @model_validator(mode="after")
    def _positive(self) -> ClientSelector:
        if self.random is not None and self.random < 1:
            raise ValueError(f"random: k must be >= 1, got {self.random}")
        return self

    def describe(self) -> str:
        return f"random:{self.random} clients" if self.random is not None else ",".join(self.ids)

    def resolve(self, subscribed: list[str], rng: random.Random) -> list[str]:
        """The clients hit, from those subscribed now (in the order they subscribed)."""
        if self.random is None:
            missing = [c for c in self.ids if c not in subscribed]
            if missing:
                raise SelectorError(f"no live subscription of {listing(missing)}")
            return list(dict.fromkeys(self.ids))
        if self.random > len(subscribed):
            raise SelectorError(f"random: {self.random} clients asked, but only"
                                f" {len(subscribed)} are subscribed")
        picked = set(rng.sample(subscribed, self.random))
        return [c for c in subscribed if c in picked]


def link_name(link: tuple[str, str]) -> str:
    return f"{link[0]}-{link[1]}"


def link_key(link: tuple[str, str]) -> str:
    """The name of a link whichever way round it is given (to match a cut with its heal)."""
    return link_name((min(link), max(link)))
