"""Legitimacy as a pure function (DESIGN.md "Legitimacy is computable").

For a tree, the clients' live subscriptions and a routing algorithm, the legitimate routing
configuration says which (filter, destination) pairs each broker must hold and which it may
hold. Subscriptions come and go, and the liveness property lets a new one activate gradually, so
a check takes two sets:
- `required`: subscriptions active long enough that every entry for them must be present;
- `allowed`: subscriptions that may still have entries (required ones, plus ones just made or
  recently ended, whose entries are still propagating or expiring).
With no churn the two are equal and the configuration is exact.

Per destination D of broker V, with R/A the required/allowed subscriptions on D's side of V:
- local client c: entry ids ⊆ A's ids for c, ⊇ R's ids for c;
- flooding: no remote entries at all; hierarchical: no entry towards the parent;
- simple: entry ids towards D between R's and A's ids, each with its subscription's filter;
- identity: entry filters between R's and A's filters;
- covering, merging: every filter of R is covered by an entry (complete), and every entry is
  covered by the union of A's filters (sound; mergers are exact unions).
Under the periodic-rebuild wrapper the union of T^0 and T^1 is checked (A1 routes on it).

With advertisements (thesis §3.4.2) the advertisement tables are checked the same way against
the live advertisements, and a subscription is on D's side of V only as far as it travels: V
must hold it towards D iff some advertisement on V's side (V included) overlaps its filter.

`overlay` checks the overlay layer itself: a spanning tree of symmetric links, every parent
pointer towards the root, and no broker left inside a reconfiguration.

On the coloured overlay of the 3-colour scheme (thesis 4.5) both checks look at the colours the
root R calls c_cur and c_old (spec ch4 §5.5): `overlay` wants each colour's parent and child
pointers mutually consistent and spanning the brokers from R, every broker's colours a consistent
triple at most one recolor behind R's, and no broker joining; `check` wants each of the two colours'
tables legitimate for that colour's tree (notifications travel on either while a recolor
spreads). The c_new pointers and table are under construction and not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from weeble.core.filters import Filter
from weeble.core.rom import Algorithm
from weeble.core.routing.merging import closure


class Broker(Protocol):
    """What a check needs of a broker: a live `core.Broker`, or a `SnapshotView` of one."""

    rom: Any

    @property
    def neighbors(self) -> frozenset[str]: ...

    @property
    def parent(self) -> str | None: ...

    def entries(self) -> Iterable[tuple[int, Any]]: ...


@dataclass(frozen=True, slots=True)
class _SnapshotRom:
    broker_id: str
    neighbors: frozenset[str]
    root: str
    parent: str | None
    algorithm: Algorithm
    hierarchical: bool


@dataclass(frozen=True, slots=True)
class _SnapshotEntry:
    sub_id: str
    filter: Filter
    dest: str
    flag: int


class SnapshotView:
    """A broker as seen through its `Broker.snapshot()` (e.g. from a live admin API)."""

    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self.rom = _SnapshotRom(
            snapshot["broker"], frozenset(snapshot["neighbors"]), snapshot["root"],
            snapshot["parent"], Algorithm(snapshot["algorithm"]), bool(snapshot["hierarchical"]),
        )
        self._tables = [
            [_SnapshotEntry(e["sub_id"], Filter.parse(e["filter"]), e["dest"], int(e["flag"]))
             for e in table]
            for table in snapshot["tables"]
        ]
        self.neighbors = self.rom.neighbors  # the overlay when the snapshot was taken
        self.parent = self.rom.parent
        self.locked = bool(snapshot.get("exchange", {}).get("locked", False))
        self.colours = snapshot.get("colours")  # the coloured overlay (thesis 4.5) only
        self.skip_ring = snapshot.get("skip_ring")  # mode skip_ring (seed 003) only
        self._adv_tables = [
            [_SnapshotEntry(e["sub_id"], Filter.parse(e["filter"]), e["dest"], int(e["flag"]))
             for e in table]
            for table in snapshot.get("adv_tables", [])
        ]

    def entries(self) -> Iterator[tuple[int, _SnapshotEntry]]:
        for tag, table in enumerate(self._tables):
            for e in table:
                yield tag, e

    def adv_entries(self) -> Iterator[tuple[int, _SnapshotEntry]]:
        for tag, table in enumerate(self._adv_tables):
            for e in table:
                yield tag, e


@dataclass(frozen=True, slots=True)
class LiveSub:
    sub_id: str
    filter: Filter
    client: str
    broker: str


Adverts = tuple[Iterable["LiveSub"], Iterable["LiveSub"]]  # (required, allowed)


def check(
    brokers: Mapping[str, Broker], required: Iterable[LiveSub], allowed: Iterable[LiveSub],
    adverts: Adverts | None = None,
) -> list[str]:
    """Problems that keep `brokers` from the legitimate configuration; [] means legitimate.

    `adverts`: the live advertisements (required, allowed), when advertisements are in use.
    """
    required, allowed = set(required), set(allowed)
    allowed |= required
    if not brokers:
        return []
    if getattr(next(iter(brokers.values())), "skip_ring", None) is not None:
        return _skip_ring(brokers, required, allowed)
    if _colours(next(iter(brokers.values()))) is not None:
        return _coloured_routing(brokers, required, allowed)
    rom0 = next(iter(brokers.values())).rom
    alg, hierarchical = rom0.algorithm, rom0.hierarchical
    # Remote entries are judged by filter (by id for simple routing): project once, per broker.
    key = (lambda s: (s.sub_id, s.filter)) if alg is Algorithm.SIMPLE else (lambda s: s.filter)
    remote = alg is not Algorithm.FLOODING
    sides_req = _sides(brokers, required, key, up=not hierarchical) if remote else {}
    sides_all = _sides(brokers, allowed, key, up=not hierarchical) if remote else {}
    problems: list[str] = []
    if adverts is not None:
        adv_req, adv_all = set(adverts[0]), set(adverts[1])
        adv_all |= adv_req
        views = {b: _Adverts(broker) for b, broker in brokers.items()}
        problems += [f"adv {p}" for p in check(views, adv_req, adv_all)]
        f_of = (lambda k: k[1]) if alg is Algorithm.SIMPLE else (lambda k: k)
        for sides, advs in ((sides_req, adv_req), (sides_all, adv_all)):
            towards = _sides(brokers, advs, lambda s: s.filter, up=True)
            for (v, d), keys in sides.items():
                there = towards.get((d, v), set())  # advertisements on V's side of V–D
                sides[v, d] = {k for k in keys if any(_overlap(f_of(k), g) for g in there)}
    local_req = _by_client(required)
    local_all = _by_client(allowed)
    for v in sorted(brokers):
        neighbors = brokers[v].neighbors
        by_dest: dict[str, list[tuple[str, Filter]]] = {}
        for _, e in brokers[v].entries():
            by_dest.setdefault(e.dest, []).append((e.sub_id, e.filter))
        clients = {c for (b, c) in local_req if b == v}
        for d in sorted(set(by_dest) | set(neighbors) | clients):
            held = by_dest.get(d, [])
            where = f"{v}→{d}"
            if d not in neighbors:
                problems += _check_ids(f"{where} (local)", held, local_req.get((v, d), set()),
                                       local_all.get((v, d), set()))
            elif not remote or (hierarchical and d == brokers[v].parent):
                if held:
                    problems.append(f"{where}: expected no entries, found {_show(held)}")
            else:
                problems += _check_remote(alg, where, held, sides_req.get((v, d), set()),
                                          sides_all.get((v, d), set()))
    return problems


def _skip_ring(brokers: Mapping[str, Any], required: set[LiveSub],
               allowed: set[LiveSub]) -> list[str]:
    """Mode skip_ring: spec seed23 §A.12 per topic (overlay/skipring/legitimacy.py)."""
    from weeble.core.overlay.skipring.legitimacy import snapshot_problems
    from weeble.core.overlay.skipring.node import NotATopic, topic_of

    def by_topic(subs: set[LiveSub]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for s in subs:
            try:
                out.setdefault(topic_of(s.filter), set()).add(s.broker)
            except NotATopic:
                continue  # refused by the brokers: holds nothing anywhere
        return out

    views = {b: broker.skip_ring for b, broker in brokers.items()}
    return snapshot_problems(views, by_topic(required), by_topic(allowed))


def _overlap(f: Filter, g: Filter) -> bool:
    return (f & g).satisfiable


class _Adverts:
    """A broker's advertisement tables seen as routing tables, for `check`."""

    def __init__(self, broker: Any) -> None:
        self.rom = broker.rom
        self.neighbors = broker.neighbors
        self.parent = broker.parent
        self._broker = broker

    def entries(self) -> Iterable[tuple[int, Any]]:
        return self._broker.adv_entries()


