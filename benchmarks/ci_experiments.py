"""Thesis 5.6, experiments 3 and 4: CI, l-MST and l-MIT against the random static tree.

    python benchmarks/ci_experiments.py                 # --quick: 10 topologies, 100 brokers
    python benchmarks/ci_experiments.py --full          # 10 topologies, the longer run
    python benchmarks/ci_experiments.py --topologies 3 --brokers 40 --duration 80   # a taste

The setup of spec ch. 5 §3.2, in the one simulator (`weeble simulate`'s code path: a scenario
with an `optimizer:` section per heuristic, the same seed, topology, costs and workload for
all four): 100 brokers in a random tree (the static tree, the thesis's reference), link costs
from brokers at random points of a square scaled to [0, 10] (a stand-in for the thesis's Brite
networks), processing costs U[0, 10]; 50 jobs of one publisher and 9 subscribers on distinct
brokers, placed by load (experiment 3: every broker load 1; experiment 4: load U[0.1, 1]),
reassigned to new brokers every 25 s on average (exponential; Table 5.1's 2500 ticks);
identity-based routing (one entry per job and link) with leases longer than the run (the jobs'
subscriptions start and end explicitly, nothing is refreshed); the coordinated link exchange in
FIFO mode carries every decision out.

Time is scaled: a tick is 10 ms, so the broadcast interval is 2.5 s (250 ticks) and 1000 ticks
are 10 s. The publication rate is scaled down 10x (2 per second per publisher, 5 per job and
broadcast period instead of 50) and cacheSize with it (512 ids: about 18 broadcast periods of an
average broker's consumption, the thesis's rule for 4608), so that a run takes seconds, not
hours. --full runs 300 s (the thesis measures at 30,000 ticks); --quick 120 s (CI has reached
its minimum at 12,000 ticks = 120 s in the thesis).

Per topology and load: each heuristic's cost per notification over the last 30 s (eq. 5.2, as
the notifications paid it on the sends), as a fraction of the static tree's in the same window;
the exchanges per 1000 ticks over the last third; the final tree's maximum degree. Prints the
medians with their spread (min-max) beside the thesis, and writes results.json, table.md and a
plot into --out.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from weeble.broker.sim.run import simulate
from weeble.model.scenario import Scenario, parse_scenario

HEURISTICS = ("none", "ci", "mst", "mit")
TICK = 0.01  # s
BROADCAST = 250 * TICK


def jobs_workload(brokers: list[str], *, jobs: int, subscribers: int, rate: float,
                  reassign: float, duration: float, nonuniform: bool,
                  rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Thesis 5.6.2: `jobs` notification types, each one publisher and `subscribers` on
    distinct brokers, placed with probability load(b)/Σload, reassigned after Exp(reassign) s;
    publications Exp(1/rate) apart. Returns (subscriptions, publications) of a scenario."""
    load = {b: rng.uniform(0.1, 1.0) if nonuniform else 1.0 for b in brokers}
    weights = [load[b] for b in brokers]

    def place(k: int) -> list[str]:
        chosen: list[str] = []
        while len(chosen) < k:
            b = rng.choices(brokers, weights)[0]
            if b not in chosen:
                chosen.append(b)
        return chosen

    subs: list[dict[str, Any]] = []
    pubs: list[dict[str, Any]] = []
    for j in range(jobs):
        t, epoch = 0.0, 0
        while t < duration:
            end = min(duration, t + rng.expovariate(1 / reassign))
            publisher = place(1)[0]
            for s, b in enumerate(place(subscribers)):
                subs.append({"client": f"j{j}e{epoch}s{s}", "broker": b,
                             "filter": f"job == {j}", "start": round(t, 4),
                             **({"end": round(end, 4)} if end < duration else {})})
            at = t + 1.0 + rng.expovariate(rate)  # subscriptions have spread for 1 s
            seq = 0
            while at < end - 0.5:
                pubs.append({"at": round(at, 4), "broker": publisher, "attributes": {"job": j},
                             "client": f"pub{j}e{epoch}"})
                seq += 1
                at += rng.expovariate(rate)
            t, epoch = end, epoch + 1
    return subs, pubs


