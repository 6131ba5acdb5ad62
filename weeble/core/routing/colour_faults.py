"""Layer routing's fault targets on the coloured overlay: what routing holds back
(colour.queue.clear, colour.holding); the per-colour tables are the routing tables (entry.* and
table.clear with `table` = the colour, routing/faults.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, boolean
from weeble.core.events import Corrupt, Effect

if TYPE_CHECKING:
    from weeble.core.routing.colours import ColouredRouting

FAULTS: Faults[ColouredRouting] = Faults("routing")


def _view_held(routing: ColouredRouting, fault: Corrupt) -> Any:
    cram = getattr(routing, "cram", None)
    if cram is None:
        raise CorruptionError(f"{fault.target}: this broker's routing holds nothing back "
                              "(not on the coloured overlay)")
    return routing.snapshot()["colour_routing"]


@FAULTS.target("colour.queue.clear", _view_held)
def _colour_queue_clear(routing: ColouredRouting, now: float, fault: Corrupt) -> list[Effect]:
    """Lose what waits: args.queue is early (E4), held (FIFO) or pubs (CAUSAL); all without."""
    which = fault.args.get("queue")
    names = ("early", "held", "pubs") if which is None else (which,)
    for name in names:
        if name not in ("early", "held", "pubs"):
            raise CorruptionError(f"colour.queue.clear: args.queue must be early, held or pubs, "
                                  f"got {name!r}")
        getattr(routing.cram, name).clear()
    return []


@FAULTS.target("colour.holding", _view_held)
def _colour_holding(routing: ColouredRouting, now: float, fault: Corrupt) -> list[Effect]:
    routing.cram.holding = boolean(fault.value, "colour.holding")
    return []
