"""The simulator compiled with mypyc (`scripts/compile.py`) and its pure-Python fallback both give
the runs the pure-Python one recorded, event for event (issue 15: one source, compiled, with a
pure-Python fallback).

A copy of this checkout is compiled (the checkout itself stays as it is; when its own build is
current for these very sources, as `bash scripts/setup.sh` leaves it, that build is copied
instead of compiled again), and every golden variant of `tests/sim/sim_golden.py` is run on the
compiled modules, and on the pure ones (WEEBLE_COMPILE=0), in a fresh interpreter and held to
the digest stored from the pure-Python simulator. The import guard of `weeble/__init__.py` is
tested on the same build: a compiled source that changed afterwards, a missing extension or a
missing stamp send every compiled module back to its .py (stale machine code never runs), with
one warning per process tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from weeble import _build

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys, warnings
warnings.simplefilter("error")  # a stale build would warn: fail loudly instead
from weeble.sim import engine
from weeble.core import broker, events, filters, messages, table
from weeble.check import deliveries
from weeble.core.reconfig import exchange
from weeble.core.optimize import layer
from tests.sim.sim_golden import digest, stored, variants
modules = (engine, table, deliveries, filters, events, messages, broker, exchange, layer)
compiled = [m.__name__ for m in modules if not m.__file__.endswith(".py")]
differ = [name for name in variants() if digest(name) != stored()[name]]
print(json.dumps({"compiled": compiled, "differ": differ}))
"""

PROBE_COMPILED = """
import json, warnings
warnings.simplefilter("error")  # the opt-out is quiet
from weeble.core import broker
print(json.dumps({"compiled": not broker.__file__.endswith(".py")}))
"""

STALE = """
import json, subprocess, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from weeble.sim import engine
    from weeble.core import overlay, table
child = subprocess.run([sys.executable, "-W", "always", "-c",
                        "from weeble.core import table; print(table.__file__)"],
                       capture_output=True, text=True, check=True)
print(json.dumps({"files": [engine.__file__, table.__file__, overlay.__file__,
                            child.stdout.strip()],
                  "warned": [str(w.message) for w in caught], "child_stderr": child.stderr}))
"""


def _compiled_here() -> bool:
    """Whether this checkout's build is compiled and current (for the sources and the MODULES
    list of now): then a copy of it is what compiling the copy would give."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile.py"), "--status"],
                         capture_output=True, text=True, check=True).stdout
    return re.fullmatch(r"weeble build: compiled \(mypyc, \d+ modules\)", out.strip()) is not None


def _modules() -> dict[str, str]:
    stamp = ROOT / _build.STAMP
    return json.loads(stamp.read_text())["modules"] if stamp.exists() else {}


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compiled")
    skip = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.json*")
    for part in ("weeble", "scripts", "tests", "scenarios"):
        shutil.copytree(ROOT / part, root / part, ignore=skip)
    if _compiled_here():  # the same sources: the build setup.sh made for them
        for name in [*_modules(), _build.SHARED_LIBRARY]:
            shutil.copy2(_build.extension(ROOT, name), _build.extension(root, name))
        shutil.copy2(ROOT / _build.STAMP, root / _build.STAMP)
    else:
        subprocess.run([sys.executable, str(root / "scripts" / "compile.py"), "--root",
                        str(root)], check=True, capture_output=True, text=True)
    state = _build.inspect(root)
    assert state is not None and state.problem is None, state
    return root


def _env(root: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", **extra}


def _run(root: Path, code: str, cwd: Path | None = None, **extra: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd or root, check=True,
                         capture_output=True, text=True, env=_env(root, **extra))
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_compiled_simulator_gives_the_recorded_runs(build: Path, tmp_path: Path) -> None:
    # from another working directory: the group's shared library sits at the checkout's root,
    # which is then not on sys.path (the import guard finds it)
    result = _run(build, PROBE, cwd=tmp_path)
    assert result["compiled"] == ["weeble.sim.engine", "weeble.core.table",
                                  "weeble.check.deliveries", "weeble.core.filters",
                                  "weeble.core.events", "weeble.core.messages",
                                  "weeble.core.broker", "weeble.core.reconfig.exchange",
                                  "weeble.core.optimize.layer"]
    assert result["differ"] == []


def test_the_pure_fallback_gives_the_recorded_runs(build: Path) -> None:
    """WEEBLE_COMPILE=0 runs the same checkout's .py files, quietly, with the same results."""
    result = _run(build, PROBE, WEEBLE_COMPILE="0")
    assert result["compiled"] == []
    assert result["differ"] == []