def scenario(*, topology: int, brokers: int, nonuniform: bool, heuristic: str, duration: float,
             args: argparse.Namespace) -> Scenario:
    rng = random.Random(f"ci-experiments:{topology}:{nonuniform}")
    names = [f"b{i}" for i in range(brokers)]
    subs, pubs = jobs_workload(names, jobs=args.jobs, subscribers=min(9, brokers - 1),
                               rate=args.rate, reassign=args.reassign, duration=duration,
                               nonuniform=nonuniform, rng=rng)
    rho = 3600.0  # no refresh: explicit subscriptions end explicitly (the jobs move)
    d = brokers - 1  # any tree the optimizer builds
    return parse_scenario({
        "name": f"ci-{'exp4' if nonuniform else 'exp3'}-t{topology}-{heuristic}",
        "seed": topology, "duration": duration,
        "topology": {"kind": "random", "brokers": brokers},
        "routing": {"algorithm": args.routing},
        "timing": {"pi": rho + d * 0.02 + 1, "rho": rho, "delta_min": 0.005,
                   "delta_max": 0.025, "delay": "uniform", "d": d},
        "subscriptions": subs, "publications": pubs,
        "check_every": None, "trace": {"enabled": False},
        "optimizer": {"heuristic": heuristic, "broadcast_interval": BROADCAST, "eta": 3,
                      "cache_size": args.cache, "hashes": 7, "start": args.start,
                      "cost_every": 10.0,
                      "link_costs": {"model": "plane", "max": 10},
                      "processing_costs": {"model": "uniform", "max": 10}},
    })


