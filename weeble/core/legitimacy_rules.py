"""What a layer declares to be judged for legitimacy, and what a check is given: the registry's
types (`Rule`, `Rules`), the live subscriptions (`LiveSub`), a broker as a check sees it
(`Broker`, `SnapshotView`).

The layers' legitimacy modules build their `Rule` from here, the broker composes them into its
`Rules` (`LEGITIMACY`, core/broker.py), and core/legitimacy.py checks with that composition:
this module sits below all three, so none of them imports another in a circle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from weeble.core.filters import Filter
from weeble.core.rom import Algorithm


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
# routing(brokers, required, allowed, adverts) -> problems; the two sets are whole (allowed
# includes required), `adverts` the live advertisements (required, allowed) or None
RoutingRule = Callable[[Mapping[str, Any], set[LiveSub], set[LiveSub], Adverts | None],
                       list[str]]
# overlay(brokers, root) -> problems
OverlayRule = Callable[[Mapping[str, Any], str], list[str]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One layer's legitimacy rule: `judges(broker)`, whether brokers like this one are its to
    judge; `routing` and `overlay`, its predicates ([] means legitimate), where it has them."""

    layer: str
    judges: Callable[[Any], bool]
    routing: RoutingRule | None = None
    overlay: OverlayRule | None = None


class Rules:
    """The legitimacy rules of the layers a broker is composed of, in their order."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)

    def check(self, brokers: Mapping[str, Broker], required: Iterable[LiveSub],
              allowed: Iterable[LiveSub], adverts: Adverts | None = None) -> list[str]:
        required, allowed = set(required), set(allowed)
        allowed |= required
        if not brokers:
            return []
        first = next(iter(brokers.values()))
        for rule in self.rules:
            if rule.routing is not None and rule.judges(first):
                return rule.routing(brokers, required, allowed, adverts)
        raise ValueError(f"no routing legitimacy rule judges broker {first.rom.broker_id!r}")

    def overlay(self, brokers: Mapping[str, Any], root: str) -> list[str]:
        first = next(iter(brokers.values()), None)
        for rule in self.rules:
            if rule.overlay is not None and rule.judges(first):
                return rule.overlay(brokers, root)
        raise ValueError("no overlay legitimacy rule judges these brokers")
