"""`weeble reproduce skipring`: seed 003 (Feldmann et al., the supervised skip ring and the
topic-based pub/sub on it), the testable claims of spec seed23 §C.1 in the one Simulation (mode
skip_ring, `SkipRingWorld`).

The seed lost nearly every formula and ends inside the proof of Publication Convergence, so its
numbers are the spec's reconstruction ([R], checked [V]) and the abstract's claims (O(1) work per
interval, O(log n) delivery, a newcomer gets the history in O(1)). A grid point is one
measurement (`part`) at one size n (and seed):

    part 0  SR(n) reached by n joins from nothing: edges, degrees, diameter, stored = definition
    part 1  a legitimate SR(n) for 20 intervals: messages per interval per node and supervisor
    part 2  from a corrupted state (labels, edges, database, 3n junk messages): time to legitimacy
    part 3  closure: SR(n) for 40 intervals, nothing changes, no reply to CheckTrie, no Deliver
    part 4  flooding with unit link delay and no Timeouts: hops to reach all, PublishNew messages
    part 5  an empty newcomer against a holder of |P| = n publications: messages of one round
    part 7  subscribe and unsubscribe at the supervisor of a legitimate SR(n): messages it sends
    part 8  one member of SR(n) unsubscribes: time to legitimacy, edges still pointing to it
    part 9  `victims` members of SR(n) crash, found by the supervisor's detector (`oracle` 1) or
            by their ring neighbours (0): time to SR(n − victims), gaps, stale references
    part 6  part 2 at n = 64 against the supervisor's Timeout (`period`, in member intervals),
            with and without the local plausibility check (`plausibility`, spec seed23 §A.13-5)

The *model* column is SR(n) built from the definition (`labels.skip_ring_neighbours`) and the
spec's closed forms; the *simulation* column runs the core. Time unit: one member Timeout
interval; the supervisor's Timeout runs 4× as often (spec seed23 §D.4); link delays 1–5 % of an
interval. `benchmarks/seed003_skipring.py` prints the same runs as tables (`corrupted_convergence`,
`join_convergence`, `steady_load`).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
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
from weeble.analytics.reproduce.plots import pyplot, save

(JOIN, LOAD, CORRUPTED, CLOSURE, FLOOD, NEWCOMER, TIMER_RATIO, OPERATIONS, LEAVE,
 CRASH) = range(10)
SUPERVISOR_PERIODS = (1.0, 0.25, 0.0625)  # part 6
SUPERVISOR_PERIOD = 0.25  # of a member interval (spec seed23 §D.4: the supervisor ≥ 4× faster)
SPEC_DIAMETERS = {16: 4, 100: 6, 1024: 10, 4096: 12}  # spec seed23 §C.1-3 [V]
CLOSURE_KINDS = {"Introduce", "IntroduceShortcut", "CheckTrie", "Config", "ConfigRequest"}


def log2_ceil(n: int) -> int:
    return max(1, (n - 1).bit_length())


def corruption_bound(n: int) -> float:
    """Spec seed23 §C.1-10 / A.7 [R]: labels within n supervisor Timeouts of a clean database, the
    ring within 2n, the shortcuts ⌈log₂ n⌉ member intervals after that (in member intervals)."""
    return 2 * n * SUPERVISOR_PERIOD + log2_ceil(n)


# ---- the runs (also printed by benchmarks/seed003_skipring.py) --------------------------------


def _world(n: int, seed: int, **kw: Any) -> Any:
    from weeble.analytics.reproduce.skipring_world import SkipRingWorld

    return SkipRingWorld(n, seed=seed, **kw)


def _legitimate(n: int, seed: int, pubs: int = 20, **kw: Any) -> Any:
    from weeble.core.overlay.skipring.trie import Publication

    w = _world(n, seed, **kw)
    w.install_legitimate(list(w.ids), [Publication(f"n{i % n}", i, b"p") for i in range(pubs)])
    return w


def corrupted_convergence(n: int, seed: int, *, supervisor_period: float = SUPERVISOR_PERIOD,
                          plausibility: bool = True, limit: float = 400) -> float | None:
    """From SR(n) with 20 publications, everything the spec lists corrupted (random labels,
    random edges, a database with all four conditions, 3n junk messages): member intervals to
    legitimacy (ring, shortcuts, database and every trie), None if not within `limit`."""
    from weeble.core.overlay.skipring.corruption import (
        corrupt_database,
        corrupt_member,
        junk_messages,
    )
    from weeble.core.overlay.skipring.member import MemberParams

    w = _legitimate(n, seed, supervisor_period=supervisor_period,
                    params=MemberParams(plausibility=plausibility))
    w.net.run(2)
    rng = random.Random(seed)
    nodes = [w.sup, *w.ids]
    for v in w.ids:
        corrupt_member(w.member(v), rng, nodes)
    corrupt_database(w.supervisor_state, rng, w.ids)
    for dst, msg in junk_messages(rng, topic=w.TOPIC, nodes=nodes, supervisor=w.sup, count=3 * n):
        w.inject(dst, dst, msg)
    return w.run_until_legitimate(limit)


def join_convergence(n: int, seed: int, *, limit: float = 400) -> tuple[float | None, Any]:
    """Everyone subscribes at once from nothing: intervals to SR(n), and the world."""
    w = _world(n, seed)
    for v in w.ids:
        w.subscribe(v)
    return w.run_until_legitimate(limit), w


def steady_load(n: int, seed: int, intervals: int = 20) -> dict[str, float]:
    """Messages per member interval in a legitimate SR(n) with 20 publications."""
    w = _legitimate(n, seed)
    w.net.run(2)
    w.net.reset_counts()
    w.net.run(2 + intervals)
    sent = [w.net.sent[v] / intervals for v in w.ids]
    recv = [w.net.received[v] / intervals for v in w.ids]
    return {"sent_max": max(sent), "sent_mean": statistics.fmean(sent),
            "work_max": max(s + r for s, r in zip(sent, recv, strict=True)),
            "recv_max": max(recv), "recv_mean": statistics.fmean(recv),
            "sup_in": w.net.received[w.sup] / intervals,
            "sup_out": w.net.sent[w.sup] / intervals,
            "configs": w.net.kinds["Config"] / intervals,
            "bytes_max": max(w.net.bytes_sent[v] for v in w.ids) / intervals}


def stored_graph(w: Any) -> dict[str, set[str]]:
    """The members' explicit edges (left, right, ring, shortcuts), undirected."""
    nbrs: dict[str, set[str]] = {v: set() for v in w.alive()}
    for v in w.alive():
        m = w.member(v)
        refs = [r.node for r in (m.left, m.right, m.ring) if r is not None]
        for u in [*refs, *m.shortcuts.values()]:
            if u != v and u in nbrs:
                nbrs[v].add(u)
                nbrs[u].add(v)
    return nbrs