def one(task: tuple[int, bool, str, argparse.Namespace]) -> dict[str, Any]:
    topology, nonuniform, heuristic, args = task
    s = scenario(topology=topology, brokers=args.brokers, nonuniform=nonuniform,
                 heuristic=heuristic, duration=args.duration, args=args)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        summary = simulate(s, tmp, progress=False).as_dict()
    wall = time.perf_counter() - wall
    o = summary["optimizer"]
    series = o["series"]
    final = [w for w in series if w["t"] > args.duration - args.window + 1e-9]
    steady = [r for r in summary["reconfigurations"] if r["outcome"] == "done"
              and r["start"] >= args.duration * 2 / 3]
    degree = Counter(x for e in o["tree"] for x in e.split("-"))
    d = summary["deliveries"]
    ops = summary["reconfigurations"]
    return {
        "topology": topology, "load": "non-uniform" if nonuniform else "uniform",
        "heuristic": heuristic, "wall": wall,
        "cost": sum(w["cost"] for w in final), "notifications": sum(
            w["notifications"] for w in final),
        "overhead": sum(w["overhead"] for w in final),
        "series": [(w["t"], w["cost"] / w["notifications"] if w["notifications"] else None)
                   for w in series],
        "exchanges": o["exchanges"]["done"],
        "per_1000_ticks": len(steady) / (args.duration / 3) * 1000 * TICK,
        "max_degree": max(degree.values()),
        "missing": d["missing"], "duplicate": d["duplicate"], "fifo": d["fifo"],
        "lost_in_exchanges": sum(r["lost"] for r in ops),
        "duplicated_in_exchanges": sum(r["duplicated"] for r in ops),
        "events": summary["performance"]["events"],
    }


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="120 s per run (the default)")
    size.add_argument("--full", action="store_true", help="300 s per run (30,000 ticks)")
    p.add_argument("--topologies", type=int, default=10)
    p.add_argument("--brokers", type=int, default=100)
    p.add_argument("--duration", type=float, default=None, help="s (overrides the size)")
    p.add_argument("--window", type=float, default=30.0, help="final window measured, s")
    p.add_argument("--start", type=float, default=10.0, help="the heuristics start here, s")
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--rate", type=float, default=2.0, help="publications/s per publisher")
    p.add_argument("--reassign", type=float, default=25.0, help="mean job lifetime, s")
    p.add_argument("--cache", type=int, default=512, help="cacheSize (filterSize 12x)")
    p.add_argument("--loads", default="uniform,non-uniform")
    p.add_argument("--routing", default="identity", choices=("simple", "identity"),
                   help="routing algorithm (identity: one entry per job and link)")
    p.add_argument("--workers", type=int, default=2, help="processes (the machine has 2 cores)")
    p.add_argument("--out", type=Path, default=Path("out/ci_experiments"))
    args = p.parse_args()
    if args.duration is None:
        args.duration = 300.0 if args.full else 120.0
    loads = [x.strip() for x in args.loads.split(",")]
    for x in loads:
        if x not in ("uniform", "non-uniform"):
            p.error(f"--loads: uniform or non-uniform, got {x!r}")
    # topology by topology (both loads), so that a run cut short has whole topologies
    tasks = [(t, load == "non-uniform", h, args) for t in range(args.topologies)
             for load in loads for h in HEURISTICS]
    print(f"{len(tasks)} runs: {args.topologies} topologies x {len(loads)} loads x "
          f"{len(HEURISTICS)} (static, ci, mst, mit), {args.brokers} brokers, "
          f"{args.duration:g} s each", file=sys.stderr)
    results: list[dict[str, Any]] = []
    begun = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    per_topology = len(loads) * len(HEURISTICS)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for i, r in enumerate(pool.map(one, tasks), 1):
            results.append(r)
            print(f"  [{i}/{len(tasks)}] {r['load']:11} topology {r['topology']} "
                  f"{r['heuristic']:4}: {r['cost'] / max(1, r['notifications']):7.2f} per "
                  f"notification, {r['exchanges']} exchanges, {r['wall']:.0f} s",
                  file=sys.stderr)
            if i % per_topology == 0:  # a whole topology more: the files so far
                write(results, loads, args, i // per_topology)
    elapsed = time.perf_counter() - begun
    text = write(results, loads, args, args.topologies)
    print(text)
    print(f"\n{len(tasks)} runs in {elapsed:.0f} s; wrote {args.out}/results.json, table.md",
          file=sys.stderr)
    plot(results, loads, args)


def write(results: list[dict[str, Any]], loads: list[str], args: argparse.Namespace,
          topologies: int) -> str:
    (args.out / "results.json").write_text(json.dumps(
        {"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=1))
    text = "\n".join(table(results, loads, args, topologies))
    (args.out / "table.md").write_text(text + "\n")
    return text


THESIS = {
    "uniform": {"ci": "≈ 0.5 (\"nearly half\")", "mst": "between CI and ℓMIT",
                "mit": "worst of the three"},
    "non-uniform": {"ci": "< 0.5 (\"even more than half\" saved)", "mst": "≈ as uniform",
                    "mit": "better than uniform, still > CI"},
}
NAMES = {"ci": "CI", "mst": "ℓMST", "mit": "ℓMIT"}


def table(results: list[dict[str, Any]], loads: list[str], args: argparse.Namespace,
          topologies: int) -> list[str]:
    by = {(r["load"], r["topology"], r["heuristic"]): r for r in results}
    rows = [f"final cost / random static tree (median, min–max over {topologies} "
            f"topologies; last {args.window:g} s of {args.duration:g} s, {args.brokers} brokers)",
            "",
            "| load | heuristic | cost / static | thesis | exchanges per 1000 ticks | "
            "max degree (median) | lost · duplicated |",
            "|---|---|---|---|---|---|---|"]
    for load in loads:
        for h in ("ci", "mst", "mit"):
            ratios, rates, degrees, lost, dup = [], [], [], 0, 0
            for t in range(topologies):
                r, s = by[(load, t, h)], by[(load, t, "none")]
                ratios.append((r["cost"] / r["notifications"]) / (s["cost"] / s["notifications"]))
                rates.append(r["per_1000_ticks"])
                degrees.append(r["max_degree"])
                lost += r["lost_in_exchanges"] + r["missing"]
                dup += r["duplicated_in_exchanges"] + r["duplicate"]
            thesis = THESIS[load][h] + (" ; 83 / 1000 ticks" if h == "ci" else
                                        " ; ≈ 40 / 1000 ticks" if h == "mit" else
                                        " ; ≈ 0 in steady state")
            rows.append(f"| {load} | {NAMES[h]} | {spread(ratios)} | {thesis} | "
                        f"{spread(rates)} | {statistics.median(degrees):g} | {lost} · {dup} |")
    for load in loads:
        order: Counter[str] = Counter()
        for t in range(topologies):
            c = {h: by[(load, t, h)]["cost"] / by[(load, t, h)]["notifications"]
                 for h in ("ci", "mst", "mit")}
            order["CI < ℓMST < ℓMIT" if c["ci"] < c["mst"] < c["mit"] else
                  "CI best" if c["ci"] < min(c["mst"], c["mit"]) else "CI not best"] += 1
        rows.append("")
        rows.append(f"{load}: order per topology: " + ", ".join(
            f"{k} {v}×" for k, v in order.most_common()) + " (thesis: CI < ℓMST < ℓMIT)")
    return rows


def plot(results: list[dict[str, Any]], loads: list[str], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(loads), figsize=(6 * len(loads), 4), squeeze=False)
    for ax, load in zip(axes[0], loads, strict=True):
        for h in HEURISTICS:
            runs = [r for r in results if r["load"] == load and r["heuristic"] == h]
            ts = [t for t, _ in runs[0]["series"]]
            med = [statistics.median(v for v in (r["series"][i][1] for r in runs)
                                     if v is not None and not math.isnan(v))
                   for i in range(len(ts))]
            ax.plot([t / TICK / 1000 for t in ts], med,
                    label={"none": "random static", **NAMES}.get(h, h))
        ax.set_title(f"experiment {4 if load == 'non-uniform' else 3}: {load} load")
        ax.set_xlabel("time (1000 ticks = 10 s)")
        ax.set_ylabel("cost per notification (median)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "cost_over_time.png", dpi=120)
    print(f"wrote {args.out}/cost_over_time.png", file=sys.stderr)


if __name__ == "__main__":
    main()
