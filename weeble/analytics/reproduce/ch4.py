"""`weeble reproduce ch4`: thesis 4.4.3, the coordinated link exchange against the strawman, by
reconfiguration cycle length (spec ch4 §4; claims TC-5, TC-6, TC-18 to TC-21).

The setup of spec ch4 §4.2, in the one simulator: 100 brokers in a random tree, 50 publishers
each with 9 dedicated subscribers (filter `pub == i`), exponential publication intervals of mean
50 ms, link delays uniform in [5, 100] ms, identity-based peer-to-peer routing, and one sequence
of random link exchanges applied one after the other (the same sequence, seed and traffic for
every variant: the coordinated exchange in FIFO mode, in causal mode, and the strawman of 4.4.1).
Leases are long (ρ = 1 h) so that every control message in an exchange's window is caused by the
exchange. Per exchange, by its cycle length: the control messages (coordination + relayed,
re-routed and forwarded (un)subscriptions; the strawman: its (un)subscriptions), the lost and
duplicated notifications, and the mean time a notification waits in Qnot.

The thesis prints no numbers for Figs. 4.14–4.16 (they were lost with the figures), only their
trends, so the claims are relations: "fewer at every length", slopes ≥ 0, exactly 0 lost. A grid
point is (variant, seed, exchanges); the short grid is one seed of 30 exchanges, `--full` five
seeds of 100 (the thesis's 100 exchanges, "up to 50 runs" per point). Its "simulation" column
sums, per cycle length c, `n.c`, `control.c`, `coordination.c`, `lost.c`, `duplicates.c`,
`qnot_waited.c` and `qnot_count.c`, and counts the exchanges with exactly 6n coordination
messages (TC-18). `benchmarks/reconfig_443.py` runs the same runs (`run_variant`).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter, defaultdict
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

RHO = 3600.0  # no refresh inside the measurement: every control message is the exchange's
DMIN, DMAX = 0.005, 0.1
START = 15.0  # every subscription has reached every broker
VARIANTS = ("fifo", "causal", "strawman")
COORDINATION_KINDS = ("Lock", "Begin", "Separator", "End", "Unlock")


@dataclass(frozen=True)
class Setup:
    brokers: int = 100
    publishers: int = 50
    subscribers: int = 9  # per publisher
    interval: float = 0.05  # mean publication interval, s
    gap: float = 3.0  # s between exchanges
    algorithm: str = "identity"


def plan_exchanges(tree: Any, count: int, rng: random.Random) -> list[Any]:
    from weeble.core.reconfig.plan import apply, random_exchange

    ops = []
    for _ in range(count):
        op = random_exchange(tree, rng)
        tree = apply(tree, op)
        ops.append(op)
    return ops


def run_variant(name: str, *, exchanges: int, seed: int, setup: Setup = Setup()) -> dict[str, Any]:
    """One variant over one sequence of `exchanges` random exchanges: a row per exchange."""
    from weeble.core.messages import CONTROL, COORDINATION
    from weeble.core.reconfig.plan import random_tree
    from weeble.core.rom import Algorithm, Ordering, Params
    from weeble.model.topology import from_edges
    from weeble.sim.reconfigure import Reconfigurator
    from weeble.sim.simulation import Simulation

    ordering, strawman = {"fifo": (Ordering.FIFO, False), "causal": (Ordering.CAUSAL, False),
                          "strawman": (Ordering.NONE, True)}[name]
    rng = random.Random(seed)
    brokers = [f"b{i}" for i in range(setup.brokers)]
    tree = random_tree(brokers, rng)
    ops = plan_exchanges(tree, exchanges, rng)
    params = Params(pi=RHO + 60.0, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=setup.brokers - 1)
    sends: list[tuple[float, str]] = []

    def on_link(t: float, kind: str, src: str, dst: str, msg: Any) -> None:
        if kind == "send" and (type(msg) in CONTROL or type(msg) in COORDINATION):
            sends.append((t, type(msg).__name__))

    net = Simulation(from_edges(tree.edges), algorithm=Algorithm(setup.algorithm),
                     params=params, seed=seed, ordering=ordering, on_link=on_link,
                     root=brokers[0])
    reconf = Reconfigurator(net, tree, strawman=strawman, gap=setup.gap, seed=seed)
    traffic = random.Random(seed + 1)
    end = START + exchanges * (setup.gap + 4.0)
    for p in range(setup.publishers):
        where = traffic.choice(brokers)
        for s in range(setup.subscribers):
            net.subscribe(0.0, f"s{p}-{s}", traffic.choice(brokers), f"pub == {p}")
        t = traffic.expovariate(1 / setup.interval)
        while t < end:
            net.publish(t, where, {"pub": p}, publisher=f"p{p}")
            t += traffic.expovariate(1 / setup.interval)
    reconf.run_plan(START, ops)
    wall = time.perf_counter()
    net.run(START)
    while not reconf.idle and net.now < end:
        net.run(net.now + 5.0)
    last = net.now + setup.gap
    net.run(last + setup.brokers * DMAX)  # what was published before `last` has arrived
    wall = time.perf_counter() - wall
    done = [r for r in reconf.records if r.outcome == "done"]
    starts = [r.started for r in done] + [last]
    waited: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for _, _, tr in net.traces:
        if tr.kind == "reconfig" and tr.fields["phase"] == "released":
            w = waited[tr.fields["rid"]]
            w[0] += tr.fields["waited"]
            w[1] += tr.fields["count"]
    rows = []
    for i, r in enumerate(done):
        lo, hi = starts[i], starts[i + 1]
        control = Counter(kind for t, kind in sends if lo <= t < hi)
        lost = dup = 0
        for pub in net.publications.values():
            if lo <= pub.notification.published_at < hi:
                got = Counter(c for _, c in pub.deliveries)
                p = pub.notification.publisher[1:]
                expected = {f"s{p}-{s}" for s in range(setup.subscribers)}
                lost += sum(1 for c in expected if got[c] == 0)
                dup += sum(n - 1 for n in got.values() if n > 1)
        w = waited.get(r.rid, [0.0, 0])
        op = r.op
        # TC-18 counts exchanges whose a-endpoints are not r-endpoints (the thesis's case)
        distinct = not strawman and not (set(op.add) & set(op.remove))  # type: ignore[union-attr]
        rows.append({"cycle": len(r.path), "duration": r.duration,
                     "control": sum(control.values()),
                     "coordination": sum(control[k] for k in COORDINATION_KINDS),
                     "distinct_endpoints": distinct,
                     "lost": lost, "duplicates": dup, "qnot_waited": w[0], "qnot_count": w[1]})
    return {"variant": name, "exchanges": len(done), "failed": len(reconf.records) - len(done),
            "wall_s": wall, "rows": rows}


def by_cycle(rows: list[dict[str, Any]], key: str) -> dict[int, float]:
    groups: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        groups[r["cycle"]].append(r[key])
    return {c: statistics.mean(v) for c, v in sorted(groups.items())}


def qnot_mean(rows: list[dict[str, Any]]) -> dict[int, float]:
    groups: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
    for r in rows:
        groups[r["cycle"]][0] += r["qnot_waited"]
        groups[r["cycle"]][1] += r["qnot_count"]
    return {c: (w / n if n else 0.0) for c, (w, n) in sorted(groups.items())}


def slope(points: dict[int, float]) -> tuple[float, float]:
    """Least-squares slope and R² of value against cycle length."""
    xs, ys = list(points), list(points.values())
    if len(xs) < 2:
        return 0.0, 0.0
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 0.0
    return b, r2


# ---- the experiment ---------------------------------------------------------------------------

SUMMED = ("n", "control", "coordination", "lost", "duplicates", "qnot_waited", "qnot_count")


@dataclass(frozen=True)
class SimulationColumn(SimulationColumnBase):
    setup: Setup = Setup()
    label: str = "ch4 simulation v2"

    def evaluate(self, point: Point) -> dict[str, float]:
        result = run_variant(VARIANTS[int(point["variant"])], exchanges=int(point["exchanges"]),
                             seed=int(point["seed"]), setup=self.setup)
        out: dict[str, float] = {"exchanges": result["exchanges"], "failed": result["failed"],
                                 "wall_s": result["wall_s"], "tc18.checked": 0, "tc18.exact": 0}
        for row in result["rows"]:
            c = row["cycle"]
            row = {**row, "n": 1}
            for key in SUMMED:
                out[f"{key}.{c}"] = out.get(f"{key}.{c}", 0) + row[key]
            if row["distinct_endpoints"]:
                out["tc18.checked"] += 1
                out["tc18.exact"] += row["coordination"] == 6 * c
        return out


def _sums(results: Results, column: str, variant: str) -> dict[str, dict[int, float]]:
    """quantity -> cycle length -> sum over the points (seeds) of this variant."""
    out: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for p in results.points:
        if VARIANTS[int(p["variant"])] != variant:
            continue
        for key in SUMMED:
            for c in range(3, 200):
                v = results.value(column, p, f"{key}.{c}")
                if v is not None:
                    out[key][c] += v
    return out


def per_exchange(results: Results, column: str, variant: str, key: str) -> dict[int, float]:
    """Mean per exchange of `key`, by cycle length."""
    s = _sums(results, column, variant)
    return {c: s[key][c] / n for c, n in sorted(s["n"].items()) if n}


def qnot_wait(results: Results, column: str, variant: str) -> dict[int, float]:
    s = _sums(results, column, variant)
    return {c: s["qnot_waited"][c] / s["qnot_count"][c] if s["qnot_count"][c] else 0.0
            for c in sorted(s["n"])}


def weighted_slope(points: dict[int, tuple[float, float]]) -> float | None:
    """Least-squares slope of value against cycle length, each length's mean weighted by its
    count: the slope over the single exchanges (or waits), so that a length seen once does not
    count as much as one seen twenty times."""
    pts = [(c, v, w) for c, (v, w) in points.items() if w > 0]
    total = sum(w for _, _, w in pts)
    if len({c for c, _, _ in pts}) < 2 or not total:
        return None
    mx = sum(c * w for c, _, w in pts) / total
    my = sum(v * w for _, v, w in pts) / total
    sxx = sum(w * (c - mx) ** 2 for c, _, w in pts)
    return sum(w * (c - mx) * (v - my) for c, v, w in pts) / sxx


def _slope(variant: str, key: str) -> Measure:
    def measure(results: Results, column: str) -> float | None:
        s = _sums(results, column, variant)
        if key == "qnot":
            return weighted_slope({c: (s["qnot_waited"][c] / n, n)
                                   for c, n in s["qnot_count"].items() if n})
        return weighted_slope({c: (s[key][c] / n, n) for c, n in s["n"].items() if n})

    return measure


def _fraction_fewer(results: Results, column: str) -> float | None:
    adv, straw = (per_exchange(results, column, v, "control") for v in ("fifo", "strawman"))
    common = [c for c in adv if c in straw]
    return sum(adv[c] < straw[c] for c in common) / len(common) if common else None


def _ratio_slope(results: Results, column: str) -> float | None:
    adv, straw = (per_exchange(results, column, v, "control") for v in ("fifo", "strawman"))
    n = _sums(results, column, "fifo")["n"]
    return weighted_slope({c: (adv[c] / straw[c], n[c]) for c in adv if straw.get(c)})


def _causal_longer(results: Results, column: str) -> float | None:
    fifo, causal = qnot_wait(results, column, "fifo"), qnot_wait(results, column, "causal")
    common = [c for c in fifo if c in causal and (fifo[c] or causal[c])]
    return sum(causal[c] > fifo[c] for c in common) / len(common) if common else None


def _total(variants: Sequence[str], key: str) -> Measure:
    def measure(results: Results, column: str) -> float | None:
        sums = [_sums(results, column, v)[key] for v in variants]
        if not any(s for s in sums):
            return None
        return sum(sum(s.values()) for s in sums)

    return measure


def _mean_per_exchange(variant: str, key: str) -> Measure:
    def measure(results: Results, column: str) -> float | None:
        s = _sums(results, column, variant)
        n = sum(s["n"].values())
        return sum(s[key].values()) / n if n else None

    return measure


def _tc18(results: Results, column: str) -> float | None:
    checked = exact = 0.0
    for p in results.points:
        if VARIANTS[int(p["variant"])] == "strawman":
            continue
        checked += results.value(column, p, "tc18.checked") or 0
        exact += results.value(column, p, "tc18.exact") or 0
    return exact / checked if checked else None


COST, LOSS, DELAY = ("control messages (Fig. 4.14, L5681–5715)",
                     "loss and duplicates (Fig. 4.15, L5717–5738)",
                     "queueing delay in Qnot (Fig. 4.16, L5741–5761)")


@dataclass
class Chapter4(SimulatedExperiment):
    simulation = SimulationColumn
    name: str = "ch4"
    title: str = ("Thesis chapter 4.4.3: the coordinated link exchange against the strawman, "
                  "by reconfiguration cycle length")
    setup: Setup = Setup()
    seeds: tuple[int, int] = (1, 5)  # short, --full
    exchanges: tuple[int, int] = (30, 100)  # short, --full

    def grid(self, *, full: bool) -> list[Point]:
        seeds, exchanges = (self.seeds[1], self.exchanges[1]) if full else (
            self.seeds[0], self.exchanges[0])
        return [Point.of(variant=v, seed=s, exchanges=exchanges)
                for s in range(seeds) for v in range(len(VARIANTS))]

    def claims(self) -> list[Claim]:
        exact = Tolerance()
        return [
            Claim("TC-19a", "advanced needs fewer control messages than the strawman: the "
                  "fraction of cycle lengths where it does", "L5681–5715", 1.0, exact,
                  _fraction_fewer, group=COST, relation="≥"),
            Claim("TC-19b", "the advantage is largest for short cycles: slope of advanced / "
                  "strawman against cycle length", "L5700–5705", 0.0, exact, _ratio_slope,
                  group=COST, relation="≥"),
            Claim("TC-19c", "advanced control messages grow with cycle length (per broker)",
                  "L5681–5715", 0.0, exact, _slope("fifo", "control"), group=COST,
                  relation="≥"),
            Claim("TC-19d", "strawman control messages grow with cycle length (per broker)",
                  "L5700–5703", 0.0, exact, _slope("strawman", "control"), group=COST,
                  relation="≥"),
            Claim("TC-18", "exactly 6n coordination messages per exchange of n brokers "
                  "(endpoints distinct): the fraction of such exchanges", "spec ch4 §3.9 (derived)",
                  1.0, exact, _tc18, group=COST),
            Claim("TC-5", "the coordinated exchange loses no notification (FIFO and causal "
                  "mode, every exchange)", "L4391–4453, Def. 9", 0.0, exact,
                  _total(("fifo", "causal"), "lost"), group=LOSS),
            Claim("TC-6", "the coordinated exchange duplicates none", "L4391", 0.0, exact,
                  _total(("fifo", "causal"), "duplicates"), group=LOSS),
            Claim("TC-20a", "the strawman's losses are \"far from negligible\": lost per "
                  "exchange", "L5717–5738", 1.0, exact, _mean_per_exchange("strawman", "lost"),
                  group=LOSS, relation="≥"),
            Claim("TC-20b", "strawman losses grow with cycle length (per broker)", "L5717–5738",
                  0.0, exact, _slope("strawman", "lost"), group=LOSS, relation="≥"),
            Claim("TC-20c", "strawman duplicates grow with cycle length (per broker)",
                  "L5717–5738", 0.0, exact, _slope("strawman", "duplicates"), group=LOSS,
                  relation="≥"),
            Claim("TC-21a", "the mean wait in Qnot grows with cycle length, FIFO (s per broker)",
                  "L5741–5761", 0.0, exact, _slope("fifo", "qnot"), group=DELAY, relation="≥"),
            Claim("TC-21b", "… and causal (s per broker)", "L5741–5761", 0.0, exact,
                  _slope("causal", "qnot"), group=DELAY, relation="≥"),
            Claim("TC-21c", "causal waits longer than FIFO: the fraction of cycle lengths",
                  "L5755–5761", 1.0, Tolerance(absolute=0.2), _causal_longer, group=DELAY,
                  relation="≥",
                  note="a length seen once or twice is noisy: 80 % of the lengths"),
        ]

    def figures(self, results: Results, out: Path) -> list[tuple[Path, str]]:
        if not self.evaluators:
            return []
        column = self.evaluators[0].name
        return ch4_figures(
            out,
            control={"advanced (FIFO)": per_exchange(results, column, "fifo", "control"),
                     "strawman": per_exchange(results, column, "strawman", "control")},
            loss={"lost": per_exchange(results, column, "strawman", "lost"),
                  "duplicates": per_exchange(results, column, "strawman", "duplicates")},
            wait={"FIFO": qnot_wait(results, column, "fifo"),
                  "causal": qnot_wait(results, column, "causal")})

    def sections(self, results: Results, outcomes: Sequence[Outcome]) -> list[str]:
        column = "simulation"
        adv = per_exchange(results, column, "fifo", "control")
        if not adv:
            return []
        straw = per_exchange(results, column, "strawman", "control")
        lost = per_exchange(results, column, "strawman", "lost")
        dup = per_exchange(results, column, "strawman", "duplicates")
        count = _sums(results, column, "fifo")["n"]
        qf, qc = qnot_wait(results, column, "fifo"), qnot_wait(results, column, "causal")
        lines = ["## Per cycle length (means per exchange)", "",
                 "| cycle | exchanges | control advanced | control strawman | advanced / "
                 "strawman | strawman lost | strawman duplicated | Qnot wait FIFO (ms) | "
                 "Qnot wait causal (ms) |", "|---|---|---|---|---|---|---|---|---|"]
        for c in sorted(set(adv) | set(straw)):
            def g(d: dict[int, float], c: int = c, scale: float = 1.0) -> str:
                return fmt(d[c] * scale, digits=3) if c in d else "—"
            ratio = fmt(adv[c] / straw[c], digits=2) if c in adv and straw.get(c) else "—"
            lines.append(f"| {c} | {fmt(count.get(c, 0))} | {g(adv)} | {g(straw)} | {ratio} | "
                         f"{g(lost)} | {g(dup)} | {g(qf, scale=1000)} | {g(qc, scale=1000)} |")
        wall = [results.value(column, p, "wall_s") for p in results.points]
        lines += ["", "The thesis's Figs. 4.14–4.16 were lost in the text extraction: its claims "
                  "are the trends above, judged as relations (a slope ≥ 0, fewer at every "
                  "length; slopes are fitted to the single exchanges). Setup differences: our "
                  "link delays are uniform in [5, 100] ms on a "
                  "random tree (no Brite transit-stub underlay), and "
                  f"{len({p['seed'] for p in results.points})} sequence(s) of "
                  f"{int(results.points[0]['exchanges'])} exchanges per variant instead of "
                  "50 runs of 100. Simulated in "
                  f"{sum(c for c in wall if c is not None and not math.isnan(c)):.0f} s "
                  "(wall clock).", ""]
        return lines


def ch4_figures(out: Path, *, control: dict[str, dict[int, float]],
                loss: dict[str, dict[int, float]],
                wait: dict[str, dict[int, float]]) -> list[tuple[Path, str]]:
    """Figs. 4.14–4.16 against the reconfiguration cycle length: control messages (advanced and
    strawman), the strawman's lost and duplicated notifications, the mean wait in Qnot."""
    plt = pyplot()
    written = []
    for name, series, ylabel, caption in (
        ("fig4_14_control_messages.png", control, "control messages per exchange",
         "Fig. 4.14: control messages per exchange, coordinated (FIFO) and strawman"),
        ("fig4_15_strawman_loss.png", loss, "notifications per exchange (strawman)",
         "Fig. 4.15: notifications the strawman lost and duplicated per exchange"),
        ("fig4_16_qnot_wait.png", {k: {c: 1000 * v for c, v in pts.items()}
                                   for k, pts in wait.items()},
         "mean wait in Qnot (ms)", "Fig. 4.16: mean time a notification waits in Qnot"),
    ):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for label, pts in series.items():
            ax.plot(list(pts), list(pts.values()), marker="o", label=label)
        ax.set_xlabel("reconfiguration cycle length (brokers)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, caption))
    return written
