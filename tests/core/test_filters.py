"""Filters: parsing, canonical form, matching, covering, perfect merging, index keys.

The property tests compare the canonical filter against a direct, predicate-by-predicate
reference evaluator, on notifications whose values sit on and right next to the constants
used in the filters (so interval ends, excluded points and prefixes are actually probed).
"""

from __future__ import annotations

import itertools
import math
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weeble.core.filters import (
    Filter,
    FilterLimitError,
    FilterSyntaxError,
    Value,
    index_value,
    merge,
    normalize_value,
    notification_index_keys,
)

P = Filter.parse

# ---- generators -------------------------------------------------------------------------------

NUMS: list[int | float] = [-2, -1, 0, 0.5, 1, 1.5, 2, 2.0, 3]
STRS = ["", "a", "ab", "abc", "a\0", "b", "ba", 'q"\\', "é"]
ATTRS = ["x", "y", "s", "b"]
HOME = {"x": "num", "y": "num", "s": "str", "b": "bool", "z": "num"}

# Notification values: the constants, their neighbours, and a few oddities.
NUM_PROBES: list[Value] = [
    *sorted(
        {v + d for v in NUMS for d in (0, 0.25, -0.25)}
        | {math.nextafter(v, s) for v in NUMS for s in (-math.inf, math.inf)}
        | {-math.inf, math.inf, 10**20, -(10**20)}
    ),
    math.nan,
]
STR_PROBES: list[Value] = sorted(
    {s + t for s in STRS for t in ("", "\0", "\0\0", "\x01", "a", "z", "\U0010ffff")}
    | {s[:-1] for s in STRS}
)
BOOL_PROBES: list[Value] = [True, False]

Pred = tuple[str, str, Any]  # (attribute, operator, argument); range: (lo, hi)


