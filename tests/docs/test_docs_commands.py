"""Every command in a docs code block runs as written (tests/docs/markdown.py: the convention).

Each page's ```console commands run in order in one bash shell, from a scratch directory that
holds the repository's scenarios/, benchmarks/ and scripts/ (so `runs/` and the files a page
writes go there), with this virtualenv's `weeble` and `python` first on the PATH. Each command
must end with the exit status it states (0 unless it says `# exit N`). Each page's ```python
blocks run in one interpreter. Live testbeds a page brings up are brought down at the end, also
on failure."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs.markdown import ROOT, Block, blocks, commands, pages

RUNNABLE = ("console", "python")
# The blocks that cannot run here, each with its reason on the page; keep this list tiny.
MAX_NOT_RUN = 3
# blocks whose commands a live or long test already runs (docs-test: run by ...), not run twice
MAX_RUN_BY = 6
COMMAND = re.compile(r"^ {4,}(\$ |weeble |python |pytest |bash |sudo |kubectl |docker )")
# read-only, so linked; copied: what a page's commands may write into (k8s render, ...)
LINKED = ("benchmarks", "scripts", "analytics")
COPIED = ("scenarios", "k8s", "examples")
BIN = Path(sys.executable).parent
# written by their generators, which hold no commands (python -m weeble.check.doc)
GENERATED = (ROOT / "docs" / "trace-schema.md",)


def _blocks() -> list[Block]:
    return [b for page in pages() if "spec" not in page.relative_to(ROOT).parts[:2]
            for b in blocks(page)]


def _runnable_pages() -> list[Path]:
    found = []
    for b in _blocks():
        if b.info in RUNNABLE and b.not_run is None and b.run_by is None and \
                b.page not in found:
            found.append(b.page)
    return found


def test_the_convention_holds() -> None:
    """Commands sit in console blocks (nothing hides from the tests in a bash block), every
    console line that looks like a command is one, and the not-run list stays tiny."""
    bad = [b.where() for b in _blocks() if b.info in ("bash", "sh", "shell", "zsh")
           or (b.info == "" and b.page not in GENERATED)]
    assert not bad, f"use ```console with `$ ` prompts (or ```text for output): {bad}"
    not_run = [(b.where(), b.not_run) for b in _blocks() if b.not_run is not None]
    assert len(not_run) <= MAX_NOT_RUN, f"too many blocks not run: {not_run}"
    assert all(reason and len(reason) > 10 for _, reason in not_run), not_run
    indented = [f"{page.relative_to(ROOT)}:{n}" for page in pages() for n in _indented(page)]
    assert not indented, f"commands in an indented block, use ```console: {indented}"
    by = [b for b in _blocks() if b.run_by is not None]
    assert len(by) <= MAX_RUN_BY, f"too many blocks run elsewhere: {[b.where() for b in by]}"
    for b in by:
        test = ROOT / b.run_by
        assert test.is_file() and test.parts[-2:][0] != "docs", f"{b.where()}: no {b.run_by}"
        text = test.read_text(encoding="utf-8")
        options = {w.split("=")[0] for c in commands(b) for w in c.text.split()
                   if w.startswith("--")}
        missing = sorted(o for o in options if o not in text)
        assert not missing, f"{b.where()}: {b.run_by} does not use {missing}"
    empty = [b.where() for b in _blocks()
             if b.info == "console" and b.not_run is None and not commands(b)]
    assert not empty, f"console blocks without a `$ ` command: {empty}"


def _indented(page: Path) -> list[int]:
    """Lines of an indented code block (after a blank line, outside fences) that hold a command:
    such a block would hide it from these tests."""
    found, fence, blank = [], False, True
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(("```", "~~~")):
            fence = not fence
        elif not fence and blank and COMMAND.match(line):
            found.append(n)
        blank = not line.strip() or (blank and COMMAND.match(line) is not None)
    return found


def _script(page: Path) -> str:
    lines = ["set -u", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for b in blocks(page):
        if b.info != "console" or b.not_run is not None or b.run_by is not None:
            continue
        for c in commands(b):
            shown = c.text.splitlines()[0]
            where = shlex.quote(f"docs-test: {b.where()}")
            lines += [f"echo {shlex.quote('$ ' + shown)}", c.text,
                      "rc=$?",
                      f"if [ $rc -ne {c.status} ]; then echo {where}"
                      f"\": exit $rc, expected {c.status}: \"{shlex.quote(shown)} >&2; exit 97; fi"]
    lines.append("wait")
    return "\n".join(lines) + "\n"


def _bring_down(work: Path, env: dict[str, str]) -> None:
    runs = work / "runs"
    if not runs.is_dir():
        return
    for run in sorted(p for p in runs.iterdir() if (p / "testbed.json").exists()):
        subprocess.run([str(BIN / "weeble"), "down", "--runs-dir", str(runs), run.name],
                       cwd=work, env=env, capture_output=True, timeout=120)


# A page that brings up brokers (on the fixed 127.0.0.x addresses of scenarios/quickstart*.yaml),
# runs the chaos suite, or cleans up what runs left on the system, is marked live: it runs in
# the live tests' group (tests/conftest.py), one after the other with them; the other pages
# (simulations, analyses, renderings) run beside them on the other worker.
LIVE_COMMAND = re.compile(r"\bweeble +(up|run|subscribe|publish|chaos|reconfigure|status|down|"
                          r"clean|replay|image)\b|\bpytest\b|\bspark-(daemon|submit)|\bdocker\b|"
                          r"\bkubectl +apply\b|\bsudo\b")
LIVE_PYTHON = re.compile(r"\bTest" r"bed\b|livebed")  # split: not a live module itself


def _is_live(page: Path) -> bool:
    for b in blocks(page):
        if b.not_run is not None or b.run_by is not None:
            continue
        if b.info == "console" and any(LIVE_COMMAND.search(c.text) for c in commands(b)):
            return True
        if b.info == "python" and LIVE_PYTHON.search(b.text):
            return True
    return False


def _pages() -> list[Any]:
    return [pytest.param(page, id=str(page.relative_to(ROOT)),
                         marks=[pytest.mark.live] if _is_live(page) else [])
            for page in _runnable_pages()]


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("page", _pages())
def test_every_command_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in LINKED:
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    for name in COPIED:
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    try:
        script = _script(page)
        if script.count("\n") > 4:
            done = subprocess.run(["bash", "-c", script], cwd=work, env=env, text=True,
                                  capture_output=True, timeout=1400)
            assert done.returncode == 0, (
                f"{page.relative_to(ROOT)}: a command failed\n{done.stderr[-4000:]}\n"
                f"--- stdout ---\n{done.stdout[-4000:]}")
        code = "\n\n".join(b.text for b in blocks(page)
                           if b.info == "python" and b.not_run is None)
        if code:
            done = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, text=True,
                                  capture_output=True, timeout=300)
            assert done.returncode == 0, f"{page.relative_to(ROOT)}: python\n{done.stderr}"
    finally:
        _bring_down(work, env)
