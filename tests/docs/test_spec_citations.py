"""Every citation of a spec names a section that exists in the repository: `spec KEY §SECTION`
is SECTION of docs/spec/KEY.md (a heading such as `### 5.6`, `## 5.`, `### C.1`, `## Part C`, or
item N of a numbered list under one: `§8.16`, `§C.1-10`), in the code's docstrings and comments,
the tests, the benchmarks, the scripts and the docs. A citation in another form (`spec §5.6`,
`spec C.2`, `spec ch. 4 §3.11`: which spec?) fails."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from tests.docs.markdown import ROOT

SPECS = ROOT / "docs" / "spec"
KEYS = tuple(sorted(p.stem for p in SPECS.glob("*.md") if p.stem != "README"))
# a lettered section may name an item of its list (C.1-10); a numbered one is N.K (8.16), and
# what follows a hyphen there is a range (§1.2-1.3: its first section is checked)
CITATION = re.compile(r"\bspec(?:'s)?\s+(?P<key>[a-z0-9-]+)\s+§(?P<section>[A-D](?:\.\d+)*"
                      r"(?:-\d+)?|\d+(?:\.\d+)*)", re.IGNORECASE)
# what a citation looks like in any other form: spec §.., spec C.2, spec ch. 4, spec Part D
LOOSE = re.compile(r"\bspec(?:'s)?\s+(?:§|[A-D]\.\d|ch\.\s?\d|part\s+[A-D]\b|[A-D]\s+and\b)",
                   re.IGNORECASE)
WHERE = ("weeble", "tests", "benchmarks", "scripts", "docs", "README.md")
# the specs themselves; this file, which shows wrong citations on purpose
NOT_CITING = ("docs/spec/", "tests/docs/test_spec_citations.py")


def sources() -> list[Path]:
    out = []
    for name in WHERE:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in (".py", ".md"))
        out += [p for p in files if not str(p.relative_to(ROOT)).startswith(NOT_CITING)
                and ".venv" not in p.parts]
    return out


@cache
def sections(key: str) -> frozenset[str]:
    """The section numbers of docs/spec/KEY.md: its headings' numbers, and N.K / X.N-K for item
    K of a numbered list under heading N / X.N."""
    found: set[str] = set()
    current: str | None = None
    for line in (SPECS / f"{key}.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#+\s+(?:Part\s+)?(?P<n>[A-D](?:\.\d+)*|\d+(?:\.\d+)*)\.?[\s—]",
                           line)
        if heading:
            current = heading["n"]
            found.add(current)
            continue
        item = re.match(r"^\s*(?:\*\*)?(?P<k>\d+)\.\s", line)
        if item and current is not None:
            found.add(f"{current}-{item['k']}" if current[0].isalpha() and "." in current
                      else f"{current}.{item['k']}")
    return frozenset(found)


def problems(path: Path) -> list[str]:
    out = []
    text = path.read_text(encoding="utf-8")
    for m in CITATION.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        key, section = m["key"].lower(), m["section"]
        if key not in KEYS:
            out.append(f"{path.relative_to(ROOT)}:{line}: {m[0]}: no docs/spec/{key}.md")
        elif section not in sections(key):
            out.append(f"{path.relative_to(ROOT)}:{line}: {m[0]}: no section {section} in"
                       f" docs/spec/{key}.md")
    for m in LOOSE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(f"{path.relative_to(ROOT)}:{line}: {m[0]!r}: cite `spec KEY §SECTION`"
                   f" (KEY one of {', '.join(KEYS)})")
    return out


def test_every_spec_citation_names_a_section_that_exists() -> None:
    found = [p for path in sources() for p in problems(path)]
    assert not found, f"{len(found)} citation(s):\n" + "\n".join(found)


def test_the_sections_are_read_from_the_specs() -> None:
    assert {"ch3", "ch4", "ch5", "seed23"} <= set(KEYS)
    assert {"5.6", "8", "8.16", "2.10"} <= sections("ch3")
    assert {"C.1", "C.1-10", "D.4", "A.13-5", "A"} <= sections("seed23")
    assert "9.99" not in sections("ch3") and "C.1-99" not in sections("seed23")


def test_a_wrong_citation_is_found(tmp_path: Path) -> None:
    import tests.docs.test_spec_citations as me

    page = tmp_path / "x.py"
    page.write_text('"""spec ch3 §5.6, spec ch3 §9.99, spec nowhere §1,'
                    ' spec §5.6, spec C.2"""\n')
    saved = me.ROOT
    me.ROOT = tmp_path
    try:
        found = problems(page)
    finally:
        me.ROOT = saved
    assert [f.split(": ", 1)[1] for f in found] == [
        "spec ch3 §9.99: no section 9.99 in docs/spec/ch3.md",
        "spec nowhere §1: no docs/spec/nowhere.md",
        "'spec §': cite `spec KEY §SECTION` (KEY one of ch3, ch4, ch5, seed23)",
        "'spec C.2': cite `spec KEY §SECTION` (KEY one of ch3, ch4, ch5, seed23)"]
