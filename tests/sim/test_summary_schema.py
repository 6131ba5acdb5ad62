"""summary.json is in the contract (docs/trace-schema.md, "summary.json", generated from
weeble.trace.summary): every summary the simulator writes has exactly the documented fields and,
where the table lists them, exactly the documented keys. A field added, renamed or dropped
without the table fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.trace.test_trace_contract import run, scenario
from weeble.sim import run as sim_run
from weeble.trace.summary import SUMMARY, SUMMARY_VERSION


def _at(summary: dict[str, Any], name: str) -> Any:
    value: Any = summary
    for part in name.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize(("algorithm", "hierarchical"), [("identity", True), ("merging1", False)])
def test_every_summary_has_the_documented_fields(algorithm: str, hierarchical: bool,
                                                 tmp_path: Path) -> None:
    run(scenario(algorithm, hierarchical, False, seed=2), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["v"] == SUMMARY_VERSION == sim_run.SUMMARY_VERSION
    assert set(summary) == {f.name for f in SUMMARY if "." not in f.name}
    for f in SUMMARY:
        value = _at(summary, f.name)
        if not f.keys or value is None:
            continue
        rows = value if isinstance(value, list) else [value]
        assert rows, f"{f.name}: no row to hold to the table"
        for row in rows:
            extra = {"episode", "timing"} if f.name == "verdict.parts" else set()
            assert set(f.keys) <= set(row) <= set(f.keys) | extra, (f.name, sorted(row))
