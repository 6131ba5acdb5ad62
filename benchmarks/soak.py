"""Soak: a live testbed for an hour under a random nemesis with reconfigurations.

    python benchmarks/soak.py --minutes 60                  # local backend, seed 1
    python benchmarks/soak.py --minutes 60 --backend docker --seed 3 --rate 3

A 7-broker tree (peer-to-peer simple routing, a steady workload) runs live for the duration,
as `weeble run SCENARIO --no-analysis` does it, under the random nemesis of `weeble explore`
(weeble/chaos/nemesis.py: the one fault vocabulary, the one generator) drawn for the whole run:
faults of every family at `--rate` per 100 s, link exchanges among them. Every `--interval` s
it samples each broker's resident memory (VmRSS) and open file descriptors (/proc, where the
backend's handle is a pid) and the bytes waiting in its link and client queues (its /metrics
endpoint). At the end the trace is judged by the reference checker (`weeble check`'s code,
no Spark): it prints the notifications lost, duplicated or reordered outside the fault windows
(0 expected) or the parts of the run that were not clean, the reconfigurations' rows (R15), and
the memory figures; RSS and fds over time go to OUT/soak.png, the samples to OUT/samples.json,
the checker's report to OUT/check.json and the drawn scenario to OUT/scenario.yaml (`weeble
simulate` runs it, `weeble run` runs it live again).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weeble.chaos.explore import broken_rules, dump_scenario
from weeble.chaos.nemesis import DEFAULT_MIX, Nemesis, draw, parse_mix
from weeble.model.scenario import parse_scenario

RUN_ID = "soak"

# Timing with room for a shared machine: Δ = 2π + d·δmax = 10.6 s.
BASE: dict[str, Any] = {
    "name": "soak",
    "seed": 1,
    "duration": 60,
    "topology": {"kind": "kary", "m": 2, "levels": 3},
    "routing": {"algorithm": "simple"},
    "timing": {"pi": 5, "rho": 2, "delta_min": 0, "delta_max": 0.1, "d": 6},
    "workload": {"filter_classes": 4, "subscriptions": 8, "mean_lifetime": 60,
                 "publish_rate": 5, "subscriber_placement": "all",
                 "publisher_placement": "all"},
    "reconfigurations": {"ordering": "fifo"},
    "trace": {"sends": False},
}


def scenario_data(minutes: float, seed: int, nemesis: Nemesis) -> dict[str, Any]:
    base = parse_scenario({**BASE, "duration": minutes * 60}, source="soak")
    return draw(base, seed, nemesis)


def _metrics(address: str) -> dict[str, float]:
    """The queue gauges of a broker's /metrics (summed over neighbours)."""
    out = {"link_queued_bytes": 0.0, "client_queued_bytes": 0.0}
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("weeble_link_queued_bytes"):
                out["link_queued_bytes"] += float(line.rsplit(" ", 1)[1])
            elif line.startswith("weeble_client_queued_bytes"):
                out["client_queued_bytes"] += float(line.rsplit(" ", 1)[1])
    return out


