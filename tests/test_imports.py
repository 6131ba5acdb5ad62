"""Imports point down (DESIGN.md, "Parts and their boundaries"), checked on the source: every
import statement of every module, the ones inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEEBLE = Path(__file__).resolve().parent.parent / "weeble"

# package -> what it must never import (a prefix of a module name)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "weeble.core": ("weeble.",),  # imports nothing else of weeble (but itself)
    "weeble.model": ("weeble.",),  # the core only (see ALLOWED)
    "weeble.sim": ("weeble.orchestrator", "weeble.chaos", "weeble.analytics",
                   "weeble.commands", "weeble.cli"),
    "weeble.runtime": ("weeble.orchestrator", "weeble.chaos", "weeble.analytics",
                       "weeble.commands", "weeble.cli", "weeble.sim"),
    # chaos reaches live brokers through the orchestrator's Backend: never the other way
    "weeble.orchestrator": ("weeble.chaos", "weeble.analytics", "weeble.commands",
                            "weeble.cli"),
    "weeble.chaos": ("weeble.analytics", "weeble.commands", "weeble.cli"),
}
ALLOWED: dict[str, tuple[str, ...]] = {
    "weeble.core": ("weeble.core",),
    "weeble.model": ("weeble.model", "weeble.core"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(WEEBLE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, absolute or relative (`package`: the one
    relative imports start from; by default the file's own)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    if package is None:
        package = module_name(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return sorted(out)


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((WEEBLE.parent / package.replace(".", "/")).rglob("*.py")):
        for line, name in imports(path):
            if not name.startswith("weeble."):
                continue
            bad = any(name.startswith(p) for p in FORBIDDEN[package])
            if bad and not any(name.startswith(a + ".") or name == a
                               for a in ALLOWED.get(package, ())):
                found.append(f"{path.relative_to(WEEBLE.parent)}:{line}: imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function counts."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from weeble.chaos import runner\n\n\nfrom . import x\n")
    assert imports(source, "weeble.sim") == [(2, "weeble.chaos.runner"),
                                                    (5, "weeble.sim.x")]
