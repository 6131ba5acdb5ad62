"""The simulator compiled with mypyc (`scripts/compile.py`) gives the runs the pure-Python one
recorded, event for event (issue 15: one source, compiled, with a pure-Python fallback).

A copy of this checkout is compiled (the checkout itself stays as it is), and every golden
variant of `tests/sim_golden.py` is run on the compiled modules in a fresh interpreter and held
to the digest stored from the pure-Python simulator. The stale guard of `weeble/__init__.py` is
tested on the same build: a compiled source that changed afterwards sends every compiled module
back to its .py, with a warning.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys, warnings
warnings.simplefilter("error")  # a stale build would warn: fail loudly instead
from weeble.broker.sim import engine
from weeble.broker.core import broker, events, filters, messages, table
from weeble.check import deliveries
from tests.sim_golden import digest, stored, variants
modules = (engine, table, deliveries, filters, events, messages, broker)
compiled = [m.__name__ for m in modules if not m.__file__.endswith(".py")]
differ = [name for name in variants() if digest(name) != stored()[name]]
print(json.dumps({"compiled": compiled, "differ": differ}))
"""

PROBE_COMPILED = """
import json, warnings
warnings.simplefilter("error")
from weeble.broker.core import broker
print(json.dumps({"compiled": not broker.__file__.endswith(".py")}))
"""

STALE = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from weeble.broker.sim import engine
    from weeble.broker.core import table
print(json.dumps({"files": [engine.__file__, table.__file__],
                  "warned": [str(w.message) for w in caught]}))
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compiled")
    skip = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.json")
    for part in ("weeble", "scripts", "tests", "scenarios"):
        shutil.copytree(ROOT / part, root / part, ignore=skip)
    subprocess.run([sys.executable, str(root / "scripts" / "compile.py"), "--root", str(root)],
                   check=True, capture_output=True, text=True)
    return root


def _run(root: Path, code: str) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", code], cwd=root, check=True,
                         capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin",
                              "PYTHONHASHSEED": "0"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_compiled_simulator_gives_the_recorded_runs(build: Path) -> None:
    result = _run(build, PROBE)
    assert result["compiled"] == ["weeble.broker.sim.engine", "weeble.broker.core.table",
                                  "weeble.check.deliveries", "weeble.broker.core.filters",
                                  "weeble.broker.core.events", "weeble.broker.core.messages",
                                  "weeble.broker.core.broker"]
    assert result["differ"] == []


# The core's unit tests, run again on the compiled build: compiled code checks declared types at
# run time, so these catch an annotation that does not say what really arrives (~15 CPU-s).
UNIT = ("tests/test_table.py", "tests/test_broker.py", "tests/test_layers.py",
        "tests/test_colours.py", "tests/test_filters.py", "tests/test_sim_engine.py")


def test_the_cores_unit_tests_pass_on_the_compiled_build(build: Path) -> None:
    assert _run(build, PROBE_COMPILED)["compiled"], "the build did not load"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNIT],
                         cwd=build, capture_output=True, text=True,
                         env={"PYTHONPATH": str(build), "PATH": "/usr/bin:/bin",
                              "PYTHONHASHSEED": "0"})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_compiled_modules_are_mypy_clean() -> None:
    """The build type-checks its modules (a type error stops it); this says which error, fast."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile.py"), "--check"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_stale_build_falls_back_to_pure_python_with_a_warning(build: Path) -> None:
    table = build / "weeble" / "broker" / "core" / "table.py"
    original = table.read_text()
    try:
        table.write_text(original + "\n# changed after the build\n")
        result = _run(build, STALE)
    finally:
        table.write_text(original)
    assert all(f.endswith(".py") for f in result["files"]), result["files"]
    assert any("stale" in w and "weeble.broker.core.table" in w for w in result["warned"])
