"""Imports point down (DESIGN.md, "Parts and their boundaries"), checked on the source against
the whole layer table: every import statement of every module, the ones inside functions
included. Inside a package too no two modules import each other, directly or round a circle:
what both need moves into a module below them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEEBLE = Path(__file__).resolve().parent.parent / "weeble"

# The layer table (DESIGN.md, "Parts and their boundaries"), from the bottom: a package imports
# only packages of the floors below its own (and itself), never one beside it on its floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    # the pure broker; the generated protobuf; the terminal's verbosity and the progress of
    # long work (neither imports anything of weeble's)
    ("weeble.core", "weeble.proto", "weeble.verbosity", "weeble.progress"),
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


def module_name(path: Path, root: Path = WEEBLE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
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


def module_graph(root: Path = WEEBLE) -> dict[str, set[str]]:
    """Module -> the weeble modules it imports (every import statement, as `imports` reads
    them): `from a.b import c` names module a.b.c where there is one, else a.b."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        graph[name] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for _, imported in imports(path, package):
            target = imported if imported in paths else imported.rpartition(".")[0]
            if target in paths and target != name:
                graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `graph`: its strongly connected components of two or more modules
    (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_module_imports_itself_round_a_circle() -> None:
    """A circle of imports, even inside one package and through an import inside a function,
    means two modules that are one layer: move what both need below them."""
    assert circles(module_graph()) == []


def test_the_circle_check_sees_a_lazy_circle(tmp_path: Path) -> None:
    """The circle check itself: a module that imports, inside a function, one that imports it
    closes a circle; a chain that only points down does not."""
    package = tmp_path / "weeble" / "p"
    package.mkdir(parents=True)
    (tmp_path / "weeble" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("X = 1\n")
    (package / "a.py").write_text("from weeble.p.low import X\nfrom weeble.p.b import Y\n")
    (package / "b.py").write_text("Y = 2\n\n\ndef f():\n    from weeble.p import a\n")
    (package / "c.py").write_text("from weeble.p import low\n")
    graph = module_graph(tmp_path / "weeble")
    assert graph["weeble.p.c"] == {"weeble.p.low"}
    assert circles(graph) == [["weeble.p.a", "weeble.p.b"]]


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function counts."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from weeble.chaos import runner\n\n\nfrom . import x\n")
    assert imports(source, "weeble.sim") == [(2, "weeble.chaos.runner"),
                                                    (5, "weeble.sim.x")]