# The core's unit tests, run again on the build this test run does not use (~15 CPU-s): on the
# compiled one when this run is pure Python, where an annotation that does not say what really
# arrives fails (compiled code checks declared types at run time), and on the pure fallback when
# this run is compiled (as CI runs, `bash scripts/test.sh` compiles first).
UNIT = ("tests/core/test_table.py", "tests/core/test_broker.py", "tests/core/test_layers.py",
        "tests/core/test_colours.py", "tests/core/test_filters.py", "tests/sim/test_sim_engine.py")


def test_the_cores_unit_tests_pass_on_the_other_build(build: Path) -> None:
    from weeble.core import broker

    compiled_here = not broker.__file__.endswith(".py")
    extra = {"WEEBLE_COMPILE": "0"} if compiled_here else {}
    assert _run(build, PROBE_COMPILED, **extra)["compiled"] is not compiled_here
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNIT],
                         cwd=build, capture_output=True, text=True, env=_env(build, **extra))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_compiled_modules_are_mypy_clean() -> None:
    """The build type-checks its modules (a type error stops it); this says which error, fast."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile.py"), "--check"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_stale_build_falls_back_to_pure_python_with_one_warning(build: Path) -> None:
    table = build / "weeble" / "core" / "table.py"
    original = table.read_text()
    try:
        table.write_text(original + "\n# changed after the build\n")
        result = _run(build, STALE)
    finally:
        table.write_text(original)
    # every compiled module, the unchanged ones too, and in the processes it starts
    assert all(f.endswith(".py") for f in result["files"]), result["files"]
    assert len(result["warned"]) == 1, result["warned"]
    assert "stale" in result["warned"][0] and "weeble.core.table" in result["warned"][0]
    assert result["child_stderr"] == ""  # reported once per process tree, not per process
    assert _run(build, PROBE_COMPILED)["compiled"]  # the source restored: compiled again


@pytest.mark.parametrize("cut", ["an extension", "the stamp"])
def test_a_build_cut_short_runs_pure_python(build: Path, cut: str) -> None:
    """A build or clean interrupted half-way: never some extensions without the rest, nor
    extensions whose sources nothing vouches for."""
    victim = (_build.extension(build, "weeble.core.filters") if cut == "an extension"
              else build / _build.STAMP)
    aside = victim.with_name(victim.name + ".aside")
    os.replace(victim, aside)
    try:
        result = _run(build, STALE)
    finally:
        os.replace(aside, victim)
    assert all(f.endswith(".py") for f in result["files"]), result["files"]
    assert len(result["warned"]) == 1
    assert ("incomplete" if cut == "an extension" else "without") in result["warned"][0]


def test_status_names_the_build_and_why_it_is_not_used(build: Path) -> None:
    def status() -> str:
        return subprocess.run([sys.executable, str(build / "scripts" / "compile.py"), "--status",
                               "--root", str(build)], capture_output=True, text=True,
                              check=True).stdout.strip()

    assert status() == f"weeble build: compiled (mypyc, {len(_modules_of(build))} modules)"
    engine = build / "weeble" / "sim" / "engine.py"
    original = engine.read_text()
    try:
        engine.write_text(original + "\n")
        assert status() == ("weeble build: pure Python: the compiled build is not used (stale: "
                            "changed since the build: weeble.sim.engine)")
    finally:
        engine.write_text(original)


def _modules_of(root: Path) -> dict[str, str]:
    return json.loads((root / _build.STAMP).read_text())["modules"]
