"""Test-wide settings."""

from typing import Any

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