def graph_figures(nbrs: dict[Any, set[Any]]) -> dict[str, float]:
    from weeble.core.overlay.skipring.labels import diameter

    degrees = [len(ns) for ns in nbrs.values()]
    return {"edges": sum(degrees) / 2, "degree_mean": statistics.fmean(degrees),
            "degree_max": max(degrees), "degree_min": min(degrees), "diameter": diameter(nbrs)}


def _sr_join(n: int, seed: int) -> dict[str, float]:
    from weeble.core.overlay.skipring.labels import skip_ring_neighbours

    took, w = join_convergence(n, seed)
    nbrs = stored_graph(w)
    by_label = {w.member(v).label: v for v in w.alive()}
    expected = {by_label[i]: {by_label[j] for j in js}
                for i, js in skip_ring_neighbours(n).items()} if sorted(by_label) == list(
                    range(n)) else {}
    return {**graph_figures(nbrs), "joined_in": -1.0 if took is None else took,
            "as_defined": float(nbrs == expected)}


def _closure(n: int, seed: int, intervals: int = 40) -> dict[str, float]:
    w = _legitimate(n, seed, pubs=30)
    w.net.run(2)
    snap = w.snapshot()
    w.net.reset_counts()
    w.net.run(2 + intervals)
    other = sum(c for k, c in w.net.kinds.items() if k not in CLOSURE_KINDS)
    return {"changed": float(w.snapshot() != snap), "problems": float(len(w.problems())),
            "other_kinds": float(other), "deliver": float(w.net.kinds["DeliverPublications"]),
            "checktrie_per_node": w.net.kinds["CheckTrie"] / (intervals * n)}


def _flood(n: int, seed: int) -> dict[str, float]:
    """One publication flooded over SR(n) with every link delay 1 and no Timeouts, published at
    the member with the longest label: the hop at which the last member holds it, and the
    PublishNew messages (then and 20 hops later)."""
    w = _legitimate(n, seed, pubs=0, delay=(1.0, 1.0))
    w.stop_timers()
    w.net.reset_counts()
    start = w.net.now
    pub = w.publish(f"n{n - 1}")  # the longest label: the farthest from the others
    hops = -1.0
    for h in range(1, 4 * log2_ceil(n) + 2):
        w.net.run(start + h + 0.5)
        if all(pub.key in w.member(v).store for v in w.ids):
            hops = float(h)
            break
    sent = w.net.kinds["PublishNew"]
    w.net.run(w.net.now + 20)
    return {"hops": hops, "messages": float(sent),
            "messages_later": float(w.net.kinds["PublishNew"])}


def _newcomer(size: int, seed: int) -> dict[str, float]:
    """A newcomer with an empty trie and a holder of `size` publications: the messages of one
    anti-entropy round the holder starts (no Timeouts), and whether the newcomer has them all."""
    from weeble.core.overlay.skipring.member import MemberParams
    from weeble.core.overlay.skipring.messages import CheckTrie
    from weeble.core.overlay.skipring.trie import Publication

    w = _legitimate(2, seed, pubs=0, params=MemberParams(push_hints=False))
    pubs = [Publication("n0", i, b"p") for i in range(size)]
    w.published = {p.key for p in pubs}
    w.member("n0").store.rebuild(pubs)
    w.member("n1").store.rebuild([])
    root = w.member("n0").store.root
    w.net.reset_counts()
    w.stop_timers()
    w.inject("n0", "n1", CheckTrie(topic=w.TOPIC, node="n0", entries=(root,), empty=False))
    w.net.run(w.net.now + 100)
    return {"messages": float(sum(w.net.sent.values())),
            "complete": float(w.member("n1").store.keys() == w.published)}


