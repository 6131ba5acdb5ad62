"""The pytest plugin (entry point `weeble` in the `pytest11` group): the `weeble_testbed`
fixture and the `--weeble-backend` / `--weeble-runs` options.

    def test_x(weeble_testbed):
        bed = weeble_testbed("my-scenario.yaml", duration=30)
        ...

Each call makes a ChaosTestbed of the scenario (a path or a Scenario), brings it up and
returns it; every testbed a test made is stopped when the test ends, pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a test asks for a testbed, not whenever pytest starts
    from weeble.testing import ChaosTestbed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("weeble", "weeble chaos testbeds")
    group.addoption("--weeble-backend", default=None, metavar="NAME",
                    help="backend of the weeble_testbed fixture: local, mininet, docker or"
                         " kubernetes (default: the scenario's live.backend, else local)")
    group.addoption("--weeble-runs", default=None, metavar="DIR",
                    help="where the testbeds' run directories go (default: a temporary"
                         " directory per test)")


@pytest.fixture
def weeble_testbed(request: pytest.FixtureRequest,
                   tmp_path: Path) -> Iterator[Callable[..., ChaosTestbed]]:
    made: list[ChaosTestbed] = []
    runs = request.config.getoption("--weeble-runs") or tmp_path / "runs"

    def make(scenario: Any, *, backend: str | None = None,
             duration: float | None = None) -> ChaosTestbed:
        from weeble.testing import ChaosTestbed

        bed = ChaosTestbed(scenario, backend=backend or request.config.getoption(
            "--weeble-backend"), runs_dir=runs, duration=duration)
        made.append(bed)  # before up(): a start that fails half-way is torn down too
        return bed.up()

    try:
        yield make
    finally:
        errors = []
        for bed in reversed(made):
            try:
                bed.close()
            except Exception as exc:  # every testbed is stopped, whatever one of them says
                errors.append(exc)
        if errors:
            raise errors[0]
