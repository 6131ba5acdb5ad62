"""The routing tables of the anti-entropy mode (seed 002 §2): simple routing whose entries from
neighbours are not leased; the layer `anti_entropy` (core/sketch/layer.py) keeps them correct
edge by edge instead of end-to-end refreshes.

Seed 002's model in this broker's terms: F_{me→n} (what makes me forward events to n) is the set
of keys of my entries towards neighbour n; L_me the keys of my local clients' entries; what I
advertise to neighbour y is S(me→y) = ⋃_{n ≠ y} F_{me→n} ∪ L_me. A subscription is forwarded to y
exactly when its key enters S(me→y) and an unsubscription when it leaves it (so a refresh goes
nowhere: this is what saves the end-to-end refresh traffic of leasing). The key is what "a
duplicate" means:
- identity-based routing (the paper's "forwarded unless duplicates", §2): the filter, so equal
  filters of different subscribers travel once;
- simple routing (Mühl's: every subscription everywhere): (sub_id, filter).
On the wire a key travels as an item (sub_id, filter), with a representative sub_id for a filter.

Client-to-broker entries stay leased (spec seed23 §D.2: clients refresh every ρ, so corrupted local
entries are fixed too, the answer to critique 3 of B.6): every π the overrun drops the client
entries not refreshed since the last one and withdraws them from the neighbours.

A neighbour this broker believes failed (`detached`, seed 002 §5) keeps its entries, but they
leave every advertisement: the stabilization rounds on the other edges, not the failure itself,
then unsubscribe them further on, and they come back with the link.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from weeble.core.events import Effect, Send
from weeble.core.filters import Filter
from weeble.core.messages import Sub, Unsub
from weeble.core.overlay import Topology
from weeble.core.rom import Algorithm
from weeble.core.routing.leasing import ControlRam
from weeble.core.routing.plane import Plane
from weeble.core.routing.strategy import Strategy
from weeble.core.table import Entry

Item = tuple[str, Filter]  # (sub_id, filter): a subscription as messages carry it
Key = Item | Filter  # what tables are compared by: the item (simple) or its filter (identity)


def encode(key: Key) -> bytes:
    """A key's canonical bytes, what a sketch hashes (filters print canonically)."""
    if isinstance(key, tuple):
        return f"{key[0]}\x1f{key[1]}".encode()
    return f"\x1f{key}".encode()


class Edges:
    wrapper = False

    def __init__(self, strategy: Strategy, ram: ControlRam, topo: Topology,
                 detached: set[str]) -> None:
        self.strategy = strategy
        self.ram = ram
        self.topo = topo
        self.detached = detached  # RAM of layer routing (RoutingRam.detached)
        self.planes = [Plane(ram.tables[0], 0, topo)]
        self.by_filter = strategy.algorithm is Algorithm.IDENTITY

    # ---- keys and items ----------------------------------------------------------------------

    def key(self, sub_id: str, f: Filter) -> Key:
        return f if self.by_filter else (sub_id, f)

    def _key(self, e: Entry) -> Key:
        return e.filter if self.by_filter else (e.sub_id, e.filter)

    def item(self, key: Key, to: str) -> Item:
        """A key as a message carries it: (sub_id, filter), the sub_id of an entry that puts
        the filter into what `to` is advertised (identity)."""
        if isinstance(key, tuple):
            return key
        rep = min((e.sub_id for e in self.planes[0].table.identical(key) if e.dest != to),
                  default="")
        return rep, key

    @staticmethod
    def wire(key: Key) -> Item:
        """A key as an item for comparison only (a reply, C2): no sub_id for a filter."""
        return key if isinstance(key, tuple) else ("", key)

    def _entries(self, key: Key) -> list[Entry]:
        table = self.planes[0].table
        if isinstance(key, tuple):
            return [e for e in table.with_id(key[0]) if e.filter == key[1]]
        return list(table.identical(key))

    # ---- seed 002's sets ---------------------------------------------------------------------

    def advertisement(self, to: str) -> set[Key]:
        """S(me→to): the keys of every entry towards another destination that is not a
        failed neighbour (local clients included)."""
        skip = self.detached
        return {self._key(e) for e in self.planes[0].table
                if e.dest != to and e.dest not in skip}

    def held(self, frm: str) -> set[Key]:
        """F_{me→frm}: the keys received from neighbour frm."""
        return {self._key(e) for e in self.planes[0].table if e.dest == frm}

    def _advertised(self, key: Key, to: str) -> bool:
        skip = self.detached
        return any(e.dest != to and e.dest not in skip for e in self._entries(key))

    def _change(self, keys: Iterable[Key], mutate: Callable[[], None]) -> list[Effect]:
        """Carry out `mutate` and send each live neighbour the keys that entered (Sub) or left
        (Unsub) what it is advertised."""
        keys = sorted(set(keys), key=str)
        targets = [y for y in self.topo.ordered if y not in self.detached]
        before = {(k, y): self._advertised(k, y) for k in keys for y in targets}
        mutate()
        effects: list[Effect] = []
        for (k, y), was in before.items():
            now = self._advertised(k, y)
            if now != was:
                sub_id, f = self.item(k, y) if now else self.wire(k)
                effects.append(Send(y, Sub(sub_id, f) if now else Unsub(sub_id, f)))
        return effects

    # ---- the scheme interface of the routing layer (as Leasing) ------------------------------

    def subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        table = self.planes[0].table
        if self.by_filter and source in self.topo.neighbors and any(
                e.dest == source for e in table.identical(f)):
            return []  # the neighbour's filter is held already (under some sub_id)
        replaced = [self._key(e) for e in table.with_id(sub_id) if e.dest == source]
        return self._change([self.key(sub_id, f), *replaced],
                            lambda: table.refresh(sub_id, f, source, per_destination=True))

    def unsubscribe(self, source: str, sub_id: str, f: Filter, remote: bool) -> list[Effect]:
        table = self.planes[0].table
        if remote and self.by_filter:  # the neighbour has no f left, whatever the sub_id
            gone = [e for e in table.identical(f) if e.dest == source]
        else:
            gone = [e for e in table.with_id(sub_id)
                    if e.dest == source and (e.filter == f or not remote)]

        def drop() -> None:
            for e in gone:
                table.discard(e)

        return self._change([self._key(e) for e in gone], drop)

    def overrun(self) -> tuple[list[Entry], list[Effect]]:
        """SC-2 for the client entries only; what expires is withdrawn from the neighbours."""
        table = self.planes[0].table
        neighbors = self.topo.neighbors
        clients = [e for e in table if e.dest not in neighbors]
        expired = [e for e in clients if e.flag == 0]

        def expire() -> None:
            for e in expired:
                table.discard(e)

        effects = self._change([self._key(e) for e in expired], expire)
        for e in clients:
            e.flag = 0
        return expired, effects

    def reset(self, bit: int) -> None:
        """Only the wrapper rebuilds."""
