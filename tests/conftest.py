"""Test-wide settings."""

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No per-example deadline anywhere: property tests assert behaviour, not speed (speed is the
# benchmarks' job), and CI machines are shared, so a slow example is not a failing one.
settings.register_profile("weeble", deadline=None)
settings.load_profile("weeble")


def _build() -> str:
    """Which build of the simulator's hot path this run tests (weeble/__init__.py decides)."""
    import weeble

    return f"weeble build: {weeble.BUILD}"


def pytest_report_header() -> str:
    return _build()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(_build())  # also under -q, which drops the header


# CI runs the suite on two xdist workers (scripts/test.sh: -n 2 --dist loadgroup). The tests that
# bring up live testbeds (several broker processes, containers, namespaces, fixed scenario
# addresses such as the docs pages' `weeble run scenarios/quickstart.yaml`) run one after the
# other on one worker, as in a serial run, so they never contend with each other for the cores or
# an address; every other test runs beside them on the other worker. A module is live when it
# uses the live testbed helpers (tests/runtime/livebed.py, Testbed, the weeble_testbed fixture)
# or is one of LIVE_MODULES, which run testbeds through the CLI only, or is marked `live` (the
# docs pages that run testbeds: tests/docs/test_docs_commands.py).
LIVE_GROUP = "live"
LIVE_SOURCE = re.compile(r"tests\.runtime\.livebed|\bTestbed\b|\bweeble_testbed\b")
LIVE_MODULES = frozenset({"tests/chaos/test_replay.py"})
_live: dict[Path, bool] = {}


def _is_live(path: Path) -> bool:
    if path not in _live:
        relative = path.relative_to(Path(__file__).resolve().parent.parent).as_posix()
        _live[path] = relative in LIVE_MODULES or bool(
            LIVE_SOURCE.search(path.read_text(encoding="utf-8")))
    return _live[path]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: this test runs a testbed (in the live group)")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (its hook renames the items)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_live(item.path) or item.get_closest_marker("live") is not None:
            item.add_marker(pytest.mark.xdist_group(LIVE_GROUP))


def pytest_collection_finish(session: pytest.Session) -> None:
    """xdist groups a worker's items by renaming them (`nodeid@group`); under pytest 9.2 that
    rename no longer takes (pytest-xdist 3.8 sets `_nodeid`, pytest 9.2 reads `_id`), and the
    live tests ran on both workers at once without a word. Refuse such a run."""
    if getattr(session.config, "workerinput", None) is None or \
            not session.config.getvalue("loadgroup"):
        return
    ungrouped = [i.nodeid for i in session.items
                 if i.get_closest_marker("xdist_group") is not None and "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(
            f"--dist loadgroup does not group {len(ungrouped)} marked tests (e.g. "
            f"{ungrouped[0]}): this pytest/pytest-xdist pair ignores xdist's renaming; "
            "install the pytest pinned in pyproject.toml (pip install -e '.[test]')")
