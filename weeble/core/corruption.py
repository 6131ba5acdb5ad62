"""Transient state faults: set any RAM field of a broker to any type-correct value.

Each target belongs to one layer and touches only that layer's slice of RAM; the registry below
finds the layer by name (`broker.layers`), so no layer imports this module and this module never
imports the broker. The fault vocabulary of spec ch3 §6.3 that lives in a broker's state:
- layer routing: F1 entry.filter, F2 entry.sub_id, F3 entry.dest, F4 entry.flag,
  F5 entry.insert / entry.delete, F6 table.clear, F10 clock, F13 entry.insert of an all-covering
  filter (plus table.clear elsewhere), F14 merger.insert, F15 rebuild_bit and any of the above
  on T^0/T^1 (`table` arg); F16 the same on the advertisement tables (adv.entry.*, adv.table.clear);
- layer overlay: the neighbour set and the parent (overlay.*), RAM from chapter 4 on;
- layer optimize (ch. 5): the interest cache (optimize.cache.*), the environment of summaries,
  interests and learned link costs (optimize.env.*, optimize.link) and the measured link costs
  (optimize.measured);
- layer exchange: the lock, the cycle pointers, the colour, Bgray/Bqueue and the queues of the
  coordinated link exchange (exchange.*);
- the 3-colour scheme (thesis 4.5, spec ch4 §5.8): the colour variables and each colour's parent
  and child pointers (colour.*, layer overlay), the ACK flags, the root's pending requests and
  the join walk (recolor.*, layer recolor), what routing holds back (colour.queue.clear,
  colour.holding, layer routing); the per-colour tables are the routing tables (entry.* and
  table.clear with `table` = the colour).
ROM is not reachable from here, by construction.

Each fault answers with a `fault` trace record holding the state before and after: the evidence
that it took effect.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from weeble.core.events import Corrupt, Effect, Send, SetTimer, Trace
from weeble.core.filters import Filter, FilterSyntaxError
from weeble.core.overlay.coloured import colour
from weeble.core.routing.merging import Merger
from weeble.core.table import Entry, RoutingTable


class Broker(Protocol):
    """What a fault needs of a broker: its ROM and its layers by name."""

    rom: Any
    layers: dict[str, Any]


class CorruptionError(ValueError):
    """A fault that names an unknown target, entry or field, or a value of the wrong type."""


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


_REGISTRY: dict[str, Target] = {}


def register(name: str, layer: str, view: View,
             kind: str | None = None) -> Callable[[Handler], Handler]:
    def add(handler: Handler) -> Handler:
        _REGISTRY[name] = Target(name, layer, handler, view, kind)
        return handler

    return add


def apply(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    target = _REGISTRY.get(fault.target)
    if target is None:
        raise CorruptionError(
            f"unknown corruption target {fault.target!r}; known: {', '.join(_REGISTRY)}"
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


# ---- layer routing: the tables, the clock, the wrapper bit, mergers --------------------------


def _tables_of(routing: Any, fault: Corrupt) -> list[RoutingTable]:
    """The notification tables, or the advertisement tables for an adv.* target."""
    if fault.target.startswith("adv."):
        adverts = routing.ram.adverts
        if adverts is None:
            raise CorruptionError(f"{fault.target}: this broker keeps no advertisement tables")
        return adverts.tables
    return routing.ram.subs.tables


def _view_clock(routing: Any, fault: Corrupt) -> Any:
    return {"next_timer": routing.ram.next_timer}


def _view_bit(routing: Any, fault: Corrupt) -> Any:
    return {"rebuild_bit": routing.ram.rebuild_bit}


def _view_mergers(routing: Any, fault: Corrupt) -> Any:
    return sorted((m.as_dict() for t in routing.ram.subs.tables for m in t.mergers.values()),
                  key=lambda m: str(m["merger_id"]))


def _view_entries(routing: Any, fault: Corrupt) -> Any:
    tables = _tables_of(routing, fault)
    return {"entries": sum(len(t) for t in tables),
            "sample": [e.as_dict() for t in tables for e in list(t)[:20]]}


@register("clock", "routing", _view_clock)
def _clock(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    rom = routing.rom
    pi = rom.params.pi
    value = _number(fault.value, "clock")
    if not 0 <= value < pi:
        raise CorruptionError(f"clock: value must be in [0, pi={pi:g}), got {value:g}")
    if rom.overlay.value == "coloured":
        raise CorruptionError("clock: the coloured overlay has no leasing clock (the root's "
                              "recolors pace the tables)")
    routing.ram.next_timer = now + (pi - value)
    timer = "switch" if rom.wrapper else "overrun"
    if rom.wrapper and not rom.is_root:
        return []  # only the root has a clock under the wrapper
    return [SetTimer(timer, routing.ram.next_timer)]


def _entry_field(field: str) -> Handler:
    def handler(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
        table, entry = _select(routing, fault)
        value: Any = fault.value
        name = fault.target
        if field == "filter":
            value = _filter(value, name)
        elif field == "flag":
            value = 1 - entry.flag if value is None else value
            if value not in (0, 1) or isinstance(value, bool):
                raise CorruptionError(f"{name}: value must be 0 or 1, got {fault.value!r}")
        elif not isinstance(value, str):
            raise CorruptionError(f"{name}: value must be a string, got {value!r}")
        table.discard(entry)
        replacement = Entry(entry.sub_id, entry.filter, entry.dest, entry.flag)
        setattr(replacement, field, value)
        if field == "filter":
            replacement = Entry(entry.sub_id, value, entry.dest, entry.flag)
        table.add(replacement)
        return []

    return handler


for _prefix in ("", "adv."):
    for _field in ("filter", "sub_id", "dest", "flag"):
        register(f"{_prefix}entry.{_field}", "routing", _view_entries)(_entry_field(_field))


def _insert(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    spec = fault.value
    name = fault.target
    if not isinstance(spec, dict):
        raise CorruptionError(f"{name}: value must be a mapping {{sub_id, filter, dest, flag}}")
    unknown = set(spec) - {"sub_id", "filter", "dest", "flag"}
    if unknown:
        raise CorruptionError(f"{name}: unknown field(s) {sorted(unknown)}")
    flag = spec.get("flag", 1)
    if flag not in (0, 1):
        raise CorruptionError(f"{name}: flag must be 0 or 1, got {flag!r}")
    entry = Entry(
        str(spec.get("sub_id", "injected")),
        _filter(spec.get("filter", "true"), f"{name}.filter"),
        str(spec.get("dest", "ghost")),
        int(flag),
    )
    _table(routing, fault).add(entry)  # no SC-1 removal: a fault may duplicate ids
    return []


def _delete(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    table, entry = _select(routing, fault)
    table.discard(entry)
    return []


def _clear(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    which = fault.args.get("table")
    tables = _tables_of(routing, fault) if which is None else [_table(routing, fault)]
    for table in tables:
        table.clear()
    if which is None:
        plane = routing.ram.adverts if fault.target.startswith("adv.") else routing.ram.subs
        for seen in plane.seen:
            seen.clear()
    return []


for _prefix in ("", "adv."):
    register(f"{_prefix}entry.insert", "routing", _view_entries)(_insert)
    register(f"{_prefix}entry.delete", "routing", _view_entries)(_delete)
    register(f"{_prefix}table.clear", "routing", _view_entries)(_clear)


@register("rebuild_bit", "routing", _view_bit)
def _rebuild_bit(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value not in (0, 1) or isinstance(fault.value, bool):
        raise CorruptionError(f"rebuild_bit: value must be 0 or 1, got {fault.value!r}")
    routing.ram.rebuild_bit = int(fault.value)
    return []


@register("merger.insert", "routing", _view_mergers)
def _merger_insert(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    spec = fault.value
    if not isinstance(spec, dict) or "constituents" not in spec:
        raise CorruptionError("merger.insert: value must be a mapping with 'constituents'")
    constituents = frozenset(_filter(c, "merger.insert.constituents") for c in spec["constituents"])
    f = _filter(spec.get("filter", "true"), "merger.insert.filter")
    mid = str(spec.get("merger_id", f"injected-merger:{f}"))
    dest = str(spec.get("dest", "ghost"))
    flag = int(spec.get("flag", 1))
    _table(routing, fault).mergers[mid] = Merger(mid, f, dest, constituents, flag)
    return []


@register("merger.clear", "routing", _view_mergers)
def _merger_clear(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    for table in routing.ram.subs.tables:
        table.mergers.clear()
    return []


# ---- layer anti_entropy: the sketch rounds of seed 002 ---------------------------------------


def _view_sketch(ae: Any, fault: Corrupt) -> Any:
    return ae.snapshot()


def _edge_arg(ae: Any, fault: Corrupt) -> list[str]:
    """The edges a fault names (args.neighbor), or every edge of the broker."""
    n = fault.args.get("neighbor")
    if n is None:
        return sorted(ae.ram.edges)
    if n not in ae.ram.edges:
        raise CorruptionError(f"{fault.target}: args.neighbor {n!r} is not an edge of this "
                              f"broker (edges: {', '.join(sorted(ae.ram.edges))})")
    return [n]


@register("sketch.bits", "anti_entropy", _view_sketch)
def _sketch_bits(ae: Any, now: float, fault: Corrupt) -> list[Effect]:
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


@register("sketch.round", "anti_entropy", _view_sketch)
def _sketch_round(ae: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Set the round counters (and the observed round) of the named edges to `value`."""
    value = fault.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptionError(f"sketch.round: value must be an integer, got {value!r}")
    for n in _edge_arg(ae, fault):
        e = ae.ram.edges[n]
        e.rounds = e.observed = value
    return []


