"""Wall time of `weeble reproduce ch3`: model only, the short grid, and (--full) the paper's grid.

    python benchmarks/reproduce_ch3.py                 # model only (median of --repeat) + short
    python benchmarks/reproduce_ch3.py --full          # and the --full grid, once (long)
    python benchmarks/reproduce_ch3.py --recorded runs/ch3   # a finished run's own figures

`--recorded DIR` re-runs nothing: it reads the per-point results a `weeble reproduce` run kept in
DIR/points/ (any experiment) and prints the simulated points, their events and the wall time the
simulation column took, summed over the points (what a run of that grid costs on one core; a
run resumed over several sessions is summed the same way). docs/reproduce.md's --full figure comes
from it, because --full takes hours and is not re-run in CI.

Each run is a fresh `weeble reproduce` process in a fresh directory (so interpreter start-up,
imports and matplotlib count, as a user sees them), then the same command again in that
directory (everything reused: the cost of the claims, figures and report alone). The simulation
column dominates: each simulated point is a run of the 121-broker setup, so the short grid and
--full are timed once each; the per-point events and wall times are in the report's
"Model against simulation" table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    # exit 1 (a claim not met) is a result, not a failure of the benchmark
    subprocess.run([sys.executable, "-m", "weeble.cli", *args], check=False,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def recorded(out: Path) -> str:
    """The simulated points of a finished (or partial) run in `out`, from its points/*.json."""
    points = sorted((out / "points").glob("*.json"))
    if not points:
        raise SystemExit(f"--recorded: no points/*.json in {out} (not a `weeble reproduce` "
                         "output directory, or nothing evaluated yet)")
    simulated, wall, events = 0, 0.0, 0.0
    for path in points:
        column = json.loads(path.read_text())["columns"].get("simulation")
        if not column:
            continue
        simulated += 1
        for key, value in column["values"].items():
            if key == "wall_time" or key.endswith("wall_s"):
                wall += value
            elif key == "events":
                events += value
    per = f", {events / 1e6:.0f} M events ({events / wall:,.0f} per s)" if events and wall else ""
    return (f"{out}: {len(points)} points, {simulated} simulated, {wall:,.0f} s "
            f"({wall / 60:.1f} min) of simulation wall time summed over them{per}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recorded", type=Path, metavar="DIR",
                        help="print a finished run's figures from DIR/points and run nothing")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the model-only runs")
    parser.add_argument("--full", action="store_true", help="also time the --full grid (long)")
    args = parser.parse_args()
    if args.recorded is not None:
        print(recorded(args.recorded))
        return
    runs = [("model only, short", ["--model-only"], args.repeat),
            ("model only, full", ["--model-only", "--full"], args.repeat),
            ("short grid", [], 1)]
    if args.full:
        runs.append(("full grid", ["--full"], 1))
    for label, extra, repeat in runs:
        fresh, resumed = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                command = ["reproduce", "ch3", "--out", str(Path(tmp) / "ch3"), "--quiet",
                           *extra]
                fresh.append(timed(command))
                resumed.append(timed(command))
        print(f"reproduce ch3 ({label}): {statistics.median(fresh):.1f} s from scratch, "
              f"{statistics.median(resumed):.1f} s resumed (median of {repeat})", flush=True)


if __name__ == "__main__":
    main()