def overlay(brokers: Mapping[str, Any], root: str) -> list[str]:
    """Problems that keep the overlay layer from legitimacy; [] means legitimate.

    Legitimate: links are symmetric and name brokers that exist, they form a spanning tree,
    each broker's parent is its neighbour towards `root` (None at the root), and no broker is
    inside a reconfiguration (locked). During a link exchange the overlay is not legitimate by
    this rule (r and a are both links for a while, thesis A2.29): it becomes legitimate again
    when the exchange is over.
    """
    if brokers and _colours(next(iter(brokers.values()))) is not None:
        return coloured_overlay(brokers, root)
    problems: list[str] = []
    names = set(brokers)
    links: set[tuple[str, str]] = set()
    for v in sorted(brokers):
        for n in sorted(brokers[v].neighbors):
            if n not in names:
                problems.append(f"{v}: neighbour {n} is no broker")
            elif v not in brokers[n].neighbors:
                problems.append(f"{v}–{n}: {n} does not have {v} as a neighbour")
            else:
                links.add((min(v, n), max(v, n)))
        if getattr(brokers[v], "locked", False):
            problems.append(f"{v}: locked in a reconfiguration")
    if len(links) != len(names) - 1:
        problems.append(f"{len(names)} brokers need {len(names) - 1} links, have {len(links)}")
    if root not in brokers:
        return [*problems, f"root {root} is no broker"]
    parent: dict[str, str | None] = {root: None}
    order = [root]
    for v in order:
        for n in sorted(brokers[v].neighbors):
            if n in names and n not in parent and v in brokers[n].neighbors:
                parent[n] = v
                order.append(n)
    unreached = sorted(names - set(parent))
    if unreached:
        problems.append(f"not connected to the root {root}: {unreached}")
    for v in sorted(parent):
        if brokers[v].parent != parent[v]:
            problems.append(f"{v}: parent {brokers[v].parent}, towards the root is {parent[v]}")
    return problems


