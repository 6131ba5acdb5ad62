"""One SparkSession for the whole test session: starting Spark takes seconds."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark  # noqa: F401  (a missing Spark must fail the suite, never skip it)
import pytest

from tests.analytics import handmade
from weeble.analytics.spark import CONF_ENV

# The tests' JVMs compile with C1 only: they run many small, different queries and no long hot
# loop, so the C2 compiler's work never pays back (on the handmade run it was a third of the
# JVM's CPU warm, half of it cold). Set in the environment, so that the notebook kernels' JVMs
# get it too (session() reads it); a WEEBLE_SPARK_CONF of the caller's own (even empty) is kept.
# The flag changes how the JVM compiles, never what a query answers.
C1_ONLY = "-XX:TieredStopAtLevel=1"
os.environ.setdefault(CONF_ENV, f"spark.driver.extraJavaOptions={C1_ONLY}")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.fail("no Java on PATH: Spark cannot start (scripts/setup.sh installs it)")
    from weeble.analytics.spark import session

    s = session("local[2]")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def handmade_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return handmade.build(tmp_path_factory.mktemp("handmade"))


@pytest.fixture(scope="session")
def handmade_summary(spark: Any, handmade_run: Path) -> dict[str, Any]:
    from weeble.analytics.pipeline import analyze

    return analyze(handmade_run, spark=spark)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (tests/conftest.py says why)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of the handmade run's analysis run on one xdist worker: the session fixture
    `handmade_summary` (a whole analysis) is then made once, not once per worker."""
    for item in items:
        if "handmade_summary" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("handmade"))
