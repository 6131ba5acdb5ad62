"""`weeble reproduce ch5`: thesis 5.6, experiments 3 and 4 — CI, ℓMST and ℓMIT against the random
static tree (spec ch5 §3.2-§3.3, claims 8, 9, 15).

The setup of spec ch5 §3.2 in the one simulator (`weeble simulate`'s code path: a scenario
with an `optimizer:` section per heuristic; the same seed, topology, costs and workload for all
four): 100 brokers in a random tree (the static tree, the thesis's reference), link costs from
brokers at random points of a square scaled to [0, 10] (a stand-in for the thesis's Brite
networks), processing costs U[0, 10]; 50 jobs of one publisher and 9 subscribers on distinct
brokers, placed by load (experiment 3: every broker load 1; experiment 4: load U[0.1, 1]),
reassigned to new brokers every 25 s on average (exponential; Table 5.1's 2500 ticks);
identity-based routing (one entry per job and link) with leases longer than the run (the jobs'
subscriptions start and end explicitly, nothing is refreshed); the coordinated link exchange in
FIFO mode carries every decision out.

Time is scaled: a tick is 10 ms, so the broadcast interval is 2.5 s (250 ticks) and 1000 ticks
are 10 s. The publication rate is scaled down 10x (2 per second per publisher, 5 per job and
broadcast period instead of 50) and cacheSize with it (512 ids: about 18 broadcast periods of an
average broker's consumption, the thesis's rule for 4608), so that a run takes about half a
minute, not hours.

A grid point is (load, topology, duration): its "simulation" column runs the four trees (static,
CI, ℓMST, ℓMIT) and gives, per heuristic h, `h.ratio` (cost per notification over the last 30 s
as a fraction of the static tree's in the same window and topology), `h.per_1000_ticks`
(exchanges over the last third), `h.max_degree`, `h.lost`, `h.duplicated` and the cost series.
The short grid: 2 topologies × 2 loads at 120 s (CI has reached its minimum at 12,000 ticks =
120 s in the thesis); `--full`: the thesis's 50 topologies at 300 s (30,000 ticks; hours).
`benchmarks/ci_experiments.py` runs the same runs (`run_one`) for its own table.
"""

from __future__ import annotations

import math
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.analytics.reproduce.framework import (
    Claim,
    Measure,
    Outcome,
    Point,
    Results,
    SimulatedExperiment,
    SimulationColumnBase,
    Tolerance,
    fmt,
)
from weeble.analytics.reproduce.plots import pyplot

HEURISTICS = ("none", "ci", "mst", "mit")
NAMES = {"none": "random static", "ci": "CI", "mst": "ℓMST", "mit": "ℓMIT"}
LOADS = ("uniform", "non-uniform")
TICK = 0.01  # s
BROADCAST = 250 * TICK


@dataclass(frozen=True)
class Setup:
    """What a run of spec ch5 §3.2 is, scaled (see the module doc)."""

    brokers: int = 100
    window: float = 30.0  # the final window measured, s
    start: float = 10.0  # the heuristics start here, s
    jobs: int = 50
    rate: float = 2.0  # publications/s per publisher
    reassign: float = 25.0  # mean job lifetime, s
    cache: int = 512  # cacheSize (filterSize 12x)
    routing: str = "identity"


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
            while at < end - 0.5:
                pubs.append({"at": round(at, 4), "broker": publisher, "attributes": {"job": j},
                             "client": f"pub{j}e{epoch}"})
                at += rng.expovariate(rate)
            t, epoch = end, epoch + 1
    return subs, pubs


