"""The same fault on the same tree under leasing (seed 000) and under anti-entropy (seed 002):
stabilization time and control bytes per second, side by side (issue 14).

The scenario is scenarios/anti-entropy.yaml (15 brokers, identity-based routing, π = 3 s,
ρ = 1.5 s; anti-entropy rounds every 1 s per directed edge, an exact round every 4) with its
workload of `--subscriptions` live subscriptions over `--classes` distinct filters, one fault
at t = 10 s and 30 s of calm; the same seed draws the same workload and the same fault targets
under both modes (`--mode`, as `weeble simulate --mode` does). Every figure comes from the one
checker over the run's traces (weeble/check): stabilization per episode from the end of the
fault, at the state level (tables legitimate at every later check) and the service level
(every later publication delivered); control bytes per second per broker from the `send`
records, mean and max over brokers.

Run: python -m benchmarks.seed002_vs_leasing [--seeds 3] [--subscriptions 40] [--classes 5]
Prints medians over seeds, and the ratio anti-entropy / leasing (the same-run baseline).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from weeble.chaos.runner import in_simulation
from weeble.check.history import check_run
from weeble.model.scenario import load_scenario, parse_scenario, with_mode
from weeble.sim.run import simulate

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "anti-entropy.yaml"
FAULTS: dict[str, dict[str, Any]] = {
    "wrong filter": {"kind": "corrupt", "field": "entry.filter", "target": "b1"},
    "bogus entry": {"kind": "corrupt", "field": "entry.insert", "target": "b3",
                    "value": {"sub_id": "bogus", "filter": "class == -1", "dest": "b1"}},
    "table lost": {"kind": "corrupt", "field": "table.clear", "target": "b1"},
    "crash": {"kind": "crash", "target": "b2", "duration": 1},
    "cut 3 s": {"kind": "cut", "link": ["b0", "b1"], "duration": 3},
}


def one(fault: dict[str, Any], mode: str, seed: int, subscriptions: int, classes: int,
        out: Path) -> dict[str, float | None]:
    data = load_scenario(SCENARIO).model_dump(mode="json", exclude_none=True)
    data.update(seed=seed, duration=40, trace={"sends": True}, check_every=0.1)
    data["workload"] = {**data["workload"], "subscriptions": subscriptions,
                        "filter_classes": classes, "mean_lifetime": 1000}
    data["chaos"] = {"faults": [{"name": "f", "at": 10, **fault}]}
    s = with_mode(parse_scenario(data), mode)
    simulate(s, out, progress=False, faults=in_simulation(s))
    report = check_run(out)
    [episode] = report["episodes"]
    load = report["load"]
    per_s = 1 / load["interval"]
    return {"state": episode["state_time"], "service": episode["service_time"],
            "bound": report["run"]["bound"],
            "bytes_mean": load["control_bytes"]["mean"] * per_s,
            "bytes_max": load["control_bytes"]["max"] * per_s,
            "took_effect": float(all(f["took_effect"] for f in report["verdict"]["faults"])),
            "pass": float(report["verdict"]["status"] == "pass")}


def median(rows: list[dict[str, float | None]], key: str) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None  # type: ignore[type-var]


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "–" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--subscriptions", type=int, default=40)
    ap.add_argument("--plot", default="out/seed002_vs_leasing.png", metavar="PNG",
                    help="where the figure goes (state stabilization and control bytes/s)")
    ap.add_argument("--classes", type=int, default=5,
                    help="distinct filters (identity routing forwards each once)")
    args = ap.parse_args()
    started = time.monotonic()
    print(f"15 brokers, {args.subscriptions} subscriptions of {args.classes} filters, one fault "
          f"at t = 10 s, median of {args.seeds} seeds (state / service stabilization in s from "
          "the fault's end; control bytes/s per broker, mean and max)")
    print(f"{'fault':<13} {'mode':<13} {'state s':>8} {'service s':>9} {'bound s':>8} "
          f"{'ctl B/s mean':>12} {'max':>8} {'verdicts':>9}")
    table: dict[str, dict[str, list[dict[str, float | None]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fault in FAULTS.items():
            results: dict[str, list[dict[str, float | None]]] = {}
            for mode in ("leasing", "anti_entropy"):
                rows = [one(fault, mode, seed, args.subscriptions, args.classes,
                            Path(tmp) / f"{name}-{mode}-{seed}".replace(" ", "_"))
                        for seed in range(1, args.seeds + 1)]
                results[mode] = rows
                passed = sum(int(r["pass"] or 0) for r in rows)
                print(f"{name:<13} {mode:<13} {fmt(median(rows, 'state')):>8} "
                      f"{fmt(median(rows, 'service')):>9} {fmt(median(rows, 'bound')):>8} "
                      f"{fmt(median(rows, 'bytes_mean'), '.0f'):>12} "
                      f"{fmt(median(rows, 'bytes_max'), '.0f'):>8} "
                      f"{passed}/{len(rows):<7}")
            table[name] = results
            le, ae = results["leasing"], results["anti_entropy"]
            lb, ab = median(le, "bytes_mean"), median(ae, "bytes_mean")
            ls, as_ = median(le, "state"), median(ae, "state")
            print(f"{'':<13} {'ratio ae/le':<13} "
                  f"{fmt(as_ / ls if as_ is not None and ls else None):>8} {'':>9} {'':>8} "
                  f"{fmt(ab / lb if ab is not None and lb else None):>12}")
            print(f"  ... {name} done ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    plot(table, Path(args.plot), f"{args.subscriptions} subscriptions of {args.classes} filters")


def plot(table: dict[str, dict[str, list[dict[str, float | None]]]], path: Path,
         title: str) -> None:
    """Two panels per fault: state-level stabilization (with each mode's Δ) and control bytes/s
    per broker (mean), median over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    faults = list(table)
    modes = ("leasing", "anti_entropy")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    for i, mode in enumerate(modes):
        xs = [j + (i - 0.5) * width for j in range(len(faults))]
        ax1.bar(xs, [median(table[f][mode], "state") or 0.0 for f in faults], width,
                label=mode)
        ax2.bar(xs, [median(table[f][mode], "bytes_mean") or 0.0 for f in faults], width,
                label=mode)
        bound = median(table[faults[0]][mode], "bound")
        if bound is not None:
            ax1.axhline(bound, linestyle="--", linewidth=1, color=f"C{i}",
                        label=f"Δ {mode} = {bound:g} s")
    for ax, label in ((ax1, "state-level stabilization, s"), (ax2, "control bytes/s per broker")):
        ax.set_xticks(range(len(faults)), faults, rotation=20)
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle(f"the same fault under leasing and anti-entropy (15 brokers, {title})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
