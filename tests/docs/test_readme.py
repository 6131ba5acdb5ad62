"""The README is an entry page: at most 250 lines, the two commands as they really are, and the
tour's commands in console blocks (which tests/docs/test_docs_commands.py runs)."""

from __future__ import annotations

from tests.docs.markdown import ROOT, blocks, commands

README = ROOT / "README.md"


def test_the_readme_is_an_entry_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the rest to docs/"


def test_the_two_commands_are_the_scripts_that_exist() -> None:
    first = next(b for b in blocks(README) if b.info == "console")
    assert [c.text.split("#")[0].strip() for c in commands(first)] == [
        "bash scripts/main.sh", "bash scripts/test.sh"]
    for script in ("main.sh", "test.sh"):
        assert (ROOT / "scripts" / script).is_file()


def test_the_tour_simulates_runs_injects_checks_and_reconfigures() -> None:
    run = [c.text for b in blocks(README) if b.info == "console" and b.not_run is None
           for c in commands(b)]
    for verb in ("weeble simulate", "weeble run", "weeble chaos", "weeble check",
                 "weeble reconfigure"):
        assert any(c.startswith(verb) for c in run), verb