def scenario(*, topology: int, nonuniform: bool, heuristic: str, duration: float,
             setup: Setup) -> Any:
    from weeble.model.scenario import parse_scenario

    rng = random.Random(f"ci-experiments:{topology}:{nonuniform}")
    brokers = setup.brokers
    names = [f"b{i}" for i in range(brokers)]
    subs, pubs = jobs_workload(names, jobs=setup.jobs, subscribers=min(9, brokers - 1),
                               rate=setup.rate, reassign=setup.reassign, duration=duration,
                               nonuniform=nonuniform, rng=rng)
    rho = 3600.0  # no refresh: explicit subscriptions end explicitly (the jobs move)
    d = brokers - 1  # any tree the optimizer builds
    return parse_scenario({
        "name": f"ci-{'exp4' if nonuniform else 'exp3'}-t{topology}-{heuristic}",
        "seed": topology, "duration": duration,
        "topology": {"kind": "random", "brokers": brokers},
        "routing": {"algorithm": setup.routing},
        "timing": {"pi": rho + d * 0.02 + 1, "rho": rho, "delta_min": 0.005,
                   "delta_max": 0.025, "delay": "uniform", "d": d},
        "subscriptions": subs, "publications": pubs,
        "check_every": None, "trace": {"enabled": False},
        "optimizer": {"heuristic": heuristic, "broadcast_interval": BROADCAST, "eta": 3,
                      "cache_size": setup.cache, "hashes": 7, "start": setup.start,
                      "cost_every": 10.0,
                      "link_costs": {"model": "plane", "max": 10},
                      "processing_costs": {"model": "uniform", "max": 10}},
    })


def run_one(topology: int, nonuniform: bool, heuristic: str, duration: float,
            setup: Setup) -> dict[str, Any]:
    """One run: the final window's cost, the exchanges per 1000 ticks over the last third, the
    final tree's maximum degree, what was lost or duplicated, the cost series."""
    from weeble.sim.run import simulate

    s = scenario(topology=topology, nonuniform=nonuniform, heuristic=heuristic,
                 duration=duration, setup=setup)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        summary = simulate(s, tmp, progress=False).as_dict()
    wall = time.perf_counter() - wall
    o = summary["optimizer"]
    series = o["series"]
    final = [w for w in series if w["t"] > duration - setup.window + 1e-9]
    steady = [r for r in summary["reconfigurations"] if r["outcome"] == "done"
              and r["start"] >= duration * 2 / 3]
    degree = Counter(x for e in o["tree"] for x in e.split("-"))
    d = summary["deliveries"]
    ops = summary["reconfigurations"]
    return {
        "topology": topology, "load": LOADS[nonuniform], "heuristic": heuristic, "wall": wall,
        "cost": sum(w["cost"] for w in final),
        "notifications": sum(w["notifications"] for w in final),
        "overhead": sum(w["overhead"] for w in final),
        "series": [(w["t"], w["cost"] / w["notifications"] if w["notifications"] else None)
                   for w in series],
        "exchanges": o["exchanges"]["done"],
        "per_1000_ticks": len(steady) / (duration / 3) * 1000 * TICK,
        "max_degree": max(degree.values()),
        "missing": d["missing"], "duplicate": d["duplicate"], "fifo": d["fifo"],
        "lost_in_exchanges": sum(r["lost"] for r in ops),
        "duplicated_in_exchanges": sum(r["duplicated"] for r in ops),
        "events": summary["performance"]["events"],
    }


# ---- the experiment ---------------------------------------------------------------------------


def point(load: int, topology: int, duration: float) -> Point:
    return Point.of(load=load, topology=topology, duration=duration)


@dataclass(frozen=True)
class SimulationColumn(SimulationColumnBase):
    """The four trees of one (load, topology) at one run length."""

    setup: Setup = Setup()
    label: str = "ch5 simulation v2"

    def evaluate(self, point: Point) -> dict[str, float]:
        duration = point["duration"]
        runs = {h: run_one(int(point["topology"]), bool(point["load"]), h, duration, self.setup)
                for h in HEURISTICS}
        static = runs["none"]
        base = static["cost"] / static["notifications"] if static["notifications"] else math.nan
        out: dict[str, float] = {}
        for h, r in runs.items():
            per = r["cost"] / r["notifications"] if r["notifications"] else math.nan
            out[f"{h}.cost_per_notification"] = per
            out[f"{h}.ratio"] = per / base
            out[f"{h}.per_1000_ticks"] = r["per_1000_ticks"]
            out[f"{h}.max_degree"] = r["max_degree"]
            out[f"{h}.exchanges"] = r["exchanges"]
            out[f"{h}.lost"] = r["missing"] + r["lost_in_exchanges"]
            out[f"{h}.duplicated"] = r["duplicate"] + r["duplicated_in_exchanges"]
            out[f"{h}.wall_s"] = r["wall"]
            for i, (t, v) in enumerate(r["series"]):
                out[f"{h}.series.{i}"] = math.nan if v is None else v
                out[f"series_t.{i}"] = t
        return out


