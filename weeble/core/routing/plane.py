"""A routing plane: one table, the tag its control messages carry, and the topology it routes on.

The leased algorithms have one plane; the periodic-rebuild wrapper has two (T^0 and T^1) on one
topology; the 3-colour scheme of 4.5 will have three, each on its own colour's tree. Strategies
only ever see planes, never the broker.
"""

from __future__ import annotations

from weeble.core.overlay import Topology
from weeble.core.table import RoutingTable


class Plane:
    __slots__ = ("table", "tag", "topo")

    def __init__(self, table: RoutingTable, tag: int, topo: Topology) -> None:
        self.table = table
        self.tag = tag
        self.topo = topo
