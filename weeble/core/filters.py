"""Content-based filters: parsing, a canonical form, matching, covering and perfect merging.

A filter is a conjunction of predicates over the attributes of a notification (a mapping
from attribute name to a ``str | int | float | bool``). Every filter is normalized when it is
built to ONE canonical constraint per attribute, which turns identity, covering and merging
into exact set operations instead of syntactic guesses:

* number   -> an interval of the extended reals minus finitely many interior points
              (unbounded sides are stored as -inf/+inf, inclusive, so ±inf values match them);
* string   -> a half-open lexicographic interval [lo, hi) minus finitely many interior points
              (``prefix p`` is [p, p with its last character incremented));
* bool     -> the set of allowed values;
* exists   -> present, with a value of any type.

Two filters with the same set of matching notifications have the same canonical form, so
``==``/``hash`` decide identity and ``covers`` is exact (not merely sound).

Semantics
---------
* int and float are one "number" type and compare exactly (``1 == 1.0``); bool is its own type,
  so ``True`` never matches ``x == 1``.
* A predicate is typed by its constant: ``x != 2`` means "x is a number other than 2", so a
  string, a bool or a missing ``x`` fails it. A missing attribute fails every predicate.
* Strings compare by Unicode code point, character by character (Python's ``str`` order, not
  UTF-16 code units, not a locale's collation); a proper prefix is less than the longer string,
  and the empty string is less than every other. ``prefix p`` holds for every string that
  starts with p (``prefix ""`` for every string).
* Attribute values and constants are finite: a notification whose attribute is ±inf or NaN is
  refused at every entry (the client library, ``weeble publish``, scenario files, the admin
  API and the brokers' wire), with an error naming the attribute. JSON, the trace's encoding,
  has no form for them, so a trace could not say what was published. (A value that reached a
  broker anyway, by a fault, is matched as follows: NaN matches no numeric predicate, only
  ``exists``; ±inf are ordinary numbers.)

Text form
---------
::

    filter    := term ('&&' term)*
    term      := 'true' | 'false' | 'exists' NAME
               | NAME ('==' | '!=' | '<' | '<=' | '>' | '>=') value
               | NAME 'prefix' STRING
               | NAME 'range' '[' value ',' value ']'        (inclusive, lo <= hi)
               | NAME 'is' ('number' | 'string' | 'bool')    (type test)
    value     := NUMBER | STRING | 'true' | 'false'
    NAME      := [A-Za-z_][A-Za-z0-9_.]*
    NUMBER    := -?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)?
    STRING    := '"' ... '"'   with escapes \\" \\\\ and \\uXXXX

The ``is`` type tests go beyond the original operator list: merging can produce "any number"
(``x < 3`` ∪ ``x >= 3``) or "any bool", which must print as text that parses back.
``str(f)`` is canonical: attributes sorted by name, each rendered from its canonical constraint.

Index keys
----------
Routing tables index entries by one equality constraint. Since ``True == 1`` and
``hash(True) == hash(1)``, a plain ``(attribute, value)`` key would let ``flag == true`` and
``flag == 1`` share a bucket. So numbers and strings are keyed as ``(attribute, value)`` with
``normalize_value`` applied (1.0 -> 1), and bools as ``(attribute, ("bool", value))``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

__all__ = [
    "Filter",
    "FilterLimitError",
    "FilterSyntaxError",
    "IndexKey",
    "Value",
    "attribute_error",
    "index_value",
    "merge",
    "normalize_value",
    "notification_index_keys",
]

Value = str | int | float | bool
Number = int | float
# (attribute, index value): see the module docstring. Typed as a tuple of any length, not as
# the pair it is: compiled (scripts/compile.py), a fixed-length tuple type is unboxed into a C
# struct, and every dict probe with it then builds and hashes a new tuple and compares it item
# by item with the stored one; as a tuple object, a key the tables hold (`table.KeyCache.canonical`)
# is found by identity.
IndexKey = tuple[str | Value | tuple[str, bool], ...]
# A compiled constraint: takes whatever a notification carries (any type; a value of the wrong
# type fails the check, it never raises)
Check = Callable[[object], bool]

_INF: Final = math.inf
_MISSING: Final = object()  # "attribute absent"; None could be a (bogus) attribute value
_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_MAX_CHAR: Final = chr(0x10FFFF)


class FilterSyntaxError(ValueError):
    """Malformed or ill-typed filter text. ``position`` is a 0-based offset into ``text``."""

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(message)
        self.text = text
        self.position = position

    def __reduce__(self) -> tuple[type[FilterSyntaxError], tuple[str, str, int]]:
        # BaseException pickles only .args, which would drop text and position.
        return (type(self), (str(self), self.text, self.position))


class FilterLimitError(FilterSyntaxError):
    """Well-formed so far, but over a size limit the caller set (``limit``)."""

    def __init__(self, message: str, text: str, position: int, *, limit: int) -> None:
        super().__init__(message, text, position)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (_limit_error, (str(self), self.text, self.position, self.limit))


def _limit_error(message: str, text: str, position: int, limit: int) -> FilterLimitError:
    return FilterLimitError(message, text, position, limit=limit)


# ---- values -----------------------------------------------------------------------------------


def normalize_value(v: Value) -> Value:
    """The canonical representative of a value: integral floats become ints (1.0 -> 1,
    -0.0 -> 0); bools, strings and other numbers come back unchanged (subclasses such as
    IntEnum or numpy.float64 collapse to the builtin type)."""
    t = type(v)
    if t is float:
        return int(v) if v.is_integer() else v  # type: ignore[union-attr]
    if t is int or t is str or t is bool:
        return v
    if isinstance(v, float):
        return normalize_value(float(v))
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v)
    raise TypeError(f"not a filter value: {v!r}")


def attribute_error(name: str, value: object) -> str | None:
    """Why `value` cannot be the attribute `name` of a notification; None when it can. The one
    rule every entry applies (module docstring, Semantics): a str, an int, a bool or a finite
    float."""
    if type(value) is float or (isinstance(value, float) and not isinstance(value, bool)):
        if math.isfinite(value):
            return None
        return (f"attribute {name!r}: {value!r} is not a finite number (a notification's "
                f"numbers are finite: the trace, JSON, has no form for ±inf or NaN)")
    if isinstance(value, str | int):  # bool is an int
        return None
    return f"attribute {name!r}: {type(value).__name__} is not a str, int, float or bool"


def index_value(v: Value) -> Value | tuple[str, bool]:
    """The value half of an index key: ``normalize_value(v)``, with bools tagged as
    ``("bool", v)`` so they never collide with the numbers 0 and 1 as dict keys."""
    return ("bool", v) if type(v) is bool else normalize_value(v)


def _is_number(v: object) -> bool:
    # Slow path only: the hot checks test `type(v) is int/float` first.
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _constant(v: object) -> Value:
    """Validate and normalize a filter constant (not a notification value)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"filter constants must be finite, got {v!r}")
        return normalize_value(v)
    if isinstance(v, str):
        return str(v)
    raise TypeError(f"filter constants are str, int, float or bool, got {v!r}")


