"""Layer routing's fault targets (spec ch3 §6.3): F1 entry.filter, F2 entry.sub_id, F3
entry.dest, F4 entry.flag, F5 entry.insert / entry.delete, F6 table.clear, F10 clock, F13
entry.insert of an all-covering filter (plus table.clear elsewhere), F14 merger.insert (and
merger.loaned.*, the loans of RoutingTable.loaned: routing RAM like the mergers), F15
rebuild_bit and any of the above on T^0/T^1 (`table` arg), F16 the same on the advertisement
tables (adv.entry.*, adv.table.clear); and `random_fault`, a random one of them."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, Handler, filter_of, number
from weeble.core.events import Corrupt, Effect, SetTimer
from weeble.core.filters import Filter
from weeble.core.routing.merging import loans
from weeble.core.table import Entry, Merger, RoutingTable

if TYPE_CHECKING:
    from weeble.core.routing.layer import Routing

FAULTS: Faults[Routing] = Faults("routing")


def _tables_of(routing: Routing, fault: Corrupt) -> list[RoutingTable]:
    """The notification tables, or the advertisement tables for an adv.* target."""
    if fault.target.startswith("adv."):
        adverts = routing.ram.adverts
        if adverts is None:
            raise CorruptionError(f"{fault.target}: this broker keeps no advertisement tables")
        return adverts.tables
    return routing.ram.subs.tables


def _view_clock(routing: Routing, fault: Corrupt) -> Any:
    return {"next_timer": routing.ram.next_timer}


def _view_bit(routing: Routing, fault: Corrupt) -> Any:
    return {"rebuild_bit": routing.ram.rebuild_bit}


def _view_mergers(routing: Routing, fault: Corrupt) -> Any:
    return sorted((m.as_dict() for t in routing.ram.subs.tables for m in t.mergers.values()),
                  key=lambda m: str(m["merger_id"]))


def _view_loaned(routing: Routing, fault: Corrupt) -> Any:
    return [loans(t) for t in routing.ram.subs.tables]


def _view_entries(routing: Routing, fault: Corrupt) -> Any:
    tables = _tables_of(routing, fault)
    return {"entries": sum(len(t) for t in tables),
            "sample": [e.as_dict() for t in tables for e in list(t)[:20]]}


@FAULTS.target("clock", _view_clock)
def _clock(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    rom = routing.rom
    pi = rom.params.pi
    value = number(fault.value, "clock")
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
    def handler(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
        table, entry = _select(routing, fault)
        value: Any = fault.value
        name = fault.target
        if field == "filter":
            value = filter_of(value, name)
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
        FAULTS.target(f"{_prefix}entry.{_field}", _view_entries)(_entry_field(_field))


def _insert(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
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
        filter_of(spec.get("filter", "true"), f"{name}.filter"),
        str(spec.get("dest", "ghost")),
        int(flag),
    )
    _table(routing, fault).add(entry)  # no SC-1 removal: a fault may duplicate ids
    return []


def _delete(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    table, entry = _select(routing, fault)
    table.discard(entry)
    return []


def _clear(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
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
    FAULTS.target(f"{_prefix}entry.insert", _view_entries)(_insert)
    FAULTS.target(f"{_prefix}entry.delete", _view_entries)(_delete)
    FAULTS.target(f"{_prefix}table.clear", _view_entries)(_clear)


@FAULTS.target("rebuild_bit", _view_bit)
def _rebuild_bit(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value not in (0, 1) or isinstance(fault.value, bool):
        raise CorruptionError(f"rebuild_bit: value must be 0 or 1, got {fault.value!r}")
    routing.ram.rebuild_bit = int(fault.value)
    return []


@FAULTS.target("merger.insert", _view_mergers)
def _merger_insert(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    spec = fault.value
    if not isinstance(spec, dict) or "constituents" not in spec:
        raise CorruptionError("merger.insert: value must be a mapping with 'constituents'")
    constituents = frozenset(filter_of(c, "merger.insert.constituents")
                             for c in spec["constituents"])
    f = filter_of(spec.get("filter", "true"), "merger.insert.filter")
    mid = str(spec.get("merger_id", f"injected-merger:{f}"))
    dest = str(spec.get("dest", "ghost"))
    flag = int(spec.get("flag", 1))
    _table(routing, fault).mergers[mid] = Merger(mid, f, dest, constituents, flag)
    return []


@FAULTS.target("merger.clear", _view_mergers)
def _merger_clear(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    for table in routing.ram.subs.tables:
        table.mergers.clear()
    return []


@FAULTS.target("merger.loaned.insert", _view_loaned)
def _loaned_insert(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    """Mark (dest, filter) as re-forwarded by a dissolved merger (RoutingTable.loaned): if its
    entry then expires unrefreshed, what was forwarded on its account is unsubscribed."""
    spec = fault.value
    name = fault.target
    if not isinstance(spec, dict) or set(spec) - {"dest", "filter"}:
        raise CorruptionError(f"{name}: value must be a mapping {{dest, filter}}, got {spec!r}")
    f = filter_of(spec.get("filter", "true"), f"{name}.filter")
    _table(routing, fault).loaned[str(spec.get("dest", "ghost")), f] = None
    return []


@FAULTS.target("merger.loaned.clear", _view_loaned)
def _loaned_clear(routing: Routing, now: float, fault: Corrupt) -> list[Effect]:
    for table in routing.ram.subs.tables:
        table.loaned.clear()
    return []


def _table(routing: Routing, fault: Corrupt) -> RoutingTable:
    index = fault.args.get("table", 0)
    tables = _tables_of(routing, fault)
    if not isinstance(index, int) or not 0 <= index < len(tables):
        raise CorruptionError(f"table: no table {index!r} (this broker has {len(tables)})")
    return tables[index]


def _select(routing: Routing, fault: Corrupt) -> tuple[RoutingTable, Entry]:
    """The entry a fault names, by `sub_id` (narrowed by `filter` and `dest` if given: ids may
    repeat, with other destinations or filters) or by `index` in table order."""
    table = _table(routing, fault)
    if "sub_id" in fault.args:
        found = table.with_id(str(fault.args["sub_id"]))
        if "filter" in fault.args:
            f = filter_of(fault.args["filter"], f"{fault.target}.args.filter")
            found = [e for e in found if e.filter == f]
        if "dest" in fault.args:
            found = [e for e in found if e.dest == str(fault.args["dest"])]
        if not found:
            named = ", ".join(f"{k} {fault.args[k]!r}" for k in ("sub_id", "filter", "dest")
                              if k in fault.args)
            raise CorruptionError(f"{fault.target}: no entry with {named}")
        return table, found[0]
    index = fault.args.get("index", 0)
    entries = list(table)
    if not isinstance(index, int) or not 0 <= index < len(entries):
        raise CorruptionError(
            f"{fault.target}: no entry at index {index!r} (table has {len(entries)} entries)"
        )
    return table, entries[index]


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
