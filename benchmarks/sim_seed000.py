"""Benchmark the simulator on the thesis setup (scenarios/seed000.yaml).

    python benchmarks/sim_seed000.py --duration 20 --repeat 3
    python benchmarks/sim_seed000.py --duration 20 --repeat 3 --baseline 20a3ae8
    python benchmarks/sim_seed000.py --duration 20 --repeat 3 --no-baseline
    python benchmarks/sim_seed000.py --duration 20 --repeat 3 --baseline bbdf1b1 --compiled
    python benchmarks/sim_seed000.py --duration 10 --profile

Each repeat runs in a fresh process, so that peak memory (getrusage maxrss: tracemalloc would
slow the run down several times) belongs to that run alone. Reports the median over repeats of:
events/s (broker steps per wall second), simulated seconds per wall second and per CPU second of
the process (the CPU figure holds still on a machine shared with other work; the wall figure
does not), the same over the second half of the simulated time only (the steady state: the
warm start, 10^5 subscriptions at t = 0, weighs on a short run but not on the minutes of a
sweep), the warm start's CPU time, inter-broker messages per simulated second, and peak RSS;
and whether every run gave the same results (a digest of its summary without `performance`:
deliveries, verdicts, messages by kind).

By default every run has two same-run baselines, interleaved with the current build so all
meet the same machine load, and the ratios to the first: the simulator at the fixed revision
`PINNED` in pure Python (the revision whose compiled figures the README once quoted, 5.33
simulated s per wall s; CPU models differ between machines, so a figure carries over as its
ratio to this one), and the current source in pure Python (`WEEBLE_COMPILE=0`, when this
checkout runs compiled): what the compiled build gives on this machine.

`--baseline REV`: the fixed revision is REV instead (its source unpacked from git into a
temporary directory and put first on the path); `--no-baseline` leaves it out.

`--compiled`: also the current source compiled with mypyc (`scripts/compile.py`, built into a
temporary copy of this checkout), interleaved the same way. `current` is whatever this checkout
imports: pure Python, or compiled if `scripts/compile.py` was run here (the `compiled` row says).

`--baseline-compiled` (with `--baseline REV --compiled`): also REV compiled with its own
`scripts/compile.py`, so the compiled build is compared with the compiled build before.

`--compiled-only` (with `--compiled`): leave out the current source as pure Python (long runs).

The wall figures are those of the whole `simulate` call (setup, run, the checker's verdict), the
CPU figures those of every process of the run (a baseline older than the checker's removed
second process may have started one); `sim s / CPU s (simulator)` is the simulator's process
alone.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import hashlib
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "seed000.yaml"
# The fixed older revision every run is compared with by default: main on 2026-11-23, when the
# README quoted 5.33 simulated s per wall s (compiled) for this benchmark at 20 s.
PINNED = "4203ecb"


def one_run(scenario_path: Path, duration: float | None) -> dict[str, Any]:
    from weeble.chaos.runner import in_simulation
    from weeble.model.scenario import load_scenario

    try:  # a revision before the layers moved into folders (59a97cd): the baseline PINNED
        from weeble.broker.sim import engine, run, workload  # type: ignore[import-not-found]
    except ModuleNotFoundError:
        from weeble.sim import engine, run, workload
    simulate = run.simulate

    scenario = load_scenario(scenario_path)
    if duration is not None:
        scenario = scenario.model_copy(update={"duration": duration})
    # The CPU time of the warm start (the clients' actions at t = 0) and of the second half of
    # the simulated time (the steady state that long runs are made of), measured around the
    # simulator's own functions (also those of a baseline revision): `Engine.run` to the half,
    # then on to the end, is the same run as one `Engine.run` to the end.
    marks: dict[str, float] = {}
    start = workload.Clients.start

    def timed_start(self: Any) -> None:
        before = time.process_time()
        start(self)
        marks["warm"] = time.process_time() - before

    def timed_run(engine: Any, until: float, show: bool, name: str) -> None:
        engine.run(until / 2)
        marks["half"] = time.process_time()
        engine.run(until)
        marks["end"] = time.process_time()

    workload.Clients.start = timed_start  # type: ignore[method-assign]
    run._run = timed_run  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as out:
        faults = in_simulation(scenario) if scenario.chaos is not None else None
        cpu = time.process_time()
        children = _children_cpu()
        wall = time.perf_counter()
        summary = simulate(scenario, out, progress=False, faults=faults)
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
        children = _children_cpu() - children  # any child process (a baseline's checker)
    perf = summary.performance
    results = summary.as_dict()
    results.pop("performance")
    digest = hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()
    # per part of the summary, so that sides whose results differ say where (a baseline
    # revision's checker may count differently while its brokers do the same)
    parts = {key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]
             for key, value in results.items()}
    return {
        "duration": scenario.duration,
        "events": perf["events"],
        "wall_time": perf["wall_time"],
        "events_per_s": perf["events_per_wall_second"],
        "sim_s_per_wall_s": scenario.duration / wall,
        "run_sim_s_per_wall_s": perf["sim_seconds_per_wall_second"],
        "sim_s_per_cpu_s": scenario.duration / (cpu + children),
        "sim_s_per_own_cpu_s": scenario.duration / cpu,
        "children_cpu_s": children,
        "steady_sim_s_per_cpu_s": scenario.duration / 2 / (marks["end"] - marks["half"]),
        "warm_start_cpu_s": marks["warm"],
        "messages_per_sim_s": summary.messages["per_second"],
        "deliveries_per_sim_s": summary.deliveries["deliveries"] / scenario.duration,
        "peak_rss_mb": perf["peak_rss_mb"],
        "compiled": float(not engine.__file__.endswith(".py")),
        "digest": digest,  # the summary without `performance`: the run's results
        "parts": parts,
    }


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _runs_compiled() -> bool:
    """Whether this checkout's simulator runs compiled (in a fresh process, as the runs do)."""
    out = subprocess.run([sys.executable, "-c", "from weeble.sim import engine;"
                          " print(not engine.__file__.endswith('.py'))"],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] == "True"


