"""Benchmark the simulator on the thesis setup (scenarios/seed000.yaml).

    python benchmarks/sim_seed000.py --duration 30 --repeat 3
    python benchmarks/sim_seed000.py --duration 10 --profile

Each repeat runs in a fresh process, so that peak memory (getrusage maxrss: tracemalloc would
slow the run down several times) belongs to that run alone. Reports the median over repeats of:
events/s (broker steps per wall second), simulated seconds per wall second, inter-broker messages
per simulated second, and peak RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "seed000.yaml"


def one_run(scenario_path: Path, duration: float | None) -> dict[str, float]:
    from weeble.broker.sim.run import simulate
    from weeble.chaos.runner import in_simulation
    from weeble.model.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    if duration is not None:
        scenario = scenario.model_copy(update={"duration": duration})
    with tempfile.TemporaryDirectory() as out:
        faults = in_simulation(scenario) if scenario.chaos is not None else None
        summary = simulate(scenario, out, progress=False, faults=faults)
    perf = summary.performance
    return {
        "duration": scenario.duration,
        "events": perf["events"],
        "wall_time": perf["wall_time"],
        "events_per_s": perf["events_per_wall_second"],
        "sim_s_per_wall_s": perf["sim_seconds_per_wall_second"],
        "messages_per_sim_s": summary.messages["per_second"],
        "deliveries_per_sim_s": summary.deliveries["deliveries"] / scenario.duration,
        "peak_rss_mb": perf["peak_rss_mb"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--duration", type=float, help="override the scenario's duration (s)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile one run, top 25")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:  # one measured run, reported to the parent as JSON
        print(json.dumps(one_run(args.scenario, args.duration)))
        return 0
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        result = one_run(args.scenario, args.duration)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        print(json.dumps(result, indent=2))
        return 0

    runs = []
    for i in range(args.repeat):
        cmd = [sys.executable, __file__, "--child", "--scenario", str(args.scenario)]
        if args.duration is not None:
            cmd += ["--duration", str(args.duration)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        print(f"run {i + 1}/{args.repeat}: {runs[-1]['events_per_s']:,.0f} events/s",
              file=sys.stderr)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"scenario              {args.scenario.name} ({median['duration']:g} simulated s)")
    print(f"events/s              {median['events_per_s']:,.0f}")
    print(f"simulated s / wall s  {median['sim_s_per_wall_s']:.3f}")
    print(f"wall time             {median['wall_time']:.1f} s")
    print(f"messages / sim s      {median['messages_per_sim_s']:,.0f}")
    print(f"deliveries / sim s    {median['deliveries_per_sim_s']:,.0f}")
    print(f"peak RSS              {median['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
