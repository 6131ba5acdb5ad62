"""Wall time of `weeble reproduce ch3`, short grid and --full, from scratch and resumed.

    python benchmarks/reproduce_ch3.py --repeat 3

Each run is a fresh `weeble reproduce` process in a fresh directory (so interpreter start-up,
imports and matplotlib count, as a user sees them), then the same command again in that
directory (everything reused: the cost of the claims, figures and report alone). Prints the
median wall time over the repeats. Today only the model column exists; the simulation column
will dominate these figures once it is added.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "weeble.cli", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for grid in ("short", "full"):
        fresh, resumed = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                command = ["reproduce", "ch3", "--out", str(Path(tmp) / "ch3"), "--quiet"]
                command += ["--full"] if grid == "full" else []
                fresh.append(timed(command))
                resumed.append(timed(command))
        print(f"reproduce ch3 ({grid} grid): {statistics.median(fresh):.2f} s from scratch, "
              f"{statistics.median(resumed):.2f} s resumed (median of {args.repeat})")


if __name__ == "__main__":
    main()
