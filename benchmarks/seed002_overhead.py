"""Seed 002 §5: reconfiguration overhead of the timer strategies after one transient link failure.

Setup (the paper's where it says, our choice where it is silent, spec B.5):
- one random spanning tree of 100 brokers, FIFO links of 5–20 ms;
- subscriptions and events are random 3-character strings over an alphabet of `--alphabet`
  letters (the paper does not give the alphabet), matching by equality;
- every broker subscribes to a new pattern every 2 s and holds at most 20 (the oldest goes);
- every broker publishes a random event every 0.1 s (heavy) or 5 s (light);
- at t = 60 s (every broker holds 20 patterns by then) the edge that splits the tree most
  evenly fails for a few seconds (3 and 15; the paper's downtimes are not recoverable).
Overhead (the paper's metric) = hops of unsubscribe and re-subscribe messages + hops of unwanted
events (an event hop after which no subscriber is reached), for one failure: the same run without
the failure (same seed) is subtracted, so subscription churn and in-flight effects cancel.
Sketch checks (Observe/reply) are not part of the paper's metric; we print their bytes beside.
Timers: one per directed edge (as the paper), period 10 s except static 3 s; the adaptive
threshold (not given) is 20 unwanted events, which a heavy load reaches within a second and a
light one not within a short outage (5 would make adaptive act like strawman under light load).

Run: python -m benchmarks.seed002_overhead [--quick]
Prints medians over seeds, and the paper's qualitative relations beside ours.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
from collections import Counter
from typing import Any

from tests.seeds.driver import SketchWorld
from weeble.broker.core.events import Send, SetTimer
from weeble.broker.core.sketch.bloom import SketchParams
from weeble.broker.core.sketch.edge import (
    AntiEntropyParams,
    Delivered,
    Event,
    Subscription,
    TimerPolicy,
    Unsubscription,
)

STRATEGIES = {
    "strawman": TimerPolicy("strawman", 10.0),
    "static 3 s": TimerPolicy("static", 3.0),
    "static 10 s": TimerPolicy("static", 10.0),
    "adaptive": TimerPolicy("adaptive", 10.0, threshold=20),
}


class Run(SketchWorld):
    """A SketchWorld that follows every event's hops to tell wanted from unwanted ones."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        self.hops: Counter[str] = Counter()
        self.event_edges: dict[int, list[tuple[str, str]]] = {}
        self.event_hits: dict[int, set[str]] = {}
        super().__init__(*a, **kw)

    def emit(self, v: str, effects: Any) -> None:
        effects = list(effects)
        for e in effects:
            if isinstance(e, Send):
                m = e.message
                if isinstance(m, Event):
                    self.event_edges.setdefault(m.eid, []).append((v, e.neighbor))
                elif isinstance(m, Subscription | Unsubscription):
                    self.hops["subscription"] += 1
                elif not isinstance(m, SetTimer):
                    self.hops["check bytes"] += m.size()  # type: ignore[attr-defined]
            elif isinstance(e, Delivered):
                self.event_hits.setdefault(e.eid, set()).add(v)
        super().emit(v, [e for e in effects if not isinstance(e, Delivered)])

    def unwanted_hops(self) -> int:
        total = 0
        for eid, edges in self.event_edges.items():
            hits = self.event_hits.get(eid, set())
            useful: set[tuple[str, str]] = set()
            parent = {b: a for a, b in edges}
            for h in hits:
                x = h
                while x in parent:
                    useful.add((parent[x], x))
                    x = parent[x]
            total += len(edges) - len(useful)
        return total


def middle_edge(edges: list[tuple[str, str]]) -> tuple[str, str]:
    """The edge whose removal splits the tree most evenly."""
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)

    def side(a: str, b: str) -> int:
        seen, stack = {a, b}, [b]
        while stack:
            u = stack.pop()
            for w in adj[u] - seen:
                seen.add(w)
                stack.append(w)
        return len(seen) - 1

    n = len(adj)
    return min(edges, key=lambda e: abs(n - 2 * side(*e)))