def _values(results: Results, column: str, load: int, quantity: str) -> list[float]:
    out = []
    for p in results.points:
        if p["load"] == load:
            v = results.value(column, p, quantity)
            if v is not None and not math.isnan(v):
                out.append(v)
    return out


def _median(load: int, quantity: str) -> Measure:
    def measure(results: Results, column: str) -> float | None:
        xs = _values(results, column, load, quantity)
        return statistics.median(xs) if xs else None

    return measure


def _difference(a: Measure, b: Measure) -> Measure:
    """a − b, where both have a value."""

    def measure(results: Results, column: str) -> float | None:
        x, y = a(results, column), b(results, column)
        return None if x is None or y is None else x - y

    return measure


def _extreme(pick: Any, measures: list[Measure]) -> Measure:
    """max or min of several measures, where all have a value."""

    def measure(results: Results, column: str) -> float | None:
        xs = [m(results, column) for m in measures]
        return None if any(x is None for x in xs) else pick(xs)

    return measure


def _total(quantity: str) -> Measure:
    def measure(results: Results, column: str) -> float | None:
        xs = [results.value(column, p, f"{h}.{quantity}") for p in results.points
              for h in HEURISTICS]
        got = [x for x in xs if x is not None]
        return sum(got) if got else None

    return measure


EXP3, EXP4 = "experiment 3 (uniform load), thesis 5.6.2", "experiment 4 (non-uniform load)"
RATES = "exchanges per 1000 ticks over the last third (thesis exp. 8, Experiment 5's setup)"