def unpack(rev: str) -> Path:
    """The source tree of git revision `rev` of this repository, in a temporary directory."""
    repo = Path(__file__).resolve().parent.parent
    target = Path(tempfile.mkdtemp(prefix="weeble-baseline-"))
    atexit.register(shutil.rmtree, target, True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def compiled_copy() -> Path:
    """This checkout's source (as it is now, uncommitted changes too), compiled, in a temporary
    directory."""
    repo = Path(__file__).resolve().parent.parent
    target = Path(tempfile.mkdtemp(prefix="weeble-compiled-"))
    atexit.register(shutil.rmtree, target, True)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.json")
    shutil.copytree(repo / "weeble", target / "weeble", ignore=skip)
    shutil.copytree(repo / "scripts", target / "scripts", ignore=skip)
    subprocess.run([sys.executable, str(target / "scripts" / "compile.py"), "--root",
                    str(target)], check=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--duration", type=float, help="override the scenario's duration (s)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile one run, top 25")
    parser.add_argument("--baseline", metavar="REV", default=PINNED,
                        help="the fixed revision run beside, pure Python, interleaved"
                             f" (default {PINNED})")
    parser.add_argument("--no-baseline", action="store_true",
                        help="leave out the fixed revision")
    parser.add_argument("--compiled", action="store_true",
                        help="also the current source compiled with mypyc, interleaved")
    parser.add_argument("--baseline-compiled", action="store_true",
                        help="also the baseline REV compiled with its own scripts/compile.py")
    parser.add_argument("--compiled-only", action="store_true",
                        help="with --compiled: leave out the current pure-Python side(s)")
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

    # side -> (the source put first on the path, or None for this checkout; pure Python)
    sides: dict[str, tuple[Path | None, bool]] = {}
    if args.no_baseline:
        args.baseline = None
    if args.baseline is not None:
        sides[f"baseline {args.baseline}"] = (unpack(args.baseline), False)
        if args.baseline_compiled:  # compiled vs compiled: what the native work itself gained
            source = unpack(args.baseline)
            subprocess.run([sys.executable, str(source / "scripts" / "compile.py"), "--root",
                            str(source)], check=True)
            sides[f"baseline-compiled {args.baseline}"] = (source, False)
    if not (args.compiled and args.compiled_only):
        if _runs_compiled():  # this checkout's build, and the same source pure beside it
            sides["current pure"] = (None, True)
        sides["current"] = (None, False)
    if args.compiled:
        sides["compiled"] = (compiled_copy(), False)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    load = [os.getloadavg()[0]]
    for i in range(args.repeat):
        for side, (source, pure) in sides.items():
            cmd = [sys.executable, __file__, "--child", "--scenario", str(args.scenario)]
            if args.duration is not None:
                cmd += ["--duration", str(args.duration)]
            env = dict(os.environ)
            env.pop("WEEBLE_CHECKER", None)  # a baseline that has the option: its default
            if pure:
                env["WEEBLE_COMPILE"] = "0"
            if source is not None:  # the baseline's weeble first on the path
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source),
                                                                  env.get("PYTHONPATH")]))
            out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                 env=env).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
            r = runs[side][-1]
            print(f"run {i + 1}/{args.repeat} {side}: {r['sim_s_per_wall_s']:.3f} sim s per "
                  f"wall s, {r['sim_s_per_cpu_s']:.3f} per CPU s (load "
                  f"{os.getloadavg()[0]:.1f})", file=sys.stderr)
    load.append(os.getloadavg()[0])
    medians = {side: {k: statistics.median(r[k] for r in rs) for k in rs[0]
                      if k not in ("digest", "parts")}
               for side, rs in runs.items()}
    digests = {side: {r["digest"] for r in rs} for side, rs in runs.items()}
    first = next(iter(medians.values()))
    print(f"scenario              {args.scenario.name} ({first['duration']:g} simulated s), "
          f"median of {args.repeat}; load (1 min) {load[0]:.1f} at the start, "
          f"{load[1]:.1f} at the end, {os.cpu_count()} CPUs")
    rows = [("events/s", "events_per_s", "{:,.0f}"),
            ("simulated s / wall s", "sim_s_per_wall_s", "{:.3f}"),
            ("  run only (summary)", "run_sim_s_per_wall_s", "{:.3f}"),
            ("simulated s / CPU s", "sim_s_per_cpu_s", "{:.3f}"),
            ("  simulator's process", "sim_s_per_own_cpu_s", "{:.3f}"),
            ("  steady (2nd half)", "steady_sim_s_per_cpu_s", "{:.3f}"),
            ("other processes CPU s", "children_cpu_s", "{:.2f}"),
            ("  warm start (CPU s)", "warm_start_cpu_s", "{:.2f}"),
            ("wall time (s)", "wall_time", "{:.1f}"),
            ("messages / sim s", "messages_per_sim_s", "{:,.0f}"),
            ("deliveries / sim s", "deliveries_per_sim_s", "{:,.0f}"),
            ("peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
            ("compiled (mypyc)", "compiled", "{:.0f}")]
    names = list(medians)
    # ratios of every other side to the first (the baseline, when there is one)
    def short(side: str) -> str:  # "current pure" -> "pure", "baseline 4203ecb" -> "baseline"
        return side.split()[-1] if side.startswith("current") else side.split()[0]

    print(f"{'':22}" + "".join(f"{n:>22}" for n in names)
          + "".join(f"  {short(n) + '/' + short(names[0]):>10}" for n in names[1:]))
    for label, key, form in rows:
        line = f"{label:22}" + "".join(f"{form.format(medians[n][key]):>22}" for n in names)
        if medians[names[0]][key] and key != "compiled":
            line += "".join(f"  {medians[n][key] / medians[names[0]][key]:>10.2f}"
                            for n in names[1:])
        print(line)
    # the results: the summary without its `performance`, every run of every side
    print(f"{'results (digest)':22}" + "".join(
        f"{(next(iter(d))[:12] if len(d) == 1 else 'DIFFER'):>22}" for d in digests.values()))
    same = len(set.union(*digests.values())) == 1
    print(f"{'same results':22}{'yes: every run of every side' if same else 'NO'}")
    if not same:  # which parts of the summary differ between the sides, and which agree
        keys = sorted({k for rs in runs.values() for r in rs for k in r["parts"]})
        values = {k: {r["parts"].get(k) for rs in runs.values() for r in rs} for k in keys}
        print(f"{'  differ in':22}{', '.join(k for k in keys if len(values[k]) > 1)}")
        print(f"{'  the same':22}{', '.join(k for k in keys if len(values[k]) == 1)}")
    return 0 if all(len(d) == 1 for d in digests.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
