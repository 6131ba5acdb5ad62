"""Compile the simulator's hot path with mypyc, from the same Python source (issue 15).

    python scripts/compile.py            # build: X.cpython-311-*.so beside each X.py below
    python scripts/compile.py --clean    # remove them: back to pure Python
    python scripts/compile.py --status   # compiled, stale or pure

The modules of `MODULES` (the engine, the broker's notification and subscription path, the
online checker's delivery rules) are compiled together, so calls and attribute reads between
them are native. There is one source: the compiled modules are the .py files, translated to C;
the pure-Python modules stay the fallback and give the same runs event for event
(`tests/test_compiled.py` builds a copy and holds it to the golden trace digests recorded by pure
Python). The build writes `weeble/_compiled.json`, the SHA-256 of every compiled source; when a
source changes afterwards, `weeble/__init__.py` loads all of them as Python again (with a
warning) rather than run stale machine code: rebuild, or `--clean`.

mypyc needs `mypy` (a test dependency) and a C compiler. The modules of `MODULES` are
mypy-clean (`MYPY_CONFIG`, which `tests/test_compiled.py` also runs as a plain `mypy` check), and
the build type-checks them as it compiles: a type error stops the build, and pure Python stays in
use. Compiled code also checks the declared type of every argument and attribute at run time, at
the boundary of each compiled function and class, so the annotations must tell the truth (a
filter value is a `Value`, a message a `Message`, ...), which the pure-Python build never checks.

    python scripts/compile.py --check    # only mypy over MODULES, as the build does (seconds)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = "weeble/_compiled.json"

# Compiled together: calls and attribute reads between them are native. A class that subclasses
# one of these must be compiled too (mypyc's native classes cannot be subclassed by interpreted
# ones): hence merging.py and colours.py.
MODULES: tuple[str, ...] = (
    "weeble/broker/core/table.py",
    "weeble/broker/core/overlay/__init__.py",
    "weeble/broker/core/routing/plane.py",
    "weeble/broker/core/routing/strategy.py",
    "weeble/broker/core/routing/merging.py",
    "weeble/broker/core/routing/leasing.py",
    "weeble/broker/core/routing/rebuild.py",
    "weeble/broker/core/routing/layer.py",
    "weeble/broker/core/routing/colours.py",
    "weeble/broker/sim/engine.py",
    "weeble/check/deliveries.py",
    "weeble/broker/core/filters.py",
    "weeble/broker/core/events.py",
    "weeble/broker/core/messages.py",
    "weeble/broker/core/broker.py",
)

# The modules above are checked; what they import is read for its types only (follow_imports
# = silent: the rest of the code base is not yet mypy-clean, and is not compiled).
MYPY_CONFIG = """\
[mypy]
ignore_missing_imports = True
follow_imports = silent
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def module_name(source: str) -> str:
    name = source.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def built(root: Path) -> list[Path]:
    """The extension files a build left in the source tree (the modules' and mypyc's shared
    library, named by a hash, in the root)."""
    out = [p for m in MODULES for p in (root / m).parent.glob(
        f"{Path(m).stem}.*.so")]
    out += list(root.glob("*__mypyc*.so"))
    return out


def clean(root: Path) -> None:
    for p in built(root):
        p.unlink()
    (root / STAMP).unlink(missing_ok=True)


def check(root: Path) -> subprocess.CompletedProcess[str]:
    """mypy over MODULES with the build's configuration (what the build checks first)."""
    with tempfile.TemporaryDirectory(prefix="weeble-mypy-") as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(MYPY_CONFIG)
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
               *MODULES]
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True)


def build(root: Path, quiet: bool = False) -> None:
    """mypyc over MODULES, in place in `root` (a checkout, or a copy of one)."""
    clean(root)
    with tempfile.TemporaryDirectory(prefix="weeble-mypyc-") as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(MYPY_CONFIG)
        env = dict(os.environ, MYPYC_OPT_LEVEL=os.environ.get("MYPYC_OPT_LEVEL", "3"))
        cmd = [sys.executable, "-m", "mypyc", "--config-file", str(config), *MODULES]
        result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if root != ROOT:  # a copy: its C sources and objects are of no further use
            shutil.rmtree(root / "build", ignore_errors=True)
        if result.returncode != 0:
            clean(root)
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            raise SystemExit(f"compile: mypyc failed (pure Python stays in use):\n{tail}")
    stamp = {"python": sys.implementation.cache_tag,
             "modules": {module_name(m): digest(root / m) for m in MODULES}}
    (root / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    if not quiet:
        print(f"compile: {len(MODULES)} modules compiled with mypyc ({root / STAMP})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--status", action="store_true", help="compiled, stale or pure")
    parser.add_argument("--check", action="store_true",
                        help="only type-check the modules with mypy, as the build does")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to build in")
    args = parser.parse_args()
    if args.clean:
        clean(args.root)
        print("compile: removed the compiled modules; pure Python from now on")
        return 0
    if args.check:
        result = check(args.root)
        print((result.stdout + result.stderr).strip())
        return result.returncode
    if args.status:
        stamp = args.root / STAMP
        if not stamp.exists():
            print("pure Python")
            return 0
        known = json.loads(stamp.read_text())["modules"]
        stale = [m for m in MODULES if known.get(module_name(m)) != digest(args.root / m)]
        print("compiled" if not stale else f"stale (changed since the build: {stale})")
        return 0
    build(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