def _format_value(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return _quote(v)
    return repr(v)  # repr(float) round-trips exactly; ints print as themselves


def _quote(s: str) -> str:
    out = ['"']
    for c in s:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif o < 0x20 or 0x7F <= o < 0xA0 or 0xD800 <= o <= 0xDFFF:
            out.append(f"\\u{o:04x}")  # keep control characters and lone surrogates visible
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _successor_prefix(p: str) -> str | None:
    """The least string greater than every string that starts with ``p`` (None: no such)."""
    p = p.rstrip(_MAX_CHAR)
    return p[:-1] + chr(ord(p[-1]) + 1) if p else None


# ---- per-attribute constraints ----------------------------------------------------------------
#
# Each constraint class is canonical by construction (use the _make_* functions, which return
# None for an empty set), so dataclass equality is set equality. They share one small protocol:
# intersect / subset_of / union / contains / compile / render.


def _with_holes(check: Check, excluded: frozenset[Value]) -> Check:
    """`check`, minus the excluded points (returned as is when there are none)."""
    if not excluded:
        return check

    def check_with_holes(v: object) -> bool:
        return check(v) and v not in excluded

    return check_with_holes


def _always(v: object) -> bool:
    return True


def _never(v: object) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class _Exists:
    """Present with any type."""

    def compile(self) -> Check:
        return _always  # matches() has already rejected a missing attribute

    def render(self, name: str) -> list[str]:
        return [f"exists {name}"]


_EXISTS: Final = _Exists()


@dataclass(frozen=True, slots=True)
class _Num:
    """Numbers in the interval (lo, hi) with inclusive ends as flagged, minus ``excluded``.

    Invariants: values normalized; an unbounded side is ±inf and inclusive (so ±inf values
    match it); lo < hi, or lo == hi with both ends inclusive (a point) and nothing excluded;
    excluded points lie strictly inside (lo, hi).
    """

    lo: Number
    lo_inc: bool
    hi: Number
    hi_inc: bool
    excluded: frozenset[Number] = frozenset()

    # Bounds as sortable keys: a smaller `lower` starts earlier, a larger `upper` ends later.
    @property
    def lower(self) -> tuple[Number, int]:
        return (self.lo, 0 if self.lo_inc else 1)

    @property
    def upper(self) -> tuple[Number, int]:
        return (self.hi, 1 if self.hi_inc else 0)

    def contains(self, v: Number) -> bool:
        return (
            (self.lo < v or (self.lo_inc and v == self.lo))
            and (v < self.hi or (self.hi_inc and v == self.hi))
            and v not in self.excluded
        )

    def intersect(self, other: _Num) -> _Num | None:
        lo, lo_key = max(self.lower, other.lower)
        hi, hi_key = min(self.upper, other.upper)
        return _make_num(lo, lo_key == 0, hi, hi_key == 1, self.excluded | other.excluded)

    def subset_of(self, other: _Num) -> bool:
        # Exact: canonical excluded points are interior, so they cannot "repair" a bound
        # that sticks out; hence interval containment plus "no hole of other's inside me".
        return (
            other.lower <= self.lower
            and self.upper <= other.upper
            and not any(self.contains(e) for e in other.excluded)
        )

    def union(self, other: _Num) -> _Num | None:
        a, b = (self, other) if self.lower <= other.lower else (other, self)
        if b.lo > a.hi:
            return None  # a stretch of reals lies between them: not an interval minus points
        gap: tuple[Number, ...] = ()
        if b.lo == a.hi and not (a.hi_inc or b.lo_inc):
            gap = (a.hi,)  # [1,3) and (3,5]: the hull minus the single point 3
        hi, hi_key = max(a.upper, b.upper)
        holes = [
            p for p in (*a.excluded, *b.excluded, *gap) if not a.contains(p) and not b.contains(p)
        ]
        return _make_num(a.lo, a.lo_inc, hi, hi_key == 1, holes)

    def compile(self) -> Check:
        lo, hi, excluded = self.lo, self.hi, self.excluded
        if lo == hi:
            return _num_point_check(lo)
        check = _NUM_RANGE_CHECKS[self.lo_inc, self.hi_inc](lo, hi)
        return _with_holes(check, excluded)

    def render(self, name: str) -> list[str]:
        lo, hi = self.lo, self.hi
        if lo == hi:
            return [f"{name} == {_format_value(lo)}"]
        parts = []
        if lo != -_INF and hi != _INF and self.lo_inc and self.hi_inc:
            parts.append(f"{name} range [{_format_value(lo)}, {_format_value(hi)}]")
        else:
            if lo != -_INF:
                parts.append(f"{name} {'>=' if self.lo_inc else '>'} {_format_value(lo)}")
            if hi != _INF:
                parts.append(f"{name} {'<=' if self.hi_inc else '<'} {_format_value(hi)}")
        parts += [f"{name} != {_format_value(e)}" for e in sorted(self.excluded)]
        return parts or [f"{name} is number"]


def _make_num(
    lo: Number, lo_inc: bool, hi: Number, hi_inc: bool, excluded: Iterable[Number] = ()
) -> _Num | None:
    """The canonical numeric constraint for the given pieces, or None if it is empty."""
    if lo > hi or (lo == hi and not (lo_inc and hi_inc)):
        return None
    holes = frozenset(excluded)
    if lo == hi:
        return None if lo in holes else _Num(lo, True, hi, True)
    inside = set()
    for e in holes:
        if e == lo:
            lo_inc = False  # excluding an endpoint just opens that end
        elif e == hi:
            hi_inc = False
        elif lo < e < hi:
            inside.add(e)
    return _Num(lo, lo_inc, hi, hi_inc, frozenset(inside))


def _num_point_check(p: Number) -> Check:
    def check(v: object) -> bool:
        t = type(v)
        return (t is int or t is float or _is_number(v)) and v == p

    return check


# One closure per inclusivity combination keeps the hot path to a single chained comparison.
def _num_closed(lo: Number, hi: Number) -> Check:
    def check(v: object) -> bool:
        t = type(v)
        return (t is int or t is float or _is_number(v)) and lo <= v <= hi  # type: ignore[operator]

    return check


def _num_open_hi(lo: Number, hi: Number) -> Check:
    def check(v: object) -> bool:
        t = type(v)
        return (t is int or t is float or _is_number(v)) and lo <= v < hi  # type: ignore[operator]

    return check


def _num_open_lo(lo: Number, hi: Number) -> Check:
    def check(v: object) -> bool:
        t = type(v)
        return (t is int or t is float or _is_number(v)) and lo < v <= hi  # type: ignore[operator]

    return check


def _num_open(lo: Number, hi: Number) -> Check:
    def check(v: object) -> bool:
        t = type(v)
        return (t is int or t is float or _is_number(v)) and lo < v < hi  # type: ignore[operator]

    return check


_NUM_RANGE_CHECKS: Final[dict[tuple[bool, bool], Callable[[Number, Number], Check]]] = {
    (True, True): _num_closed,
    (True, False): _num_open_hi,
    (False, True): _num_open_lo,
    (False, False): _num_open,
}


@dataclass(frozen=True, slots=True)
class _Str:
    """Strings s with lo <= s < hi (hi None: unbounded), minus ``excluded``.

    Strings are discrete at the bottom: the least string above s is s + "\\0". So ``s > "a"``
    is ``s >= "a\\0"`` and ``s <= "a"`` is ``s < "a\\0"``, and every bound can be stored
    half-open. Invariants: lo < hi; lo is not excluded; if hi = t + "\\0" then t is not
    excluded (otherwise the bound would shrink); excluded points lie strictly inside.
    """

    lo: str
    hi: str | None
    excluded: frozenset[str] = frozenset()

    def contains(self, v: str) -> bool:
        return self.lo <= v and (self.hi is None or v < self.hi) and v not in self.excluded

    def intersect(self, other: _Str) -> _Str | None:
        return _make_str(
            max(self.lo, other.lo), _min_hi(self.hi, other.hi), self.excluded | other.excluded
        )

    def subset_of(self, other: _Str) -> bool:
        # Exact for the same reason as _Num.subset_of: lo is always a member, and just below
        # hi there is either a non-excluded greatest member or infinitely many members.
        return (
            other.lo <= self.lo
            and _hi_le(self.hi, other.hi)
            and not any(self.contains(e) for e in other.excluded)
        )

    def union(self, other: _Str) -> _Str | None:
        a, b = (self, other) if self.lo <= other.lo else (other, self)
        gap: list[str] = []
        if a.hi is not None and b.lo > a.hi:
            # [a.hi, b.lo) is finite only if b.lo is a.hi followed by NULs.
            tail = b.lo[len(a.hi) :]
            if not b.lo.startswith(a.hi) or tail.strip("\0"):
                return None
            gap = [a.hi + "\0" * i for i in range(len(tail))]
        holes = [
            p for p in (*a.excluded, *b.excluded, *gap) if not a.contains(p) and not b.contains(p)
        ]
        return _make_str(a.lo, _max_hi(a.hi, b.hi), holes)

    def compile(self) -> Check:
        lo, hi, excluded = self.lo, self.hi, self.excluded
        if hi is not None and hi == lo + "\0":

            def check(v: object) -> bool:
                return (type(v) is str or isinstance(v, str)) and v == lo

        elif hi is None:

            def check(v: object) -> bool:
                return (type(v) is str or isinstance(v, str)) and lo <= v

        else:

            def check(v: object) -> bool:
                return (type(v) is str or isinstance(v, str)) and lo <= v < hi

        return _with_holes(check, excluded)

    def render(self, name: str) -> list[str]:
        lo, hi = self.lo, self.hi
        if hi is not None and hi == lo + "\0":
            return [f"{name} == {_quote(lo)}"]
        parts = []
        if lo and hi == _successor_prefix(lo):
            parts.append(f"{name} prefix {_quote(lo)}")
        elif lo and hi is not None and lo[-1] != "\0" and hi[-1] == "\0":
            parts.append(f"{name} range [{_quote(lo)}, {_quote(hi[:-1])}]")
        else:
            if lo:
                # A trailing NUL on lo came from '>': print it back that way.
                parts.append(
                    f"{name} > {_quote(lo[:-1])}" if lo[-1] == "\0" else f"{name} >= {_quote(lo)}"
                )
            if hi is not None:
                parts.append(
                    f"{name} <= {_quote(hi[:-1])}" if hi[-1] == "\0" else f"{name} < {_quote(hi)}"
                )
        parts += [f"{name} != {_quote(e)}" for e in sorted(self.excluded)]
        return parts or [f"{name} is string"]


def _min_hi(a: str | None, b: str | None) -> str | None:
    return b if a is None else a if b is None else min(a, b)


def _max_hi(a: str | None, b: str | None) -> str | None:
    return None if a is None or b is None else max(a, b)


def _hi_le(a: str | None, b: str | None) -> bool:
    return b is None or (a is not None and a <= b)


def _make_str(lo: str, hi: str | None, excluded: Iterable[str] = ()) -> _Str | None:
    """The canonical string constraint for the given pieces, or None if it is empty."""
    holes = frozenset(excluded)
    while lo in holes:  # excluding the least member raises lo to its successor
        lo += "\0"
    while hi is not None and hi[-1:] == "\0" and hi[:-1] in holes:  # ...the greatest lowers hi
        hi = hi[:-1]
    if hi is not None and lo >= hi:
        return None
    return _Str(lo, hi, frozenset(e for e in holes if lo < e and (hi is None or e < hi)))


@dataclass(frozen=True, slots=True)
class _Bool:
    """A bool in ``allowed`` (non-empty)."""

    allowed: frozenset[bool]

    def intersect(self, other: _Bool) -> _Bool | None:
        both = self.allowed & other.allowed
        return _Bool(both) if both else None

    def subset_of(self, other: _Bool) -> bool:
        return self.allowed <= other.allowed

    def union(self, other: _Bool) -> _Bool:
        return _Bool(self.allowed | other.allowed)

    def compile(self) -> Check:
        if len(self.allowed) == 2:
            return lambda v: type(v) is bool
        # bool is final and True/False are singletons, so identity is an exact type+value test.
        return (lambda v: v is True) if True in self.allowed else (lambda v: v is False)

    def render(self, name: str) -> list[str]:
        if len(self.allowed) == 2:
            return [f"{name} is bool"]
        return [f"{name} == {'true' if True in self.allowed else 'false'}"]


Constraint = _Exists | _Num | _Str | _Bool


def _intersect(a: Constraint, b: Constraint) -> Constraint | None:
    if isinstance(a, _Exists):
        return b
    if isinstance(b, _Exists):
        return a
    if isinstance(a, _Num) and isinstance(b, _Num):
        return a.intersect(b)
    if isinstance(a, _Str) and isinstance(b, _Str):
        return a.intersect(b)
    if isinstance(a, _Bool) and isinstance(b, _Bool):
        return a.intersect(b)
    return None  # one attribute cannot hold two types at once


def _intersect_all(group: list[Constraint]) -> Constraint | None:
    """The intersection of several constraints on one attribute, in one pass: the same set as
    folding `_intersect` over them, without building a set of excluded points per step."""
    typed = [c for c in group if not isinstance(c, _Exists)]
    if not typed:
        return _EXISTS
    kind = type(typed[0])
    if any(type(c) is not kind for c in typed):
        return None  # one attribute cannot hold two types at once
    if kind is _Bool:
        allowed = frozenset((False, True))
        for c in typed:
            allowed &= c.allowed  # type: ignore[union-attr]
        return _Bool(allowed) if allowed else None
    holes: set[Value] = set()
    for c in typed:
        holes.update(c.excluded)  # type: ignore[union-attr]
    if kind is _Num:
        nums: list[_Num] = typed  # type: ignore[assignment]
        lo, lo_key = max(c.lower for c in nums)
        hi, hi_key = min(c.upper for c in nums)
        return _make_num(lo, lo_key == 0, hi, hi_key == 1, holes)  # type: ignore[arg-type]
    strs: list[_Str] = typed  # type: ignore[assignment]
    his = [c.hi for c in strs if c.hi is not None]
    return _make_str(max(c.lo for c in strs), min(his) if his else None,
                     holes)  # type: ignore[arg-type]


def _constraint_covers(a: Constraint, b: Constraint) -> bool:
    if isinstance(a, _Exists):
        return True
    if isinstance(a, _Num) and isinstance(b, _Num):
        return b.subset_of(a)
    if isinstance(a, _Str) and isinstance(b, _Str):
        return b.subset_of(a)
    if isinstance(a, _Bool) and isinstance(b, _Bool):
        return b.subset_of(a)
    return False


def _union(a: Constraint, b: Constraint) -> Constraint | None:
    if isinstance(a, _Num) and isinstance(b, _Num):
        return a.union(b)
    if isinstance(a, _Str) and isinstance(b, _Str):
        return a.union(b)
    if isinstance(a, _Bool) and isinstance(b, _Bool):
        return a.union(b)
    return None  # "number or string" is no single constraint; _Exists cases are coverings


def _predicate(op: str, value: Value) -> Constraint | None:
    """The constraint of ``attribute <op> value`` (value already validated and normalized).

    Raises TypeError for an operator that does not apply to the value's type.
    """
    if isinstance(value, bool):
        if op == "==":
            return _Bool(frozenset((value,)))
        if op == "!=":
            return _Bool(frozenset((not value,)))
        raise TypeError(f"'{op}' cannot be applied to a boolean")
    if isinstance(value, str):
        bounds = {
            "==": (value, value + "\0"),
            "!=": ("", None),
            "<": ("", value),
            "<=": ("", value + "\0"),
            ">": (value + "\0", None),
            ">=": (value, None),
            "prefix": (value, _successor_prefix(value)),
        }[op]
        return _make_str(*bounds, (value,) if op == "!=" else ())
    if op == "prefix":
        raise TypeError("'prefix' needs a string")
    lo, lo_inc, hi, hi_inc = {
        "==": (value, True, value, True),
        "!=": (-_INF, True, _INF, True),
        "<": (-_INF, True, value, False),
        "<=": (-_INF, True, value, True),
        ">": (value, False, _INF, True),
        ">=": (value, True, _INF, True),
    }[op]
    return _make_num(lo, lo_inc, hi, hi_inc, (value,) if op == "!=" else ())


_TYPE_TESTS: Final[dict[str, Constraint]] = {
    "number": _Num(-_INF, True, _INF, True),
    "string": _Str("", None),
    "bool": _Bool(frozenset((False, True))),
}


# ---- filters ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Filter:
    """An immutable, hashable, canonical conjunctive filter.

    Build filters with ``parse``, ``equals``, ``everything``, ``nothing`` or ``&``; the
    constructor expects an already-canonical constraint tuple (sorted by attribute name).
    """

    constraints: tuple[tuple[str, Constraint], ...] = ()
    satisfiable: bool = True
    # Derived at construction, so the hot paths do no allocation or dispatch:
    _checks: tuple[tuple[str, Check], ...] = field(init=False)
    _by_name: dict[str, Constraint] = field(init=False)
    _attributes: frozenset[str] = field(init=False)
    _hash: int = field(init=False)
    _index_key: IndexKey | None = field(init=False)  # routing tables ask on every insert
    _text: str | None = field(init=False)  # str(self), once asked: every refresh sends it

    def __post_init__(self) -> None:
        if self.satisfiable:
            checks = tuple((name, c.compile()) for name, c in self.constraints)
        else:
            checks = (("", _never),)
        set_ = object.__setattr__
        set_(self, "_checks", checks)
        set_(self, "_by_name", dict(self.constraints))
        set_(self, "_attributes", frozenset(self._by_name))
        set_(self, "_hash", hash((self.satisfiable, self.constraints)))
        set_(self, "_index_key", self._find_index_key())
        set_(self, "_text", None)

    @classmethod
    def _build(cls, constraints: Mapping[str, Constraint] | None) -> Filter:
        """From per-attribute canonical constraints; None means unsatisfiable."""
        if constraints is None:
            return _NOTHING
        if not constraints:
            return _EVERYTHING
        return cls(tuple(sorted(constraints.items(), key=lambda item: item[0])))

    # -- construction --

    @classmethod
    def parse(cls, text: str, *, max_terms: int | None = None) -> Filter:
        """Parse the text form (see the module docstring). Raises FilterSyntaxError, or
        FilterLimitError when the text has more than `max_terms` terms (checked while parsing,
        so a huge filter costs no more than the limit). Linear in the length of the text."""
        return cls._build(_Parser(text, max_terms).parse())

    @classmethod
    def everything(cls) -> Filter:
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> Filter:
        return _NOTHING

    @classmethod
    def equals(cls, attribute: str, value: Value) -> Filter:
        """``attribute == value`` without going through the parser."""
        if not _NAME_RE.fullmatch(attribute):
            raise ValueError(f"invalid attribute name {attribute!r}")
        constraint = _predicate("==", _constant(value))
        assert constraint is not None  # a point is never empty
        return cls(((attribute, constraint),))

    def __and__(self, other: Filter) -> Filter:
        """The conjunction of two filters."""
        if not (self.satisfiable and other.satisfiable):
            return _NOTHING
        merged: dict[str, Constraint] = dict(self._by_name)
        for name, c in other.constraints:
            mine = merged.get(name)
            both = c if mine is None else _intersect(mine, c)
            if both is None:
                return _NOTHING
            merged[name] = both
        return Filter._build(merged)

    # -- queries --

    def matches(self, attributes: Mapping[str, object]) -> bool:
        for name, check in self._checks:
            value = attributes.get(name, _MISSING)
            if value is _MISSING or not check(value):  # type: ignore[arg-type]
                return False
        return True

    def covers(self, other: Filter) -> bool:
        """N(self) ⊇ N(other). Exact, because both sides are canonical."""
        if not other.satisfiable:
            return True
        if not self.satisfiable:
            return False
        theirs = other._by_name
        for name, mine in self.constraints:
            c = theirs.get(name)
            # If other leaves `name` free it admits notifications lacking it; we don't.
            if c is None or not _constraint_covers(mine, c):
                return False
        return True

    def identical(self, other: Filter) -> bool:
        """N(self) == N(other)."""
        return self == other

    def index_key(self) -> IndexKey | None:
        """(attribute, index_value) of the point constraint on the first attribute (by name)
        that has one, or None. See the module docstring for the key format."""
        return self._index_key

    def _find_index_key(self) -> IndexKey | None:
        for name, c in self.constraints:
            if isinstance(c, _Num) and c.lo == c.hi:
                return (name, c.lo)
            if isinstance(c, _Str) and c.hi == c.lo + "\0":
                return (name, c.lo)
            if isinstance(c, _Bool) and len(c.allowed) == 1:
                return (name, ("bool", True in c.allowed))
        return None

    @property
    def attributes(self) -> frozenset[str]:
        return self._attributes

    # -- identity and text --

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Filter):
            return NotImplemented
        return (
            self._hash == other._hash
            and self.satisfiable == other.satisfiable
            and self.constraints == other.constraints
        )

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        text = self._text
        if text is None:
            if not self.satisfiable:
                text = "false"
            elif not self.constraints:
                text = "true"
            else:
                text = " && ".join(part for name, c in self.constraints for part in c.render(name))
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"Filter.parse({str(self)!r})"

    def __reduce__(self) -> tuple[Callable[[str], Filter], tuple[str]]:
        # The compiled checks are closures and cannot be pickled; the canonical text can.
        return (Filter.parse, (str(self),))


