"""The routing layer's legitimacy rule (a `Rule` of core/legitimacy_rules.py, composed by the
broker).

For a tree, the clients' live subscriptions and a routing algorithm, the legitimate routing
configuration says which (filter, destination) pairs each broker must hold and which it may
hold, between the `required` and the `allowed` subscriptions (core/legitimacy.py).

Per destination D of broker V, with R/A the required/allowed subscriptions on D's side of V:
- local client c: entry (id, filter) pairs ⊆ A's pairs of c, ⊇ R's pairs of c (an entry
  carries the network id, `core.events.network_id`; c may reuse an id for another filter);
- flooding: no remote entries at all; hierarchical: no entry towards the parent;
- simple: entry (network id, filter) pairs towards D between R's and A's pairs;
- identity: entry filters between R's and A's filters;
- covering, merging: every filter of R is covered by an entry (complete), and every entry is
  covered by the union of A's filters (sound: every notification it matches, one of A's
  matches; mergers are exact unions).
Under the periodic-rebuild wrapper the union of T^0 and T^1 is checked (A1 routes on it).

With advertisements (thesis §3.4.2) the advertisement tables are checked the same way against
the live advertisements, and a subscription is on D's side of V only as far as it travels: V
must hold it towards D iff some advertisement on V's side (V included) overlaps its filter.

On the coloured overlay of the 3-colour scheme (thesis 4.5) the rule looks at the colours the
root R calls c_cur and c_old (spec ch4 §5.5): each of the two colours' tables must be
legitimate for that colour's tree (notifications travel on either while a recolor spreads). The
c_new table is under construction and not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weeble.core.events import network_id
from weeble.core.filters import Filter, merge
from weeble.core.legitimacy_rules import Adverts, Broker, LiveSub, Rule
from weeble.core.overlay.coloured_legitimacy import colours_of, root_colours
from weeble.core.rom import Algorithm
from weeble.core.routing.merging import closure


def tables(brokers: Mapping[str, Broker], required: set[LiveSub], allowed: set[LiveSub],
           adverts: Adverts | None = None) -> list[str]:
    """Problems that keep the tables of `brokers` (a static tree) from the legitimate
    configuration; [] means legitimate. `allowed` includes `required`."""
    rom0 = next(iter(brokers.values())).rom
    alg, hierarchical = rom0.algorithm, rom0.hierarchical
    # Remote entries are judged by filter (by id for simple routing): project once, per broker.
    key = ((lambda s: (network_id(s.client, s.sub_id), s.filter)) if alg is Algorithm.SIMPLE
           else (lambda s: s.filter))
    remote = alg is not Algorithm.FLOODING
    sides_req = _sides(brokers, required, key, up=not hierarchical) if remote else {}
    sides_all = _sides(brokers, allowed, key, up=not hierarchical) if remote else {}
    problems: list[str] = []
    if adverts is not None:
        adv_req, adv_all = set(adverts[0]), set(adverts[1])
        adv_all |= adv_req
        views = {b: _Adverts(broker) for b, broker in brokers.items()}
        problems += [f"adv {p}" for p in tables(views, adv_req, adv_all)]
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


def coloured_tables(brokers: Mapping[str, Any], required: set[LiveSub],
                    allowed: set[LiveSub], adverts: Adverts | None = None) -> list[str]:
    """The tables of the colours c_cur and c_old, each legitimate for its colour's tree."""
    _, r = root_colours(brokers)
    problems: list[str] = []
    for name in ("c_cur", "c_old"):
        c = r[name]
        views = {}
        for v, b in brokers.items():
            state = colours_of(b)
            assert state is not None
            views[v] = _ColourView(b, state["trees"][c], c)
        problems += [f"colour {c} ({name}): {p}" for p in tables(views, required, allowed)]
    return problems


def _by_client(subs: set[LiveSub]) -> dict[tuple[str, str], set[tuple[str, Filter]]]:
    out: dict[tuple[str, str], set[tuple[str, Filter]]] = {}
    for s in subs:
        out.setdefault((s.broker, s.client), set()).add((network_id(s.client, s.sub_id),
                                                         s.filter))
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
                     if not any(u.covers(f) for u in unions) and not _union_covers(alw, f)]
    return problems


def _union_covers(filters: Iterable[Filter], f: Filter) -> bool:
    """Whether f is a perfect merger of pieces of `filters` (so covered by their union), by
    every order of pairwise merges, where the greedy closure above tried one: that closure
    may merge b with a where a broker merged b with c (x ∈ [0, 2] ∧ y ∈ [0, 1] leaves
    x ∈ [1, 2] ∧ y ∈ [1, 2] over, and x ∈ [1, 2] ∧ y ∈ [0, 2] unexplained). The pieces are
    f's overlaps with the filters: a merger a broker built from them is their union, and the
    same merges of the pieces build f."""
    pieces = {p for p in (f & g for g in filters) if p.satisfiable}
    frontier = list(pieces)
    while frontier:
        if any(p.covers(f) for p in frontier):
            return True
        new = []
        for x in frontier:
            for y in list(pieces):
                m = merge(x, y)
                if m is not None and m not in pieces:
                    pieces.add(m)
                    new.append(m)
        frontier = new
    return False


def _check_ids(where: str, held: list[tuple[str, Filter]], req: set[tuple[str, Filter]],
               alw: set[tuple[str, Filter]]) -> list[str]:
    """Entries judged by (network id, filter): one client may
    reuse an id for another filter once the first subscription ended, so one id can stand for
    two allowed subscriptions (R9b, c). A required one is missing when no entry carries its
    id and filter, unless an entry with its id holds a filter no allowed subscription of that
    id has (a corrupted filter: reported once, as spurious)."""
    pairs = set(held)
    ids = {i for i, f in held if (i, f) not in alw}  # the ids of unexplained entries
    problems = [f"{where}: missing entry for {i} ({f})" for i, f in sorted(req, key=_by_text)
                if (i, f) not in pairs and i not in ids]
    problems += [f"{where}: spurious entry {i} ({f})" for i, f in sorted(held, key=_first)
                 if (i, f) not in alw]
    return problems


def _first(pair: tuple[str, Filter]) -> str:
    return pair[0]


def _by_text(pair: tuple[str, Filter]) -> tuple[str, str]:
    return pair[0], str(pair[1])


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


# The 3-colour scheme's tables first: a coloured broker is also a broker with tables.
COLOURED = Rule("routing", lambda broker: colours_of(broker) is not None,
                routing=coloured_tables)
STATIC = Rule("routing", lambda broker: True, routing=tables)