def operation_cost(n: int, seed: int) -> dict[str, float]:
    """Spec seed23 §C.1-6: the messages the supervisor of a legitimate SR(n) sends for one subscribe
    and one unsubscribe, and whether its database is clean (no condition of §3.1) right after each,
    without acknowledgements."""
    from weeble.core.overlay.skipring.messages import Subscribe, Unsubscribe

    w = _legitimate(n, seed, pubs=0)
    sup = w.supervisor_state
    sub = sup.receive(Subscribe(topic=w.TOPIC, node="new"))
    clean = not sup.corrupted() and sup.members().get("new") == n
    unsub = sup.receive(Unsubscribe(topic=w.TOPIC, node="n3"))
    clean = clean and not sup.corrupted() and "n3" not in sup.members()
    return {"subscribe": float(len(sub)), "unsubscribe": float(len(unsub)),
            "clean": float(clean)}


def leave(n: int, seed: int, *, limit: float = 60) -> dict[str, float]:
    """Spec seed23 §C.1-11: member n5 of a legitimate SR(n) unsubscribes: member intervals until the
    rest is legitimate, then (5 intervals later) how many members still hold an explicit edge to
    it, and whether it is inactive with no label."""
    w = _legitimate(n, seed, pubs=5)
    w.unsubscribe("n5")
    took = w.run_until_legitimate(limit)
    w.net.run(w.net.now + 5)
    gone = w.member("n5")
    return {"took": -1.0 if took is None else took,
            "edges_to_leaver": float(sum("n5" in w.member(v).neighbours() for v in w.alive())),
            "left": float(not gone.active and gone.label is None)}


def crash(n: int, seed: int, victims: int, *, oracle: bool,
          limit: float = 120) -> dict[str, float]:
    """Spec seed23 §C.1-12: `victims` members of a legitimate SR(n) crash (n7 alone, or n0, n1 and
    n11: the first labels included); the supervisor learns of them from an eventually-correct
    detector (`oracle`) or from their ring neighbours' reports. Member intervals to SR(n −
    victims), whether the database then holds r(0…n − victims − 1) without a gap, and how many
    references to a crashed node remain 5 intervals later."""
    names = ["n7"] if victims == 1 else ["n0", "n1", "n11"][:victims]
    w = _legitimate(n, seed, pubs=5, oracle_detector=oracle)
    if not oracle:
        w.net.run(w.net.now + 5)
    for v in names:
        w.crash(v)
    took = w.run_until_legitimate(limit)
    no_gap = sorted(w.supervisor_state.db) == list(range(n - len(names)))
    w.net.run(w.net.now + 5)
    stale = sum(len(set(names) & w.member(v).neighbours()) for v in w.alive())
    return {"took": -1.0 if took is None else took, "no_gap": float(no_gap),
            "stale": float(stale)}


def model_values(point: Point) -> dict[str, float]:
    """SR(n) from the definition and the spec's closed forms."""
    from weeble.core.overlay.skipring.labels import skip_ring_neighbours

    part, n = int(point["part"]), int(point["n"])
    if part == JOIN:
        return {**graph_figures(skip_ring_neighbours(n)), "edges_formula": 2 * n - 3.0,
                "degree_mean_formula": 4 - 6 / n}
    if part == FLOOD:
        return {"hops": float(log2_ceil(n)), "messages": 3 * n - 5.0,
                "messages_all": 4 * n - 6.0}
    if part == CORRUPTED:
        return {"bound": corruption_bound(n)}
    if part == NEWCOMER:
        return {"messages": 3.0}
    if part == OPERATIONS:
        return {"subscribe": 1.0, "unsubscribe": 2.0}
    return {}


# ---- the experiment ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    load_intervals: int = 20
    limit: float = 400.0  # member intervals before a run counts as not converged


@dataclass(frozen=True)
class ModelColumn:
    name: str = "model"
    version: str = "SR(n) by definition, spec seed23 §C.1 closed forms, v1"
    costly: bool = False

    def applies_to(self, point: Point, *, full: bool) -> bool:
        return int(point["part"]) in (JOIN, FLOOD, CORRUPTED, NEWCOMER, OPERATIONS)

    def evaluate(self, point: Point) -> dict[str, float]:
        return model_values(point)


@dataclass(frozen=True)
class SimulationColumn(SimulationColumnBase):
    setup: Setup = Setup()
    label: str = "seed003 simulation v2"

    def evaluate(self, point: Point) -> dict[str, float]:
        part, n, seed = int(point["part"]), int(point["n"]), int(point["seed"])
        wall = time.perf_counter()
        if part == JOIN:
            out = _sr_join(n, seed)
        elif part == LOAD:
            out = steady_load(n, seed, intervals=self.setup.load_intervals)
        elif part == CORRUPTED:
            took = corrupted_convergence(n, seed, limit=self.setup.limit)
            out = {"took": -1.0 if took is None else took}
        elif part == CLOSURE:
            out = _closure(n, seed)
        elif part == FLOOD:
            out = _flood(n, seed)
        elif part == NEWCOMER:
            out = _newcomer(n, seed)
        elif part == OPERATIONS:
            out = operation_cost(n, seed)
        elif part == LEAVE:
            out = leave(n, seed)
        elif part == CRASH:
            out = crash(n, seed, int(point["victims"]), oracle=bool(point["oracle"]))
        elif part == TIMER_RATIO:
            took = corrupted_convergence(n, seed, supervisor_period=point["period"],
                                         plausibility=bool(point["plausibility"]),
                                         limit=self.setup.limit)
            out = {"took": -1.0 if took is None else took}
        else:
            raise ValueError(f"no part {part}")
        return {**out, "wall_s": time.perf_counter() - wall}