_EVERYTHING: Final = Filter()
_NOTHING: Final = Filter((), satisfiable=False)


def merge(a: Filter, b: Filter) -> Filter | None:
    """A perfect merger: a filter m with N(m) == N(a) ∪ N(b) exactly, or None if no single
    (conjunctive) filter has that set.

    A union of two "boxes" (one constraint per attribute) is a box only if one contains the
    other, or they agree on every attribute but one. In the latter case the union on that
    attribute must itself be one canonical constraint: e.g. x in [1,3] ∪ (3,5] -> [1,5];
    [1,3) ∪ (3,5] -> [1,5] minus {3}; but x == 1 ∪ x == 2 is not (over the reals 1.5 lies
    between), nor is x == 1 ∪ x == "a".
    """
    if a.covers(b):
        return a
    if b.covers(a):
        return b
    # Both satisfiable from here on (an unsatisfiable filter is covered by anything).
    if a.attributes != b.attributes:
        # An attribute constrained on one side only is one difference; since neither side
        # covers the other, some other attribute differs too: two differences, no box.
        return None
    theirs = b._by_name
    differing = [name for name, c in a.constraints if theirs[name] != c]
    if len(differing) != 1:
        return None
    name = differing[0]
    union = _union(a._by_name[name], theirs[name])
    if union is None:
        return None
    return Filter._build({**a._by_name, name: union})


