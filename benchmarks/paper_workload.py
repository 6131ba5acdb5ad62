"""The papers' workload live (issue 25 item 3): `weeble run scenarios/paper.yaml`, fault-free and
with its table corruption at the root, measured; and, when this machine cannot hold it, which
resource ran out first and the largest scale that it holds.

    python benchmarks/paper_workload.py                       # full scale: both phases
    python benchmarks/paper_workload.py --subscriptions 10000 1000 --rates 1000 250 --phases free
                                            # step down over N_s and omega until one passes
    python benchmarks/paper_workload.py --levels 3 --rates 100 --subscriptions 1000
                                            # small: 13 brokers (3-ary, 3 levels), omega 100

Each run is `weeble run` of scenarios/paper.yaml with the scale changed (the tree's levels, ω,
N_s, the duration; everything else is the scenario's). While it runs, every `--sample` s: each
broker process's CPU (utime+stime from /proc, as a share of one core) and RSS, the runner's (the
`weeble run` process, which holds every client: N_s subscribe streams, the publishers), the
load average and the machine's available memory. Then from the run's summary.json and its
analysis (the verdict's own figures): deliveries per second, lost outside fault windows, the
timing model (hop delays against δmax, refresh gaps against ρ, timer lateness: how late the
brokers' event loops fired their timers), latency, and every live limit that cut the workload.

A scale passes when every phase's verdict is "pass" (its timing model kept: a run that broke it
is "assumptions violated") and nothing was lost outside fault windows. The scales are tried
from the largest (levels, then N_s, then ω, in the order given) and the first that passes ends the
search. For a failing scale the benchmark says which resource ran out first, by when each
crossed its line: CPU (the machine's cores ≥ 90% busy, from /proc/stat, with the run's
processes' share and other work's named; not the load average, a 1-minute mean that lags),
the clients' event loop (the runner, one process, at ≥ 90% of one
core: the clients cannot keep the plan's pace however many cores there are), memory
(available < 5% of the machine's), the brokers' event loops (a timer fired later than the
checker's tolerance), a live limit (the run's summary names it). This pegs a 2-core machine
at full scale: run it under the bench lock
(`flock /work/coord/bench.lock python benchmarks/paper_workload.py ...`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import cpu_model, median, rss_mb, table
from backends_scale import HZ, broker_pids, cpu_ticks

REPO = Path(__file__).resolve().parent.parent
PAPER = REPO / "scenarios" / "paper.yaml"
CORES = os.cpu_count() or 1
CPU_LINE = 0.9  # share of all cores busy (the machine's, from /proc/stat): CPU ran out
MEMORY_LINE = 0.05  # available memory under this share of the machine's: memory ran out


def cpu_busy_ticks() -> tuple[int, int]:
    """The machine's (busy, all) CPU ticks since boot, over every core (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        out[key] = int(value.split()[0]) * 1024
    return out


@dataclass
class Sample:
    t: float  # s since the run's command started
    in_workload: bool  # the clients had started and every broker still ran
    load: float  # the load average: a 1-minute mean of runnable threads, so it lags
    busy: float  # cores the whole machine kept busy over the last interval (/proc/stat)
    available: int  # bytes
    cpu: dict[str, float]  # process -> share of one core over the last interval
    rss: dict[str, float]  # process -> MiB
    trace_mb: float = 0.0  # the run's trace files so far


