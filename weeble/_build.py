"""Which build of the simulator's hot path a checkout holds: pure Python, or compiled with mypyc
by `scripts/compile.py` (extension modules beside their .py files), and whether that build may
run. Read by the import guard of `weeble/__init__.py` (at every start, so it only reads files)
and by `scripts/compile.py --status` (one definition of "current" for both).

The build's stamp, `weeble/_compiled.json`, names every compiled module with the SHA-256 of the
source it was compiled from and the Python it was compiled for. The build may run only if the
stamp says this Python, every module's source still has that digest, and every module's
extension (and the group's shared library) is in place: otherwise none of it runs (the compiled
modules call each other natively, so they work all together or not at all).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

STAMP = "weeble/_compiled.json"
# mypyc's group: its shared library, the module `weeble_compiled__mypyc`, sits at the
# checkout's root, beside `weeble/` (mypyc derives the compiled modules' `__file__` and
# `__path__` from its place). A top-level module there is importable only with the root on
# sys.path, so the import guard of `weeble/__init__.py` maps its name to its file.
GROUP = "weeble_compiled"
SHARED_LIBRARY = GROUP + "__mypyc"


def source(root: Path, module: str) -> Path:
    """The .py file of a dotted module name under `root`."""
    path = root.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def extension(root: Path, module: str) -> Path:
    """Where the compiled extension of `module` sits for this Python."""
    path = root.joinpath(*module.split("."))
    if path.is_dir():
        path = path / "__init__"
    return path.with_name(path.name + EXTENSION_SUFFIXES[0])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Build:
    """The compiled build found in a checkout (there is one when its stamp exists)."""

    modules: dict[str, str]  # module name -> SHA-256 of the source it was compiled from
    problem: str | None  # why it must not run; None: it is current

    def describe(self) -> str:
        if self.problem is None:
            return f"compiled (mypyc, {len(self.modules)} modules)"
        return f"pure Python: the compiled build is not used ({self.problem})"


def inspect(root: Path) -> Build | None:
    """The build in checkout `root`, or None when there is none (pure Python)."""
    stamp = root / STAMP
    if not stamp.exists():
        if extension(root, SHARED_LIBRARY).exists():  # a build cut short, or a stamp removed
            return Build(modules={}, problem=f"compiled extensions without {STAMP}: rebuild")
        return None
    try:
        built = json.loads(stamp.read_text())
        modules = {str(k): str(v) for k, v in built["modules"].items()}
        python = built.get("python")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Build(modules={}, problem=f"{STAMP} is unreadable: rebuild")
    if python != sys.implementation.cache_tag:
        return Build(modules=modules, problem=f"built for {python}, this is "
                                              f"{sys.implementation.cache_tag}: rebuild")
    changed = sorted(m for m, sha in modules.items()
                     if not source(root, m).exists() or digest(source(root, m)) != sha)
    if changed:
        return Build(modules=modules, problem="stale: changed since the build: "
                                              + ", ".join(changed))
    missing = sorted(m for m in [*modules, SHARED_LIBRARY] if not extension(root, m).exists())
    if missing:
        return Build(modules=modules, problem="incomplete: no extension for "
                                              + ", ".join(missing))
    return Build(modules=modules, problem=None)