def notification_index_keys(attributes: Mapping[str, object]) -> list[IndexKey]:
    """The index keys of a notification, one per attribute, in the format of
    ``Filter.index_key``; values that are not str/int/float/bool are skipped."""
    keys: list[IndexKey] = []
    for name, v in attributes.items():
        if type(v) is str or type(v) is int:
            keys.append((name, v))
        elif type(v) is float:
            keys.append((name, int(v) if v.is_integer() else v))
        elif type(v) is bool:
            keys.append((name, ("bool", v)))
        elif isinstance(v, (str, int, float)):
            keys.append((name, normalize_value(v)))
    return keys


# ---- parser -----------------------------------------------------------------------------------


class _Token(NamedTuple):
    kind: str  # "name", "number", "string", "op", "bad", "end"
    text: str  # source text (for "bad": a complete error message, or "" for a stray char)
    pos: int
    value: Value = ""


_TOKEN_RE: Final = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<op>==|!=|<=|>=|<|>|&&|\[|\]|,)
    """,
    re.VERBOSE,
)
_COMPARISONS: Final = frozenset(("==", "!=", "<", "<=", ">", ">="))
_WORD_OPERATORS: Final = frozenset(("prefix", "range", "is"))
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _tokenize(text: str) -> list[_Token]:
    """Tokens up to the first bad one (which the parser reports in context), then "end"."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            token = _scan_string(text, i)
            tokens.append(token)
            if token.kind == "bad":
                return tokens
            i += len(token.text)
            continue
        m = _TOKEN_RE.match(text, i)
        if m is None:
            tokens.append(_Token("bad", "", i, text[i]))
            return tokens
        kind = m.lastgroup
        assert kind is not None
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), i))
        i = m.end()
    tokens.append(_Token("end", "", n))
    return tokens


