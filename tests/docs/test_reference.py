"""The generated reference pages are current: the CLI from the argparse definitions, the scenario
schema from the pydantic models (scripts/gen_reference.py). The trace schema has its own test
(tests/trace/test_trace_contract.py)."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import pytest

from tests.docs.markdown import ROOT


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


@pytest.mark.parametrize("page", sorted(GEN.PAGES), ids=lambda p: p.name)
def test_the_generated_page_is_current(page: object) -> None:
    render = GEN.PAGES[page]
    assert page.read_text(encoding="utf-8") == render(), (  # type: ignore[attr-defined]
        f"{page.relative_to(ROOT)} is stale: python scripts/gen_reference.py")  # type: ignore[attr-defined]


def test_the_cli_page_names_every_command_and_option() -> None:
    from weeble.cli import COMMANDS, build_parser

    text = GEN.cli_reference()
    for name in COMMANDS:
        assert f"## weeble {name}\n" in text, name
    simulate = next(a for a in build_parser()._actions if a.dest == "command").choices["simulate"]
    for action in simulate._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):  # a row's first cell names it
                assert re.search(r"^\| `[^`|]*" + re.escape(option) + r"\b", text, re.M), option


def test_the_scenario_page_has_every_field_with_its_comment() -> None:
    """Every field of every model reachable from Scenario has a row, and a field's comment in
    the source is its meaning (`check_every`'s comment as the example)."""
    from weeble.model.scenario import Scenario, Timing

    text = GEN.scenario_reference()
    for name in Scenario.model_fields:
        assert f"| `{name}` |" in text, name
    for name in Timing.model_fields:
        assert f"| `{name}` |" in text, name
    assert "| `check_every` | number \\| null | `1.0` | > 0 | None: no legitimacy checks |" in text