def fmt(v: object) -> str:
    """Independent of the module's own printer, on purpose."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def pred_text(p: Pred) -> str:
    attr, op, arg = p
    if op == "exists":
        return f"exists {attr}"
    if op == "is":
        return f"{attr} is {arg}"
    if op == "range":
        lo, hi = arg
        return f"{attr} range [{fmt(lo)}, {fmt(hi)}]"
    return f"{attr} {op} {fmt(arg)}"


def kind_of(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return "string"


def ref(p: Pred, n: Mapping[str, Value]) -> bool:
    """Direct semantics of one predicate, as documented in the module."""
    attr, op, arg = p
    if attr not in n:
        return False
    v = n[attr]
    if op == "exists":
        return True
    if op == "is":
        return kind_of(v) == {"number": "number", "string": "string", "bool": "bool"}[arg] and (
            v == v  # NaN is no number to any numeric predicate
        )
    sample = arg[0] if op == "range" else arg
    if kind_of(v) != kind_of(sample) or v != v:
        return False
    if op == "==":
        return v == arg
    if op == "!=":
        return v != arg
    if op == "<":
        return v < arg
    if op == "<=":
        return v <= arg
    if op == ">":
        return v > arg
    if op == ">=":
        return v >= arg
    if op == "prefix":
        return isinstance(v, str) and v.startswith(arg)
    if op == "range":
        return arg[0] <= v <= arg[1]
    raise AssertionError(op)


def ref_all(preds: list[Pred], n: Mapping[str, Value]) -> bool:
    return all(ref(p, n) for p in preds)


@st.composite
def predicates(draw: st.DrawFn, attrs: list[str] = ATTRS) -> Pred:
    attr = draw(st.sampled_from(attrs))
    kind = draw(st.sampled_from([HOME[attr]] * 10 + ["num", "str", "bool", "other"]))
    if kind == "other":
        op = draw(st.sampled_from(["exists", "is"]))
        return (attr, op, draw(st.sampled_from(["number", "string", "bool"])))
    if kind == "bool":
        return (attr, draw(st.sampled_from(["==", "!="])), draw(st.booleans()))
    pool: list[Any] = NUMS if kind == "num" else STRS
    ops = ["==", "!=", "<", "<=", ">", ">=", "range"] + (["prefix"] * 2 if kind == "str" else [])
    op = draw(st.sampled_from(ops))
    if op == "range":
        lo, hi = sorted([draw(st.sampled_from(pool)), draw(st.sampled_from(pool))])
        return (attr, op, (lo, hi))
    return (attr, op, draw(st.sampled_from(pool)))


def build(preds: list[Pred]) -> Filter:
    return P(" && ".join(map(pred_text, preds)) or "true")


pred_lists = st.lists(predicates(), max_size=4)


@st.composite
def values_for(draw: st.DrawFn, attr: str) -> Value:
    kind = draw(st.sampled_from([HOME[attr]] * 4 + ["num", "str", "bool"]))
    pool: list[Value] = {"num": NUM_PROBES, "str": STR_PROBES, "bool": BOOL_PROBES}[kind]
    return draw(st.sampled_from(pool))


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Value]:
    return {
        attr: draw(values_for(attr))
        for attr in [*ATTRS, "z"]
        if draw(st.integers(0, 4))  # present 80% of the time
    }


notification_lists = st.lists(notifications(), min_size=1, max_size=25)


# ---- parsing and text -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ('stock == "IBM" && price < 100', 'price < 100 && stock == "IBM"'),
        ("price range [10, 20]", "price range [10, 20]"),
        ('name prefix "ab" && exists volume', 'name prefix "ab" && exists volume'),
        ("class == 17", "class == 17"),
        ("flag == true && x != 2.5", "flag == true && x != 2.5"),
        ("true", "true"),
        ("false", "false"),
        ("  x<=1&&x>-0.5  ", "x > -0.5 && x <= 1"),
        ("x >= 1 && x != 1", "x > 1"),
        ("x == 1e3 && y == -3 && z == 1.0", "x == 1000 && y == -3 && z == 1"),
        ('s > "a" && s < "c"', 's > "a" && s < "c"'),
        ('s >= "a" && s <= "c"', 's range ["a", "c"]'),
        ('s prefix ""', "s is string"),
        ("x is number && b is bool", "b is bool && x is number"),
        ("x != true", "x == false"),
        ("exists x && x == 2", "x == 2"),
        ('s == "a\\"b\\\\c"', 's == "a\\"b\\\\c"'),
        ('s == "\\u0041\\u0000"', 's == "A\\u0000"'),
        ("a.b_c == 1", "a.b_c == 1"),
        ("x == 1 && true", "x == 1"),
        ("x == 1 && false", "false"),
    ],
)
def test_parse_and_canonical_text(text: str, canonical: str) -> None:
    f = P(text)
    assert str(f) == canonical
    assert P(canonical) == f


def test_keywords_can_be_attribute_names() -> None:
    f = P('true == 1 && exists exists && exists is && prefix prefix "a" && is is bool')
    assert f.attributes == {"true", "exists", "is", "prefix"}
    assert P(str(f)) == f
    assert f.matches({"true": 1, "exists": "x", "is": True, "prefix": "ab"})
    assert P("exists == 3").matches({"exists": 3})


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "expected a predicate"),
        ("price <  && x == 1", 9, "expected a value after '<' at position 9"),
        ("price < ", 8, "expected a value after '<' at position 8, found end of input"),
        ("x", 1, "expected an operator"),
        ("x = 1", 2, "found unexpected character '='"),
        ("x == 1 &&", 9, "expected a predicate after '&&' at position 9"),
        ("x == 1 y == 2", 7, "expected '&&' or end of input at position 7"),
        ("x == 1 & y == 2", 7, "expected '&&' or end of input at position 7"),
        ("&& x == 1", 0, "expected a predicate at position 0"),
        ('x == "abc', 5, "unterminated string starting at position 5"),
        ('x == "a\\q"', 7, "invalid escape at position 7"),
        ("x prefix 5", 9, "'prefix' needs a string at position 9"),
        ("x < true", 4, "'<' cannot be applied to a boolean at position 4"),
        ("x prefix true", 9, "boolean at position 9"),
        ("x range [5, 1]", 9, "empty range at position 9"),
        ('x range [1, "a"]', 9, "both be numbers or both strings at position 9"),
        ("x range [true, false]", 9, "not booleans, at position 9"),
        ("x range 1, 2]", 8, "expected '[' after 'range' at position 8"),
        ("x range [1 2]", 11, "expected ',' after the lower bound at position 11"),
        ("x range [1, 2", 13, "expected ']' after the upper bound at position 13"),
        ("x == 1e999", 5, "number out of range at position 5"),
        ("x == -", 5, "expected a value after '==' at position 5"),
        ("x == y", 5, "expected a value after '==' at position 5, found 'y'"),
        ("exists 5", 7, "expected an attribute name after 'exists' at position 7"),
        ("x is integer", 5, "expected 'number', 'string' or 'bool' after 'is' at position 5"),
        ("5 == x", 0, "expected a predicate at position 0, found '5'"),
        ("x > 5 && x < 3 && y ==", 22, "expected a value after '=='"),  # errors beat `false`
    ],
)
def test_syntax_errors_name_position_and_expectation(
    text: str, position: int, fragment: str
) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        P(text)
    e = info.value
    assert isinstance(e, ValueError)
    assert e.text == text
    assert e.position == position
    assert fragment in str(e)
    assert f"position {position}" in str(e)
    again = pickle.loads(pickle.dumps(e))
    assert (str(again), again.text, again.position) == (str(e), e.text, e.position)


def test_equals_constructor() -> None:
    assert Filter.equals("class", 17) == P("class == 17")
    assert Filter.equals("x", 1.0) == P("x == 1")
    assert Filter.equals("s", 'a"b') == P('s == "a\\"b"')
    assert Filter.equals("flag", True) == P("flag == true")
    assert str(Filter.equals("s", "tab\there\ud800")) == 's == "tab\\u0009here\\ud800"'
    with pytest.raises(ValueError):
        Filter.equals("not a name", 1)
    with pytest.raises(ValueError):
        Filter.equals("x", math.nan)
    with pytest.raises(TypeError):
        Filter.equals("x", None)  # type: ignore[arg-type]


@given(pred_lists)
def test_round_trip(preds: list[Pred]) -> None:
    f = build(preds)
    text = str(f)
    g = P(text)
    assert g == f
    assert hash(g) == hash(f)
    assert str(g) == text
    assert pickle.loads(pickle.dumps(f)) == f


@given(st.lists(predicates(), min_size=2, max_size=12))
def test_parsing_a_conjunction_equals_intersecting_its_terms(preds: list[Pred]) -> None:
    # The parser intersects all terms on one attribute at once; `&` folds them pairwise.
    folded = Filter.everything()
    for p in preds:
        folded = folded & P(pred_text(p))
    assert build(preds) == folded


def test_term_limit_is_checked_while_parsing() -> None:
    text = " && ".join(f"x != {i}" for i in range(11))
    assert P(text, max_terms=11) == P(text)
    with pytest.raises(FilterLimitError) as caught:
        P(text + " && garbage ((", max_terms=11)
    assert caught.value.limit == 11 and "more than 11 terms" in str(caught.value)
    assert pickle.loads(pickle.dumps(caught.value)).limit == 11


# ---- matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "yes", "no"),
    [
        ("x == 1", [1, 1.0], [1.5, True, "1", math.nan]),
        ("x == true", [True], [1, False, "true"]),
        ("x == false", [False], [0, True]),
        ("x != 1", [0, 2, -math.inf, math.inf], [1, 1.0, "a", True, math.nan]),
        ('s != "a"', ["", "b", "a\0"], ["a", 1]),
        ("x < 2", [1.999, -math.inf, -(10**30)], [2, 2.0, 3, "1", False]),
        ("x <= 2", [2, 2.0], [2.0000001]),
        ("x > 2", [2.5, math.inf, 10**30], [2, 1, "3"]),
        ("x >= 2", [2], [1.9999]),
        ('s < "b"', ["a", "", "azzz"], ["b", "ba", 1]),
        ('s <= "b"', ["b"], ["b\0", "ba"]),
        ('s > "b"', ["b\0", "ba", "c"], ["b", "a"]),
        ('s >= "b"', ["b"], ["a\U0010ffff"]),
        ('s prefix "ab"', ["ab", "abc", "ab\U0010ffff"], ["a", "ac", "b", "Ab", 5]),
        ('s prefix "a\U0010ffff"', ["a\U0010ffff", "a\U0010ffffz"], ["b", "a"]),
        ("x range [1, 2]", [1, 1.5, 2.0], [0.99, 2.01, True]),
        ('s range ["a", "b"]', ["a", "az", "b"], ["b\0", "ba", ""]),
        ("exists x", [1, "a", True, math.nan], []),
        ("x is number", [0, 2.5, math.inf], ["a", True, math.nan]),
        ("x is string", ["", "z"], [1, False]),
        ("x is bool", [True, False], [0, 1, "true"]),
    ],
)
def test_matching_per_operator(text: str, yes: list[Value], no: list[Value]) -> None:
    attr = text.split()[0] if not text.startswith("exists") else text.split()[1]
    f = P(text)
    for v in yes:
        assert f.matches({attr: v}), (text, v)
    for v in no:
        assert not f.matches({attr: v}), (text, v)
    assert not f.matches({}), "a missing attribute fails every predicate"
    assert not f.matches({"other": 1})


def test_everything_nothing_and_contradictions() -> None:
    assert Filter.everything().matches({}) and Filter.everything() == P("true")
    assert not Filter.nothing().matches({"x": 1}) and Filter.nothing() == P("false")
    for text in [
        "x > 5 && x < 3",
        'x == "a" && x == "b"',
        'x == 1 && x == "a"',
        "x == 1 && x != 1",
        "x range [1, 2] && x > 2",
        "b == true && b == false",
        's < ""',
        's prefix "a" && s prefix "b"',
        "x is number && x is string",
    ]:
        assert P(text) == Filter.nothing(), text
        assert str(P(text)) == "false"


def test_matches_accepts_numeric_subclasses_and_any_mapping() -> None:
    from enum import IntEnum
    from types import MappingProxyType

    class Level(IntEnum):
        HIGH = 3

    class MyFloat(float):
        pass

    assert P("x == 3").matches({"x": Level.HIGH})
    assert P("x > 2").matches(MappingProxyType({"x": MyFloat(2.5)}))
    assert not P("x > 2").matches({"x": None})  # type: ignore[dict-item]


@settings(max_examples=300)
@given(pred_lists, notification_lists)
def test_matching_agrees_with_direct_semantics(
    preds: list[Pred], ns: list[dict[str, Value]]
) -> None:
    f = build(preds)
    for n in ns:
        assert f.matches(n) == ref_all(preds, n), (str(f), n)


# ---- identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x >= 1 && x <= 3", "x range [1, 3]"),
        ("x == 1", "x == 1.0"),
        ("x == 1", "x range [1, 1]"),
        ("x >= 1 && x <= 1", "x == 1.0"),
        ("x > 1 && x != 3 && x < 5", "x < 5 && x != 3 && x > 1 && x != 7 && x != 0"),
        ("x range [1, 3] && x != 1", "x > 1 && x <= 3"),
        ('s > "a"', 's >= "a\\u0000"'),
        ('s <= "a"', 's < "a\\u0000"'),
        ('s range ["a", "a"]', 's == "a"'),
        ('s prefix "ab"', 's >= "ab" && s < "ac"'),
        ('s prefix ""', 's >= ""'),
        ('s != "" && s != "\\u0000"', 's > "\\u0000"'),
        ('s < "b" && s != "a\\u0000" && s >= "a" && s != "a"', 's > "a\\u0000" && s < "b"'),
        ("flag != true", "flag == false"),
        ("exists x && x > 0", "x > 0"),
        ("x > 5 && x < 3", 'y == "a" && y == "b"'),
        ("x == 1 && y == 2", "y == 2 && x == 1"),
    ],
)
def test_equivalent_spellings_are_equal(a: str, b: str) -> None:
    fa, fb = P(a), P(b)
    assert fa == fb and hash(fa) == hash(fb) and str(fa) == str(fb)
    assert fa.identical(fb) and fb.identical(fa)
    assert len({fa, fb}) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x == 1", "x == true"),
        ("x == 1", 'x == "1"'),
        ("x > 1", "x >= 1"),
        ("x != 1", "x is number"),
        ("exists x", "x is number"),
        ('s prefix "a"', 's range ["a", "b"]'),
        ("true", "false"),
    ],
)
def test_different_sets_are_not_equal(a: str, b: str) -> None:
    assert P(a) != P(b) and not P(a).identical(P(b))


@given(pred_lists, pred_lists, notification_lists)
def test_equal_filters_behave_alike(
    pa: list[Pred], pb: list[Pred], ns: list[dict[str, Value]]
) -> None:
    a, b = build(pa), build(pb)
    assert a.identical(b) == (a.covers(b) and b.covers(a)) == (a == b)
    if a == b:
        assert hash(a) == hash(b)
        assert all(a.matches(n) == b.matches(n) for n in ns)


# Exhaustive models of one attribute. With constants from a fixed pool, every filter on one
# attribute is a union of "atoms": single points (the constants and the bounds they induce)
# and the open stretches between them, plus one atom per other type and "missing". Probing
# one value per atom decides set equality, so these tests check that the canonical form is
# unique, that covering is exact (not just sound) and that merge finds every union that is a
# single filter -- not only on sampled notifications.


@dataclass(frozen=True)
class Universe:
    attr: str
    ordered: list[Value]  # one probe per atom of the attribute's own type, ascending
    stretches: frozenset[int]  # indexes into `ordered` of atoms that are open stretches
    others: list[Value]  # one probe per atom of the other types (and NaN)
    preds: st.SearchStrategy[list[Pred]]

    @property
    def probes(self) -> list[Value | None]:
        return [*self.ordered, *self.others, None]  # None: attribute missing

    def atoms(self, f: Filter) -> tuple[bool, ...]:
        return tuple(f.matches({} if v is None else {self.attr: v}) for v in self.probes)

    def single_filter(self, atoms: tuple[bool, ...]) -> bool:
        """Whether this union of atoms is the set of one (conjunctive) filter."""
        hits = [p for p, hit in zip(self.probes, atoms, strict=True) if hit]
        if all(atoms) or all(atoms[:-1]) or not hits:
            return True  # `true`, `exists`, `false`
        if None in hits or len({kind_of(p) for p in hits}) > 1:
            return False  # missing-or-something, or two types at once
        if any(p != p for p in hits):
            return False  # NaN alone: no numeric constraint admits it
        own = [i for i in range(len(self.ordered)) if atoms[i]]
        if not own:
            return True  # another type: its atoms here are all-or-nothing
        # An interval minus points: no open stretch may be missing between two hits.
        return all(atoms[i] for i in range(own[0], own[-1]) if i in self.stretches)


def _home_preds(attr: str, kinds: tuple[str, ...]) -> st.SearchStrategy[list[Pred]]:
    def keep(p: Pred) -> bool:
        return p[1] in ("exists", "is") or kind_of(p[2][0] if p[1] == "range" else p[2]) in kinds

    return st.lists(predicates([attr]).filter(keep), max_size=2)


def _number_universe() -> Universe:
    points = sorted({*NUMS, -math.inf, math.inf})
    ordered: list[Value] = [points[0]]
    for lo, hi in itertools.pairwise(points):
        mid = (
            (lo + hi) / 2
            if math.isfinite(lo) and math.isfinite(hi)
            else (hi - 5 if lo < 0 else lo + 5)
        )
        ordered += [mid, hi]
    stretches = frozenset(range(1, len(ordered), 2))
    return Universe(
        "x", ordered, stretches, ["a", True, False, math.nan], _home_preds("x", ("number", "bool"))
    )


def _successor(c: str) -> str:
    return c[:-1] + chr(ord(c[-1]) + 1)


def _string_universe() -> Universe:
    bounds = (
        {""}
        | {c + t for c in STRS for t in ("", "\0", "\0\0")}
        | {_successor(c) for c in STRS if c}
    )
    points = sorted(bounds)
    ordered: list[Value] = []
    stretches: set[int] = set()
    for lo, hi in itertools.pairwise([*points, None]):
        assert lo is not None
        ordered.append(lo)
        if hi is not None and hi.startswith(lo) and not hi[len(lo) :].strip("\0"):
            ordered += [lo + "\0" * i for i in range(1, len(hi) - len(lo))]  # finitely many
            continue
        # An infinite stretch (lo, hi): find one member that is not itself an atom.
        inside = [lo + "\0" * j + t for j in range(4) for t in ("\x01", "\U0010ffff")]
        probe = next(v for v in inside if v not in bounds and (hi is None or v < hi))
        stretches.add(len(ordered))
        ordered.append(probe)
    assert ordered == sorted(ordered)
    return Universe(
        "s",
        ordered,
        frozenset(stretches),
        [1, 2.5, True, False],
        _home_preds("s", ("string", "bool")),
    )


UNIVERSES = [_number_universe(), _string_universe()]


@pytest.mark.parametrize("u", UNIVERSES, ids=lambda u: u.attr)
@settings(max_examples=400)
@given(data=st.data())
def test_canonical_form_and_covering_are_exact(u: Universe, data: st.DataObject) -> None:
    a, b = build(data.draw(u.preds)), build(data.draw(u.preds))
    ca, cb = u.atoms(a), u.atoms(b)
    assert (a == b) == (ca == cb), (str(a), str(b))
    assert a.covers(b) == all(x or not y for x, y in zip(ca, cb, strict=True)), (str(a), str(b))


@pytest.mark.parametrize("u", UNIVERSES, ids=lambda u: u.attr)
@settings(max_examples=400)
@given(data=st.data())
def test_merge_is_exact_and_complete_on_one_attribute(u: Universe, data: st.DataObject) -> None:
    a, b = build(data.draw(u.preds)), build(data.draw(u.preds))
    union = tuple(x or y for x, y in zip(u.atoms(a), u.atoms(b), strict=True))
    m = merge(a, b)
    if m is None:
        assert not u.single_filter(union), f"merge({a}, {b}) should exist"
    else:
        assert u.atoms(m) == union, (str(a), str(b), str(m))


# ---- covering ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x < 10", "x < 5"),
        ("x < 10", "x == 3"),
        ("x <= 5", "x < 5"),
        ("x != 7", "x range [1, 5]"),
        ("x != 3 && x != 4", "x > 3 && x < 4"),
        ('s prefix "a"', 's == "abc"'),
        ('s prefix "a"', 's prefix "ab"'),
        ('s prefix "a"', 's range ["a", "a\\uffff"]'),
        ('s >= "a"', 's prefix "a"'),
        ('s < "b"', 's prefix "a"'),
        ("true", "x == 1 && y == 2"),
        ("true", "false"),
        ("exists x", 'x == "a"'),
        ("x is number", "x != 1"),
        ("b is bool", "b == true"),
        ("x > 1", "x > 1 && y == 2"),
        ("false", "false"),
        ("x == 1", "x == 1"),
    ],
)
def test_covers_positive(a: str, b: str) -> None:
    assert P(a).covers(P(b))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x < 5", "x < 10"),
        ("x < 5", "x <= 5"),
        ("x != 3", "x range [1, 5]"),
        ("x == 1", "x == true"),
        ('s prefix "ab"', 's prefix "a"'),
        ('s prefix "a"', 's <= "b"'),
        ("x > 1 && y == 2", "x > 1"),
        ("x == 1", "true"),
        ("false", "true"),
        ("x is number", "exists x"),
        ("x == 1", "y == 1"),
    ],
)
def test_covers_negative(a: str, b: str) -> None:
    assert not P(a).covers(P(b))


@settings(max_examples=300)
@given(pred_lists, pred_lists, notification_lists)
def test_covers_is_sound(pa: list[Pred], pb: list[Pred], ns: list[dict[str, Value]]) -> None:
    a, b = build(pa), build(pb)
    if a.covers(b):
        for n in ns:
            assert not b.matches(n) or a.matches(n), (str(a), str(b), n)


@given(pred_lists, pred_lists)
def test_covers_agrees_with_conjunction(pa: list[Pred], pb: list[Pred]) -> None:
    a, b = build(pa), build(pb)
    both = a & b
    assert a.covers(both) and b.covers(both)  # so covers is never trivially False
    assert a.covers(b) == (both == b)
    assert a.covers(a) and Filter.everything().covers(a) and a.covers(Filter.nothing())


@given(pred_lists, pred_lists, notification_lists)
def test_conjunction_semantics(pa: list[Pred], pb: list[Pred], ns: list[dict[str, Value]]) -> None:
    both = build(pa) & build(pb)
    assert both == build(pa + pb)
    for n in ns:
        assert both.matches(n) == ref_all(pa + pb, n)


# ---- merging ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "merged"),
    [
        ("x range [1, 3]", "x > 3 && x <= 5", "x range [1, 5]"),
        ("x range [1, 3]", "x range [2, 5]", "x range [1, 5]"),
        ("x >= 1 && x < 3", "x range [3, 5]", "x range [1, 5]"),
        ("x < 3", "x >= 3", "x is number"),
        ("x < 3", "x > 3", "x != 3"),
        ("x >= 1 && x < 3", "x > 3 && x <= 5", "x range [1, 5] && x != 3"),
        ("x != 1 && x != 2", "x == 2", "x != 1"),
        ("x != 1", "x != 2", "x is number"),
        ("x < 10", "x < 5", "x < 10"),
        ("x > 0 && y == 1", "x <= 0 && y == 1", "x is number && y == 1"),
        ('s < "b"', 's >= "b"', "s is string"),
        ('s <= "a"', 's > "a"', "s is string"),
        ('s < "a"', 's > "a"', 's != "a"'),
        ('s prefix "a"', 's prefix "b"', 's >= "a" && s < "c"'),
        ('s == "a"', 's == "a\\u0000"', 's range ["a", "a\\u0000"]'),
        ('s < "a"', 's >= "a\\u0000"', 's != "a"'),
        ('s <= "a"', 's >= "a\\u0000\\u0000"', 's != "a\\u0000"'),
        ('s prefix "a"', 's == "abc"', 's prefix "a"'),
        ("b == true", "b == false", "b is bool"),
        ("x == 1", "x == 1.0", "x == 1"),
        ("x == 1", "true", "true"),
        ("x == 1", "false", "x == 1"),
    ],
)
def test_merge_succeeds(a: str, b: str, merged: str) -> None:
    m = merge(P(a), P(b))
    assert m == P(merged), (str(m), merged)
    assert merge(P(b), P(a)) == m


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x == 1", "x == 2"),  # 1.5 is in neither
        ("x range [1, 2]", "x range [3, 4]"),
        ("x < 3", "x > 4"),
        ("x == 1", 'x == "a"'),
        ("x == 1", "x == true"),
        ("x == 1", "y == 1"),
        ("x == 1 && y == 1", "x == 2 && y == 2"),
        ("x < 3 && y == 1", "x >= 3 && y == 2"),  # each attribute alone would merge
        ("x == 1 && y == 1", "x == 1"),  # covered, but the other way round: merges to x == 1
        ('s == "a"', 's == "b"'),
        ('s <= "a"', 's >= "a\\u0000\\u0001"'),
        ('s < "a"', 's >= "a\\u0001"'),
        ('s prefix "a"', 's prefix "c"'),
        ("exists x", "exists y"),
    ],
)
def test_merge_fails_when_no_single_filter_is_the_union(a: str, b: str) -> None:
    if P(b).covers(P(a)):
        assert merge(P(a), P(b)) == P(b)
        return
    assert merge(P(a), P(b)) is None
    assert merge(P(b), P(a)) is None


@st.composite
def merge_candidates(draw: st.DrawFn) -> tuple[list[Pred], list[Pred]]:
    """Two filters that share their constraints on all attributes but one (or sometimes two,
    so that merge also sees pairs that must not merge although one attribute would)."""
    base = draw(st.lists(predicates(["y", "b"]), max_size=2))
    attr = draw(st.sampled_from(["x", "s", "b"]))
    one = st.lists(predicates([attr]), min_size=1, max_size=2)
    a, b = base + draw(one), base + draw(one)
    also_elsewhere = draw(st.booleans())
    if base and also_elsewhere:
        b.append(draw(predicates([base[0][0]])))
    return a, b


@settings(max_examples=500)
@given(st.one_of(merge_candidates(), st.tuples(pred_lists, pred_lists)), notification_lists)
def test_merge_is_exact(pair: tuple[list[Pred], list[Pred]], ns: list[dict[str, Value]]) -> None:
    a, b = build(pair[0]), build(pair[1])
    m = merge(a, b)
    assert m == merge(b, a)
    if m is None:
        return
    assert m.covers(a) and m.covers(b)
    assert P(str(m)) == m
    for n in ns:
        assert m.matches(n) == (a.matches(n) or b.matches(n)), (str(a), str(b), str(m), n)


# ---- index keys -------------------------------------------------------------------------------


def test_index_keys() -> None:
    assert Filter.equals("class", 17).index_key() == ("class", 17)
    assert P("x == 1.0").index_key() == P("x == 1").index_key() == ("x", 1)
    assert P('b == 2 && a == "s"').index_key() == ("a", "s")  # first attribute by name
    assert P("a > 1 && b == 2").index_key() == ("b", 2)
    assert P('s range ["a", "a"]').index_key() == ("s", "a")
    assert P("x > 1").index_key() is None
    assert Filter.everything().index_key() is None and Filter.nothing().index_key() is None
    t, one = P("x == true").index_key(), P("x == 1").index_key()
    assert t != one and len({t: 0, one: 1}) == 2  # True == 1 in Python; the keys still differ
    assert P("x == false").index_key() != P("x == 0").index_key()
    assert normalize_value(1.0) == 1 and type(normalize_value(1.0)) is int
    assert type(normalize_value(-0.0)) is int and normalize_value(2.5) == 2.5
    assert normalize_value(True) is True and normalize_value("a") == "a"
    assert index_value(True) == ("bool", True) and index_value(3.0) == 3


def test_notification_index_keys() -> None:
    keys = list(notification_index_keys({"a": 1.0, "b": True, "c": "s", "d": 2.5, "e": None}))  # type: ignore[dict-item]
    assert keys == [("a", 1), ("b", ("bool", True)), ("c", "s"), ("d", 2.5)]
    assert type(keys[0][1]) is int


@given(pred_lists, notification_lists)
def test_matching_notification_carries_the_filter_index_key(
    preds: list[Pred], ns: list[dict[str, Value]]
) -> None:
    f = build(preds)
    key = f.index_key()
    for n in ns:
        if f.matches(n) and key is not None:
            assert key in set(notification_index_keys(n))
        if key is not None and key not in set(notification_index_keys(n)):
            assert not f.matches(n)
