"""Fixtures of the live tests; the plain helpers live in tests/runtime/helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.runtime.helpers import make_config
from weeble.runtime.config import BrokerConfig
from weeble.runtime.process import BrokerProcess


@pytest.fixture
def configs(tmp_path: Path) -> Callable[..., BrokerConfig]:
    return lambda broker_id, **kw: make_config(broker_id, tmp_path, **kw)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[[BrokerConfig], BrokerProcess]]:
    """Start broker subprocesses; all are stopped (SIGTERM, then SIGKILL) at teardown."""
    started: list[BrokerProcess] = []

    def start(config: BrokerConfig) -> BrokerProcess:
        proc = BrokerProcess(config, tmp_path, log_level="DEBUG")
        started.append(proc)
        proc.start()
        return proc

    yield start
    for proc in reversed(started):
        proc.stop(timeout=5)
