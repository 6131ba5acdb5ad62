"""Pydantic validation errors as the problems a user can fix: "field.path: problem".

One describer for every YAML file of the model (scenarios, chaos experiments):
- an unknown field is named, with the closest valid one and the valid list
  (`faults[2]: unknown field 'fualt' (did you mean 'field'?; valid fields: ...)`);
- unknown fields come first: a typo of a required field also makes that field "missing", which
  says less about what to fix;
- the tags pydantic inserts for a discriminated union are left out (`topology.kary.m` is
  `topology.m`, `faults.0.corrupt.field` is `faults[0].field`);
- a model check that names its field first ("faults[1].name: ...") keeps that path.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

_FIELD_FIRST = re.compile(r"^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+)*): (.*)$", re.DOTALL)


def problems(error: ValidationError, root: type[BaseModel]) -> list[tuple[str, str]]:
    """Every problem of `error` as (path, problem), unknown fields first, without repeats."""
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    out: list[tuple[str, str]] = []
    for err in errors:
        item = describe(err, root)
        if item not in out:
            out.append(item)
    return out


def describe(err: Any, root: type[BaseModel]) -> tuple[str, str]:
    """One pydantic error (an item of `ValidationError.errors()`) as (path, problem)."""
    loc: tuple[str | int, ...] = tuple(err["loc"])
    path, owner = _resolve(loc, root)
    kind, msg = err["type"], str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        name = str(loc[-1])
        where = path.rsplit(".", 1)[0] if "." in path else "(top level)"
        valid = list(owner.model_fields) if owner is not None else []
        close = difflib.get_close_matches(name, valid, n=1)
        hints = [f"did you mean {close[0]!r}?"] if close else []
        if valid:
            hints.append(f"valid fields: {', '.join(valid)}")
        return where, f"unknown field {name!r}" + (f" ({'; '.join(hints)})" if hints else "")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        members = _members_at(loc, root)
        tags = [t for t in (_tag(m) for m in members) if t is not None]
        name = next((d for d in map(_discriminator, members) if d is not None), "kind")
        given = err.get("ctx", {}).get("tag")
        what = f"unknown {name if name != 'op' else 'operation'} {given!r}" \
            if kind == "union_tag_invalid" else "required field missing"
        return f"{path}.{name}", f"{what} ({name}s: {', '.join(tags)})" if tags else what
    if kind == "missing":
        return path, "required field missing"
    m = _FIELD_FIRST.match(msg)
    if m is not None and kind == "value_error":  # a check of a whole model naming its field
        named = m.group(1)
        if named.startswith("faults") or path == "(top level)":
            return named, m.group(2)
        return f"{path}.{named}", m.group(2)
    return path, msg


def _resolve(loc: tuple[str | int, ...],
             root: type[BaseModel]) -> tuple[str, type[BaseModel] | None]:
    """Readable path for a pydantic location, without the union tags pydantic inserts, plus
    the model owning the last component."""
    parts: list[str] = []
    current: Any = root
    owner: type[BaseModel] | None = None
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            parts.append(f"[{part}]")
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        members = _union_members(current)
        if members is not None:  # pydantic put the discriminator's value here: skip it
            current = next((m for m in members if _tag(m) == part), None)
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            owner = current
            field = current.model_fields.get(part)
            current = field.annotation if field else None
        else:
            owner, current = None, None
        parts.append(f".{part}" if parts else part)
    return "".join(parts).lstrip(".") or "(top level)", owner


def _members_at(loc: tuple[str | int, ...], root: type[BaseModel]) -> tuple[Any, ...]:
    """The members of the discriminated union at `loc` (for the list of valid kinds)."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            current = field.annotation if field else None
        else:
            return ()
    return _union_members(_unwrap(current)) or ()


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and `X | None` down to the interesting type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _union_members(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = typing.get_args(tp)
        if all(_tag(m) is not None for m in members):
            return members
    return None


# The discriminator fields of the model's unions: `kind` (topologies, faults), `op`
# (a scenario's reconfiguration operations).
_DISCRIMINATORS = ("kind", "op")


def _discriminator(model: Any) -> str | None:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return next((d for d in _DISCRIMINATORS if d in model.model_fields), None)
    return None


def _tag(model: Any) -> str | None:
    name = _discriminator(model)
    if name is not None:
        field = model.model_fields[name]
        args = typing.get_args(field.annotation)
        if args:
            return str(args[0])
        return field.default if isinstance(field.default, str) else None
    return None
