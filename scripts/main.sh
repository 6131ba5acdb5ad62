#!/usr/bin/env bash
# The main job: set-up, then the live quickstart end to end — 7 broker processes on this
# machine, the workload, a chaos experiment of five fault kinds (routing-table and clock
# corruption, a link cut, a broker crash with restart, message duplication), the Spark analysis,
# and the verdict table per fault with the report's path. Exit status 1 when a verdict fails.
#   bash scripts/main.sh [SCENARIO] [weeble run options, e.g. --duration 30]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
scenario=${1:-scenarios/quickstart.yaml}
if [ $# -gt 0 ]; then shift; fi
exec .venv/bin/weeble run "$scenario" "$@"
