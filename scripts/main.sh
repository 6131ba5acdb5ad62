#!/usr/bin/env bash
# The main job: set-up, then a scenario end to end (simulation at this stage).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
scenario=${1:-scenarios/sim-small.yaml}
out=${2:-runs/$(basename "$scenario" .yaml)}
exec .venv/bin/weeble simulate "$scenario" --out "$out"
