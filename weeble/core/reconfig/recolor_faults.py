"""Layer recolor's fault targets (the 3-colour scheme): the ACK flags, the root's pending
requests and the join walk (recolor.*); and `random_colour_fault`, a random fault of a coloured
broker's overlay, recolor or routing RAM."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, boolean, broker_ids
from weeble.core.events import Corrupt, Effect
from weeble.core.filters import Filter

if TYPE_CHECKING:
    from weeble.core.reconfig.recolor import RecolorLayer

FAULTS: Faults[RecolorLayer] = Faults("recolor")


def _view_recolor(recolor: RecolorLayer, fault: Corrupt) -> Any:
    return recolor.snapshot()


@FAULTS.target("recolor.flags", _view_recolor)
def _recolor_flags(recolor: RecolorLayer, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.flags = set(broker_ids(fault.value, "recolor.flags"))
    return []


@FAULTS.target("recolor.pending.clear", _view_recolor)
def _recolor_pending(recolor: RecolorLayer, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.pending.clear()
    return []


@FAULTS.target("recolor.leaving", _view_recolor)
def _recolor_leaving(recolor: RecolorLayer, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.leaving = boolean(fault.value, "recolor.leaving")
    return []


@FAULTS.target("recolor.walk", _view_recolor)
def _recolor_walk(recolor: RecolorLayer, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"recolor.walk: value must be a broker id or null, "
                              f"got {fault.value!r}")
    recolor.ram.walk = fault.value
    return []


COLOUR_KINDS = ("colour.c_old", "colour.c_cur", "colour.c_new", "colour.parent",
                "colour.children", "colour.child.add", "colour.child.remove", "colour.joining",
                "recolor.flags", "recolor.pending.clear", "recolor.leaving", "recolor.walk",
                "colour.queue.clear", "colour.holding", "table.clear", "entry.insert")


def random_colour_fault(broker: Any, rng: random.Random, brokers: list[str]) -> Corrupt:
    """One random, type-correct fault on a coloured broker's overlay, recolor or routing RAM
    (a colour's table included); `brokers` are the ids to draw pointers from."""
    ids = [*brokers, "ghost"]
    kind = rng.choice(COLOUR_KINDS)
    value: Any = None
    args: dict[str, Any] = {}
    if kind in ("colour.c_old", "colour.c_cur", "colour.c_new"):
        value = rng.randrange(3)
    elif kind in ("colour.parent", "colour.children", "colour.child.add",
                  "colour.child.remove"):
        c = rng.randrange(3)
        args = {"colour": c}
        children = sorted(broker.ram.overlay.trees[c].children)
        if kind == "colour.child.remove" and not children:
            kind = "colour.child.add"
        if kind == "colour.parent":
            value = rng.choice([None, *ids])
        elif kind == "colour.children":
            value = rng.sample(ids, rng.randrange(min(len(ids), 4) + 1))
        elif kind == "colour.child.add":
            value = rng.choice(ids)
        else:
            value = rng.choice(children)
    elif kind in ("colour.joining", "recolor.leaving", "colour.holding"):
        value = rng.random() < 0.5
    elif kind == "recolor.flags":
        value = rng.sample(ids, rng.randrange(min(len(ids), 4) + 1))
    elif kind == "recolor.walk":
        value = rng.choice([None, *ids])
    elif kind == "table.clear":
        args = {"table": rng.randrange(3)}
    elif kind == "entry.insert":
        args = {"table": rng.randrange(3)}
        value = {"sub_id": f"bogus{rng.randrange(1000)}", "filter": Filter.everything(),
                 "dest": rng.choice([*sorted(broker.ram.overlay.trees[args["table"]].neighbors),
                                     "ghost"]), "flag": 1}
    return Corrupt(kind, value, args)