# ---- the coloured overlay (thesis 4.5) ------------------------------------------------------


def _colours(broker: Any) -> dict[str, Any] | None:
    """A broker's colour state as in its snapshot's `colours`, or None on a static overlay."""
    state = getattr(broker, "colours", None)
    if state is not None:
        return state  # a SnapshotView
    ram = getattr(getattr(broker, "ram", None), "overlay", None)
    if ram is None or not hasattr(ram, "trees"):
        return None
    return {"c_old": ram.c_old, "c_cur": ram.c_cur, "c_new": ram.c_new, "joining": ram.joining,
            "trees": [t.as_dict() for t in ram.trees]}


def _consistent(state: Mapping[str, Any]) -> bool:
    c_new = state["c_new"]
    return state["c_cur"] == (c_new - 1) % 3 and state["c_old"] == (c_new - 2) % 3


class _ColourView:
    """One colour of a coloured broker, seen as a chapter-3 broker for `check`."""

    def __init__(self, broker: Any, tree: Mapping[str, Any], c: int) -> None:
        self.rom = broker.rom
        self.parent = tree["parent"]
        self.neighbors = frozenset(tree["children"]) | (
            {self.parent} if self.parent is not None else set())
        self._broker = broker
        self._c = c

    def entries(self) -> Iterable[tuple[int, Any]]:
        c = self._c
        return ((tag, e) for tag, e in self._broker.entries() if tag == c)


