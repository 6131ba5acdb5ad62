"""Seed 003: convergence time and per-node load of the supervised skip ring against n.

For each n: (1) from SR(n) with 20 publications, corrupt everything the spec lists (random
labels, random edges, a database with all four corruption conditions, 3n junk messages) and
measure the time to legitimacy (ring, shortcuts, database and every trie); (2) everyone joins at
once from nothing; (3) in the legitimate state, messages per interval sent and received per member
(maximum and mean) and at the supervisor; (4) convergence against the supervisor's Timeout
with and without the local plausibility check (spec seed23 §A.13-5). Time unit: one member Timeout
interval; the supervisor's Timeout runs 4× as often (spec seed23 §D.4); link delays 1–5 % of an
interval.

The paper's claims beside ours (abstract, §3.2.1, §4.3): constant expected work per interval for
the supervisor and for any process in a legitimate state; O(log n) worst-case, O(1) average
degree. The reconstruction predicts that "0" and "1" *receive* Θ(log n) shortcut introductions
per interval (spec seed23 §C.1-8): the maximum received column shows it.

Every figure comes from the one Simulation in mode skip_ring (SkipRingWorld is a view of it):
the same core, engine and ROM as `weeble simulate`. The runs are those of `weeble reproduce
skipring` (weeble/analytics/reproduce/skipring.py), which judges them against spec seed23 §C.1.

Run: python -m benchmarks.seed003_skipring [--full]
"""

from __future__ import annotations

import argparse
import statistics
import time

from weeble.analytics.reproduce.skipring import (
    corrupted_convergence,
    join_convergence,
    steady_load,
)


def _joined(n: int, seed: int) -> float | None:
    return join_convergence(n, seed)[0]


def _median(xs: list[float | None]) -> float | None:
    ok = [x for x in xs if x is not None]
    return statistics.median(ok) if ok and len(ok) == len(xs) else None


def _ratio(x: float | None, base: float) -> str:
    return "-" if x is None else f"{x / base:.2f}"


def med(xs: list[float | None]) -> str:
    ok = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return "None" if len(ok) < len(xs) else f"{statistics.median(ok):.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="add n = 4096 (joins and load)")
    ap.add_argument("--corrupted-max", type=int, default=256,
                    help="largest n started from a corrupted state (the work grows as n²)")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    sizes = [16, 64, 256, 1024] + ([4096] if args.full else [])
    seeds = list(range(1, args.seeds + 1))
    print("convergence (member intervals, median over seeds; None = not within 400); the "
          "paper's claims beside (spec seed23 §C.1-10, A.7 [R]): labels within n supervisor "
          "Timeouts "
          "of a clean database, the ring within 2n, shortcuts ~log2 n intervals after that")
    print(f"{'n':>6} {'corrupted':>10} {'x n=16':>7} {'all join':>9} {'x n=16':>7} "
          f"{'claim: 2n/4 + log2 n':>21} {'wall s':>7}")
    base: dict[str, float] = {}
    for n in sizes:
        t0 = time.perf_counter()
        # from a corrupted state BuildRing moves every stale reference one hop per message, so
        # the work of convergence grows about as n²: only the smaller sizes by default
        c = ([corrupted_convergence(n, s) for s in seeds]
             if n <= args.corrupted_max else [])
        j = [_joined(n, s) for s in seeds[:1]]
        cm, jm = _median(c), _median(j)
        base.setdefault("c", cm or 1.0)
        base.setdefault("j", jm or 1.0)
        claim = 2 * n * 0.25 + (n - 1).bit_length()
        print(f"{n:>6} {med(c):>10} {_ratio(cm, base['c']):>7} {med(j):>9} "
              f"{_ratio(jm, base['j']):>7} {claim:>21.0f} {time.perf_counter() - t0:>7.1f}")
    print("\nconvergence from a corrupted state against the supervisor's Timeout (n = 64; spec "
          "C.1-10, A.13-5)")
    print(f"{'supervisor period':>18} {'plausibility on':>16} {'off (paper)':>12}")
    for sp in (1.0, 0.25, 0.0625):
        on = [corrupted_convergence(64, s, supervisor_period=sp) for s in seeds]
        off = [corrupted_convergence(64, s, supervisor_period=sp, plausibility=False)
               for s in seeds]
        print(f"{sp:>18} {med(on):>16} {med(off):>12}")
    print("\nlegitimate-state load per interval (paper: O(1) expected per process and supervisor;"
          " the reconstruction: 'sup out' = 4 Configs (one per supervisor Timeout) + answers,"
          " 'sup in' < 0.75 + q = 1.25, flat in n; 'recv max' grows as 2 log2 n at labels 0, 1)")
    print(f"{'n':>6} {'sent max':>9} {'sent mean':>10} {'recv max':>9} {'recv mean':>10} "
          f"{'sup in':>7} {'sup out':>8} {'B/node max':>11}")
    for n in sizes:
        r = steady_load(n, seeds[0], intervals=20 if n <= 256 else 8)
        print(f"{n:>6} {r['sent_max']:>9.2f} {r['sent_mean']:>10.2f} {r['recv_max']:>9.2f} "
              f"{r['recv_mean']:>10.2f} {r['sup_in']:>7.2f} {r['sup_out']:>8.2f} "
              f"{r['bytes_max']:>11.0f}")


if __name__ == "__main__":
    main()
