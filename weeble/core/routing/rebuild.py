"""The periodic-rebuild wrapper (Algorithm A, thesis §3.4.1) around any strategy.

Two tables T^0/T^1 with the rebuild bit a_B: R runs on T^{a_B} for client requests (A2) and on
the table a control message's tag names (A3); unsubscriptions apply to both (A4); notifications
are routed on the union (A1, the routing layer); a switch resets the table it names (A5/A6);
a repeated subscription within one rebuild period is dropped (A7).
"""

from __future__ import annotations

from collections.abc import Callable

from weeble.core.events import Effect
from weeble.core.filters import Filter
from weeble.core.overlay import Topology
from weeble.core.routing.leasing import ControlRam, withdraw
from weeble.core.routing.plane import Plane
from weeble.core.routing.strategy import Strategy
from weeble.core.table import Entry


class Rebuild:
    wrapper = True

    def __init__(self, strategy: Strategy, ram: ControlRam, topo: Topology,
                 rebuild_bit: Callable[[], int]) -> None:
        self.strategy = strategy
        self.ram = ram
        self.planes = [Plane(table, tag, topo) for tag, table in enumerate(ram.tables)]
        self._bit = rebuild_bit  # a_B lives with the switch timer, shared by every control plane

    def subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        tag &= 1  # A3: the table a tagged control message belongs to
        seen = self.ram.seen[tag]
        key = (sub_id, source)
        if key in seen:  # A7: a repeated subscription within the period is dropped
            return []
        seen.add(key)
        plane = self.planes[tag]
        plane.table.refresh(sub_id, f, source, per_destination=True)
        return self.strategy.on_subscribe(plane, source, sub_id, f)

    def unsubscribe(self, source: str, sub_id: str, f: Filter, remote: bool) -> list[Effect]:
        # A4: apply it to both tables, tag what it generates with a_B
        withdraw(self.planes, sub_id, f, source, remote)
        for seen in self.ram.seen:  # A7: a later subscription with this id is new again
            seen.discard((sub_id, source))
        return self.strategy.on_unsubscribe(self.planes, self._bit(), source, sub_id, f, remote)

    def overrun(self) -> tuple[list[Entry], list[Effect]]:
        return [], []  # no leases under the wrapper: the rebuild does the cleaning

    def reset(self, bit: int) -> None:
        """A5/A6: start rebuilding table `bit` from the initial (empty) configuration."""
        self.ram.tables[bit].clear()
        self.ram.seen[bit].clear()