def _root_colours(brokers: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    root = next(iter(brokers.values())).rom.root
    if root not in brokers:
        root = min(brokers)
    state = _colours(brokers[root])
    assert state is not None
    return root, state


def _coloured_routing(brokers: Mapping[str, Any], required: set[LiveSub],
                      allowed: set[LiveSub]) -> list[str]:
    _, r = _root_colours(brokers)
    problems: list[str] = []
    for name in ("c_cur", "c_old"):
        c = r[name]
        views = {}
        for v, b in brokers.items():
            state = _colours(b)
            assert state is not None
            views[v] = _ColourView(b, state["trees"][c], c)
        problems += [f"colour {c} ({name}): {p}" for p in check(views, required, allowed)]
    return problems


def coloured_overlay(brokers: Mapping[str, Any], root: str) -> list[str]:
    """Spec ch4 §5.5 (thesis L6315-6336); [] means legitimate (see the module doc)."""
    if root not in brokers:
        return [f"root {root} is no broker"]
    states: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for v, b in sorted(brokers.items()):
        state = _colours(b)
        if state is None:
            return [f"{v}: not on the coloured overlay"]
        states[v] = state
    r = states[root]
    behind = (r["c_new"] - 1) % 3
    for v, state in sorted(states.items()):
        triple = (state["c_old"], state["c_cur"], state["c_new"])
        if not _consistent(state):
            problems.append(f"{v}: colours (c_old, c_cur, c_new) = {triple} do not rotate")
        elif v != root and state["c_new"] not in (r["c_new"], behind):
            problems.append(f"{v}: colours {triple} are not the root's or one recolor behind")
        if state.get("joining"):
            problems.append(f"{v}: joining the tree")
    for name in ("c_cur", "c_old"):
        c = r[name]
        parent = {v: s["trees"][c]["parent"] for v, s in states.items()}
        children = {v: set(s["trees"][c]["children"]) for v, s in states.items()}
        where = f"colour {c} ({name})"
        for v in sorted(states):
            p = parent[v]
            if v == root:
                if p is not None:
                    problems.append(f"{where}: the root {v} has parent {p}")
            elif p is None:
                problems.append(f"{where}: {v} has no parent")
            elif p not in states:
                problems.append(f"{where}: {v}'s parent {p} is no broker")
            elif v not in children[p]:
                problems.append(f"{where}: {v}'s parent {p} does not have it as a child")
            for x in sorted(children[v]):
                if x not in states:
                    problems.append(f"{where}: {v}'s child {x} is no broker")
                elif parent[x] != v:
                    problems.append(f"{where}: {v}'s child {x} has parent {parent[x]}")
        reached = {root}
        todo = [root]
        while todo:  # along consistent pointers only
            v = todo.pop()
            for x in sorted(children[v]):
                if x in states and x not in reached and parent[x] == v:
                    reached.add(x)
                    todo.append(x)
        unreached = sorted(set(states) - reached)
        if unreached:
            problems.append(f"{where}: not connected to the root {root}: {unreached}")
    return problems


def _by_client(subs: set[LiveSub]) -> dict[tuple[str, str], set[tuple[str, Filter]]]:
    out: dict[tuple[str, str], set[tuple[str, Filter]]] = {}
    for s in subs:
        out.setdefault((s.broker, s.client), set()).add((s.sub_id, s.filter))
    return out


def _check_remote(alg: Algorithm, where: str, held: list[tuple[str, Filter]],
                  req: set[Any], alw: set[Any]) -> list[str]:
    if alg is Algorithm.SIMPLE:
        return _check_ids(where, held, req, alw)
    filters = {f for _, f in held}
    if alg is Algorithm.IDENTITY:
        problems = [f"{where}: missing entry for {f}" for f in sorted(req - filters, key=str)]
        problems += [f"{where}: spurious entry {f}" for f in sorted(filters - alw, key=str)]
        return problems
    problems = [f"{where}: nothing covers {f}" for f in sorted(req, key=str)
                if f not in filters and not any(g.covers(f) for g in filters)]
    spurious = sorted(filters - alw, key=str)
    if spurious:  # only then is the merge closure of the allowed filters worth building
        unions = [m for m, _ in closure([(f, frozenset((f,))) for f in sorted(alw, key=str)])]
        problems += [f"{where}: spurious entry {f}" for f in spurious
                     if not any(u.covers(f) for u in unions)]
    return problems


def _check_ids(where: str, held: list[tuple[str, Filter]], req: set[tuple[str, Filter]],
               alw: set[tuple[str, Filter]]) -> list[str]:
    may = dict(alw)
    ids = {sub_id for sub_id, _ in held}
    problems = [f"{where}: missing entry for {i} ({f})" for i, f in sorted(req, key=_first)
                if i not in ids]
    problems += [f"{where}: spurious entry {i} ({f})" for i, f in sorted(held, key=_first)
                 if may.get(i) != f]
    return problems


def _first(pair: tuple[str, Filter]) -> str:
    return pair[0]


def _show(held: list[tuple[str, Filter]]) -> str:
    return ", ".join(f"{i} ({f})" for i, f in held[:5]) + (" …" if len(held) > 5 else "")


def _sides(brokers: Mapping[str, Broker], subs: set[LiveSub], key: Callable[[LiveSub], Any],
           up: bool) -> dict[tuple[str, str], set[Any]]:
    """For every directed edge (v, d): the keys of the subscriptions on d's side of v.

    Towards children always; towards the parent only if `up` (peer-to-peer routing).
    """
    root = next(iter(brokers.values())).rom.root
    if root not in brokers:
        root = min(brokers)
    local: dict[str, set[Any]] = {b: set() for b in brokers}
    for s in subs:
        if s.broker in local:
            local[s.broker].add(key(s))
    order, parent = [root], {root: None}
    for v in order:  # BFS over the current neighbour sets
        for n in sorted(brokers[v].neighbors):
            if n in brokers and n not in parent:
                parent[n] = v
                order.append(n)
    children = {v: [n for n in sorted(brokers[v].neighbors) if parent.get(n) == v]
                for v in order}
    down: dict[str, set[Any]] = {}
    for v in reversed(order):  # keys in v's subtree
        acc = set(local[v])
        for c in children[v]:
            acc |= down[c]
        down[v] = acc
    sides: dict[tuple[str, str], set[Any]] = {}
    outside: dict[str, set[Any]] = {root: set()}  # keys outside v's subtree
    for v in order:
        for c in children[v]:
            sides[v, c] = down[c]
        if up:
            if parent[v] is not None:
                sides[v, parent[v]] = outside[v]
            for c in children[v]:
                rest = outside[v] | local[v]
                for other in children[v]:
                    if other != c:
                        rest |= down[other]
                outside[c] = rest
    return sides