@dataclass
class Chapter5(SimulatedExperiment):
    simulation = SimulationColumn
    name: str = "ch5"
    title: str = ("Thesis chapter 5.6, experiments 3 and 4: the Cost-and-Interest heuristic "
                  "against ℓMST, ℓMIT and the random static tree")
    setup: Setup = Setup()
    topologies: tuple[int, int] = (2, 50)  # short, --full
    durations: tuple[float, float] = (120.0, 300.0)  # short, --full

    def grid(self, *, full: bool) -> list[Point]:
        n, duration = (self.topologies[1], self.durations[1]) if full else (
            self.topologies[0], self.durations[0])
        return [point(load, t, duration) for t in range(n) for load in (0, 1)]

    def claims(self) -> list[Claim]:
        u, n = (lambda q: _median(0, q)), (lambda q: _median(1, q))
        tenth = Tolerance(absolute=0.1)
        exact = Tolerance()
        half = Tolerance(relative=0.5)
        return [
            Claim("exp3.ci", "CI's final cost / static tree's, median over topologies: "
                  "\"nearly half\"", "L8330–8332", 0.5, tenth, u("ci.ratio"), group=EXP3),
            Claim("exp3.ci<mst", "CI cheaper than ℓMST: median ℓMST − median CI (of static)",
                  "L8265–8332, Fig. 5.8", 0.0, exact,
                  _difference(u("mst.ratio"), u("ci.ratio")), group=EXP3, relation="≥"),
            Claim("exp3.mst<mit", "ℓMST cheaper than ℓMIT: median ℓMIT − median ℓMST",
                  "L8265–8332, Fig. 5.8", 0.0, exact,
                  _difference(u("mit.ratio"), u("mst.ratio")), group=EXP3, relation="≥"),
            Claim("exp3.static", "every heuristic beats the random tree: the largest median "
                  "cost / static", "L8436–8442", 1.0, exact,
                  _extreme(max, [u("ci.ratio"), u("mst.ratio"), u("mit.ratio")]),
                  group=EXP3, relation="≤"),
            Claim("exp4.ci", "CI's final cost / static tree's: \"even more than half\" saved",
                  "L8361–8362", 0.5, exact, n("ci.ratio"), group=EXP4, relation="≤"),
            Claim("exp4.ci-best", "CI best again: min(ℓMST, ℓMIT) − CI (medians, of static)",
                  "L8334–8369, Fig. 5.9", 0.0, exact,
                  _difference(_extreme(min, [n("mst.ratio"), n("mit.ratio")]),
                              n("ci.ratio")), group=EXP4, relation="≥"),
            Claim("exp4.ci-gains", "CI saves more than under uniform load: CI exp. 3 − CI exp. 4",
                  "L8334–8362", 0.0, exact, _difference(u("ci.ratio"), n("ci.ratio")),
                  group=EXP4, relation="≥"),
            Claim("exp4.mit-gains", "ℓMIT exploits the hotspots: ℓMIT exp. 3 − ℓMIT exp. 4",
                  "L8334–8369", 0.0, exact, _difference(u("mit.ratio"), n("mit.ratio")),
                  group=EXP4, relation="≥"),
            Claim("exp4.mst-same", "ℓMST essentially unchanged: ℓMST exp. 4 − ℓMST exp. 3",
                  "L8334–8369", 0.0, tenth, _difference(n("mst.ratio"), u("mst.ratio")),
                  group=EXP4),
            Claim("rate.ci", "CI never settles: exchanges per 1000 ticks, uniform load (ours: "
                  "a tenth of the thesis's publication rate)", "L8517–8519", 83.0, half,
                  u("ci.per_1000_ticks"), group=RATES),
            Claim("rate.mit", "ℓMIT about half CI's rate", "L8517–8519 (≈ 40 derived)", 40.0,
                  half, u("mit.per_1000_ticks"), group=RATES),
            Claim("rate.mst", "ℓMST settles: about 0 between changes", "L8500–8510", 0.0,
                  Tolerance(absolute=2.0), u("mst.per_1000_ticks"), group=RATES),
            Claim("lost", "notifications lost in all runs (the exchanges of ch. 4 carry every "
                  "decision out)", "L7468–7473", 0.0, exact, _total("lost"), group=RATES),
            Claim("duplicated", "notifications duplicated in all runs", "L7468–7473", 0.0,
                  exact, _total("duplicated"), group=RATES),
        ]

    def figures(self, results: Results, out: Path) -> list[tuple[Path, str]]:
        return ch5_figures(results, out=out, columns=[e.name for e in self.evaluators])

    def sections(self, results: Results, outcomes: Sequence[Outcome]) -> list[str]:
        column = "simulation"
        lines = ["## Per load and heuristic (median, min–max over the topologies)", "",
                 "| load | heuristic | cost / static | exchanges per 1000 ticks | "
                 "max degree (median; thesis exp. 7: CI 21, ℓMST 19, ℓMIT 18) | "
                 "lost · duplicated | wall s per run (median) |",
                 "|---|---|---|---|---|---|---|"]
        for load, label in enumerate(LOADS):
            for h in ("ci", "mst", "mit"):
                ratio = _values(results, column, load, f"{h}.ratio")
                if not ratio:
                    continue
                rate = _values(results, column, load, f"{h}.per_1000_ticks")
                degree = _values(results, column, load, f"{h}.max_degree")
                lost = sum(_values(results, column, load, f"{h}.lost"))
                dup = sum(_values(results, column, load, f"{h}.duplicated"))
                wall = _values(results, column, load, f"{h}.wall_s")
                took = f"{statistics.median(wall):.0f}" if wall else "—"
                lines.append(f"| {label} | {NAMES[h]} | {spread(ratio)} | {spread(rate)} | "
                             f"{fmt(statistics.median(degree))} | {fmt(lost)} · {fmt(dup)} | "
                             f"{took} |")
        orders = []
        for load, label in enumerate(LOADS):
            count: Counter[str] = Counter()
            for p in results.points:
                if p["load"] != load:
                    continue
                c = {h: results.value(column, p, f"{h}.ratio") for h in ("ci", "mst", "mit")}
                if any(v is None for v in c.values()):
                    continue
                count["CI < ℓMST < ℓMIT" if c["ci"] < c["mst"] < c["mit"] else  # type: ignore[operator]
                      "CI best" if c["ci"] < min(c["mst"], c["mit"]) else  # type: ignore[operator,type-var]
                      "CI not best"] += 1
            if count:
                orders.append(f"- {label}: " + ", ".join(f"{k} on {v}"
                                                         for k, v in count.most_common())
                              + " topologies (thesis: CI < ℓMST < ℓMIT)")
        n = len({p["topology"] for p in results.points})
        grid = ("the thesis's 50 topologies at 30,000 ticks" if n >= 50 else
                f"{n} topolog{'y' if n == 1 else 'ies'} instead of 50 (the short grid; "
                "`--full` runs 50 at 30,000 ticks)")
        lines += ["", "Order per topology:", "", *orders, "",
                  "Where we differ from the thesis's setup: no Brite (link costs from random "
                  "points of a square, so no heavy-tailed hubs: our trees' maximum degree is "
                  "lower), a tenth of its publication rate and of its cacheSize. The grid: "
                  f"{grid}.", ""]
        return lines


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


