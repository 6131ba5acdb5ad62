"""Idle resident memory (RSS) of a live broker process.

    python benchmarks/live_rss.py
    python benchmarks/live_rss.py --repeat 5 --settle 3

Starts the quickstart's 7-broker tree the way `weeble up` does (metrics endpoint and trace
on), lets it settle with every link up and no clients, and reads each broker's VmRSS. Each
repeat starts fresh processes. Baselines in the same run: a bare `python` interpreter and an
idle raw grpc.aio server (the relay of live_throughput.py), the floor a gRPC broker in Python
stands on. Target: at most 60 MB per broker.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import median, next_base_host, rss_mb, table
from live_throughput import relays

from weeble.model.scenario import load_scenario
from weeble.orchestrator.testbed import Testbed

QUICKSTART = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml"
MB = 1024 * 1024 / 1e6  # VmRSS is in KiB; report MiB and MB alike would confuse: use MiB


def brokers_rss(settle: float) -> list[float]:
    scenario = load_scenario(QUICKSTART)
    bed = Testbed.plan(scenario, runs_dir=Path(tempfile.mkdtemp(prefix="weeble-rss-")),
                       base_host=next_base_host(), any_ports=True, log_level="WARNING")
    with bed:
        bed.up()
        time.sleep(settle)
        out = []
        for b in bed.brokers:
            handle = bed.backend.handle(b)
            assert handle is not None
            out.append(rss_mb(int(handle)))
        bed.down(timeout=10)
    return out


def bare_python_rss(settle: float) -> float:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(min(settle, 1.0))
        return rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def raw_grpc_rss(settle: float) -> float:
    with relays(1, 1) as _addrs:
        time.sleep(settle)
        pids = subprocess.run(["pgrep", "-f", f"_relay.py --listen {_addrs[0]}"],
                              capture_output=True, text=True).stdout.split()
        return rss_mb(int(pids[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs (median)")
    parser.add_argument("--settle", type=float, default=3.0, help="idle seconds before reading")
    args = parser.parse_args()
    per_run, maxima, bare, raw = [], [], [], []
    for _ in range(args.repeat):
        values = brokers_rss(args.settle)
        per_run.append(median(values))
        maxima.append(max(values))
        bare.append(bare_python_rss(args.settle))
        raw.append(raw_grpc_rss(args.settle))
        print(f"brokers {', '.join(f'{v:.1f}' for v in values)} MiB; bare python"
              f" {bare[-1]:.1f}; raw grpc server {raw[-1]:.1f}", file=sys.stderr, flush=True)
    broker = median(per_run)
    rows = [{"process": "broker (median of 7)", "RSS MiB": broker,
             "vs raw grpc": broker / median(raw)},
            {"process": "broker (max of 7)", "RSS MiB": median(maxima),
             "vs raw grpc": median(maxima) / median(raw)},
            {"process": "raw grpc.aio server", "RSS MiB": median(raw), "vs raw grpc": 1.0},
            {"process": "bare python", "RSS MiB": median(bare),
             "vs raw grpc": median(bare) / median(raw)}]
    print(f"\nidle RSS, median of {args.repeat} fresh runs")
    print(table(rows, list(rows[0])))
    worst_mb = median(maxima) * MB
    print(f"target <= 60 MB per broker: worst broker {worst_mb:.1f} MB"
          f" ({'met' if worst_mb <= 60 else 'MISSED'})")


if __name__ == "__main__":
    main()
