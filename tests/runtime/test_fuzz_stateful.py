"""The stateful live fuzz (tests/runtime/fuzzmachine.py) on a short budget: five runs of
15 steps, every invariant checked after every step (with the fix of finding 3 undone, it finds
the poisoned Snapshot). benchmarks/fuzz_live.py runs the
same machine long and reports the health latencies against the 200 ms promise."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.runtime.fuzzmachine import LiveBrokerMachine

LiveBrokerMachine.TestCase.settings = settings(
    max_examples=5, stateful_step_count=15, deadline=None, derandomize=True,
    suppress_health_check=list(HealthCheck))

TestLiveBrokerFuzz = LiveBrokerMachine.TestCase
