"""Compile the simulator's hot path with mypyc, from the same Python source (issue 15).

    python scripts/compile.py            # build: X.cpython-311-*.so beside each X.py below
    python scripts/compile.py --clean    # remove them: back to pure Python
    python scripts/compile.py --status   # which build runs: compiled, or pure and why
    python scripts/compile.py --if-needed  # build unless the build in place is current

The modules of `MODULES` (the engine, the broker's notification and subscription path, the
online checker's delivery rules, the coordinated link exchange, the cost/interest optimizer
of `weeble reproduce ch5` and a traced broker's trace encoders) are compiled together, so
calls and attribute reads between them are native. There is one source: the compiled modules
are the .py files, translated to C; the pure-Python modules stay the fallback and give the
same runs event for event
(`tests/sim/test_compiled.py` builds a copy and holds it to the golden trace digests recorded
by pure Python). The build writes `weeble/_compiled.json`, the SHA-256 of every compiled
source; when a source changes afterwards, `weeble/__init__.py` loads all of them as Python
again (with a warning) rather than run stale machine code: rebuild, or `--clean`.

mypyc needs `mypy` (a test dependency) and a C compiler. The modules of `MODULES` are
mypy-clean (`MYPY_CONFIG`, which `tests/sim/test_compiled.py` also runs as a plain `mypy`
check), and
the build type-checks them as it compiles: a type error stops the build, and pure Python stays in
use. Compiled code also checks the declared type of every argument and attribute at run time, at
the boundary of each compiled function and class, so the annotations must tell the truth (a
filter value is a `Value`, a message a `Message`, ...), which the pure-Python build never checks.

    python scripts/compile.py --check    # only mypy over MODULES, as the build does (seconds)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Compiled together: calls and attribute reads between them are native. A class that subclasses
# one of these must be compiled too (mypyc's native classes cannot be subclassed by interpreted
# ones): hence merging.py and colours.py.
MODULES: tuple[str, ...] = (
    "weeble/core/table.py",
    "weeble/core/overlay/__init__.py",
    "weeble/core/routing/plane.py",
    "weeble/core/routing/strategy.py",
    "weeble/core/routing/merging.py",
    "weeble/core/routing/leasing.py",
    "weeble/core/routing/rebuild.py",
    "weeble/core/routing/layer.py",
    "weeble/core/routing/colours.py",
    "weeble/sim/engine.py",
    "weeble/check/deliveries.py",
    "weeble/core/filters.py",
    "weeble/core/events.py",
    "weeble/core/messages.py",
    "weeble/core/broker.py",
    "weeble/core/reconfig/exchange.py",
    "weeble/core/reconfig/membership.py",
    "weeble/core/optimize/cost.py",
    "weeble/core/optimize/interest.py",
    "weeble/core/optimize/layer.py",
    "weeble/core/optimize/messages.py",
    "weeble/trace/columns.py",
)

# The modules above are checked; what they import is read for its types only (follow_imports
# = silent: the rest of the code base is not yet mypy-clean, and is not compiled).
MYPY_CONFIG = """\
[mypy]
ignore_missing_imports = True
follow_imports = silent
"""


def _build_state() -> Any:
    """weeble/_build.py of this checkout, loaded by its path (importing the package would run
    its import guard)."""
    path = ROOT / "weeble" / "_build.py"
    spec = importlib.util.spec_from_file_location("weeble_build_state", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


STATE = _build_state()
STAMP: str = STATE.STAMP


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """One build or clean at a time per checkout (two set-ups at once: the second waits, then
    finds the build current)."""
    with open(root / "weeble" / "_compiled.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def module_name(source: str) -> str:
    name = source.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def built(root: Path) -> list[Path]:
    """Every extension file a build may have left in `root` (of the modules of MODULES or of
    an earlier list, the group's shared library, and an old build's hash-named one at the
    root): nothing else in the package is an extension."""
    return [*sorted((root / "weeble").rglob("*.so")), *sorted(root.glob("*__mypyc*.so"))]


def clean(root: Path) -> None:
    # the extensions before the stamp: an interrupted clean leaves a stamp whose build is
    # incomplete (pure Python runs), never extensions without a stamp
    for p in built(root):
        p.unlink()
    (root / STAMP).unlink(missing_ok=True)


def status(root: Path) -> tuple[str, bool]:
    """One line saying which build runs in `root`, and whether it is current for MODULES."""
    build = STATE.inspect(root)
    if build is None:
        return "pure Python (no compiled build: python scripts/compile.py)", False
    wanted = {module_name(m) for m in MODULES}
    if build.problem is None and set(build.modules) != wanted:
        new = ", ".join(sorted(wanted - set(build.modules))) or "-"
        gone = ", ".join(sorted(set(build.modules) - wanted)) or "-"
        return (f"{build.describe()}, but MODULES changed since the build (new: {new}; "
                f"dropped: {gone}): rebuild"), False
    return build.describe(), build.problem is None


def check(root: Path) -> subprocess.CompletedProcess[str]:
    """mypy over MODULES with the build's configuration (what the build checks first)."""
    with tempfile.TemporaryDirectory(prefix="weeble-mypy-") as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(MYPY_CONFIG)
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
               *MODULES]
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True)


