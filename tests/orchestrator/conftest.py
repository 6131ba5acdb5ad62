"""Every backend test checks, after it ran, that it left nothing behind: no network
namespace, veth, broker process, host shell, container or network."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.orchestrator.leaks import leaked, snapshot


@pytest.fixture(autouse=True)
def no_leaks(tmp_path: Path) -> Iterator[None]:
    before = snapshot(str(tmp_path))
    yield
    deadline = time.monotonic() + 10  # the kernel removes a namespace a moment after its last
    while True:                       # process; a container's removal takes a moment too
        left = leaked(before, snapshot(str(tmp_path)))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"the test left behind: {left}"
