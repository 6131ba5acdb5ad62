"""One SparkSession for the whole test session: starting Spark takes seconds."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark  # noqa: F401  (a missing Spark must fail the suite, never skip it)
import pytest

from tests.analytics import handmade


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