@dataclass
class Sampler:
    """Samples the run's processes every `every` s from a thread."""

    run_dir: Path
    runner: int  # pid of `weeble run`
    brokers: int
    every: float
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        t0 = time.monotonic()
        before: dict[str, tuple[int, int]] = {}  # name -> (pid, ticks)
        last = time.monotonic()
        machine = cpu_busy_ticks()
        while not self._stop.wait(self.every):
            pids = broker_pids(self.run_dir / "brokers") | {"runner": self.runner}
            now = time.monotonic()
            cpu, rss = {}, {}
            for name, pid in pids.items():
                ticks = cpu_ticks(pid)
                prev = before.get(name)
                if prev is not None and prev[0] == pid:
                    cpu[name] = (ticks - prev[1]) / HZ / (now - last)
                before[name] = (pid, ticks)
                with contextlib.suppress(OSError, RuntimeError):  # it ended meanwhile
                    rss[name] = rss_mb(pid)
            last = now
            busy_ticks, all_ticks = cpu_busy_ticks()
            busy = CORES * (busy_ticks - machine[0]) / max(1, all_ticks - machine[1])
            machine = (busy_ticks, all_ticks)
            trace = self.run_dir / "trace"
            started = trace.is_dir() and any(trace.glob("c[0-9]*.jsonl"))
            in_workload = (started and len(pids) - 1 >= self.brokers
                           and not (self.run_dir / "summary.json").exists())
            self.samples.append(Sample(
                t=now - t0, in_workload=in_workload,
                load=float(Path("/proc/loadavg").read_text().split()[0]), busy=busy,
                available=meminfo()["MemAvailable"], cpu=cpu, rss=rss,
                trace_mb=sum(f.stat().st_size for f in trace.glob("*.jsonl")) / 2**20
                if trace.is_dir() else 0.0))


def scenario_at(levels: int, rate: float, subscriptions: int, duration: float,
                chaos: bool, warm_start_rate: float | None = None) -> dict[str, Any]:
    """scenarios/paper.yaml at another scale (or the same); `warm_start_rate`: 0 for none
    (every subscription at t = 0 with the first publications), None for the scenario's."""
    s = yaml.safe_load(PAPER.read_text())
    if warm_start_rate is not None:
        s["live"]["warm_start_rate"] = warm_start_rate or None
    s["topology"]["levels"] = levels
    s["workload"]["publish_rate"] = rate
    s["workload"]["subscriptions"] = subscriptions
    s["duration"] = duration
    if not chaos:
        s.pop("chaos", None)
    s["name"] = f"paper-l{levels}-w{rate:g}-n{subscriptions}" + ("-corrupt" if chaos else "")
    return s


def brokers_of(levels: int, m: int = 3) -> int:
    return sum(m ** i for i in range(levels))


