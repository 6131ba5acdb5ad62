"""Layer overlay's fault targets on the static tree: the neighbour set and the parent
(overlay.*), RAM from chapter 4 on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, broker_ids
from weeble.core.events import Corrupt, Effect

if TYPE_CHECKING:
    from weeble.core.overlay import Overlay

FAULTS: Faults[Overlay] = Faults("overlay", kind="static")


def _view_overlay(overlay: Overlay, fault: Corrupt) -> Any:
    return overlay.snapshot()


@FAULTS.target("overlay.neighbors", _view_overlay)
def _neighbors(overlay: Overlay, now: float, fault: Corrupt) -> list[Effect]:
    overlay.set_neighbors(broker_ids(fault.value, "overlay.neighbors"))
    return []


@FAULTS.target("overlay.neighbor.add", _view_overlay)
def _neighbor_add(overlay: Overlay, now: float, fault: Corrupt) -> list[Effect]:
    if not isinstance(fault.value, str):
        raise CorruptionError(
            f"overlay.neighbor.add: value must be a broker id, got {fault.value!r}")
    overlay.add(fault.value)
    return []


@FAULTS.target("overlay.neighbor.remove", _view_overlay)
def _neighbor_remove(overlay: Overlay, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value not in overlay.ram.neighbors:
        raise CorruptionError(f"overlay.neighbor.remove: {fault.value!r} is not a neighbour")
    parent = overlay.ram.parent
    overlay.remove(fault.value)
    overlay.set_parent(parent)  # a fault changes one field: the parent pointer stays as it was
    return []


@FAULTS.target("overlay.parent", _view_overlay)
def _parent(overlay: Overlay, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"overlay.parent: value must be a broker id or null, "
                              f"got {fault.value!r}")
    overlay.set_parent(fault.value)
    return []
