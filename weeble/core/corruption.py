"""Transient state faults: set any RAM field of a broker to any type-correct value.

This is the registry. Each layer declares its fault targets in a module of its own (`Faults`:
each target touches only that layer's slice of RAM), and the broker composes the registry from
its layers' declarations (`Registry`, core/broker.py); a fault finds its target's layer by name
(`broker.layers`), so no layer imports the broker and this module imports no layer:

    routing/faults.py             entry.*, table.clear, clock, rebuild_bit, merger.*, adv.*
    sketch/faults.py              sketch.* (seed 002)
    overlay/faults.py             overlay.* (the static tree)
    reconfig/faults.py            exchange.* (the coordinated link exchange, 4.4.2)
    optimize/faults.py            optimize.* (ch. 5)
    overlay/coloured_faults.py    colour.* (the 3-colour scheme, 4.5, spec ch4 §5.8)
    reconfig/recolor_faults.py    recolor.*
    routing/colour_faults.py      colour.queue.clear, colour.holding
    overlay/skipring/faults.py    skipring.* (seed 003)

ROM is not reachable from here, by construction. Each fault answers with a `fault` trace record
holding the state before and after: the evidence that it took effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from weeble.core.events import Corrupt, Effect, Trace
from weeble.core.filters import Filter, FilterSyntaxError


class Broker(Protocol):
    """What a fault needs of a broker: its ROM and its layers by name."""

    rom: Any
    layers: dict[str, Any]


class CorruptionError(ValueError):
    """A fault that names an unknown target, entry or field, or a value of the wrong type."""


Layer = TypeVar("Layer")
Handler = Callable[[Any, float, Corrupt], list[Effect]]
View = Callable[[Any, Corrupt], Any]


@dataclass(frozen=True, slots=True)
class Target:
    """One kind of state fault: the layer whose RAM it touches, how, and what to show of it.
    `kind`: the kind of layer it needs (the static or the coloured overlay), if it matters."""

    name: str
    layer: str
    apply: Handler
    view: View
    kind: str | None = None


class Faults(Generic[Layer]):
    """The fault targets one layer declares (`@FAULTS.target(name, view)` on each handler), in
    declaration order. `layer`: the name the broker knows the layer by; `kind`: the kind of
    that layer the targets need, if it matters."""

    def __init__(self, layer: str, kind: str | None = None) -> None:
        self.layer = layer
        self.kind = kind
        self.targets: list[Target] = []

    def target(self, name: str, view: Callable[[Layer, Corrupt], Any]
               ) -> Callable[[Callable[[Layer, float, Corrupt], list[Effect]]],
                             Callable[[Layer, float, Corrupt], list[Effect]]]:
        def add(handler: Callable[[Layer, float, Corrupt], list[Effect]]
                ) -> Callable[[Layer, float, Corrupt], list[Effect]]:
            self.targets.append(Target(name, self.layer, handler, view, self.kind))
            return handler

        return add


class Registry:
    """Every fault target of the layers a broker is composed of, by name, in their order."""

    def __init__(self, layers: Iterable[Faults[Any]]) -> None:
        # name -> target; read it, never change it
        self.targets: dict[str, Target] = {t.name: t for f in layers for t in f.targets}

    def names(self) -> tuple[str, ...]:
        return tuple(self.targets)

    def apply(self, broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
        target = self.targets.get(fault.target)
        if target is None:
            raise CorruptionError(
                f"unknown corruption target {fault.target!r}; known: {', '.join(self.targets)}"
            )
        layer = broker.layers.get(target.layer)
        if layer is None:
            raise CorruptionError(f"{fault.target}: this broker has no layer {target.layer!r}")
        kind = getattr(layer, "kind", "static")
        if target.kind is not None and kind != target.kind:
            raise CorruptionError(f"{fault.target}: this broker's {target.layer} is {kind}, "
                                  f"the target needs a {target.kind} one")
        before = target.view(layer, fault)
        effects = target.apply(layer, now, fault)
        evidence = {"field": fault.target, "layer": target.layer, "args": _jsonable(fault.args),
                    "value": _jsonable(fault.value), "before": before,
                    "after": target.view(layer, fault)}
        effects.append(Trace("fault", evidence))
        return effects


# ---- the checks of a fault's value that several layers share ----------------------------------


def broker_ids(value: object, field: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise CorruptionError(f"{field}: value must be a list of broker ids, got {value!r}")
    if not all(isinstance(v, str) for v in value):
        raise CorruptionError(f"{field}: every broker id must be a string, got {value!r}")
    return list(value)


def boolean(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise CorruptionError(f"{field}: value must be true or false, got {value!r}")
    return value


def filter_of(value: object, field: str) -> Filter:
    if isinstance(value, Filter):
        return value
    if isinstance(value, str):
        try:
            return Filter.parse(value)
        except FilterSyntaxError as e:
            raise CorruptionError(f"{field}: {e}") from None
    raise CorruptionError(f"{field}: expected a filter, got {value!r}")


def number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CorruptionError(f"{field}: expected a number, got {value!r}")
    return float(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Filter):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value
