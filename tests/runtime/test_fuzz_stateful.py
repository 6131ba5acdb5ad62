"""The stateful live fuzz (tests/runtime/fuzzmachine.py) on a short budget: a few runs of a
dozen steps each, every invariant checked after every step. benchmarks/fuzz_live.py runs the
same machine long and reports the health latencies against the 200 ms promise."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.runtime.fuzzmachine import LiveBrokerMachine

LiveBrokerMachine.TestCase.settings = settings(
    max_examples=3, stateful_step_count=12, deadline=None, derandomize=True,
    suppress_health_check=list(HealthCheck))

TestLiveBrokerFuzz = LiveBrokerMachine.TestCase
