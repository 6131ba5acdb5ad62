"""The routing tables of the anti-entropy mode (seed 002 §2): simple routing whose entries from
neighbours are not leased; the layer `anti_entropy` (core/sketch/layer.py) keeps them correct
edge by edge instead of end-to-end refreshes.

Seed 002's model in this broker's terms: an item is a subscription (sub_id, filter); F_{me→n}
(what makes me forward events to n) is the set of items of my entries towards neighbour n; L_me
the items of my local clients' entries. What I advertise to neighbour y is
S(me→y) = ⋃_{n ≠ y} F_{me→n} ∪ L_me. Simple routing forwards a subscription to y exactly when its
item enters S(me→y) and an unsubscription when it leaves it (so a refresh goes nowhere: this is
what saves the end-to-end refresh traffic of leasing).

Client-to-broker entries stay leased (spec D.2: clients refresh every ρ, so corrupted local
entries are fixed too, the answer to critique 3 of B.6): every π the overrun drops the client
entries not refreshed since the last one and withdraws them from the neighbours.

A neighbour this broker believes failed (`detached`, seed 002 §5) keeps its entries, but they
leave every advertisement: the stabilization rounds on the other edges, not the failure itself,
then unsubscribe them further on, and they come back with the link.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from weeble.broker.core.events import Effect, Send
from weeble.broker.core.filters import Filter
from weeble.broker.core.messages import Sub, Unsub
from weeble.broker.core.overlay import Topology
from weeble.broker.core.routing.leasing import ControlRam
from weeble.broker.core.routing.plane import Plane
from weeble.broker.core.routing.strategy import Strategy
from weeble.broker.core.table import Entry

Item = tuple[str, Filter]  # (sub_id, filter): one subscription of seed 002's tables


def encode(item: Item) -> bytes:
    """An item's canonical bytes, what a sketch hashes (filters print canonically)."""
    return f"{item[0]}\x1f{item[1]}".encode()


class Edges:
    wrapper = False

    def __init__(self, strategy: Strategy, ram: ControlRam, topo: Topology,
                 detached: set[str]) -> None:
        self.strategy = strategy
        self.ram = ram
        self.topo = topo
        self.detached = detached  # RAM of layer routing (RoutingRam.detached)
        self.planes = [Plane(ram.tables[0], 0, topo)]

    # ---- seed 002's sets ---------------------------------------------------------------------

    def advertisement(self, to: str) -> set[Item]:
        """S(me→to): the items of every entry towards another destination that is not a
        failed neighbour (local clients included)."""
        skip = self.detached
        return {(e.sub_id, e.filter) for e in self.planes[0].table
                if e.dest != to and e.dest not in skip}

    def held(self, frm: str) -> set[Item]:
        """F_{me→frm}: the items received from neighbour frm."""
        return {(e.sub_id, e.filter) for e in self.planes[0].table if e.dest == frm}

    def _advertised(self, item: Item, to: str) -> bool:
        sub_id, f = item
        skip = self.detached
        return any(e.filter == f and e.dest != to and e.dest not in skip
                   for e in self.planes[0].table.with_id(sub_id))

    def _change(self, items: Iterable[Item], mutate: Callable[[], None]) -> list[Effect]:
        """Carry out `mutate` and send each live neighbour the items that entered (Sub) or left
        (Unsub) what it is advertised."""
        items = sorted(set(items), key=lambda i: (i[0], str(i[1])))
        targets = [y for y in self.topo.ordered if y not in self.detached]
        before = {(i, y): self._advertised(i, y) for i in items for y in targets}
        mutate()
        effects: list[Effect] = []
        for (item, y), was in before.items():
            now = self._advertised(item, y)
            if now != was:
                sub_id, f = item
                effects.append(Send(y, Sub(sub_id, f) if now else Unsub(sub_id, f)))
        return effects

    def refresh_all(self, before: dict[tuple[Item, str], bool]) -> list[Effect]:
        """What a change of `detached` set off, given each (item, neighbour) before it."""
        effects: list[Effect] = []
        for (item, y), was in sorted(before.items(), key=lambda p: (p[0][1], p[0][0][0])):
            if y in self.detached:
                continue
            if self._advertised(item, y) != was:
                sub_id, f = item
                effects.append(Send(y, Sub(sub_id, f) if not was else Unsub(sub_id, f)))
        return effects

    # ---- the scheme interface of the routing layer (as Leasing) ------------------------------

    def subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        table = self.planes[0].table
        replaced = [(e.sub_id, e.filter) for e in table.with_id(sub_id) if e.dest == source]
        return self._change([(sub_id, f), *replaced],
                            lambda: table.refresh(sub_id, f, source, per_destination=True))

    def unsubscribe(self, source: str, sub_id: str, f: Filter, remote: bool) -> list[Effect]:
        table = self.planes[0].table
        gone = [e for e in table.with_id(sub_id)
                if e.dest == source and (e.filter == f or not remote)]

        def drop() -> None:
            for e in gone:
                table.discard(e)

        return self._change([(e.sub_id, e.filter) for e in gone], drop)

    def overrun(self) -> tuple[list[Entry], list[Effect]]:
        """SC-2 for the client entries only; what expires is withdrawn from the neighbours."""
        table = self.planes[0].table
        neighbors = self.topo.neighbors
        clients = [e for e in table if e.dest not in neighbors]
        expired = [e for e in clients if e.flag == 0]

        def expire() -> None:
            for e in expired:
                table.discard(e)

        effects = self._change([(e.sub_id, e.filter) for e in expired], expire)
        for e in clients:
            e.flag = 0
        return expired, effects

    def reset(self, bit: int) -> None:
        """Only the wrapper rebuilds."""
