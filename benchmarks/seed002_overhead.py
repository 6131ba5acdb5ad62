"""Seed 002 §5: reconfiguration overhead of the timer strategies after one transient link failure,
on the real brokers in the one Simulation (mode anti_entropy, identity-based routing: the paper's
"forwarded unless a duplicate").

Setup (the paper's where it says, our choice where it is silent, spec seed23 §B.5):
- one random spanning tree of 100 brokers, FIFO links of 5-20 ms;
- subscriptions and events are random 3-character strings over an alphabet of `--alphabet`
  letters (the paper does not give the alphabet): filter `p == "abc"`, event {p: "abc"};
- every broker subscribes to a new pattern every 2 s and holds at most 20 (the oldest is
  unsubscribed);
- every broker publishes a random event every 0.1 s (heavy) or 5 s (light);
- at t = 60 s (every broker holds 20 patterns by then) the edge that splits the tree most evenly
  fails for `downtime` s (the paper's downtimes are not recoverable): both ends are told
  (LinkDown, then LinkUp), as the chaos module's `cut` does in the simulator.
Overhead (the paper's metric, L207: "the total number of hops traversed by both unsubscribe/
re-subscribe messages and unwanted events") = subscribe and unsubscribe messages (one per hop)
+ the hops of unwanted events (a hop whose receiver, and everything beyond it, delivered the event
to nobody: `WastedHops`), for one failure: the same run without the failure (same seed) is
subtracted, so subscription churn cancels. `once` beside it counts each unwanted event once,
where it died (the core's counter, weeble/check/load.py's `unwanted`).
Timers: one per directed edge, period 10 s except static 3 s; the adaptive threshold (not given)
is 20 unwanted events. Sketch checks (Observe/reply) are not part of the paper's metric; their
bytes are printed beside.

The runs are those of `weeble reproduce sketches` (weeble/analytics/reproduce/sketches.py:
`one_run`), which judges them against the paper's relations (spec seed23 §C.2-6).

Run: python -m benchmarks.seed002_overhead [--quick]
Prints medians over seeds, and the paper's qualitative relations beside ours.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from weeble.analytics.reproduce.sketches import STRATEGIES, one_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer seeds and one downtime")
    ap.add_argument("--alphabet", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=100)
    args = ap.parse_args()
    seeds = [1, 2, 3] if args.quick else [1, 2, 3, 4, 5]
    downtimes = [5.0] if args.quick else [3.0, 15.0]
    started = time.monotonic()
    for load, interval in (("heavy", 0.1), ("light", 5.0)):
        for downtime in downtimes:
            print(f"\n{load} load (publish every {interval} s per broker), downtime {downtime} s,"
                  f" {args.nodes} brokers, median of {len(seeds)} seeds")
            print(f"{'strategy':<12} {'overhead':>9} {'(sub hops':>10} {'unwanted hops)':>15}"
                  f" {'once':>6} {'check kB':>9}")
            med: dict[str, float] = {}
            rows: dict[str, list[tuple[int, ...]]] = {k: [] for k in STRATEGIES}
            for seed in seeds:
                common = {"seed": seed, "publish_interval": interval, "downtime": downtime,
                          "alphabet": args.alphabet, "n": args.nodes}
                # without the failure no round corrects anything: one baseline for all timers
                base = one_run(timer="static", period=10.0, fail=False, **common)
                for name, (timer, period) in STRATEGIES.items():
                    run = one_run(timer=timer, period=period, fail=True, **common)
                    sub, hops, once = (run[k] - base[k] for k in (
                        "subscription_messages", "unwanted_hops", "unwanted"))
                    rows[name].append((sub + hops, sub, hops, once, run["check_bytes"]))
                print(f"  ... {load}, downtime {downtime} s, seed {seed} done "
                      f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
            for name in STRATEGIES:
                m = [statistics.median(r[i] for r in rows[name]) for i in range(5)]
                med[name] = m[0]
                print(f"{name:<12} {m[0]:>9.0f} {m[1]:>10.0f} {m[2]:>15.0f} {m[3]:>6.0f}"
                      f" {m[4] / 1e3:>9.1f}")
            s, a3, a10, ad = (med["strawman"], med["static 3 s"], med["static 10 s"],
                              med["adaptive"])

            def ratio(x: float, y: float) -> str:
                return f"{x / y:.2f}" if y else "n/a"

            if load == "heavy":
                print("paper (Fig. 2): strawman <= adaptive < static 3 s ~ 1/2 static 10 s")
                print(f"ours: strawman {s:.0f} <= adaptive {ad:.0f}: {s <= ad}; adaptive < static"
                      f" 3 s {a3:.0f}: {ad < a3}; static 3 s / static 10 s = {ratio(a3, a10)}")
            else:
                print("paper (Fig. 3): static 10 s ~ adaptive ~ 1/3 strawman; static 3 s high")
                print(f"ours: static 10 s / strawman = {ratio(a10, s)}, adaptive / strawman = "
                      f"{ratio(ad, s)}, static 3 s / strawman = {ratio(a3, s)}")


if __name__ == "__main__":
    main()
