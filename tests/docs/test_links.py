"""Every relative link in the README and under docs/ resolves: the file exists, and an anchor
(`page.md#section`) names a heading or an explicit `<a id>` of that page."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from tests.docs.markdown import ROOT, pages

LINK = re.compile(r"(?<!\!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(page: Path) -> str:
    """The page without its fenced blocks and inline code (links there are not links)."""
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", page.read_text(encoding="utf-8"),
                  flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", page.read_text(encoding="utf-8"),
                  flags=re.MULTILINE | re.DOTALL)
    found: set[str] = set(re.findall(r"<a id=\"([^\"]+)\"", text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+?)\s*#*$", text, flags=re.MULTILINE):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    out = []
    for m in LINK.finditer(_prose(page)):
        target = m["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = page if not path_part else (page.parent / path_part).resolve()
        if not dest.exists():
            out.append(f"{page.relative_to(ROOT)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{page.relative_to(ROOT)}: {target}: no such section")
    return out


def test_every_relative_link_resolves() -> None:
    broken = [b for page in pages() for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_checker_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A title\n\n## The `x` part, and more\n")
    page.write_text("[ok](there.md#the-x-part-and-more) [no](gone.md) [bad](there.md#nope)\n"
                    "`[code](gone.md)` [web](https://example.org)\n")
    assert sorted(broken_links_at(page)) == ["gone.md: no such file",
                                             "there.md#nope: no such section"]


def broken_links_at(page: Path) -> list[str]:
    import tests.docs.test_links as me

    saved = me.ROOT
    me.ROOT = page.parent
    try:
        return [b.split(": ", 1)[1] for b in broken_links(page)]
    finally:
        me.ROOT = saved
