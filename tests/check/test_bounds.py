"""One source for every bound (issue 23 item 2): the formulas docs/trace-schema.md prints are
the expressions weeble.core.rom evaluates, and the run header, the scenario and the simulator
all report that value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from weeble.core.rom import Algorithm
from weeble.model.scenario import parse_scenario
from weeble.trace.header import RunHeader

DOC = Path(__file__).resolve().parents[2] / "docs" / "trace-schema.md"
NAMES = {"π": "pi", "ρ": "rho", "δmax": "delta_max", "δmin": "delta_min"}


def from_text(formula: str, **values: float) -> float:
    """Evaluate a formula as the document prints it (2π + d·δmax), by the test's own reading."""
    expr = formula
    for symbol, name in NAMES.items():
        expr = expr.replace(symbol, f" {name}")
    expr = re.sub(r"(\d) (?=[a-z])", r"\1*", expr).replace("·", "*")
    return float(eval(expr, {"__builtins__": {}, "max": max}, values))


def documented() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| \([\d.]+\) \|$", text, flags=re.M)
    wrapper = re.search(r"^\| any, under the periodic-rebuild wrapper.*?\| ([^|]+) \|", text,
                        flags=re.M)
    assert wrapper is not None
    return {**{name: f.strip() for name, f in rows}, "wrapper": wrapper.group(1).strip()}


def data(algorithm: str, wrapper: bool, adverts: bool) -> dict:
    return {"name": "b", "seed": 1, "duration": 10, "topology": {"kind": "chain", "brokers": 7},
            "routing": {"algorithm": algorithm, "wrapper": wrapper, "adverts": adverts},
            "timing": {"pi": 7.3, "rho": 2.1, "delta_min": 0.01, "delta_max": 0.09}}


@pytest.mark.parametrize("algorithm", [a.value for a in Algorithm])
@pytest.mark.parametrize(("wrapper", "adverts"), [(False, False), (True, False), (False, True)])
def test_the_documented_formula_is_the_bound_of_the_header(algorithm: str, wrapper: bool,
                                                           adverts: bool) -> None:
    try:
        s = parse_scenario(data(algorithm, wrapper, adverts))
    except ValueError as e:  # a combination the scenario refuses is not a run
        assert "adverts" in str(e) or "wrapper" in str(e) or "pi" in str(e)
        return
    formulas = documented()
    assert set(formulas) == {a.value for a in Algorithm} | {"wrapper"}
    p = s.params
    value = from_text(formulas["wrapper" if wrapper else algorithm], pi=p.pi, rho=p.rho,
                      d=p.d, delta_max=p.delta_max)
    if adverts:
        value *= 2  # Δ_a = 2Δ, as the document says
    header = RunHeader.of_scenario(s, backend="sim", clock="virtual")
    assert header.bound == pytest.approx(value, rel=1e-12)
    assert s.bound == header.bound


def test_merging_is_documented_with_the_thesis_bounds() -> None:
    """The seed's (3.8) and (3.9): the printed merging bounds hold once a dissolved merger
    renews no constituent beyond its own lease (tests/sim/test_claims.py holds the runs to
    them)."""
    f = documented()
    assert f["merging1"] == "2π + d·δmax" and f["merging2"] == "2π + ρ + d·δmax"
    assert "4π" not in DOC.read_text(encoding="utf-8")