def _points(results: Results, part: int) -> list[Point]:
    return [p for p in results.points if int(p["part"]) == part]


def _over(part: int, value: Callable[[Results, str, Point], float | None],
          reduce: Callable[[list[float]], float] = max) -> Measure:
    """A claim's value: `value` at every point of `part` that the column evaluated, reduced."""
    def measure(results: Results, column: str) -> float | None:
        got = [value(results, column, p) for p in _points(results, part)]
        vals = [v for v in got if v is not None]
        return reduce(vals) if vals else None

    return measure


def _q(quantity: str) -> Callable[[Results, str, Point], float | None]:
    return lambda results, column, p: results.value(column, p, quantity)


def _minus(quantity: str, expected: Callable[[int], float], *,
           absolute: bool = True) -> Callable[[Results, str, Point], float | None]:
    def value(results: Results, column: str, p: Point) -> float | None:
        v = results.value(column, p, quantity)
        if v is None:
            return None
        d = v - expected(int(p["n"]))
        return abs(d) if absolute else d

    return value


def _diameter_mismatches(results: Results, column: str) -> float | None:
    got = [(int(p["n"]), results.value(column, p, "diameter")) for p in _points(results, JOIN)
           if int(p["n"]) in SPEC_DIAMETERS]
    got = [(n, d) for n, d in got if d is not None]
    return float(sum(d != SPEC_DIAMETERS[n] for n, d in got)) if got else None


def _slope_per_doubling(part: int, quantity: str) -> Measure:
    """Least-squares slope of `quantity` against log₂ n over the points of `part`."""
    def measure(results: Results, column: str) -> float | None:
        pts = [(math.log2(p["n"]), results.value(column, p, quantity))
               for p in _points(results, part)]
        pts = [(x, y) for x, y in pts if y is not None]
        if len({x for x, _ in pts}) < 2:
            return None
        mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
        return (sum((x - mx) * (y - my) for x, y in pts)
                / sum((x - mx) ** 2 for x, _ in pts))

    return measure


def _converged_fraction(results: Results, column: str) -> float | None:
    got = [results.value(column, p, "took") for p in _points(results, CORRUPTED)]
    got = [v for v in got if v is not None]
    return sum(v >= 0 for v in got) / len(got) if got else None


def ratio_took(results: Results, column: str, period: float, check: int) -> float | None:
    """Member intervals to legitimacy (part 6), the median over seeds; None if a run did not
    converge or none ran."""
    got = [results.value(column, p, "took") for p in _points(results, TIMER_RATIO)
           if p["period"] == period and int(p["plausibility"]) == check]
    if not got or any(v is None or v < 0 for v in got):
        return None
    return statistics.median(got)  # type: ignore[type-var]


def _slow_supervisor(results: Results, column: str) -> float | None:
    slow = ratio_took(results, column, SUPERVISOR_PERIODS[0], 0)
    fast = ratio_took(results, column, SUPERVISOR_PERIODS[-1], 0)
    return None if slow is None or not fast else slow / fast


def _worst_over_bound(results: Results, column: str) -> float | None:
    if column != "simulation":
        return None
    got = [(results.value(column, p, "took"), corruption_bound(int(p["n"])))
           for p in _points(results, CORRUPTED)]
    got = [(t, b) for t, b in got if t is not None and t >= 0]
    return max(t / b for t, b in got) if got else None


# the claims the model column (SR(n) by definition, the closed forms) gives a value for
MODELLED = frozenset({"C.1-3a", "C.1-3b", "C.1-3c", "C.1-3d", "C.1-3e", "C.1-3f", "C.1-13",
                      "C.1-14a", "C.1-14b", "C.1-6a", "C.1-6b"})
TOPOLOGY = "SR(n): the topology (C.1-2, C.1-3)"
LOADS = "steady-state load per interval (C.1-7, C.1-8)"
STABILIZATION = "closure and convergence (C.1-9, C.1-10)"
PUBLICATIONS = "publications (C.1-13, C.1-14)"


