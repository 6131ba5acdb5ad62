"""The stateful live fuzz of issue 24 on a long budget (CI runs it short:
tests/runtime/test_fuzz_stateful.py): many runs of the machine in tests/runtime/fuzzmachine.py,
each a fresh broker process driven by sequences of hostile link envelopes, client requests,
stream tricks and publications, every invariant checked after every step. Beyond the test's
invariants it holds the health service to its promise: p99 of every health check under
200 ms (a loop stall shows there first).

    python benchmarks/fuzz_live.py                       # 40 runs of 40 steps
    python benchmarks/fuzz_live.py --runs 200 --steps 60

Prints the health latencies (p50, p99, max), the runs and steps, and the first failure
Hypothesis found (shrunk), if any. Exit 1 on a failure or on p99 >= 200 ms. Say the load
(`uptime`) beside the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.runtime.fuzzmachine import LiveBrokerMachine

HEALTH_P99_S = 0.200


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="machine runs (examples)")
    parser.add_argument("--steps", type=int, default=40, help="steps per run")
    args = parser.parse_args()
    if args.runs < 1 or args.steps < 1:
        parser.error("--runs and --steps: must be >= 1")
    # random sequences each time (the CI test is derandomized), no example database
    config = settings(max_examples=args.runs, stateful_step_count=args.steps, deadline=None,
                      suppress_health_check=list(HealthCheck), database=None)
    start = time.monotonic()
    failure: BaseException | None = None
    try:
        run_state_machine_as_test(LiveBrokerMachine, settings=config)
    except BaseException as e:
        failure = e
    wall = time.monotonic() - start
    latencies = sorted(LiveBrokerMachine.health_latencies)
    if latencies:
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(f"health checks: {len(latencies)}; p50 {statistics.median(latencies) * 1e3:.1f} ms,"
              f" p99 {p99 * 1e3:.1f} ms, max {latencies[-1] * 1e3:.1f} ms")
    else:
        p99 = 0.0
        print("health checks: none")
    print(f"runs {args.runs} x steps {args.steps}, wall {wall:.0f} s")
    if failure is not None:
        print(f"FAILED: {type(failure).__name__}: {failure}")
        return 1
    if p99 >= HEALTH_P99_S:
        print(f"FAILED: health p99 {p99 * 1e3:.1f} ms >= {HEALTH_P99_S * 1e3:.0f} ms")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
