"""Brokers at scale on each backend: bring-up time, memory and CPU per broker, and a verdict.

    python benchmarks/backends_scale.py tree121 --backend local      # the 121-broker tree
    python benchmarks/backends_scale.py tree121 --backend mininet
    python benchmarks/backends_scale.py tree121 --backend local --run   # + `weeble run` verdict
    python benchmarks/backends_scale.py docker --brokers 15 40       # Docker at 15 and 40

tree121: scenarios/live121.yaml (seed 000's 3-ary 5-level tree, identity routing, pi = 6 s).
Brings it up and waits until every broker serves and every link is up (the bring-up time),
lets it settle, then reads each broker process's VmRSS and its CPU time over an idle window.
With --run it then runs `weeble run scenarios/live121.yaml` (100 subscriptions, 50
publications/s, 40 s, one table corruption) and samples the brokers' CPU under that load, and
prints the run's verdict and lost deliveries.

docker: a tree of N brokers in containers (the image built beforehand): bring-up time and
memory per broker (the broker process's VmRSS, and the container's cgroup memory).

CPU is the brokers' utime+stime from /proc over the window, as a share of one core per broker
and in all; the load average is printed beside it (other programs on the machine count).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import median, rss_mb, table

from weeble.model.scenario import load_scenario, parse_scenario
from weeble.orchestrator.testbed import Testbed

REPO = Path(__file__).resolve().parent.parent
LIVE121 = REPO / "scenarios" / "live121.yaml"
HZ = os.sysconf("SC_CLK_TCK")


def broker_pids(workdir: Path) -> dict[str, int]:
    """Broker id -> pid of every broker process whose config lies in `workdir` (works for
    local processes, Mininet hosts and containers alike: all are processes of this kernel)."""
    marker = str(workdir).rstrip("/") + "/"
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmd]
        if "weeble.runtime" in args and "--config" in args:
            config = args[args.index("--config") + 1]
            if config.startswith(marker):
                out[Path(config).stem] = int(entry.name)
    return out


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_over(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's CPU use over `seconds`, as a share of one core."""
    before = {b: cpu_ticks(p) for b, p in pids.items()}
    time.sleep(seconds)
    return {b: (cpu_ticks(p) - before[b]) / HZ / seconds for b, p in pids.items()}


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def measure_up(scenario: Any, backend: str, settle: float, idle: float) -> dict[str, Any]:
    runs = Path(tempfile.mkdtemp(prefix="weeble-scale-"))
    t0 = time.monotonic()
    bed = Testbed.plan(scenario, runs_dir=runs, any_ports=True, log_level="WARNING",
                       backend=backend)
    with bed:
        bed.up()
        up_s = time.monotonic() - t0
        time.sleep(settle)
        pids = broker_pids(bed.backend.workdir)
        rss = [rss_mb(p) for p in pids.values()]
        cgroup = container_memory(bed) if backend == "docker" else []
        cpu = cpu_over(pids, idle)
        row = {"backend": backend, "brokers": len(bed.brokers), "found": len(pids),
               "up s": up_s, "rss MiB med": median(rss), "rss MiB max": max(rss),
               "idle cpu %/broker": 100 * median(list(cpu.values())),
               "idle cpu % all": 100 * sum(cpu.values()), "load": load()}
        if cgroup:
            row["cgroup MiB med"] = median(cgroup)
        t1 = time.monotonic()
        bed.down(timeout=30)
        row["down s"] = time.monotonic() - t1
    return row


def container_memory(bed: Testbed) -> list[float]:
    """Each container's memory as its cgroup counts it (docker stats), in MiB."""
    backend: Any = bed.backend
    out = []
    for b in bed.brokers:
        stats = backend.container(b).stats(stream=False)
        usage = stats.get("memory_stats", {}).get("usage")
        if usage:
            out.append(usage / 2**20)
    return out


def run_verdict(backend: str, sample_every: float = 5.0) -> dict[str, Any]:
    """`weeble run scenarios/live121.yaml`, sampling the brokers' CPU while it runs."""
    runs = Path(tempfile.mkdtemp(prefix="weeble-scale-run-"))
    cmd = [sys.executable, "-m", "weeble.cli", "run", str(LIVE121), "--backend", backend,
           "--runs-dir", str(runs), "--run-id", "r", "--quiet"]
    if backend == "local":
        cmd += ["--any-ports", "--base-host", "127.50.0.2"]
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pids = broker_pids(runs / "r" / "brokers")
            if len(pids) > 100:
                share = cpu_over(pids, sample_every)
                samples.append(sum(share.values()))
            else:
                time.sleep(1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800)
    done.set()
    sampler.join(timeout=sample_every + 5)
    out = result.stdout
    verdict = next((line.split(":")[1].strip() for line in out.splitlines()
                    if line.startswith("run verdict:")), f"none (exit {result.returncode})")
    row = next((line for line in out.splitlines() if line.strip("│ ").startswith("table")), "")
    return {"backend": backend, "verdict": verdict, "wall s": time.monotonic() - t0,
            "load cpu % all (med)": 100 * median(samples) if samples else None,
            "fault row": " ".join(row.replace("│", " ").split()),
            "stderr": result.stderr[-500:] if result.returncode not in (0, 1) else ""}


TREES = {15: {"kind": "kary", "m": 2, "levels": 4}, 40: {"kind": "kary", "m": 3, "levels": 4}}


def tree_scenario(n: int) -> Any:
    """A tree of n brokers: 2-ary with 4 levels (15), 3-ary with 4 levels (40), else a chain."""
    return parse_scenario({
        "name": f"tree{n}", "duration": 10,
        "topology": TREES.get(n, {"kind": "chain", "brokers": n}),
        "routing": {"algorithm": "identity", "hierarchical": True},
        "timing": {"pi": 6, "rho": 3, "delta_min": 0, "delta_max": 0.1},
        "live": {"metrics_port": None, "drain": 0.5, "startup_timeout": 300},
        "check_every": None}, source="<benchmark>")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tree121")
    t.add_argument("--backend", default="local", choices=["local", "mininet", "docker"])
    t.add_argument("--settle", type=float, default=10.0)
    t.add_argument("--idle", type=float, default=10.0)
    t.add_argument("--run", action="store_true", help="also `weeble run` it for a verdict")
    d = sub.add_parser("docker")
    d.add_argument("--brokers", type=int, nargs="+", default=[15, 40])
    d.add_argument("--settle", type=float, default=5.0)
    args = p.parse_args()
    if args.what == "tree121":
        row = measure_up(load_scenario(LIVE121), args.backend, args.settle, args.idle)
        print(table([row], list(row)))
        if args.run:
            v = run_verdict(args.backend)
            print(table([v], [k for k in v if k != "stderr"]))
            if v["stderr"]:
                print(v["stderr"], file=sys.stderr)
    else:
        rows = [measure_up(tree_scenario(n), "docker", args.settle, 5.0) for n in args.brokers]
        print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