def toolchain() -> str | None:
    """What the build lacks to compile C extensions for this Python, or None."""
    for module, package in (("mypyc", "mypy"), ("setuptools", "setuptools")):
        if importlib.util.find_spec(module) is None:
            return f"no {module} in {sys.executable} (pip install {package})"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc!r} is not on PATH; Debian: apt-get install gcc)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return (f"no Python headers ({headers} is missing; Debian: apt-get install "
                f"python{version}-dev)")
    return None


SETUP = """\
from setuptools import setup
from mypyc.build import mypycify
setup(name="weeble-compiled", script_args=["build_ext", "--inplace"],
      ext_modules=mypycify({args!r}, opt_level={opt!r}, group_name={group!r}))
"""


def build(root: Path, quiet: bool = False) -> None:
    """mypyc over MODULES, for checkout `root` (this one, or a copy of one).

    The sources are compiled from a snapshot (a copy of the package in a temporary directory),
    and the stamp records the digests of that snapshot: a source edited during the build makes
    the build stale at once, never silently wrong. The result is moved into `root` stamp first,
    then the shared library, then the modules (each an atomic rename: a process already running
    keeps the file it mapped)."""
    lacking = toolchain()
    if lacking is not None:
        raise SystemExit(f"compile: cannot compile: {lacking}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="weeble-mypyc-") as tmp:
        snapshot = Path(tmp) / "src"
        skip = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.json")
        shutil.copytree(root / "weeble", snapshot / "weeble", ignore=skip)
        digests = {module_name(m): STATE.digest(snapshot / m) for m in MODULES}
        config = Path(tmp) / "mypy.ini"
        config.write_text(MYPY_CONFIG)
        (snapshot / "setup.py").write_text(SETUP.format(
            args=["--config-file", str(config), *MODULES],
            opt=os.environ.get("MYPYC_OPT_LEVEL", "3"), group=STATE.GROUP))
        result = subprocess.run([sys.executable, "setup.py"], cwd=snapshot,
                                capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            raise SystemExit(f"compile: mypyc failed (the build in {root} is unchanged):\n"
                             f"{tail}")
        names = [STATE.SHARED_LIBRARY, *digests]
        missing = [n for n in names if not STATE.extension(snapshot, n).exists()]
        if missing:
            raise SystemExit(f"compile: mypyc made no extension for {', '.join(missing)}")
        clean(root)
        stamp = {"python": sys.implementation.cache_tag, "modules": digests}
        (root / (STAMP + ".tmp")).write_text(json.dumps(stamp, indent=1) + "\n")
        os.replace(root / (STAMP + ".tmp"), root / STAMP)
        for name in names:
            os.replace(STATE.extension(snapshot, name), STATE.extension(root, name))
    if not quiet:
        print(f"compile: {len(MODULES)} modules compiled with mypyc in "
              f"{time.monotonic() - started:.0f} s ({root / STAMP})")
        line, current = status(root)
        if not current:
            print(f"compile: but now: {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--status", action="store_true", help="compiled, stale or pure")
    parser.add_argument("--check", action="store_true",
                        help="only type-check the modules with mypy, as the build does")
    parser.add_argument("--if-needed", action="store_true",
                        help="build only if the build in place is not current (setup.sh)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to build in")
    args = parser.parse_args()
    if args.clean:
        with locked(args.root):
            clean(args.root)
        print("compile: removed the compiled modules; pure Python from now on")
        return 0
    if args.check:
        result = check(args.root)
        print((result.stdout + result.stderr).strip())
        return result.returncode
    if args.status:
        print(f"weeble build: {status(args.root)[0]}")
        return 0
    with locked(args.root):
        if args.if_needed:
            line, current = status(args.root)
            if current:
                print(f"compile: up to date: {line}")
                return 0
        build(args.root)
    return 0

if __name__ == "__main__":
    sys.exit(main())
