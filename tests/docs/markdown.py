"""The documentation as the tests read it: its pages, their fenced blocks, their links.

The convention (docs/README.md says it to writers):
- ```console blocks hold commands, each line starting with `$ `; a line ending in `\\` goes on,
  a heredoc (`<<'END'`) takes its lines up to `END`; other lines are output, not run. A command
  that must fail says so at its end: `# exit 2`. Every command runs in the docs tests, in page
  order, in one shell per page.
- ```python blocks run too, in page order, in one interpreter per page.
- a block that cannot run on this machine has the line `<!-- docs-test: not run: REASON -->`
  right above it (keep these few); a block whose commands a test already runs (a live suite,
  not run twice) has `<!-- docs-test: run by tests/PATH.py -->`, and that file must name each
  of the commands' options.
- ```bash, ```sh and ```shell blocks are not used (they would hide commands from the tests);
  output is ```text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = re.compile(r"<!--\s*docs-test:\s*not run:\s*(?P<reason>.+?)\s*-->")
RUN_BY = re.compile(r"<!--\s*docs-test:\s*run by\s+(?P<test>\S+?)\s*-->")
EXPECT = re.compile(r"\s+#\s*exit\s+(?P<status>\d+)\s*$")
HEREDOC = re.compile(r"<<-?\s*['\"]?(?P<end>\w+)['\"]?")


def pages() -> list[Path]:
    """README.md and every page under docs/ (the vendored specs are the papers' notes, not ours
    to run, but their links are checked too)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    not_run: str | None  # the reason, when the block is marked not to run
    run_by: str | None = None  # the test file that runs these commands (a live suite, once)

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(?P<fence>`{3,}|~{3,})(?P<info>.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, fence = i, m["fence"]
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        above = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker, by = NOT_RUN.search(above), RUN_BY.search(above)
        out.append(Block(page, start + 1, m["info"].strip(), "\n".join(body),
                         marker["reason"] if marker else None, by["test"] if by else None))
        i += 1
    return out


@dataclass(frozen=True)
class Command:
    text: str  # as the shell gets it (continuations and heredoc included)
    status: int  # the exit status it must end with


def commands(block: Block) -> list[Command]:
    """The commands of a console block, in order."""
    lines = block.text.splitlines()
    out: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            continue
        parts = [line[2:]]
        while parts[-1].endswith("\\") and i < len(lines):
            parts.append(lines[i])
            i += 1
        first = parts[0]
        heredoc = HEREDOC.search(first)
        if heredoc:
            while i < len(lines):
                parts.append(lines[i])
                i += 1
                if parts[-1].strip() == heredoc["end"]:
                    break
        status = 0
        expect = EXPECT.search(parts[-1] if not heredoc else first)
        if expect:
            status = int(expect["status"])
        out.append(Command("\n".join(parts), status))
    return out
