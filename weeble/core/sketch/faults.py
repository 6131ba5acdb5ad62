"""Layer anti_entropy's fault targets: the sketch rounds of seed 002 (sketch.*)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, boolean, broker_ids
from weeble.core.events import Corrupt, Effect

if TYPE_CHECKING:
    from weeble.core.sketch.layer import AntiEntropyLayer

FAULTS: Faults[AntiEntropyLayer] = Faults("anti_entropy")


def _view_sketch(ae: AntiEntropyLayer, fault: Corrupt) -> Any:
    return ae.snapshot()


def _edge_arg(ae: AntiEntropyLayer, fault: Corrupt) -> list[str]:
    """The edges a fault names (args.neighbor), or every edge of the broker."""
    n = fault.args.get("neighbor")
    if n is None:
        return sorted(ae.ram.edges)
    if n not in ae.ram.edges:
        raise CorruptionError(f"{fault.target}: args.neighbor {n!r} is not an edge of this "
                              f"broker (edges: {', '.join(sorted(ae.ram.edges))})")
    return [n]


@FAULTS.target("sketch.bits", _view_sketch)
def _sketch_bits(ae: AntiEntropyLayer, now: float, fault: Corrupt) -> list[Effect]:
    """Flip `value` bits (default 8) of the next sketch this broker builds, and of the sketch
    of every round it has in flight."""
    value = 8 if fault.value is None else fault.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptionError(f"sketch.bits: value must be a number of bits >= 1, got {value!r}")
    ae.ram.poison = value
    for n in _edge_arg(ae, fault):
        r = ae.ram.edges[n].pending
        if r is not None and r.filter is not None:
            for i in range(value):
                r.filter.bits ^= 1 << ((r.filter.seed + 7919 * i) % r.filter.m)
    return []


@FAULTS.target("sketch.round", _view_sketch)
def _sketch_round(ae: AntiEntropyLayer, now: float, fault: Corrupt) -> list[Effect]:
    """Set the round counters (and the observed round) of the named edges to `value`."""
    value = fault.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptionError(f"sketch.round: value must be an integer, got {value!r}")
    for n in _edge_arg(ae, fault):
        e = ae.ram.edges[n]
        e.rounds = e.observed = value
    return []


@FAULTS.target("sketch.suspended", _view_sketch)
def _sketch_suspended(ae: AntiEntropyLayer, now: float, fault: Corrupt) -> list[Effect]:
    """Suspend (true) or resume (false) the rounds of the named edges (the adaptive timer's
    state)."""
    value = boolean(fault.value, "sketch.suspended")
    for n in _edge_arg(ae, fault):
        ae.ram.edges[n].suspended = now if value else None
    return []


@FAULTS.target("sketch.detached", _view_sketch)
def _sketch_detached(ae: AntiEntropyLayer, now: float, fault: Corrupt) -> list[Effect]:
    """Set which neighbours this broker believes failed (their entries leave every
    advertisement until a message from them proves the link works)."""
    ids = broker_ids(fault.value, "sketch.detached")
    detached = ae.routing.ram.detached
    detached.clear()
    detached.update(n for n in ids if n in ae.topo.neighbors)
    return []