def _proc(pid: int) -> dict[str, float]:
    rss = next(int(line.split()[1]) / 1024
               for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return {"rss_mib": rss, "fds": float(len(os.listdir(f"/proc/{pid}/fd")))}


def sample(run_dir: Path, t: float) -> list[dict[str, Any]]:
    """One sample per broker up now (a crashed broker, or one not yet up, has none)."""
    try:
        state = json.loads((run_dir / "testbed.json").read_text())
    except (OSError, ValueError):
        return []
    rows = []
    for b, info in state.get("brokers", {}).items():
        row: dict[str, Any] = {"t": round(t, 1), "broker": b}
        try:
            if info.get("pid"):
                row.update(_proc(int(info["pid"])))
            if info.get("metrics"):
                row.update(_metrics(info["metrics"]))
        except (OSError, ValueError, StopIteration):
            continue  # down (crashed, paused past the timeout) at this instant
        if len(row) > 2:
            rows.append(row)
    return rows


def figures(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per broker: RSS first (after the first minute: start-up done), last, max; fds and
    queue bytes max."""
    out: dict[str, dict[str, Any]] = {}
    for b in sorted({s["broker"] for s in samples}, key=lambda b: (len(b), b)):
        mine = [s for s in samples if s["broker"] == b]
        rss = [(s["t"], s["rss_mib"]) for s in mine if "rss_mib" in s]
        settled = [v for t, v in rss if t >= 60] or [v for _, v in rss]
        f: dict[str, Any] = {"samples": len(mine)}
        if rss:
            f.update(rss_first=round(settled[0], 1), rss_last=round(rss[-1][1], 1),
                     rss_max=round(max(v for _, v in rss), 1),
                     fds_max=max(int(s["fds"]) for s in mine if "fds" in s))
        q = [s["link_queued_bytes"] + s["client_queued_bytes"] for s in mine
             if "link_queued_bytes" in s]
        if q:
            f["queued_bytes_max"] = int(max(q))
        out[b] = f
    return out


def plot(samples: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for b in sorted({s["broker"] for s in samples}, key=lambda b: (len(b), b)):
        mine = [s for s in samples if s["broker"] == b and "rss_mib" in s]
        ax.plot([s["t"] / 60 for s in mine], [s["rss_mib"] for s in mine], label=b, lw=1)
        bx.plot([s["t"] / 60 for s in mine], [s["fds"] for s in mine], label=b, lw=1)
    ax.set_ylabel("RSS (MiB)")
    bx.set_ylabel("open fds")
    bx.set_xlabel("minutes")
    ax.set_title(title)
    ax.legend(ncol=4, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def outside_faults(report: dict[str, Any]) -> dict[str, Any]:
    """What the checker found outside the fault windows: the verdict's parts that are not
    clean (an episode's part covers its faults and Δ after them; everything after that, up to
    the next episode, must be free of losses, duplicates and reorderings)."""
    v = report["verdict"]
    parts = v["parts"]
    bad = [p for p in parts if p["status"] != "pass"]
    return {"status": v["status"], "parts": len(parts),
            "clean_parts": len(parts) - len(bad),
            "not_clean": [{"part": p["part"], "status": p["status"], "reason": p["reason"]}
                          for p in bad],
            "rules_broken": broken_rules(report),
            "before_first_fault": v.get("before_first_fault")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--seed", type=int, default=1, help="the nemesis' and workload's seed")
    parser.add_argument("--rate", type=float, default=2.0,
                        help="faults per 100 s (all of them drawn: a soak, not a sample)")
    parser.add_argument("--mix", default=",".join(
        f"{k}={w:g}" for k, w in {**DEFAULT_MIX, "reconfigure": 2.0}.items()),
        help="weight per family (weeble explore --mix)")
    parser.add_argument("--exclude", default="",
                        help="corruption targets left out, by name or prefix, comma-separated"
                             " (those outside the configuration's fault model, the static"
                             " overlay's neighbour set and the exchange's RAM, are left out"
                             " anyway: weeble explore's rule, nemesis.fault_model)")
    parser.add_argument("--interval", type=float, default=10.0, help="s between samples")
    parser.add_argument("--out", type=Path, default=Path("runs/soak"))
    args = parser.parse_args()
    seconds = args.minutes * 60
    nemesis = Nemesis(rate=args.rate, mix=parse_mix(args.mix),
                      max_faults=max(1, round(args.rate * seconds / 100)), exact=True,
                      exclude=tuple(x for x in args.exclude.split(",") if x))
    data = scenario_data(args.minutes, args.seed, nemesis)
    args.out.mkdir(parents=True, exist_ok=True)
    scenario_path = args.out / "scenario.yaml"
    faults = (data.get("chaos") or {}).get("faults", [])
    ops = (data.get("reconfigurations") or {}).get("operations", [])
    scenario_path.write_text(dump_scenario(
        data, f"benchmarks/soak.py --minutes {args.minutes:g} --seed {args.seed}"
              f" --rate {args.rate:g}: {len(faults)} faults, {len(ops)} reconfigurations"))
    # the same schedule in the simulator first (seconds): a part that fails there too is the
    # algorithm's (or the nemesis leaving the model), not the live runtime's
    from weeble.chaos.explore import simulate_data

    simulated = outside_faults(simulate_data(data, args.out / "sim"))
    print(f"simulator, same schedule: {simulated['status']}: {simulated['clean_parts']} of"
          f" {simulated['parts']} parts clean", flush=True)
    for p in simulated["not_clean"]:
        print(f"  {p['part']}: {p['status']}: {p['reason'][:200]}", flush=True)
    run_dir = args.out / RUN_ID
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    print(f"soak: {args.minutes:g} min, {len(faults)} faults, {len(ops)} reconfigurations,"
          f" backend {args.backend}; load {os.getloadavg()[0]:.1f}; {scenario_path}",
          flush=True)
    command = [sys.executable, "-m", "weeble.cli", "run", str(scenario_path), "--no-analysis",
               "--quiet", "--any-ports", "--backend", args.backend, "--runs-dir",
               str(args.out), "--run-id", RUN_ID]
    samples: list[dict[str, Any]] = []
    start = time.monotonic()
    wall = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            now = time.monotonic() - start
            rows = sample(run_dir, now)
            samples.extend(rows)
            if rows and int(now) % 300 < args.interval:  # kept as it goes: a long run
                (args.out / "samples.json").write_text(json.dumps(samples) + "\n")
            if rows and int(now) % 300 < args.interval:
                rss = [r["rss_mib"] for r in rows if "rss_mib" in r]
                print(f"  {now / 60:5.1f} min: {len(rows)} brokers, RSS median"
                      f" {statistics.median(rss) if rss else float('nan'):.1f} MiB,"
                      f" load {os.getloadavg()[0]:.1f}", flush=True)
            time.sleep(max(0.0, args.interval - (time.monotonic() - start - now)))
        out, err = proc.communicate()
    except BaseException:
        proc.terminate()  # weeble run stops its brokers on SIGTERM
        proc.wait(timeout=60)
        raise
    (args.out / "samples.json").write_text(json.dumps(samples) + "\n")
    if proc.returncode != 0:
        print(f"soak: weeble run exited {proc.returncode}: {err.strip()[-2000:]}")
        return 1
    checked = time.monotonic()
    from weeble.check.history import check_run

    report = check_run(run_dir)
    (args.out / "check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    found = outside_faults(report)
    per_broker = figures(samples)
    plot(samples, args.out / "soak.png",
         f"soak {args.minutes:g} min, {len(faults)} faults, {len(ops)} exchanges, seed "
         f"{args.seed}")
    summary = {"minutes": args.minutes, "backend": args.backend, "seed": args.seed,
               "faults": len(faults), "reconfigurations": len(ops),
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall)),
               "wall_s": round(checked - start, 1),
               "check_s": round(time.monotonic() - checked, 1),
               "load_end": round(os.getloadavg()[0], 1),
               "run": json.loads(out.strip().splitlines()[-1]) if out.strip() else None,
               "checker": found, "simulator": simulated, "brokers": per_broker}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("checker", "simulator")},
                     indent=1))
    print(f"checker: {found['status']}: {found['clean_parts']} of {found['parts']} parts"
          " clean (no loss, duplicate or reordering outside the fault windows)")
    sim_bad = {p["part"] for p in simulated["not_clean"]}
    for p in found["not_clean"]:
        also = " (the simulator too)" if p["part"] in sim_bad else ""
        print(f"  {p['part']}: {p['status']}{also}: {p['reason'][:300]}")
    print(f"wrote {args.out}/soak.png, samples.json, check.json, summary.json")
    return 0 if found["status"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
