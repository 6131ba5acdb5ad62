"""Layer `membership`: elementary overlay changes a manager asks one broker to make (4.2).

- AddLeaf(Ba, B): B gets AddNeighbor(Ba) and sends Ba what it needs of its tables; Ba boots
  with B as its only neighbour and parent.
- RemoveLeaf(Br): Br gets Leave, sends Bye to its neighbour and drops the link; the neighbour
  acts as if Br had withdrawn every subscription and advertisement it made, then drops the link.
- The strawman link exchange of 4.4.1 (Yu et al.): RemoveNeighbor at both ends of r (withdraw
  everything received over r), AddNeighbor at both ends of a (send everything across a), with no
  coordination at all: the baseline the coordinated exchange is measured against.
"""

from __future__ import annotations

from weeble.core.events import (
    AddNeighbor,
    Effect,
    Handler,
    Leave,
    RemoveNeighbor,
    Send,
    SetParent,
    Trace,
    not_a_neighbour,
)
from weeble.core.messages import Bye
from weeble.core.overlay import Overlay
from weeble.core.routing.layer import Routing


class Membership:
    name = "membership"

    def __init__(self, overlay: Overlay, routing: Routing) -> None:
        self.overlay = overlay
        self.routing = routing
        self.events: dict[type, Handler] = {
            AddNeighbor: self.on_add_neighbor,
            RemoveNeighbor: self.on_remove_neighbor,
            Leave: self.on_leave,
            SetParent: self.on_set_parent,
        }

    def on_add_neighbor(self, now: float, event: AddNeighbor) -> list[Effect]:
        n = event.neighbor
        if not self.overlay.add(n):
            return [Trace("garbage", {"from": n, "why": "already a neighbour (or myself)"})]
        effects: list[Effect] = [Trace("link_up", {"peer": n})]
        if event.bootstrap:
            effects.extend(self.routing.bootstrap(n))
        return effects

    def on_remove_neighbor(self, now: float, event: RemoveNeighbor) -> list[Effect]:
        return self.drop(event.neighbor, withdraw=event.withdraw)

    def drop(self, n: str, withdraw: bool) -> list[Effect]:
        if n not in self.overlay.ram.neighbors:
            return not_a_neighbour(n)
        effects: list[Effect] = self.routing.withdraw_neighbor(n) if withdraw else []
        self.overlay.remove(n)
        effects.append(Trace("link_down", {"peer": n}))
        return effects

    def on_leave(self, now: float, event: Leave) -> list[Effect]:
        effects: list[Effect] = []
        for n in self.overlay.ram.ordered:
            effects.append(Send(n, Bye()))
            self.overlay.remove(n)
        effects.append(Trace("leave", {}))
        return effects

    def on_bye(self, now: float, source: str, msg: Bye) -> list[Effect]:
        return self.drop(source, withdraw=True)

    def on_set_parent(self, now: float, event: SetParent) -> list[Effect]:
        p = event.parent
        if p is not None and p not in self.overlay.ram.neighbors:
            return [Trace("garbage", {"from": p, "why": "parent is not a neighbour"})]
        self.overlay.set_parent(p)
        return []
