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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from weeble.broker.core.filters import Filter
from weeble.broker.core.merging import closure
from weeble.broker.core.rom import Algorithm


class Broker(Protocol):
    """What a check needs of a broker: a live `core.Broker`, or a `SnapshotView` of one."""

    rom: Any

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

    def entries(self) -> Iterator[tuple[int, _SnapshotEntry]]:
        for tag, table in enumerate(self._tables):
            for e in table:
                yield tag, e


@dataclass(frozen=True, slots=True)
class LiveSub:
    sub_id: str
    filter: Filter
    client: str
    broker: str


def check(
    brokers: Mapping[str, Broker], required: Iterable[LiveSub], allowed: Iterable[LiveSub]
) -> list[str]:
    """Problems that keep `brokers` from the legitimate configuration; [] means legitimate."""
    required, allowed = set(required), set(allowed)
    allowed |= required
    sides_req = _sides(brokers, required)
    sides_all = _sides(brokers, allowed)
    problems: list[str] = []
    for v in sorted(brokers):
        broker = brokers[v]
        rom = broker.rom
        by_dest: dict[str, list[tuple[str, Filter]]] = {}
        for _, e in broker.entries():
            by_dest.setdefault(e.dest, []).append((e.sub_id, e.filter))
        local_req = {s for s in required if s.broker == v}
        local_all = {s for s in allowed if s.broker == v}
        dests = set(by_dest) | set(rom.neighbors) | {s.client for s in local_req}
        for d in sorted(dests):
            held = by_dest.get(d, [])
            if d in rom.neighbors:
                problems += _check_remote(rom.algorithm, rom.hierarchical, rom.parent, v, d, held,
                                          sides_req[v, d], sides_all[v, d])
            else:
                req = {s for s in local_req if s.client == d}
                alw = {s for s in local_all if s.client == d}
                problems += _check_ids(f"{v}→{d} (local)", held, req, alw)
    return problems


def _check_remote(
    alg: Algorithm, hierarchical: bool, parent: str | None, v: str, d: str,
    held: list[tuple[str, Filter]], req: set[LiveSub], alw: set[LiveSub],
) -> list[str]:
    where = f"{v}→{d}"
    if alg is Algorithm.FLOODING or (hierarchical and d == parent):
        if held:
            return [f"{where}: expected no entries, found {_show(held)}"]
        return []
    if alg is Algorithm.SIMPLE:
        return _check_ids(where, held, req, alw)
    filters = {f for _, f in held}
    need = {s.filter for s in req}
    may = {s.filter for s in alw}
    if alg is Algorithm.IDENTITY:
        problems = [f"{where}: missing entry for {f}" for f in sorted(need - filters, key=str)]
        problems += [f"{where}: spurious entry {f}" for f in sorted(filters - may, key=str)]
        return problems
    problems = [f"{where}: nothing covers {f}" for f in sorted(need, key=str)
                if not any(g.covers(f) for g in filters)]
    unions = [m for m, _ in closure([(f, frozenset((f,))) for f in sorted(may, key=str)])]
    problems += [f"{where}: spurious entry {f}" for f in sorted(filters, key=str)
                 if f not in may and not any(u.covers(f) for u in unions)]
    return problems


def _check_ids(
    where: str, held: list[tuple[str, Filter]], req: set[LiveSub], alw: set[LiveSub]
) -> list[str]:
    may = {s.sub_id: s.filter for s in alw}
    ids = {sub_id for sub_id, _ in held}
    problems = [f"{where}: missing entry for {s.sub_id} ({s.filter})"
                for s in sorted(req, key=lambda s: s.sub_id) if s.sub_id not in ids]
    for sub_id, f in sorted(held, key=lambda h: h[0]):
        if may.get(sub_id) != f:
            problems.append(f"{where}: spurious entry {sub_id} ({f})")
    return problems


def _show(held: list[tuple[str, Filter]]) -> str:
    return ", ".join(f"{i} ({f})" for i, f in held[:5]) + (" …" if len(held) > 5 else "")


Sides = dict[tuple[str, str], set[LiveSub]]


def _sides(brokers: Mapping[str, Broker], subs: set[LiveSub]) -> Sides:
    """For every directed edge (v, d): the subscriptions located on d's side of v."""
    if not brokers:
        return {}
    root = next(iter(brokers.values())).rom.root
    if root not in brokers:
        root = min(brokers)
    local: dict[str, set[LiveSub]] = {b: set() for b in brokers}
    for s in subs:
        if s.broker in local:
            local[s.broker].add(s)
    order, parent = [root], {root: None}
    for v in order:  # BFS over the ROM neighbour sets
        for n in sorted(brokers[v].rom.neighbors):
            if n in brokers and n not in parent:
                parent[n] = v
                order.append(n)
    down: dict[str, set[LiveSub]] = {}
    for v in reversed(order):  # the subscriptions in v's subtree
        acc = set(local[v])
        for n in brokers[v].rom.neighbors:
            if parent.get(n) == v:
                acc |= down[n]
        down[v] = acc
    everything = down[root]
    sides: dict[tuple[str, str], set[LiveSub]] = {}
    for v in order:
        for n in brokers[v].rom.neighbors:
            if n not in parent:
                sides[v, n] = set()
            elif parent.get(n) == v:
                sides[v, n] = down[n]
            else:
                sides[v, n] = everything - down[v]
    return sides
