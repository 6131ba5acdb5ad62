"""Layer overlay's fault targets on the coloured overlay (the 3-colour scheme, thesis 4.5, spec
ch4 §5.8): the colour variables and each colour's parent and child pointers (colour.*)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, Handler, boolean, broker_ids
from weeble.core.events import Corrupt, Effect
from weeble.core.overlay.coloured import colour

if TYPE_CHECKING:
    from weeble.core.overlay.coloured import ColouredOverlay

FAULTS: Faults[ColouredOverlay] = Faults("overlay", kind="coloured")


def _view_colours(overlay: ColouredOverlay, fault: Corrupt) -> Any:
    return overlay.snapshot()["colours"]


def _colour_arg(overlay: ColouredOverlay, fault: Corrupt) -> int:
    c = colour(fault.args.get("colour"))
    if c is None:
        raise CorruptionError(f"{fault.target}: args.colour must be 0, 1 or 2, "
                              f"got {fault.args.get('colour')!r}")
    return c


def _colour_variable(name: str) -> Handler:
    def handler(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
        value = fault.value
        if isinstance(value, bool) or value not in (0, 1, 2):
            raise CorruptionError(f"colour.{name}: value must be 0, 1 or 2, got {value!r}")
        setattr(overlay.ram, name, value)
        return []

    return handler


for _name in ("c_old", "c_cur", "c_new"):
    FAULTS.target(f"colour.{_name}", _view_colours)(_colour_variable(_name))


@FAULTS.target("colour.parent", _view_colours)
def _colour_parent(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"colour.parent: value must be a broker id or null, "
                              f"got {fault.value!r}")
    tree = overlay.tree(c)
    tree.parent = fault.value  # one field: a child pointer to the same broker stays
    tree.sync()
    return []


@FAULTS.target("colour.children", _view_colours)
def _colour_children(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    tree = overlay.tree(c)
    tree.children = set(broker_ids(fault.value, "colour.children"))
    tree.sync()
    return []


@FAULTS.target("colour.child.add", _view_colours)
def _colour_child_add(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if not isinstance(fault.value, str):
        raise CorruptionError(f"colour.child.add: value must be a broker id, got {fault.value!r}")
    tree = overlay.tree(c)
    tree.children.add(fault.value)  # even the parent or the broker itself: any value
    tree.sync()
    return []


@FAULTS.target("colour.child.remove", _view_colours)
def _colour_child_remove(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if not overlay.remove_child(c, fault.value):
        raise CorruptionError(f"colour.child.remove: {fault.value!r} is not a child in "
                              f"colour {c}")
    return []


@FAULTS.target("colour.joining", _view_colours)
def _colour_joining(overlay: ColouredOverlay, now: float, fault: Corrupt) -> list[Effect]:
    overlay.ram.joining = boolean(fault.value, "colour.joining")
    return []
