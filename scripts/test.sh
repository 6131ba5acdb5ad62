#!/usr/bin/env bash
# The test command: set-up, lint, then every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check weeble tests benchmarks scripts
exec .venv/bin/python -m pytest -q --durations=25 "$@"