@dataclass
class SkipRing(SimulatedExperiment):
    simulation, model = SimulationColumn, ModelColumn
    name: str = "skipring"
    title: str = ("Seed 003 (Feldmann et al.): the supervised skip ring and its topic pub/sub, "
                  "spec seed23 §C.1")
    setup: Setup = Setup()
    # (short, --full)
    join_sizes: tuple[tuple[int, ...], tuple[int, ...]] = ((16, 100, 1024), (16, 100, 1024,
                                                                             4096))
    load_sizes: tuple[tuple[int, ...], tuple[int, ...]] = ((16, 64, 256, 1024),
                                                           (16, 64, 256, 1024, 4096))
    corrupted_sizes: tuple[tuple[int, ...], tuple[int, ...]] = ((16, 64), (16, 64, 256))
    seeds: tuple[int, int] = (2, 3)
    flood_sizes: tuple[tuple[int, ...], tuple[int, ...]] = ((64, 256), (64, 256, 1024))
    newcomer_sizes: tuple[int, ...] = (10, 1000)
    closure_size: int = 50
    ratio_size: int = 64
    leave_size: int = 24
    ratio_seeds: tuple[int, int] = (1, 3)

    def grid(self, *, full: bool) -> list[Point]:
        i = int(full)
        pts = [Point.of(part=JOIN, n=n, seed=1) for n in self.join_sizes[i]]
        pts += [Point.of(part=LOAD, n=n, seed=1) for n in self.load_sizes[i]]
        pts += [Point.of(part=CORRUPTED, n=n, seed=s) for n in self.corrupted_sizes[i]
                for s in range(1, self.seeds[i] + 1)]
        pts += [Point.of(part=CLOSURE, n=self.closure_size, seed=1)]
        pts += [Point.of(part=FLOOD, n=n, seed=9) for n in self.flood_sizes[i]]
        pts += [Point.of(part=NEWCOMER, n=n, seed=n) for n in self.newcomer_sizes]
        pts += [Point.of(part=OPERATIONS, n=n, seed=1) for n in self.load_sizes[i]]
        pts += [Point.of(part=LEAVE, n=self.leave_size, seed=3)]
        pts += [Point.of(part=CRASH, n=self.leave_size, seed=4, victims=k, oracle=o)
                for k in (1, 3) for o in (1, 0)]
        pts += [Point.of(part=TIMER_RATIO, n=self.ratio_size, seed=s, period=period,
                         plausibility=check)
                for s in range(1, self.ratio_seeds[i] + 1) for period in SUPERVISOR_PERIODS
                for check in (0, 1)]
        return pts

    def claims(self) -> list[Claim]:
        """Every claim; without the simulation column (--model-only), those the model gives."""
        simulated = any(isinstance(e, SimulationColumn) for e in self.evaluators)
        return [c for c in self._claims() if simulated or c.id in MODELLED]

    def _claims(self) -> list[Claim]:
        exact, tiny = Tolerance(), Tolerance(absolute=1e-9)
        return [
            Claim("C.1-3a", "undirected edges = 2n − 3: largest |edges − (2n − 3)| over n",
                  "spec seed23 §C.1-3 [V]", 0.0, tiny, _over(JOIN, _minus("edges",
                  lambda n: 2 * n - 3)),
                  group=TOPOLOGY),
            Claim("C.1-3b", "average degree = 4 − 6/n: largest difference over n",
                  "spec seed23 §C.1-3 [V]", 0.0, tiny,
                  _over(JOIN, _minus("degree_mean", lambda n: 4 - 6 / n)), group=TOPOLOGY),
            Claim("C.1-3c", "maximum degree ≤ 2⌈log₂ n⌉ − 1: largest excess over n",
                  "spec seed23 §C.1-3 [V]; abstract: O(log n)", 0.0, exact,
                  _over(JOIN, _minus("degree_max", lambda n: 2 * log2_ceil(n) - 1,
                                     absolute=False)), group=TOPOLOGY, relation="≤"),
            Claim("C.1-3d", "minimum degree = 2 (smallest over n)", "spec seed23 §C.1-3 [V]", 2.0,
            exact,
                  _over(JOIN, _q("degree_min"), min), group=TOPOLOGY),
            Claim("C.1-3e", "diameter ≤ ⌈log₂ n⌉ (O(log n) delivery): largest excess over n",
                  "spec seed23 §C.1-3 [V]; abstract", 0.0, exact,
                  _over(JOIN, _minus("diameter", lambda n: log2_ceil(n), absolute=False)),
                  group=TOPOLOGY, relation="≤"),
            Claim("C.1-3f", "diameter 4 / 6 / 10 / 12 at n = 16 / 100 / 1024 / 4096: sizes of "
                  "the grid where it differs", "spec seed23 §C.1-3 [V]", 0.0, exact,
                  _diameter_mismatches, group=TOPOLOGY),
            Claim("C.1-2", "the members' stored edges after n joins from nothing are SR(n) by "
                  "definition: fraction of sizes", "spec seed23 §C.1-2, Network Convergence", 1.0,
                  exact,
                  _over(JOIN, _q("as_defined"), min), group=TOPOLOGY),
            Claim("C.1-6a", "subscribe costs the supervisor 1 message (largest over n)",
                  "spec seed23 §C.1-6; seed Thm. Subscribe/Unsubscribe cost", 1.0, exact,
                  _over(OPERATIONS, _q("subscribe")), group=LOADS),
            Claim("C.1-6b", "unsubscribe costs it 2 (largest over n)",
                  "spec seed23 §C.1-6; seed Thm. Subscribe/Unsubscribe cost", 2.0, exact,
                  _over(OPERATIONS, _q("unsubscribe")), group=LOADS),
            Claim("C.1-6c", "… and the database is correct right after each, with no "
                  "acknowledgement (fraction of sizes)", "spec seed23 §C.1-6", 1.0, exact,
                  _over(OPERATIONS, _q("clean"), min), group=LOADS),
            Claim("C.1-7a", "exactly 1 Config per supervisor Timeout (plus one answer per "
                  "request): (Configs − requests) per Timeout, mean over n",
                  "spec seed23 §C.1-7, A.6", 1.0, Tolerance(absolute=0.05),
                  _over(LOAD, lambda r, c, p: None if r.value(c, p, "configs") is None else
                        (r.value(c, p, "configs") - r.value(c, p, "sup_in"))  # type: ignore
                        * SUPERVISOR_PERIOD, statistics.fmean),
                  group=LOADS),
            Claim("C.1-7b", "requests to the supervisor per interval < 0.75 + q = 1.25, "
                  "independent of n (largest over n)", "spec seed23 §C.1-7 [R]", 1.25, exact,
                  _over(LOAD, _q("sup_in")), group=LOADS, relation="≤"),
            Claim("C.1-7c", "… flat in n: slope of requests per interval per doubling of n",
                  "spec seed23 §C.1-7 [R]", 0.0, Tolerance(absolute=0.1),
                  _slope_per_doubling(LOAD, "sup_in"), group=LOADS),
            Claim("C.1-8a", "a member sends O(1) per interval: 2 ring + ≤ 2 shortcut "
                  "introductions + 1 CheckTrie + rare requests (largest over members and n)",
                  "spec seed23 §C.1-8; abstract", 5.0, Tolerance(absolute=0.25),
                  _over(LOAD, _q("sent_max")), group=LOADS, relation="≤"),
            Claim("C.1-8b", "… on average (mean over members, largest over n)",
                  "spec seed23 §C.1-8; abstract", 5.0, Tolerance(absolute=0.25),
                  _over(LOAD, _q("sent_mean")), group=LOADS, relation="≤"),
            Claim("C.1-8c", "caveat: labels 0 and 1 receive about 2(L − j) introductions, "
                  "Θ(log n): slope of the largest received per doubling of n",
                  "spec seed23 §C.1-8 [R]", 2.0, Tolerance(absolute=0.5),
                  _slope_per_doubling(LOAD, "recv_max"), group=LOADS),
            Claim("C.1-8e", "the seed's abstract: checking legitimacy costs 'a constant on "
                  "expectation for ... any process': slope of the busiest member's messages "
                  "(sent + received) per doubling of n", "seed 003 abstract, §4.3", 0.0,
                  Tolerance(absolute=0.5),
                  _slope_per_doubling(LOAD, "work_max"), group=LOADS,
                  note="not with the spec's reconstruction of the lost Algorithm 4: see C.1-8c"),
            Claim("C.1-8d", "… O(1) on average: slope of the mean received per doubling",
                  "spec seed23 §C.1-8 [R]", 0.0, Tolerance(absolute=0.1),
                  _slope_per_doubling(LOAD, "recv_mean"), group=LOADS),
            Claim("C.1-9a", "closure: SR(n) with no joins or leaves changes nothing over 40 "
                  "intervals (labels, edges, database, tries)",
                  "spec seed23 §C.1-9, Network Closure",
                  0.0, exact, _over(CLOSURE, _q("changed")), group=STABILIZATION),
            Claim("C.1-9b", "… CheckTrie gets no reply and no Deliver is sent (messages of "
                  "other kinds)", "spec seed23 §C.1-9", 0.0, exact, _over(CLOSURE,
                  _q("other_kinds")),
                  group=STABILIZATION),
            Claim("C.1-11", "unsubscribe: the leaver ends with no incoming explicit edge "
                  "from a subscriber (members still holding it)", "spec seed23 §C.1-11; seed Lemma "
                  "Unsubscribe", 0.0, exact, _over(LEAVE, _q("edges_to_leaver")),
                  group=STABILIZATION),
            Claim("C.1-11b", "… the rest is SR(n − 1) again and the leaver holds no label "
                  "(fraction)", "spec seed23 §C.1-11", 1.0, exact,
                  _over(LEAVE, lambda r, c, p: None if r.value(c, p, "took") is None else
                        float(r.value(c, p, "took") >= 0  # type: ignore[operator]
                              and r.value(c, p, "left") == 1)), group=STABILIZATION),
            Claim("C.1-12a", "crashes (1 or 3 members, the supervisor's detector or ring "
                  "neighbours' reports): SR(n − k) again, the database r(0…n−k−1) without a "
                  "gap (fraction of runs)", "spec seed23 §C.1-12, A.8 (NotMember [D])", 1.0, exact,
                  _over(CRASH, lambda r, c, p: None if r.value(c, p, "took") is None else
                        float(r.value(c, p, "took") >= 0  # type: ignore[operator]
                              and r.value(c, p, "no_gap") == 1), min),
                  group=STABILIZATION),
            Claim("C.1-12b", "… no reference to a crashed member left (largest over runs)",
                  "spec seed23 §C.1-12, A.8", 0.0, exact, _over(CRASH, _q("stale")),
                  group=STABILIZATION),
            Claim("C.1-10a", "convergence from arbitrary states (labels, edges, database, junk "
                  "messages): fraction of runs legitimate again",
                  "spec seed23 §C.1-10, Thm. Network "
                  "Convergence", 1.0, exact, _converged_fraction, group=STABILIZATION),
            Claim("C.1-10b", "… within 2n supervisor Timeouts + ⌈log₂ n⌉ intervals: the "
                  "slowest run / that bound", "spec seed23 §C.1-10, A.7 [R]", 1.0, exact,
                  _worst_over_bound, group=STABILIZATION, relation="≤"),
            Claim("C.1-10c", "the timer ratio matters (A.13-5): with the paper's rules alone (no "
                  "plausibility check), time with a supervisor Timeout of 1 interval / with 1/16 "
                  "(n = 64, median over seeds)", "spec seed23 §C.1-10, A.13-5 [R]", 1.0, exact,
                  _slow_supervisor, group=STABILIZATION, relation="≥",
                  note="a corrupted own label waits for the round robin: n supervisor Timeouts"),
            Claim("C.1-13", "an empty newcomer gets the whole history in one round of 3 "
                  "messages, whatever |P| (largest over |P|)", "spec seed23 §C.1-13 [V]; abstract",
                  3.0, exact, _over(NEWCOMER, _q("messages")), group=PUBLICATIONS),
            Claim("C.1-13b", "… and then holds every publication (fraction of sizes)",
                  "spec seed23 §C.1-13", 1.0, exact, _over(NEWCOMER, _q("complete"), min),
                  group=PUBLICATIONS),
            Claim("C.1-14a", "flooding reaches all n within ⌈log₂ n⌉ hops: largest excess",
                  "spec seed23 §C.1-14 [V]; abstract: O(log n)", 0.0, exact,
                  _over(FLOOD, _minus("hops", lambda n: log2_ceil(n), absolute=False)),
                  group=PUBLICATIONS, relation="≤"),
            Claim("C.1-14b", "flooding sends 3n − 5 messages (the sender excluded): largest "
                  "|difference|", "spec seed23 §C.1-14 [V]", 0.0, exact,
                  _over(FLOOD, _minus("messages", lambda n: 3 * n - 5)), group=PUBLICATIONS),
            Claim("C.1-14c", "duplicates are dropped, never forwarded: PublishNew sent after "
                  "the flood", "spec seed23 §C.1-14", 0.0, exact,
                  _over(FLOOD, lambda r, c, p: None if r.value(c, p, "messages_later") is None
                        else r.value(c, p, "messages_later")  # type: ignore[operator]
                        - r.value(c, p, "messages")), group=PUBLICATIONS),
        ]

    def figures(self, results: Results, out: Path) -> list[tuple[Path, str]]:
        return skipring_figures(results, out=out, supervisor_period=SUPERVISOR_PERIOD)

    def sections(self, results: Results, outcomes: Sequence[Outcome]) -> list[str]:
        col = "simulation"
        lines = ["## Per size", "",
                 "| n | joined in (intervals) | edges | degree mean · max | diameter: SR(n) · "
                 "stored | sent/member max · mean | received max · mean | supervisor in · "
                 "out |", "|---|---|---|---|---|---|---|---|"]
        sizes = sorted({int(p["n"]) for p in results.points
                        if int(p["part"]) in (JOIN, LOAD)})
        for n in sizes:
            j = next((p for p in _points(results, JOIN) if int(p["n"]) == n), None)
            ld = next((p for p in _points(results, LOAD) if int(p["n"]) == n), None)

            def g(p: Point | None, q: str, column: str = col, digits: int = 3) -> str:
                return "—" if p is None else fmt(results.value(column, p, q), digits=digits)

            lines.append(
                f"| {n} | {g(j, 'joined_in')} | {g(j, 'edges')} | {g(j, 'degree_mean')} · "
                f"{g(j, 'degree_max')} | {g(j, 'diameter', 'model')} · {g(j, 'diameter')} | "
                f"{g(ld, 'sent_max')} · {g(ld, 'sent_mean')} | {g(ld, 'recv_max')} · "
                f"{g(ld, 'recv_mean')} | {g(ld, 'sup_in')} · {g(ld, 'sup_out')} |")
        conv = {}
        for p in _points(results, CORRUPTED):
            v = results.value(col, p, "took")
            if v is not None:
                conv.setdefault(int(p["n"]), []).append(v)
        if conv:
            lines += ["", "From a corrupted state (member intervals to legitimacy, per seed; "
                      "the bound 2n·¼ + ⌈log₂ n⌉ [R]):", "",
                      "| n | runs | bound |", "|---|---|---|"]
            for n, vs in sorted(conv.items()):
                lines.append(f"| {n} | {', '.join('none' if v < 0 else fmt(v) for v in vs)} | "
                             f"{fmt(corruption_bound(n))} |")
        ratio = [(period, [ratio_took(results, col, period, c) for c in (0, 1)])
                 for period in SUPERVISOR_PERIODS]
        if any(v is not None for _, vs in ratio for v in vs):
            lines += ["", f"From a corrupted state against the supervisor's Timeout (n = "
                      f"{self.ratio_size}, member intervals, median over seeds):", "",
                      "| supervisor Timeout (intervals) | paper's rules | with the plausibility "
                      "check (A.13-5) |", "|---|---|---|"]
            for period, (off, on) in ratio:
                lines.append(f"| {fmt(period)} | {fmt(off)} | {fmt(on)} |")
        wall = [results.value(col, p, "wall_s") for p in results.points]
        lines += ["", "The seed's formulas and its Algorithms 3–4 were lost in extraction and "
                  "its text ends inside the proof of Publication Convergence: the values are "
                  "the spec's reconstruction ([R]) and its own measurements of the definition "
                  "([V]); p(k) = 4^−k and q = ½ (spec seed23 §A.13-1). Simulated in "
                  f"{sum(w for w in wall if w is not None):.0f} s (wall clock).", ""]
        return lines


