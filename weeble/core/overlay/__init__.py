"""Layer `overlay`: who my neighbours are, and which of them is my parent.

Chapter 3 keeps the neighbour set in ROM (thesis §3.2.3). Here it is RAM from the start: a
broker boots with the overlay its ROM names, reconfigurations (4.2, 4.4) change it at run time,
and faults may corrupt it. Every other layer reads the overlay through a `Topology`, so a layer
that keeps several topologies at once (the three colours of 4.5) can hand each routing plane its
own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class Topology(Protocol):
    """What routing needs to know of the overlay: the neighbours (a set, and in a fixed order
    so runs do not depend on string hashing) and the parent (None at the root)."""

    # read-only here: routing reads them; only the overlay layer changes them (properties, so
    # the coloured overlay's per-colour views qualify too)
    @property
    def neighbors(self) -> set[str]: ...

    @property
    def ordered(self) -> tuple[str, ...]: ...

    @property
    def parent(self) -> str | None: ...


class OverlayRam:
    """The overlay's slice of RAM. Change it through `Overlay`, which keeps `ordered` in step."""

    __slots__ = ("neighbors", "ordered", "parent")

    def __init__(self, neighbors: Iterable[str], parent: str | None) -> None:
        self.neighbors: set[str] = set(neighbors)
        self.ordered: tuple[str, ...] = tuple(sorted(self.neighbors))
        self.parent = parent


class Overlay:
    """The static tree of chapter 3, made changeable: link add and remove, parent changes."""

    name = "overlay"

    def __init__(self, broker_id: str, ram: OverlayRam) -> None:
        self.broker_id = broker_id
        self.ram = ram

    def add(self, neighbor: str) -> bool:
        """Add a link; False if it was there already (or names this broker)."""
        ram = self.ram
        if neighbor in ram.neighbors or neighbor == self.broker_id:
            return False
        ram.neighbors.add(neighbor)
        ram.ordered = tuple(sorted(ram.neighbors))
        return True

    def remove(self, neighbor: str) -> bool:
        ram = self.ram
        if neighbor not in ram.neighbors:
            return False
        ram.neighbors.discard(neighbor)
        ram.ordered = tuple(sorted(ram.neighbors))
        if ram.parent == neighbor:
            ram.parent = None
        return True

    def set_neighbors(self, neighbors: Iterable[str]) -> None:
        ram = self.ram
        ram.neighbors = {n for n in neighbors if n != self.broker_id}
        ram.ordered = tuple(sorted(ram.neighbors))

    def set_parent(self, parent: str | None) -> None:
        self.ram.parent = parent

    def snapshot(self) -> dict[str, Any]:
        return {"neighbors": list(self.ram.ordered), "parent": self.ram.parent}