def ch5_figures(results: Results, *, out: Path, columns: Sequence[str]) -> list[tuple[Path, str]]:
    """Figs. 5.8 and 5.9 (cost per notification over time, median over the topologies, one
    panel per load) and the final cost / static tree per heuristic (one box per heuristic and
    load, the thesis's "about half" as a line)."""
    plt = pyplot()
    written = []
    for column in columns:
        points = [p for p in results.points if results.value(column, p, "ci.ratio") is not None]
        if not points:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)
        for ax, (load, label) in zip(axes[0], enumerate(LOADS), strict=True):
            mine = [p for p in points if p["load"] == load]
            if not mine:
                continue
            steps = 0
            while results.value(column, mine[0], f"series_t.{steps}") is not None:
                steps += 1
            ts = [results.value(column, mine[0], f"series_t.{i}") for i in range(steps)]
            for h in HEURISTICS:
                med = []
                for i in range(steps):
                    vs = [results.value(column, p, f"{h}.series.{i}") for p in mine]
                    vs = [v for v in vs if v is not None and not math.isnan(v)]
                    med.append(statistics.median(vs) if vs else math.nan)
                ax.plot([t / TICK / 1000 for t in ts], med, label=NAMES[h])  # type: ignore[operator]
            ax.set_title(f"experiment {3 + load}: {label} load ({len(mine)} "
                         f"topolog{'y' if len(mine) == 1 else 'ies'})")
            ax.set_xlabel("time (1000 ticks = 10 s)")
            ax.set_ylabel("cost per notification (median)")
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        path = out / "ch5_cost_over_time.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, "Figs. 5.8 and 5.9: cost per notification over time (10 s "
                              "windows), median over the topologies, per heuristic"))
        fig, ax = plt.subplots(figsize=(7, 4))
        data, labels = [], []
        for load, label in enumerate(LOADS):
            for h in ("ci", "mst", "mit"):
                vs = [results.value(column, p, f"{h}.ratio") for p in points if p["load"] == load]
                data.append([v for v in vs if v is not None])
                labels.append(f"{NAMES[h]}\n{label}")
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
        ax.axhline(0.5, color="grey", linestyle="--", label="thesis: CI ≈ half (exp. 3)")
        ax.axhline(1.0, color="black", linewidth=0.8, label="random static tree")
        ax.set_ylabel("final cost / random static tree")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = out / "ch5_final_cost.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, "Final cost (last 30 s) as a fraction of the random static tree's, "
                              "per topology: experiments 3 and 4"))
    return written