def _scan_string(text: str, start: int) -> _Token:
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return _Token("string", text[start : i + 1], start, "".join(chars))
        if c == "\\":
            nxt = text[i + 1 : i + 2]
            digits = text[i + 2 : i + 6]
            if nxt in ('"', "\\"):
                chars.append(nxt)
                i += 2
            elif nxt == "u" and len(digits) == 4 and set(digits) <= _HEX:
                chars.append(chr(int(digits, 16)))
                i += 6
            else:
                message = f'invalid escape at position {i}: use \\", \\\\ or \\uXXXX'
                return _Token("bad", message, i)
        else:
            chars.append(c)
            i += 1
    message = f"unterminated string starting at position {start}: expected a closing '\"'"
    return _Token("bad", message, start)


class _Parser:
    def __init__(self, text: str, max_terms: int | None = None) -> None:
        self.text = text
        self.max_terms = max_terms
        self.tokens = _tokenize(text)
        self.i = 0

    def parse(self) -> dict[str, Constraint] | None:
        """Per-attribute constraints; None if the conjunction is unsatisfiable.

        Linear in the text: the terms are grouped by attribute and each group is intersected
        once at the end (`_intersect_all`). Intersecting term by term rebuilt the set of
        excluded points on every `!=`, which made a long filter quadratic to parse."""
        groups: dict[str, list[Constraint]] = {}
        satisfiable = True
        after = None
        terms = 0
        while True:
            terms += 1
            if self.max_terms is not None and terms > self.max_terms:
                raise FilterLimitError(
                    f"more than {self.max_terms} terms (the term at position "
                    f"{self._peek().pos} is one too many)",
                    self.text, self._peek().pos, limit=self.max_terms)
            term = self._term(after)
            # Keep parsing after a contradiction so that syntax errors are still reported.
            if term is False:
                satisfiable = False
            elif term is not True:
                name, c = term
                if c is None:
                    satisfiable = False
                else:
                    groups.setdefault(name, []).append(c)
            tok = self._peek()
            if tok.kind == "end":
                break
            if tok.text != "&&" or tok.kind != "op":
                raise self._expected("'&&' or end of input", tok)
            self.i += 1
            after = "'&&'"
        if not satisfiable:
            return None
        constraints: dict[str, Constraint] = {}
        for name, group in groups.items():
            both = group[0] if len(group) == 1 else _intersect_all(group)
            if both is None:
                return None
            constraints[name] = both
        return constraints

    def _term(self, after: str | None) -> tuple[str, Constraint | None] | bool:
        tok = self._peek()
        if tok.kind != "name":
            where = f" after {after}" if after else ""
            raise self._expected(f"a predicate{where}", tok)
        nxt = self._peek(1)
        if tok.text in ("true", "false") and self._ends_term(nxt):
            self.i += 1
            return tok.text == "true"
        if tok.text == "exists" and nxt.kind not in ("name", "op"):
            raise self._expected("an attribute name after 'exists'", nxt)
        # `exists NAME` unless NAME is a word operator applied to an attribute called "exists".
        if (
            tok.text == "exists"
            and nxt.kind == "name"
            and (nxt.text not in _WORD_OPERATORS or self._ends_term(self._peek(2)))
        ):
            self.i += 2
            return (nxt.text, _EXISTS)
        return self._predicate()

    def _predicate(self) -> tuple[str, Constraint | None]:
        name = self._advance().text
        op = self._peek()
        if op.kind == "op" and op.text in _COMPARISONS:
            self.i += 1
            value, pos = self._value(f"a value after '{op.text}'")
            return name, self._typed(op.text, value, pos)
        if op.kind == "name" and op.text == "prefix":
            self.i += 1
            value, pos = self._value("a string after 'prefix'")
            return name, self._typed("prefix", value, pos)
        if op.kind == "name" and op.text == "range":
            self.i += 1
            return name, self._range()
        if op.kind == "name" and op.text == "is":
            self.i += 1
            kind = self._peek()
            test = _TYPE_TESTS.get(kind.text) if kind.kind == "name" else None
            if test is None:
                raise self._expected("'number', 'string' or 'bool' after 'is'", kind)
            self.i += 1
            return name, test
        raise self._expected(
            f"an operator (==, !=, <, <=, >, >=, prefix, range, is) after '{name}'", op
        )

    def _range(self) -> Constraint:
        self._expect("[", "'[' after 'range'")
        lo, lo_pos = self._value("a lower bound after '['")
        self._expect(",", "',' after the lower bound")
        hi, hi_pos = self._value("an upper bound after ','")
        self._expect("]", "']' after the upper bound")
        if isinstance(lo, bool) or isinstance(hi, bool):
            pos = lo_pos if isinstance(lo, bool) else hi_pos
            raise self._error(
                f"'range' needs numbers or strings, not booleans, at position {pos}", pos
            )
        if isinstance(lo, str) and isinstance(hi, str):
            c: Constraint | None = _make_str(lo, hi + "\0")
        elif not isinstance(lo, str) and not isinstance(hi, str):
            c = _make_num(lo, True, hi, True)
        else:
            raise self._error(
                f"'range' bounds must both be numbers or both strings at position {lo_pos}",
                lo_pos,
            )
        if c is None:  # the only way a closed range can be empty
            raise self._error(
                f"empty range at position {lo_pos}: lower bound {_format_value(lo)} "
                f"exceeds upper bound {_format_value(hi)}",
                lo_pos,
            )
        return c

    def _typed(self, op: str, value: Value, pos: int) -> Constraint | None:
        try:
            return _predicate(op, value)  # None only for `< ""`, which nothing satisfies
        except TypeError as e:
            raise self._error(f"{e} at position {pos}, found {_format_value(value)}", pos) from None

    def _value(self, what: str) -> tuple[Value, int]:
        tok = self._peek()
        if tok.kind == "number":
            try:
                value = _constant(
                    float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
                )
            except ValueError:
                raise self._error(
                    f"number out of range at position {tok.pos}: {tok.text}", tok.pos
                ) from None
        elif tok.kind == "string":
            value = tok.value
        elif tok.kind == "name" and tok.text in ("true", "false"):
            value = tok.text == "true"
        else:
            raise self._expected(what, tok)
        self.i += 1
        return value, tok.pos

    # -- token helpers --

    def _peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def _advance(self) -> _Token:
        tok = self._peek()
        self.i += 1
        return tok

    def _expect(self, op: str, what: str) -> None:
        tok = self._peek()
        if tok.kind != "op" or tok.text != op:
            raise self._expected(what, tok)
        self.i += 1

    @staticmethod
    def _ends_term(tok: _Token) -> bool:
        return tok.kind == "end" or (tok.kind == "op" and tok.text == "&&")

    def _error(self, message: str, position: int) -> FilterSyntaxError:
        return FilterSyntaxError(message, self.text, position)

    def _expected(self, what: str, tok: _Token) -> FilterSyntaxError:
        if tok.kind == "bad" and tok.text:
            return self._error(tok.text, tok.pos)  # string-literal errors say it better
        if tok.kind == "end":
            found = "end of input"
        elif tok.kind == "bad":
            found = f"unexpected character {tok.value!r}"
        else:
            found = repr(tok.text)
        return self._error(f"expected {what} at position {tok.pos}, found {found}", tok.pos)
