#!/usr/bin/env bash
# The test command: set-up, lint, then every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check weeble tests benchmarks scripts
# One string-hash order for every run (a belt: the simulator's runs no longer depend on it, which
# tests/sim/test_sim_hashorder.py proves by running the same runs under two hash seeds; they once did,
# through a tree's set of links giving the brokers' order, and a colour example failed under two).
export PYTHONHASHSEED=${PYTHONHASHSEED:-0}
# Two workers: the live tests one after the other on one, every other test beside them on the
# other (tests/conftest.py says which are live); WEEBLE_TEST_WORKERS=0 runs it all in this process.
exec .venv/bin/python -m pytest -q --durations=25 -n "${WEEBLE_TEST_WORKERS:-2}" --dist loadgroup "$@"
