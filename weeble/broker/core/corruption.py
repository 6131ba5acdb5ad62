"""Transient state faults: set any RAM field of a broker to any type-correct value.

The fault vocabulary of spec §6.3 that lives in a broker's state:
F1 entry.filter, F2 entry.sub_id, F3 entry.dest, F4 entry.flag, F5 entry.insert / entry.delete,
F6 table.clear, F10 clock, F13 entry.insert of an all-covering filter (plus table.clear
elsewhere), F14 merger.insert, F15 rebuild_bit and any of the above on T^0/T^1 (`table` arg).
ROM is not reachable from here, by construction.

Each fault answers with a `fault` trace record holding the state before and after: the evidence
that it took effect.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weeble.broker.core.events import Corrupt, Effect, SetTimer, Trace
from weeble.broker.core.filters import Filter, FilterSyntaxError
from weeble.broker.core.merging import Merger
from weeble.broker.core.table import Entry, RoutingTable

if TYPE_CHECKING:
    from weeble.broker.core.broker import Broker


class CorruptionError(ValueError):
    """A fault that names an unknown target, entry or field, or a value of the wrong type."""


TARGETS = (
    "clock", "entry.filter", "entry.sub_id", "entry.dest", "entry.flag", "entry.insert",
    "entry.delete", "table.clear", "rebuild_bit", "merger.insert", "merger.clear",
)


def apply(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    handler = _HANDLERS.get(fault.target)
    if handler is None:
        raise CorruptionError(
            f"unknown corruption target {fault.target!r}; known: {', '.join(TARGETS)}"
        )
    before = _view(broker, fault)
    effects = handler(broker, now, fault)
    evidence = {"field": fault.target, "args": _jsonable(fault.args),
                "value": _jsonable(fault.value), "before": before, "after": _view(broker, fault)}
    effects.append(Trace("fault", evidence))
    return effects


# ---- handlers -------------------------------------------------------------------------------


def _clock(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    pi = broker.rom.params.pi
    value = _number(fault.value, "clock")
    if not 0 <= value < pi:
        raise CorruptionError(f"clock: value must be in [0, pi={pi:g}), got {value:g}")
    broker.ram.next_timer = now + (pi - value)
    timer = "switch" if broker.rom.wrapper else "overrun"
    if broker.rom.wrapper and not broker.rom.is_root:
        return []  # only the root has a clock under the wrapper
    return [SetTimer(timer, broker.ram.next_timer)]


def _entry_field(field: str) -> Callable[[Broker, float, Corrupt], list[Effect]]:
    def handler(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
        table, entry = _select(broker, fault)
        value: Any = fault.value
        if field == "filter":
            value = _filter(value, "entry.filter")
        elif field == "flag":
            value = 1 - entry.flag if value is None else value
            if value not in (0, 1) or isinstance(value, bool):
                raise CorruptionError(f"entry.flag: value must be 0 or 1, got {fault.value!r}")
        elif not isinstance(value, str):
            raise CorruptionError(f"entry.{field}: value must be a string, got {value!r}")
        table.discard(entry)
        replacement = Entry(entry.sub_id, entry.filter, entry.dest, entry.flag)
        setattr(replacement, field, value)
        if field == "filter":
            replacement = Entry(entry.sub_id, value, entry.dest, entry.flag)
        table.add(replacement)
        return []

    return handler


def _insert(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    spec = fault.value
    if not isinstance(spec, dict):
        raise CorruptionError("entry.insert: value must be a mapping {sub_id, filter, dest, flag}")
    unknown = set(spec) - {"sub_id", "filter", "dest", "flag"}
    if unknown:
        raise CorruptionError(f"entry.insert: unknown field(s) {sorted(unknown)}")
    flag = spec.get("flag", 1)
    if flag not in (0, 1):
        raise CorruptionError(f"entry.insert: flag must be 0 or 1, got {flag!r}")
    entry = Entry(
        str(spec.get("sub_id", "injected")),
        _filter(spec.get("filter", "true"), "entry.insert.filter"),
        str(spec.get("dest", "ghost")),
        int(flag),
    )
    _table(broker, fault).add(entry)  # no SC-1 removal: a fault may duplicate ids
    return []


def _delete(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    table, entry = _select(broker, fault)
    table.discard(entry)
    return []


def _clear(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    which = fault.args.get("table")
    tables = broker.ram.tables if which is None else [_table(broker, fault)]
    for table in tables:
        table.clear()
    if which is None:
        for seen in broker.ram.seen:
            seen.clear()
    return []


def _rebuild_bit(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    if fault.value not in (0, 1) or isinstance(fault.value, bool):
        raise CorruptionError(f"rebuild_bit: value must be 0 or 1, got {fault.value!r}")
    broker.ram.rebuild_bit = int(fault.value)
    return []


def _merger_insert(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    spec = fault.value
    if not isinstance(spec, dict) or "constituents" not in spec:
        raise CorruptionError("merger.insert: value must be a mapping with 'constituents'")
    constituents = frozenset(_filter(c, "merger.insert.constituents") for c in spec["constituents"])
    f = _filter(spec.get("filter", "true"), "merger.insert.filter")
    mid = str(spec.get("merger_id", f"injected-merger:{f}"))
    dest = str(spec.get("dest", "ghost"))
    flag = int(spec.get("flag", 1))
    _table(broker, fault).mergers[mid] = Merger(mid, f, dest, constituents, flag)
    return []


def _merger_clear(broker: Broker, now: float, fault: Corrupt) -> list[Effect]:
    for table in broker.ram.tables:
        table.mergers.clear()
    return []


_HANDLERS: dict[str, Callable[[Broker, float, Corrupt], list[Effect]]] = {
    "clock": _clock,
    "entry.filter": _entry_field("filter"),
    "entry.sub_id": _entry_field("sub_id"),
    "entry.dest": _entry_field("dest"),
    "entry.flag": _entry_field("flag"),
    "entry.insert": _insert,
    "entry.delete": _delete,
    "table.clear": _clear,
    "rebuild_bit": _rebuild_bit,
    "merger.insert": _merger_insert,
    "merger.clear": _merger_clear,
}

# ---- selection and validation ---------------------------------------------------------------


def _table(broker: Broker, fault: Corrupt) -> RoutingTable:
    index = fault.args.get("table", 0)
    tables = broker.ram.tables
    if not isinstance(index, int) or not 0 <= index < len(tables):
        raise CorruptionError(f"table: no table {index!r} (this broker has {len(tables)})")
    return tables[index]


def _select(broker: Broker, fault: Corrupt) -> tuple[RoutingTable, Entry]:
    """The entry a fault names, by `sub_id` or by `index` in table order."""
    table = _table(broker, fault)
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


def _view(broker: Broker, fault: Corrupt) -> Any:
    """The part of RAM a fault touches, before or after it."""
    if fault.target == "clock":
        return {"next_timer": broker.ram.next_timer}
    if fault.target == "rebuild_bit":
        return {"rebuild_bit": broker.ram.rebuild_bit}
    if fault.target.startswith("merger."):
        return sorted((m.as_dict() for t in broker.ram.tables for m in t.mergers.values()),
                      key=lambda m: str(m["merger_id"]))
    return {"entries": sum(len(t) for t in broker.ram.tables),
            "sample": [e.as_dict() for t in broker.ram.tables for e in list(t)[:20]]}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Filter):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


# ---- random faults (simulator, chaos module, property tests) --------------------------------


def random_fault(broker: Broker, rng: random.Random, filters: list[Filter]) -> Corrupt:
    """One random, type-correct state fault on `broker`; `filters` seeds the filter values."""
    table_count = len(broker.ram.tables)
    size = [len(t) for t in broker.ram.tables]
    dests = [*sorted(broker.rom.neighbors), "ghost", *(f"c{rng.randrange(50)}" for _ in range(2))]
    table = rng.randrange(table_count)
    kinds = ["entry.insert", "clock", "table.clear"]
    if size[table]:
        kinds += ["entry.filter", "entry.sub_id", "entry.dest", "entry.flag", "entry.delete"]
    if broker.rom.wrapper:
        kinds.append("rebuild_bit")
    if broker.rom.algorithm.merging:
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
    return Corrupt(kind, value, args)