def one_run(*, seed: int, policy: TimerPolicy, publish_interval: float, downtime: float,
            fail: bool, alphabet: int, n: int) -> tuple[int, int, int]:
    rng = random.Random(seed)
    edges = [(f"b{i}", f"b{rng.randrange(i)}") for i in range(1, n)]
    params = AntiEntropyParams(timer=policy, bloom=SketchParams(bits_per_element=10, hashes=7))
    w = Run(edges, params=params, seed=seed)
    letters = string.ascii_lowercase[:alphabet]

    def pattern() -> str:
        return "".join(rng.choice(letters) for _ in range(3))

    held: dict[str, list[str]] = {v: [] for v in w.nodes}
    t_fail, t_end = 60.0, 60.0 + downtime + 12.0
    eid = 0
    # the workload, fixed by the seed (identical with and without the failure)
    actions: list[tuple[float, str, str]] = []
    for v in sorted(w.nodes):
        t = rng.uniform(0, 2.0)
        while t < t_end:
            actions.append((t, "sub", v))
            t += 2.0
        t = t_fail - 1.0 + rng.uniform(0, publish_interval)
        while t < t_end:
            actions.append((t, "pub", v))
            t += publish_interval
    actions.sort()
    a, b = middle_edge(edges)
    failed = False
    for t, kind, v in actions:
        if fail and not failed and t >= t_fail:
            w.net.run(t_fail)
            w.cut(a, b)
            w.net.at(t_fail + downtime, w.heal, a, b)
            failed = True
        w.net.run(t)
        node = w.nodes[v]
        if kind == "sub":
            p = pattern()
            if p in held[v]:
                continue
            if len(held[v]) >= 20:
                w.emit(v, node.unsubscribe(held[v].pop(0)))
            held[v].append(p)
            w.emit(v, node.subscribe(p))
        else:
            eid += 1
            w.emit(v, node.publish(w.net.now, pattern(), eid))
    w.net.run(t_end)
    return w.hops["subscription"], w.unwanted_hops(), w.hops["check bytes"]


def overhead(**kw: Any) -> tuple[int, int, int, int]:
    sub_f, unw_f, chk_f = one_run(fail=True, **kw)
    sub_0, unw_0, _ = one_run(fail=False, **kw)
    return (sub_f - sub_0) + (unw_f - unw_0), sub_f - sub_0, unw_f - unw_0, chk_f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer seeds and one downtime")
    ap.add_argument("--alphabet", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=100)
    args = ap.parse_args()
    seeds = [1, 2, 3] if args.quick else [1, 2, 3, 4, 5]
    downtimes = [5.0] if args.quick else [3.0, 15.0]
    for load, interval in (("heavy", 0.1), ("light", 5.0)):
        for downtime in downtimes:
            print(f"\n{load} load (publish every {interval} s per broker), downtime {downtime} s,"
                  f" {args.nodes} brokers, median of {len(seeds)} seeds")
            print(f"{'strategy':<12} {'overhead':>9} {'(sub hops':>10} {'unwanted)':>10}"
                  f" {'check kB':>9}")
            med: dict[str, float] = {}
            for name, policy in STRATEGIES.items():
                rows = [overhead(seed=s, policy=policy, publish_interval=interval,
                                 downtime=downtime, alphabet=args.alphabet, n=args.nodes)
                        for s in seeds]
                m = [statistics.median(r[i] for r in rows) for i in range(4)]
                med[name] = m[0]
                print(f"{name:<12} {m[0]:>9.0f} {m[1]:>10.0f} {m[2]:>10.0f} {m[3] / 1e3:>9.1f}")
            s, a3, a10, ad = (med["strawman"], med["static 3 s"], med["static 10 s"],
                              med["adaptive"])
            if load == "heavy":
                print("paper (Fig. 2): strawman <= adaptive < static 3 s ~ 1/2 static 10 s")
                print(f"ours: strawman {s:.0f} <= adaptive {ad:.0f}: {s <= ad}; adaptive < static"
                      f" 3 s {a3:.0f}: {ad < a3}; static 3 s / static 10 s = "
                      f"{a3 / a10 if a10 else float('nan'):.2f}")
            else:
                print("paper (Fig. 3): static 10 s ~ adaptive ~ 1/3 strawman; static 3 s high")
                print(f"ours: static 10 s / strawman = {a10 / s if s else float('nan'):.2f}, "
                      f"adaptive / strawman = {ad / s if s else float('nan'):.2f}, static 3 s /"
                      f" strawman = {a3 / s if s else float('nan'):.2f}")


if __name__ == "__main__":
    main()