def run_once(levels: int, rate: float, subscriptions: int, duration: float, chaos: bool,
             every: float, keep: Path | None, check_timeout: float,
             warm_start_rate: float | None = None) -> dict[str, Any]:
    runs = keep or Path(tempfile.mkdtemp(prefix="weeble-paper-"))
    runs.mkdir(parents=True, exist_ok=True)
    scenario = scenario_at(levels, rate, subscriptions, duration, chaos, warm_start_rate)
    if not scenario["live"].get("warm_start_rate"):
        scenario["name"] += "-cold"
    path = runs / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    run_id = scenario["name"]
    # the verdict from `weeble check`, the reference checker (the Spark twin that `weeble run`
    # starts agrees with it on every test trace, and took minutes per MB of trace here)
    cmd = [sys.executable, "-m", "weeble.cli", "run", str(path), "--runs-dir", str(runs),
           "--run-id", run_id, "--quiet", "--any-ports", "--no-analysis",
           "--base-host", f"127.{60 + os.getpid() % 60}.0.2"]
    t0 = time.monotonic()
    log = (runs / f"{run_id}.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    sampler = Sampler(runs / run_id, proc.pid, brokers_of(levels), every)
    thread = sampler.start()
    try:
        code = proc.wait(timeout=3600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sampler.stop()
        thread.join(every + 5)
        log.close()
    wall = time.monotonic() - t0
    t1 = time.monotonic()
    try:  # at full scale its legitimacy rounds over 121 tables of 10^4 entries take long
        check = subprocess.run([sys.executable, "-m", "weeble.cli", "check",
                                str(runs / run_id), "--json"], capture_output=True, text=True,
                               cwd=REPO, timeout=check_timeout)
        (runs / run_id / "check.json").write_text(check.stdout)
    except subprocess.TimeoutExpired:
        print(f"weeble check of {runs / run_id}: stopped after {check_timeout:g} s",
              file=sys.stderr)
    out = figures(runs / run_id, sampler.samples, duration)
    out["check s"] = time.monotonic() - t1
    out.update({"phase": "corrupt" if chaos else "free", "brokers": brokers_of(levels),
                "omega": rate, "N_s": subscriptions, "exit": code, "wall s": wall,
                "run_dir": str(runs / run_id), "log": str(runs / f"{run_id}.log")})
    return out


def figures(run_dir: Path, samples: list[Sample], duration: float) -> dict[str, Any]:
    """The run's figures: from its summary, its analysis and the samples."""
    out: dict[str, Any] = {}
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    analysis_path = run_dir / "check.json"
    try:
        analysis = json.loads(analysis_path.read_text())
    except (OSError, ValueError):
        analysis = {}
    work = summary.get("workload", {})
    traces = summary.get("traces", {})
    out["publications"] = traces.get("publications", work.get("publications"))
    out["deliveries"] = traces.get("deliveries", work.get("deliveries"))
    out["deliveries/s"] = (out["deliveries"] or 0) / duration
    out["client errors"] = work.get("errors")
    # the plan's publications, and those its clients never got acknowledged: a scale whose
    # clients fell behind did not carry the workload, whatever the verdict of what they sent
    out["planned"] = work.get("publications")
    out["unpublished"] = work.get("unpublished", 0)
    out["warm start s"] = work.get("warm_start_s", 0.0)  # before t = 0 (live.warm_start_rate)
    limits = dict(work.get("capped", {}))
    limits.update(traces.get("limits", {}))  # the brokers' (weeble run names them too)
    out["limits"] = limits
    verdict = analysis.get("verdict", {})
    out["verdict"] = verdict.get("status", "none (weeble check failed)")
    out["reasons"] = verdict.get("reasons", [])
    d = analysis.get("deliveries", {})
    out["expected"] = d.get("expected")
    out["missing"] = d.get("missing")
    in_faults = sum(f.get("lost") or 0 for f in verdict.get("faults", []))
    out["lost outside faults"] = (max(0, (d.get("missing") or 0) - in_faults)
                                  if d else None)
    timing = analysis.get("timing", {})
    worst, by_kind = timing.get("worst", {}), timing.get("by_kind", {})
    params = analysis.get("run", {}).get("header", {})  # pi, rho, delta_max, ...
    out["hop max s"] = worst.get("hop")
    out["δmax s"] = params.get("delta_max")
    out["hops over"] = by_kind.get("hop", {}).get("violations", 0)
    out["hops"] = timing.get("measured", {}).get("hop")
    out["refresh gap max s"] = worst.get("refresh")
    out["ρ s"] = params.get("rho")
    out["timer late max s"] = worst.get("timer")
    out["timers late"] = by_kind.get("timer", {}).get("violations", 0)
    out["timer late first s"] = by_kind.get("timer", {}).get("first")
    out["delivery delay max s"] = worst.get("path")  # publish to deliver, the slowest
    out["timing violations"] = sum(k.get("violations", 0) for k in by_kind.values())
    # those of the warm start (before the run's origin; R13 counts them like the others)
    groups = timing.get("groups", [])
    out["before t=0"] = sum(g.get("count", 1) for g in groups if g.get("begin", 0.0) < 0)
    # and those of the run's first bin of R13's grouping (Δ/10: 12 s at the paper's Δ), where
    # the warm start's storm was when it came at t = 0
    first = analysis.get("run", {}).get("bound", 0.0) / 10
    out["first Δ/10"] = sum(g.get("count", 1) for g in groups
                            if 0 <= g.get("begin", -1.0) < first)
    # the workload's window of the samples
    window = [s for s in samples if s.in_workload] or samples
    brokers = [n for n in (window[-1].cpu if window else {}) if n != "runner"]
    per_broker = [s.cpu[b] for s in window for b in brokers if b in s.cpu]
    out["broker cpu % med"] = 100 * median(per_broker) if per_broker else None
    out["broker cpu % max"] = 100 * max(per_broker) if per_broker else None
    totals = [sum(s.cpu.values()) for s in window if s.cpu]
    out["run cpu cores med"] = median(totals) if totals else None
    out["machine cpu cores med"] = median([s.busy for s in window]) if window else None
    runner = [s.cpu.get("runner", 0.0) for s in window if s.cpu]
    out["runner cpu cores med"] = median(runner) if runner else None
    rss = [s.rss[b] for s in window[-1:] for b in brokers if b in s.rss]
    out["broker rss MiB med"] = median(rss) if rss else None
    out["broker rss MiB max"] = max((v for s in window for b, v in s.rss.items()
                                     if b != "runner"), default=None)
    out["runner rss MiB max"] = max((s.rss.get("runner", 0.0) for s in window), default=None)
    out["load max"] = max((s.load for s in samples), default=None)
    out["load med"] = median([s.load for s in window]) if window else None
    total = meminfo()["MemTotal"]
    out["trace MiB"] = max((s.trace_mb for s in samples), default=0.0)
    out["available min MiB"] = min((s.available for s in samples), default=total) / 2**20
    out["ran out"] = ran_out(samples, out, total)
    return out


def ran_out(samples: list[Sample], f: dict[str, Any], total: int) -> list[tuple[float, str]]:
    """Each resource that ran out, with when it first did (s since the run's command
    started; timer lateness and limits are dated by the trace or not at all), first first."""
    found: list[tuple[float, str]] = []
    for s in samples:
        # the machine's busy time, not the load average: that is a 1-minute mean (at 10 s it
        # still holds the last run's load) and it counts threads waiting, not cores used
        used = sum(s.cpu.values())
        if s.cpu and s.busy >= CPU_LINE * CORES:
            found.append((s.t, f"CPU: {s.busy:.2f} of {CORES} cores busy, the run's processes"
                               f" using {used:.2f} of them, other work"
                               f" {max(0.0, s.busy - used):.2f} (load average {s.load:.0f})"))
            break
    for s in samples:
        if s.cpu.get("runner", 0.0) >= CPU_LINE:  # one process, one event loop: one core
            found.append((s.t, f"the clients' event loop: the runner, one process holding every"
                               f" client, used {s.cpu['runner']:.2f} of its one core"))
            break
    for s in samples:
        if s.available < MEMORY_LINE * total:
            found.append((s.t, f"memory: {s.available / 2**20:,.0f} MiB available"))
            break
    if f.get("timers late"):
        # dated in the run's time; the samples start before the brokers: after the CPU line
        # it is a consequence of it, alone it is the event loops themselves
        cpu = found[0][0] if found and found[0][1].startswith("CPU") else None
        when = (cpu + 1e-3) if cpu is not None else float("inf")
        found.append((when, f"event loop lag: broker timers fired up to"
                            f" {f['timer late max s']:.3g} s late ({f['timers late']:,} over"
                            f" the tolerance)"))
    if f.get("unpublished"):
        found.append((float("inf"), f"the clients: {f['unpublished']:,} of {f['planned']:,}"
                                    f" planned publications never acknowledged by a broker"))
    for name, count in f.get("limits", {}).items():
        found.append((float("inf"), f"a live limit: {name} cut {count:,}"))
    return sorted(found, key=lambda x: x[0])


def passes(f: dict[str, Any]) -> bool:
    """The bar: the verdict passes, with its timing model kept (no hop, refresh, timer or
    path over the model), nothing lost outside fault windows, nothing cut by a live limit,
    and the plan carried out: every planned publication published, no client error."""
    return (f["verdict"] == "pass" and f["timing violations"] == 0
            and f["lost outside faults"] == 0 and not f["limits"]
            and not f.get("unpublished") and not f.get("client errors"))


COLUMNS = ["phase", "brokers", "omega", "N_s", "verdict", "planned", "publications",
           "unpublished", "client errors", "deliveries/s", "expected", "missing",
           "lost outside faults", "hop max s", "δmax s", "hops over",
           "refresh gap max s", "ρ s", "timer late max s", "delivery delay max s",
           "timing violations", "before t=0", "first Δ/10", "warm start s",
           "broker cpu % med", "broker cpu % max", "runner cpu cores med", "run cpu cores med",
           "machine cpu cores med", "broker rss MiB med", "broker rss MiB max",
           "runner rss MiB max", "load med", "load max", "available min MiB", "trace MiB", "wall s",
           "check s"]


def report(f: dict[str, Any]) -> str:
    lines = [table([f], COLUMNS[:13]), table([f], COLUMNS[13:25]), table([f], COLUMNS[25:])]
    lines.append(f"pass: {passes(f)} (verdict {f['verdict']}, {f['timing violations']:,} timing"
                 f" violations, {f['lost outside faults']} lost outside fault windows)"
                 f"   run: {f['run_dir']}")
    for reason in f["reasons"][:5]:
        lines.append(f"  verdict: {str(reason)[:300]}")
    for when, what in f["ran out"]:
        at = f"at {when:.0f} s" if when != float("inf") else "(from the traces)"
        lines.append(f"  ran out {at}: {what}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--levels", type=int, nargs="+", default=[5],
                   help="3-ary tree levels, tried in this order (5: 121 brokers, 4: 40, 3: 13)")
    p.add_argument("--rates", type=float, nargs="+", default=[1000.0],
                   help="ω, tried in this order at each tree")
    p.add_argument("--subscriptions", type=int, nargs="+", default=[10_000],
                   help="N_s, tried in this order at each tree (before ω)")
    p.add_argument("--duration", type=float, default=None,
                   help="s (default: the scenario's, 120: 60 s judged after A = 60.2 s)")
    p.add_argument("--phases", nargs="+", default=["free", "corrupt"],
                   choices=["free", "corrupt"])
    p.add_argument("--warm-start-rate", type=float, default=None, metavar="R",
                   help="subscriptions/s of the warm start before t = 0 (live.warm_start_rate;"
                        " default: the scenario's; 0: none, every subscription at t = 0 with"
                        " the first publications, as before it existed)")
    p.add_argument("--sample", type=float, default=5.0, help="s between CPU/RSS samples")
    p.add_argument("--keep", type=Path, help="keep the runs in this directory")
    p.add_argument("--check-timeout", type=float, default=900.0,
                   help="s: stop `weeble check` of a run after this (its verdict: none)")
    args = p.parse_args()
    model = cpu_model()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=REPO).stdout.strip()
    print(f"paper workload: {CORES} cores ({model}), commit {rev},"
          f" load {Path('/proc/loadavg').read_text().split()[0]} at the start", flush=True)
    duration = args.duration or float(yaml.safe_load(PAPER.read_text())["duration"])
    held = None
    scales = [(levels, n, rate) for levels in args.levels for n in args.subscriptions
              for rate in args.rates]
    for levels, n, rate in scales:
        ok = True
        for phase in args.phases:
            f = run_once(levels, rate, n, duration, phase == "corrupt", args.sample, args.keep,
                         args.check_timeout, args.warm_start_rate)
            print(report(f), flush=True)
            ok = ok and passes(f)
            if not ok:
                break
        if ok:
            held = (brokers_of(levels), rate, n)
            break
    if held:
        print(f"largest scale held: {held[0]} brokers, ω = {held[1]:g}/s, N_s = {held[2]:,},"
              f" {duration:g} s ({', '.join(args.phases)})")
    else:
        print("no scale tried held (phases: " + ", ".join(args.phases) + ")")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
