"""Imports point down (DESIGN.md, "Parts and their boundaries"), checked on the source against
the whole layer table: every import statement of every module, the ones inside functions
included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEEBLE = Path(__file__).resolve().parent.parent / "weeble"

# The layer table (DESIGN.md, "Parts and their boundaries"), from the bottom: a package imports
# only packages of the floors below its own (and itself), never one beside it on its floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    # the pure broker; the generated protobuf; the terminal's verbosity (imports nothing)
    ("weeble.core", "weeble.proto", "weeble.verbosity"),
    ("weeble.model", "weeble.codec"),  # scenario models; the wire codec (core <-> protobuf)
    ("weeble.trace",),
    ("weeble.check",),
    ("weeble.sim", "weeble.runtime"),  # the two drivers: what both need sits below them
    ("weeble.orchestrator",),
    # chaos reaches live brokers through the orchestrator's Backend: never the other way
    ("weeble.chaos",),
    ("weeble.analytics",),
    # rendering and argument parsing only; the pytest plugin for chaos suites
    ("weeble.commands", "weeble.testing"),
    ("weeble.cli",),
)
# the package's own guard and build state: every layer may be loaded through it
BASE: tuple[str, ...] = ("weeble._build",)
FLOOR: dict[str, int] = {package: n for n, floor in enumerate(FLOORS) for package in floor}


def package_of(name: str) -> str | None:
    """The package of the layer table that module `name` belongs to (None: not of weeble)."""
    parts = name.split(".")
    if parts[0] != "weeble" or len(parts) < 2:
        return None
    return ".".join(parts[:2])


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
    root = WEEBLE.parent / package.replace(".", "/")
    paths = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    for path in paths:
        for line, name in imports(path):
            wrong = misplaced(package, name)
            if wrong is not None:
                found.append(f"{path.relative_to(WEEBLE.parent)}:{line}: {wrong}")
    return found


def misplaced(package: str, name: str) -> str | None:
    """Why `package` may not import module `name` (None: it may)."""
    target = package_of(name)
    if target is None or target == package or target in BASE:
        return None
    if target not in FLOOR:
        return f"imports {name}, of a package the layer table does not place"
    if FLOOR[target] >= FLOOR[package]:
        return f"imports {name}, floor {FLOOR[target]} from floor {FLOOR[package]}"
    return None


@pytest.mark.parametrize("package", sorted(FLOOR))
def test_imports_point_down(package: str) -> None:
    assert violations(package) == []


def test_every_package_has_a_floor() -> None:
    """A new package must be placed in the table, or nothing would check it."""
    packages = {f"weeble.{p.stem}" for p in WEEBLE.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists())
                or (p.suffix == ".py" and p.stem != "__init__")}
    assert packages - set(FLOOR) - set(BASE) == set()


def test_the_table_forbids_what_design_forbids() -> None:
    """The boundaries DESIGN.md names, read off the table."""
    def may(importer: str, imported: str) -> bool:
        return misplaced(importer, f"{imported}.x") is None

    assert not may("weeble.sim", "weeble.runtime") and not may("weeble.runtime", "weeble.sim")
    for lower in ("weeble.model", "weeble.trace", "weeble.check", "weeble.codec"):
        assert not may(lower, "weeble.sim") and not may(lower, "weeble.runtime")
    for driver in ("weeble.core", "weeble.sim", "weeble.runtime"):
        assert not may(driver, "weeble.orchestrator") and not may(driver, "weeble.chaos")
    assert may("weeble.chaos", "weeble.orchestrator")
    assert not may("weeble.orchestrator", "weeble.chaos")
    assert all(not may("weeble.core", p) for p in FLOOR if p != "weeble.core")
    assert may("weeble.sim", "weeble.codec") and may("weeble.runtime", "weeble.codec")
    assert misplaced("weeble.sim", "weeble.elsewhere.x") is not None  # not placed: refused


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function counts."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from weeble.chaos import runner\n\n\nfrom . import x\n")
    assert imports(source, "weeble.sim") == [(2, "weeble.chaos.runner"),
                                                    (5, "weeble.sim.x")]
