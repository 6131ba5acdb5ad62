"""Layer `overlay`, coloured: the self-stabilizing tree of thesis 4.5 (seed 001), as data.

Three colours rotate mod 3. Each broker keeps, per colour c, a parent pointer P^c and a child
set C^c (spec ch4 §5.3), and three colour variables: c_cur (the tree notifications use now),
c_old (the previous one, kept for messages still in flight) and c_new (the tree being prepared:
reconfigurations are written into it). A colour value is an index into the per-colour slots, so
a corrupted colour variable only changes which slot is current; the routing layer keeps one
table per colour in the same slots (`routing/colours.py`).

This layer is data and its invariants only (each colour's neighbour set in step with its
pointers); the recolor protocol that rotates the colours and moves the pointers is the layer
`recolor` (`reconfig/recolor.py`), which sits above routing because a rotation also resets the
routing table T^{c_new}.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

COLOURS = 3


class ColourTree:
    """One colour's pointers, seen by routing as a `Topology`: the neighbours are the children
    and the parent. Change it through `ColouredOverlay`, which keeps the derived fields in step."""

    __slots__ = ("children", "neighbors", "ordered", "parent")

    def __init__(self, parent: str | None, children: Iterable[str]) -> None:
        self.parent = parent
        self.children: set[str] = set(children)
        self.neighbors: set[str] = set()
        self.ordered: tuple[str, ...] = ()
        self.sync()

    def sync(self) -> None:
        self.neighbors = set(self.children)
        if self.parent is not None:
            self.neighbors.add(self.parent)
        self.ordered = tuple(sorted(self.neighbors))

    def as_dict(self) -> dict[str, Any]:
        return {"parent": self.parent, "children": sorted(self.children)}


class ColouredRam:
    """The coloured overlay's slice of RAM.

    `neighbors`, `ordered` and `parent` are the current colour's (what the rest of the broker,
    the snapshot and the chapter-3 legitimacy check call "the overlay").
    """

    __slots__ = ("c_cur", "c_new", "c_old", "joining", "trees")

    def __init__(self, neighbors: Iterable[str], parent: str | None, root: bool) -> None:
        children = [n for n in neighbors if n != parent]
        self.trees = [ColourTree(parent, children) for _ in range(COLOURS)]
        # Every broker boots with the same consistent triple; the root's first recolor keeps it.
        self.c_old, self.c_cur, self.c_new = 0, 1, 2
        # Not (yet) in the tree: the three slots hold the same pointers, and the first recolor
        # accepted from P^{c_new} sets the colours whatever they were (a broker booting, or
        # one whose join is pending). Every broker but the root boots joining.
        self.joining = not root

    @property
    def current(self) -> ColourTree:
        return self.trees[self.c_cur]

    @property
    def neighbors(self) -> set[str]:
        return self.trees[self.c_cur].neighbors

    @property
    def ordered(self) -> tuple[str, ...]:
        return self.trees[self.c_cur].ordered

    @property
    def parent(self) -> str | None:
        return self.trees[self.c_cur].parent


def colour(value: object) -> int | None:
    """A colour value (0, 1 or 2), or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < COLOURS:
        return value
    return None


class ColouredOverlay:
    """Pointer operations on the coloured tree; every change keeps the colour's neighbours in
    step. Broker ids equal to this broker's own are never stored (no self-loops)."""

    name = "overlay"
    kind = "coloured"

    def __init__(self, broker_id: str, ram: ColouredRam) -> None:
        self.broker_id = broker_id
        self.ram = ram

    def tree(self, c: int) -> ColourTree:
        return self.ram.trees[c]

    def set_parent(self, c: int, parent: str | None) -> None:
        tree = self.ram.trees[c]
        tree.parent = None if parent == self.broker_id else parent
        tree.children.discard(tree.parent)  # type: ignore[arg-type]
        tree.sync()

    def add_child(self, c: int, child: str) -> bool:
        tree = self.ram.trees[c]
        if child == self.broker_id or child in tree.children:
            return False
        tree.children.add(child)
        if tree.parent == child:
            tree.parent = None
        tree.sync()
        return True

    def remove_child(self, c: int, child: str) -> bool:
        tree = self.ram.trees[c]
        if child not in tree.children:
            return False
        tree.children.discard(child)
        tree.sync()
        return True

    def set_children(self, c: int, children: Iterable[str]) -> None:
        tree = self.ram.trees[c]
        tree.children = {x for x in children if x != self.broker_id and x != tree.parent}
        tree.sync()

    def copy(self, src: int, dst: int) -> None:
        """P^{dst} := P^{src}; C^{dst} := C^{src} (A9.6, A10.6)."""
        if src == dst:
            return
        a, b = self.ram.trees[src], self.ram.trees[dst]
        b.parent = a.parent
        b.children = set(a.children)
        b.sync()

    def snapshot(self) -> dict[str, Any]:
        ram = self.ram
        return {
            "neighbors": list(ram.ordered),
            "parent": ram.parent,
            "colours": {"c_old": ram.c_old, "c_cur": ram.c_cur, "c_new": ram.c_new,
                        "joining": ram.joining, "trees": [t.as_dict() for t in ram.trees]},
        }
