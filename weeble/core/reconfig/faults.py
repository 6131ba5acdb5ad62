"""Layer exchange's fault targets: the lock, the cycle pointers, the colour, Bgray/Bqueue and
the queues of the coordinated link exchange (exchange.*, thesis 4.4.2); and
`random_layer_fault`, a random fault of the overlay or the exchange below it."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, boolean, broker_ids
from weeble.core.events import Corrupt, Effect
from weeble.core.reconfig.exchange import POINTERS

if TYPE_CHECKING:
    from weeble.core.reconfig.exchange import Exchange

FAULTS: Faults[Exchange] = Faults("exchange")


def _view_exchange(exchange: Exchange, fault: Corrupt) -> Any:
    return exchange.snapshot()


@FAULTS.target("exchange.locked", _view_exchange)
def _locked(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.locked = boolean(fault.value, "exchange.locked")
    return []


@FAULTS.target("exchange.pointer", _view_exchange)
def _pointer(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    name = fault.args.get("name")
    if name not in POINTERS:
        raise CorruptionError(f"exchange.pointer: args.name must be one of {', '.join(POINTERS)},"
                              f" got {name!r}")
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"exchange.pointer: value must be a broker id or null, "
                              f"got {fault.value!r}")
    setattr(exchange.ram, name, fault.value)
    return []


@FAULTS.target("exchange.color", _view_exchange)
def _color(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.gray = boolean(fault.value, "exchange.color")  # true: gray
    return []


@FAULTS.target("exchange.relaying", _view_exchange)
def _relaying(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.relaying = boolean(fault.value, "exchange.relaying")
    return []


@FAULTS.target("exchange.gray_set", _view_exchange)
def _gray_set(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.gray_set = set(broker_ids(fault.value, "exchange.gray_set"))
    return []


@FAULTS.target("exchange.queue_set", _view_exchange)
def _queue_set(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.queue_set = set(broker_ids(fault.value, "exchange.queue_set"))
    return []


@FAULTS.target("exchange.queue.clear", _view_exchange)
def _queue_clear(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    """Lose what a queue holds: args.queue is qnot, qsub or qrel (all three when absent)."""
    which = fault.args.get("queue")
    names = ("qnot", "qsub", "qrel") if which is None else (which,)
    for name in names:
        if name not in ("qnot", "qsub", "qrel"):
            raise CorruptionError(f"exchange.queue.clear: args.queue must be qnot, qsub or qrel, "
                                  f"got {name!r}")
        getattr(exchange.ram, name).clear()
    return []


@FAULTS.target("exchange.rid", _view_exchange)
def _rid(exchange: Exchange, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"exchange.rid: value must be a string or null, got {fault.value!r}")
    exchange.ram.rid = fault.value
    return []


def random_layer_fault(broker: Any, rng: random.Random, brokers: list[str]) -> Corrupt:
    """One random, type-correct fault on the overlay or exchange RAM of `broker`; `brokers`
    are the ids to draw neighbours and pointers from (any id is type-correct). On the coloured
    overlay: `random_colour_fault`."""
    if getattr(broker.ram, "recolor", None) is not None:
        from weeble.core.reconfig.recolor_faults import random_colour_fault

        return random_colour_fault(broker, rng, brokers)
    ids = [*brokers, "ghost"]
    kind = rng.choice(["overlay.neighbors", "overlay.neighbor.add", "overlay.neighbor.remove",
                       "overlay.parent", "exchange.locked", "exchange.pointer",
                       "exchange.color", "exchange.gray_set", "exchange.queue.clear"])
    neighbors = sorted(broker.ram.overlay.neighbors)
    if kind == "overlay.neighbor.remove" and not neighbors:
        kind = "overlay.neighbor.add"
    args: dict[str, Any] = {}
    value: Any = None
    if kind == "overlay.neighbors":
        value = rng.sample(ids, rng.randrange(min(len(ids), 4) + 1))
    elif kind in ("overlay.neighbor.add",):
        value = rng.choice(ids)
    elif kind == "overlay.neighbor.remove":
        value = rng.choice(neighbors)
    elif kind == "overlay.parent":
        value = rng.choice([None, *ids])
    elif kind in ("exchange.locked", "exchange.color"):
        value = rng.random() < 0.5
    elif kind == "exchange.pointer":
        args = {"name": rng.choice(POINTERS)}
        value = rng.choice([None, *ids])
    elif kind == "exchange.gray_set":
        value = rng.sample(ids, rng.randrange(min(len(ids), 4) + 1))
    return Corrupt(kind, value, args)