@register("sketch.suspended", "anti_entropy", _view_sketch)
def _sketch_suspended(ae: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Suspend (true) or resume (false) the rounds of the named edges (the adaptive timer's
    state)."""
    value = _flag(fault.value, "sketch.suspended")
    for n in _edge_arg(ae, fault):
        ae.ram.edges[n].suspended = now if value else None
    return []


@register("sketch.detached", "anti_entropy", _view_sketch)
def _sketch_detached(ae: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Set which neighbours this broker believes failed (their entries leave every
    advertisement until a message from them proves the link works)."""
    ids = _ids(fault.value, "sketch.detached")
    detached = ae.routing.ram.detached
    detached.clear()
    detached.update(n for n in ids if n in ae.topo.neighbors)
    return []


# ---- layer overlay: the neighbour set and the parent -----------------------------------------


def _view_overlay(overlay: Any, fault: Corrupt) -> Any:
    return overlay.snapshot()


def _ids(value: object, field: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise CorruptionError(f"{field}: value must be a list of broker ids, got {value!r}")
    if not all(isinstance(v, str) for v in value):
        raise CorruptionError(f"{field}: every broker id must be a string, got {value!r}")
    return list(value)


@register("overlay.neighbors", "overlay", _view_overlay, "static")
def _neighbors(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    overlay.set_neighbors(_ids(fault.value, "overlay.neighbors"))
    return []


@register("overlay.neighbor.add", "overlay", _view_overlay, "static")
def _neighbor_add(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    if not isinstance(fault.value, str):
        raise CorruptionError(
            f"overlay.neighbor.add: value must be a broker id, got {fault.value!r}")
    overlay.add(fault.value)
    return []


@register("overlay.neighbor.remove", "overlay", _view_overlay, "static")
def _neighbor_remove(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value not in overlay.ram.neighbors:
        raise CorruptionError(f"overlay.neighbor.remove: {fault.value!r} is not a neighbour")
    parent = overlay.ram.parent
    overlay.remove(fault.value)
    overlay.set_parent(parent)  # a fault changes one field: the parent pointer stays as it was
    return []


@register("overlay.parent", "overlay", _view_overlay, "static")
def _parent(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"overlay.parent: value must be a broker id or null, "
                              f"got {fault.value!r}")
    overlay.set_parent(fault.value)
    return []


# ---- layer exchange: the lock, the cycle pointers, colours and queues (thesis 4.4.2) ----------

POINTERS = ("left", "right", "new", "old", "relay_to", "awaiting_end")


def _view_exchange(exchange: Any, fault: Corrupt) -> Any:
    return exchange.snapshot()


def _flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise CorruptionError(f"{field}: value must be true or false, got {value!r}")
    return value


@register("exchange.locked", "exchange", _view_exchange)
def _locked(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.locked = _flag(fault.value, "exchange.locked")
    return []


@register("exchange.pointer", "exchange", _view_exchange)
def _pointer(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    name = fault.args.get("name")
    if name not in POINTERS:
        raise CorruptionError(f"exchange.pointer: args.name must be one of {', '.join(POINTERS)},"
                              f" got {name!r}")
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"exchange.pointer: value must be a broker id or null, "
                              f"got {fault.value!r}")
    setattr(exchange.ram, name, fault.value)
    return []


@register("exchange.color", "exchange", _view_exchange)
def _color(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.gray = _flag(fault.value, "exchange.color")  # true: gray
    return []


@register("exchange.relaying", "exchange", _view_exchange)
def _relaying(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.relaying = _flag(fault.value, "exchange.relaying")
    return []


@register("exchange.gray_set", "exchange", _view_exchange)
def _gray_set(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.gray_set = set(_ids(fault.value, "exchange.gray_set"))
    return []


@register("exchange.queue_set", "exchange", _view_exchange)
def _queue_set(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    exchange.ram.queue_set = set(_ids(fault.value, "exchange.queue_set"))
    return []


@register("exchange.queue.clear", "exchange", _view_exchange)
def _queue_clear(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Lose what a queue holds: args.queue is qnot, qsub or qrel (all three when absent)."""
    which = fault.args.get("queue")
    names = ("qnot", "qsub", "qrel") if which is None else (which,)
    for name in names:
        if name not in ("qnot", "qsub", "qrel"):
            raise CorruptionError(f"exchange.queue.clear: args.queue must be qnot, qsub or qrel, "
                                  f"got {name!r}")
        getattr(exchange.ram, name).clear()
    return []


@register("exchange.rid", "exchange", _view_exchange)
def _rid(exchange: Any, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"exchange.rid: value must be a string or null, got {fault.value!r}")
    exchange.ram.rid = fault.value
    return []


# ---- layer optimize: the tree optimizer's interest cache, environment and costs (ch. 5) -------


def _view_optimize(opt: Any, fault: Corrupt) -> Any:
    return opt.snapshot()


def _cost_value(value: object, field: str) -> float:
    cost = _number(value, field)
    if cost < 0 or cost != cost:
        raise CorruptionError(f"{field}: value must be a cost >= 0, got {value!r}")
    return cost


@register("optimize.cache.clear", "optimize", _view_optimize)
def _cache_clear(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Forget what this broker consumed: its next summary says it wants nothing."""
    old = opt.ram.cache
    opt.ram.cache = type(old)(size=old.size, m=old.m, k=old.k)
    opt.reset_joint()
    return []


@register("optimize.cache.insert", "optimize", _view_optimize)
def _cache_insert(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Notification ids this broker never consumed enter its cache (an interest it lacks)."""
    ids = fault.value
    if isinstance(ids, str) or not isinstance(ids, list | tuple) or not ids \
            or not all(isinstance(i, str) for i in ids):
        raise CorruptionError("optimize.cache.insert: value must be a list of notification"
                              f" ids, got {ids!r}")
    for nid in ids:
        opt.ram.cache.record(nid)
    opt.reset_joint()
    return []


@register("optimize.env.clear", "optimize", _view_optimize)
def _env_clear(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Forget the environment: every summary, processing cost and learned link cost."""
    opt.ram.env.clear()
    opt.ram.links.clear()
    opt.reset_joint()
    return []


@register("optimize.env.interest", "optimize", _view_optimize)
def _env_interest(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Set I_{me,X} (args.broker = X, a broker of the environment) to `value`."""
    x = fault.args.get("broker")
    known = opt.ram.env.get(x)
    if known is None:
        raise CorruptionError(f"optimize.env.interest: args.broker {x!r} is not in this broker's"
                              f" environment (it knows: {', '.join(sorted(opt.ram.env))})")
    value = fault.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorruptionError(f"optimize.env.interest: value must be a count >= 0, got {value!r}")
    known.interest = value
    return []


@register("optimize.link", "optimize", _view_optimize)
def _learned_link(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Set the cost of the remote link args.a-args.b as this broker learned it (a broadcast's
    path) to `value`, as if learned now."""
    a, b = fault.args.get("a"), fault.args.get("b")
    if not isinstance(a, str) or not isinstance(b, str) or a == b:
        raise CorruptionError("optimize.link: args.a and args.b must be two broker ids,"
                              f" got {a!r}, {b!r}")
    opt.ram.links[(a, b) if a < b else (b, a)] = (_cost_value(fault.value, "optimize.link"),
                                                   now)
    opt.reset_joint()
    return []


@register("optimize.measured", "optimize", _view_optimize)
def _measured(opt: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Set the measured cost of the link to args.peer to `value` (null: forget the
    measurement, back to the scenario's cost) until the next measurement."""
    peer = fault.args.get("peer")
    if not isinstance(peer, str) or peer == opt.me:
        raise CorruptionError(f"optimize.measured: args.peer must be another broker's id,"
                              f" got {peer!r}")
    if fault.value is None:
        opt.ram.measured.pop(peer, None)
    else:
        opt.ram.measured[peer] = _cost_value(fault.value, "optimize.measured")
    return []


# ---- the 3-colour scheme: colours, pointers per colour, flags, requests, held messages ---------


def _view_colours(overlay: Any, fault: Corrupt) -> Any:
    return overlay.snapshot()["colours"]


def _colour_arg(overlay: Any, fault: Corrupt) -> int:
    c = colour(fault.args.get("colour"))
    if c is None:
        raise CorruptionError(f"{fault.target}: args.colour must be 0, 1 or 2, "
                              f"got {fault.args.get('colour')!r}")
    return c


def _colour_variable(name: str) -> Handler:
    def handler(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
        value = fault.value
        if isinstance(value, bool) or value not in (0, 1, 2):
            raise CorruptionError(f"colour.{name}: value must be 0, 1 or 2, got {value!r}")
        setattr(overlay.ram, name, value)
        return []

    return handler


for _name in ("c_old", "c_cur", "c_new"):
    register(f"colour.{_name}", "overlay", _view_colours, "coloured")(_colour_variable(_name))


@register("colour.parent", "overlay", _view_colours, "coloured")
def _colour_parent(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"colour.parent: value must be a broker id or null, "
                              f"got {fault.value!r}")
    tree = overlay.tree(c)
    tree.parent = fault.value  # one field: a child pointer to the same broker stays
    tree.sync()
    return []


@register("colour.children", "overlay", _view_colours, "coloured")
def _colour_children(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    tree = overlay.tree(c)
    tree.children = set(_ids(fault.value, "colour.children"))
    tree.sync()
    return []


@register("colour.child.add", "overlay", _view_colours, "coloured")
def _colour_child_add(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if not isinstance(fault.value, str):
        raise CorruptionError(f"colour.child.add: value must be a broker id, got {fault.value!r}")
    tree = overlay.tree(c)
    tree.children.add(fault.value)  # even the parent or the broker itself: any value
    tree.sync()
    return []


@register("colour.child.remove", "overlay", _view_colours, "coloured")
def _colour_child_remove(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    c = _colour_arg(overlay, fault)
    if not overlay.remove_child(c, fault.value):
        raise CorruptionError(f"colour.child.remove: {fault.value!r} is not a child in "
                              f"colour {c}")
    return []


@register("colour.joining", "overlay", _view_colours, "coloured")
def _colour_joining(overlay: Any, now: float, fault: Corrupt) -> list[Effect]:
    overlay.ram.joining = _flag(fault.value, "colour.joining")
    return []


def _view_recolor(recolor: Any, fault: Corrupt) -> Any:
    return recolor.snapshot()


@register("recolor.flags", "recolor", _view_recolor)
def _recolor_flags(recolor: Any, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.flags = set(_ids(fault.value, "recolor.flags"))
    return []


@register("recolor.pending.clear", "recolor", _view_recolor)
def _recolor_pending(recolor: Any, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.pending.clear()
    return []


@register("recolor.leaving", "recolor", _view_recolor)
def _recolor_leaving(recolor: Any, now: float, fault: Corrupt) -> list[Effect]:
    recolor.ram.leaving = _flag(fault.value, "recolor.leaving")
    return []


@register("recolor.walk", "recolor", _view_recolor)
def _recolor_walk(recolor: Any, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value is not None and not isinstance(fault.value, str):
        raise CorruptionError(f"recolor.walk: value must be a broker id or null, "
                              f"got {fault.value!r}")
    recolor.ram.walk = fault.value
    return []


def _view_held(routing: Any, fault: Corrupt) -> Any:
    cram = getattr(routing, "cram", None)
    if cram is None:
        raise CorruptionError(f"{fault.target}: this broker's routing holds nothing back "
                              "(not on the coloured overlay)")
    return routing.snapshot()["colour_routing"]


@register("colour.queue.clear", "routing", _view_held)
def _colour_queue_clear(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Lose what waits: args.queue is early (E4), held (FIFO) or pubs (CAUSAL); all without."""
    which = fault.args.get("queue")
    names = ("early", "held", "pubs") if which is None else (which,)
    for name in names:
        if name not in ("early", "held", "pubs"):
            raise CorruptionError(f"colour.queue.clear: args.queue must be early, held or pubs, "
                                  f"got {name!r}")
        getattr(routing.cram, name).clear()
    return []


@register("colour.holding", "routing", _view_held)
def _colour_holding(routing: Any, now: float, fault: Corrupt) -> list[Effect]:
    routing.cram.holding = _flag(fault.value, "colour.holding")
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


def targets() -> tuple[str, ...]:
    """Every known target, in registration order (layer by layer)."""
    return tuple(_REGISTRY)


# ---- selection and validation ---------------------------------------------------------------


def _table(routing: Any, fault: Corrupt) -> RoutingTable:
    index = fault.args.get("table", 0)
    tables = _tables_of(routing, fault)
    if not isinstance(index, int) or not 0 <= index < len(tables):
        raise CorruptionError(f"table: no table {index!r} (this broker has {len(tables)})")
    return tables[index]


def _select(routing: Any, fault: Corrupt) -> tuple[RoutingTable, Entry]:
    """The entry a fault names, by `sub_id` or by `index` in table order."""
    table = _table(routing, fault)
    if "sub_id" in fault.args:
        found = table.with_id(str(fault.args["sub_id"]))
        if not found:
            raise CorruptionError(f"{fault.target}: no entry with sub_id {fault.args['sub_id']!r}")
        return table, found[0]
    index = fault.args.get("index", 0)
    entries = list(table)
    if not isinstance(index, int) or not 0 <= index < len(entries):
        raise CorruptionError(
            f"{fault.target}: no entry at index {index!r} (table has {len(entries)} entries)"
        )
    return table, entries[index]


def _filter(value: object, field: str) -> Filter:
    if isinstance(value, Filter):
        return value
    if isinstance(value, str):
        try:
            return Filter.parse(value)
        except FilterSyntaxError as e:
            raise CorruptionError(f"{field}: {e}") from None
    raise CorruptionError(f"{field}: expected a filter, got {value!r}")


def _number(value: object, field: str) -> float:
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


# ---- layer skip_ring: the topic overlay of mode skip_ring (seed 003, spec seed23 §C.1-10) --------
# Each takes args.topic (default: the first topic the broker is a member of, or supervises) and
# args.seed (the values are drawn from it: a run stays a function of its seed). References are
# to brokers this one knows of (the model assumes no reference to a node that never existed).


def _view_skip_ring(node: Any, fault: Corrupt) -> Any:
    return node.snapshot()


def _sr_rng(fault: Corrupt) -> random.Random:
    seed = fault.args.get("seed", 0)
    if not isinstance(seed, int):
        raise CorruptionError(f"{fault.target}: args.seed must be an integer, got {seed!r}")
    return random.Random(seed)


def _sr_member(node: Any, fault: Corrupt) -> Any:
    topic = fault.args.get("topic")
    members = node.layer.members
    if topic is None:
        active = sorted(t for t, m in members.items() if m.active)
        if not active:
            raise CorruptionError(f"{fault.target}: this broker is a member of no topic")
        topic = active[0]
    m = members.get(topic)
    if m is None or not m.active:
        raise CorruptionError(f"{fault.target}: this broker is no member of topic {topic!r}")
    return m


def _sr_supervisor(node: Any, fault: Corrupt) -> Any:
    topic = fault.args.get("topic")
    supervised = node.layer.supervised
    if topic is None:
        if not supervised:
            raise CorruptionError(f"{fault.target}: this broker supervises no topic yet")
        topic = sorted(supervised)[0]
    sup = supervised.get(topic)
    if sup is None:
        raise CorruptionError(f"{fault.target}: this broker does not supervise {topic!r}")
    return sup


@register("skipring.label", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_label(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """A member's own label: value an index (r(value)), null (⊥), or absent: a random one."""
    from weeble.core.overlay.skipring.corruption import random_label
    from weeble.core.overlay.skipring.labels import check_label

    m = _sr_member(node, fault)
    value = fault.value
    if value is None and "value" not in fault.args:
        value = random_label(_sr_rng(fault), len(node.known()))
        while value == m.label:
            value += 1
    try:
        m.label = None if value is None else check_label(value)
    except ValueError as e:
        raise CorruptionError(f"skipring.label: {e}") from None
    return []


@register("skipring.edges", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_edges(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """A member's ring edges and shortcuts: random nodes with random stored labels."""
    from weeble.core.overlay.skipring.corruption import corrupt_member

    m = _sr_member(node, fault)
    label = m.label
    corrupt_member(m, _sr_rng(fault), node.known())
    m.label = label
    return []


@register("skipring.member", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_member_all(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Everything a member holds of the overlay: label, edges, shortcuts, confirmations."""
    from weeble.core.overlay.skipring.corruption import corrupt_member

    corrupt_member(_sr_member(node, fault), _sr_rng(fault), node.known())
    return []


@register("skipring.database", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_database(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """The supervisor's database with every corruption condition of §3.1 (tuples without a
    subscriber, duplicates, gaps, labels out of range) and a wrong failure-detector view."""
    from weeble.core.overlay.skipring.corruption import corrupt_database

    sup = _sr_supervisor(node, fault)
    known = sorted(set(node.known()) | set(sup.members()))
    corrupt_database(sup, _sr_rng(fault), known)
    return []


@register("skipring.dead", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_dead(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """The supervisor's failure-detector view: value the brokers it holds crashed (live ones
    too: a wrong suspicion), which it removes from its database at once."""
    sup = _sr_supervisor(node, fault)
    dead = _ids(fault.value, "skipring.dead")
    return node.deliver_effects(now, sup.failure_report(dead))


@register("skipring.junk", "skip_ring", _view_skip_ring, "skip_ring")
def _sr_junk(node: Any, now: float, fault: Corrupt) -> list[Effect]:
    """Junk messages in the channels: args.count arbitrary skip-ring messages of every kind
    (some with labels outside the label space) sent from this broker to brokers it knows."""
    from weeble.core.overlay.skipring.corruption import junk_messages

    count = fault.args.get("count", 10)
    if not isinstance(count, int) or count < 1:
        raise CorruptionError(f"skipring.junk: args.count must be an integer >= 1, "
                              f"got {count!r}")
    rng = _sr_rng(fault)
    topics = sorted(node.layer.members) or sorted(node.layer.supervised)
    topic = fault.args.get("topic") or (topics[0] if topics else "t0")
    known = node.known()
    out: list[Effect] = []
    for dst, msg in junk_messages(rng, topic=topic, nodes=known,
                                  supervisor=node.layer.supervisor_of(topic), count=count):
        out.append(Send(dst, msg))
    node.junk_sent += count
    return node.deliver_effects(now, out)


# ---- random faults (simulator, chaos module, property tests) --------------------------------


def random_fault(broker: Any, rng: random.Random, filters: list[Filter]) -> Corrupt:
    """One random, type-correct state fault on the routing tables of `broker`; `filters` seeds
    the filter values. With advertisements, half the faults hit the advertisement tables (F16)."""
    tables = broker.ram.tables
    adverts = broker.ram.routing.adverts
    prefix = ""
    if adverts is not None and rng.random() < 0.5:
        prefix, tables = "adv.", adverts.tables
    table_count = len(tables)
    size = [len(t) for t in tables]
    dests = [*sorted(broker.ram.overlay.neighbors), "ghost",
             *(f"c{rng.randrange(50)}" for _ in range(2))]
    table = rng.randrange(table_count)
    kinds = ["entry.insert", "table.clear"] if prefix else ["entry.insert", "clock", "table.clear"]
    if broker.ram.recolor is not None:
        kinds.remove("clock")  # the coloured overlay has no leasing clock
    if size[table]:
        kinds += ["entry.filter", "entry.sub_id", "entry.dest", "entry.flag", "entry.delete"]
    if broker.rom.wrapper and not prefix:
        kinds.append("rebuild_bit")
    if broker.rom.algorithm.merging and not prefix:
        kinds.append("merger.insert")
    kind = rng.choice(kinds)
    args: dict[str, Any] = {"table": table}
    if kind.startswith("entry.") and kind != "entry.insert":
        args["index"] = rng.randrange(size[table])
    pick = rng.choice(filters) if filters else Filter.everything()
    value: Any = None
    if kind == "clock":
        value = rng.uniform(0, broker.rom.params.pi * 0.999)
    elif kind == "entry.filter":
        value = pick
    elif kind == "entry.sub_id":
        value = rng.choice(["bogus", f"x{rng.randrange(100)}"])
    elif kind == "entry.dest":
        value = rng.choice(dests)
    elif kind == "entry.flag":
        value = rng.randrange(2)
    elif kind == "entry.insert":
        value = {"sub_id": f"bogus{rng.randrange(1000)}", "filter": pick,
                 "dest": rng.choice(dests), "flag": rng.randrange(2)}
    elif kind == "rebuild_bit":
        value = rng.randrange(2)
    elif kind == "merger.insert":
        value = {"filter": Filter.everything(), "dest": rng.choice(dests),
                 "constituents": list(filters) or [Filter.everything()], "flag": rng.randrange(2)}
    elif kind == "table.clear":
        args = {}
    if prefix:  # only entry.* and table.clear were drawn for the advertisement tables
        kind = prefix + kind
    return Corrupt(kind, value, args)


def random_layer_fault(broker: Any, rng: random.Random, brokers: list[str]) -> Corrupt:
    """One random, type-correct fault on the overlay or exchange RAM of `broker`; `brokers`
    are the ids to draw neighbours and pointers from (any id is type-correct). On the coloured
    overlay: `random_colour_fault`."""
    if getattr(broker.ram, "recolor", None) is not None:
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


TARGETS = targets()
