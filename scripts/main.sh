#!/usr/bin/env bash
# The main job: set-up, then the live quickstart end to end — 7 broker processes on this
# machine, the workload, a chaos experiment of five fault kinds (routing-table and clock
# corruption, a link cut, a broker crash with restart, message duplication), the Spark analysis,
# and the verdict table per fault with the report's path — and then its second part,
# quickstart-reconfig: the tree reshaped under traffic beside three faults (two coordinated
# link exchanges and a new broker joining as a leaf), with a verdict row per reconfiguration.
# Exit status 1 when a verdict fails.
#   bash scripts/main.sh [SCENARIO] [weeble run options, e.g. --duration 30]   # just that one
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ $# -gt 0 ]; then
  scenario=$1
  shift
  exec .venv/bin/weeble run "$scenario" "$@"
fi
status=0
.venv/bin/weeble run scenarios/quickstart.yaml || status=$?
.venv/bin/weeble run scenarios/quickstart-reconfig.yaml || status=$?
exit "$status"