def skipring_figures(results: Results, *, out: Path,
                     supervisor_period: float) -> list[tuple[Path, str]]:
    """Seed 003: SR(n)'s degrees and diameter against n (definition as lines, the members'
    stored edges as markers); the per-interval load against n; convergence against its bound."""
    plt = pyplot()
    written = []
    joins = sorted((int(p["n"]), p) for p in results.points if int(p["part"]) == JOIN)
    if joins:
        ns = [n for n, _ in joins]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, (q, label) in enumerate((("degree_max", "maximum degree"),
                                        ("diameter", "diameter"),
                                        ("degree_mean", "average degree"))):
            model = [results.value("model", p, q) for _, p in joins]
            ax.plot(ns, model, color=f"C{i}", label=f"{label} (SR(n) by definition)")
            sim = [(n, results.value("simulation", p, q)) for n, p in joins]
            sim = [(n, v) for n, v in sim if v is not None]
            ax.plot([n for n, _ in sim], [v for _, v in sim], "o", color=f"C{i}",
                    label=f"{label} (stored after n joins)")
        ax.plot(ns, [2 * log2_ceil(n) - 1 for n in ns], "k:", label="2⌈log₂ n⌉ − 1")
        ax.plot(ns, [log2_ceil(n) for n in ns], "k--", linewidth=0.8, label="⌈log₂ n⌉")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("edges per node / hops")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("SR(n): degree and diameter against n")
        written.append(save(fig, out / "seed003_degree_diameter_vs_n.png",
                             "SR(n): maximum and average degree and diameter against n (lines: "
                             "the definition; markers: the members' stored edges after n "
                             "joins from nothing)"))
    loads = sorted((int(p["n"]), p) for p in results.points if int(p["part"]) == LOAD)
    loads = [(n, p) for n, p in loads if results.value("simulation", p, "sent_max") is not None]
    if loads:
        ns = [n for n, _ in loads]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, (q, label) in enumerate((("sent_max", "sent, busiest member"),
                                        ("sent_mean", "sent, mean member"),
                                        ("recv_max", "received, busiest member"),
                                        ("recv_mean", "received, mean member"),
                                        ("sup_in", "received by the supervisor"))):
            ax.plot(ns, [results.value("simulation", p, q) for _, p in loads], "o-",
                    color=f"C{i}", label=label)
        ax.axhline(0.75 + 0.5, color="C4", linestyle=":", label="0.75 + q (supervisor, [R])")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("messages per member interval")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"legitimate SR(n): load per interval (supervisor Timeout "
                     f"{supervisor_period:g} interval)")
        written.append(save(fig, out / f"seed003_load_vs_n_supervisor{supervisor_period:g}.png",
                             "Messages per member interval in a legitimate SR(n) against n: "
                             "sent stays constant, the supervisor's requests stay flat, what "
                             "labels 0 and 1 receive grows by about 2 per doubling"))
    conv = [(int(p["n"]), results.value("simulation", p, "took")) for p in results.points
            if int(p["part"]) == CORRUPTED]
    conv = [(n, v) for n, v in conv if v is not None]
    if conv:
        ns = sorted({n for n, _ in conv})
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ok = [(n, v) for n, v in conv if v >= 0]
        ax.plot([n for n, _ in ok], [v for _, v in ok], "o", label="runs (per seed)")
        grid = [2 ** e for e in range(int(math.log2(ns[0])), int(math.log2(ns[-1])) + 1)]
        ax.plot(grid, [corruption_bound(n) for n in grid], "k--",
                label="2n supervisor Timeouts + ⌈log₂ n⌉ [R]")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("member intervals to legitimacy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"convergence from a corrupted state (supervisor Timeout "
                     f"{supervisor_period:g})")
        written.append(save(fig, out / f"seed003_convergence_vs_n_supervisor"
                                        f"{supervisor_period:g}.png",
                             "Member intervals from a corrupted state (labels, edges, "
                             "database, junk messages) to legitimacy against n, with the "
                             "reconstructed bound"))
    ratio = [p for p in results.points if int(p["part"]) == TIMER_RATIO
             and results.value("simulation", p, "took") is not None]
    if ratio:
        n = int(ratio[0]["n"])
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for check, label in ((0, "the paper's rules"), (1, "with the plausibility check")):
            pts = [(period, ratio_took(results, "simulation", period, check))
                   for period in SUPERVISOR_PERIODS]
            pts = [(x, y) for x, y in pts if y is not None]
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("supervisor Timeout (member intervals)")
        ax.set_ylabel("member intervals to legitimacy (median)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"convergence from a corrupted state against the timer ratio, n = {n}")
        written.append(save(fig, out / f"seed003_convergence_vs_supervisor_timeout_n{n}.png",
                             "Member intervals from a corrupted state to legitimacy against the "
                             f"supervisor's Timeout (n = {n}), with and without the local "
                             "plausibility check (spec seed23 §A.13-5)"))
    return written
