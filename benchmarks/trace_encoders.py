"""A traced broker's trace encoding in process: CPU per notification of its `publish` and
`deliver` records, without gRPC or an event loop.

    python benchmarks/trace_encoders.py [--count 30000] [--batch 100] [--passes 9]
    PYTHONPATH=OTHER_CHECKOUT python benchmarks/trace_encoders.py   # the same on other code

Each pass builds `count` notifications as a broker decodes them from `live_throughput.py`'s
publisher (publisher "src", consecutive seqs, the time, attributes class and n), then, timed
apart: `LiveSink.published` for each request of `batch` of them, `LiveSink.delivered` for each
write of `batch` to one subscription, and the flush with its write into a file (here on the
caller's thread; a broker's loop hands the write to a thread). Printed: the build that ran
(`weeble.BUILD`), then min and median over the passes of each part's CPU (process time) per
notification, in µs. Uses only `LiveSink`'s public calls, so it runs on older code too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--passes", type=int, default=9)
    a = parser.parse_args()

    import weeble
    from weeble.core.messages import Notification
    from weeble.trace.writer import LiveSink

    parts: dict[str, list[float]] = {"publish": [], "deliver": [], "flush": [], "all": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.passes):
            now = time.time()
            ns = [
                Notification("src", i * a.count + j, {"class": 0, "n": j}, now + j * 1e-6)
                for j in range(a.count)
            ]
            requests = [ns[j : j + a.batch] for j in range(0, a.count, a.batch)]
            writes = [[("src/0", n) for n in r] for r in requests]
            path = Path(tmp) / f"b{i}.jsonl"
            sink = LiveSink(path, "b1", flush_interval=3600, max_buffer=1 << 30)
            t0 = time.process_time()
            for r in requests:
                sink.published("src", "b1", r)
            t1 = time.process_time()
            for w in writes:
                sink.delivered("sub", "b1", w)
            t2 = time.process_time()
            sink.flush()
            t3 = time.process_time()
            sink.close()
            size = path.stat().st_size
            path.unlink()
            for name, cpu in (
                ("publish", t1 - t0),
                ("deliver", t2 - t1),
                ("flush", t3 - t2),
                ("all", t3 - t0),
            ):
                parts[name].append(cpu / a.count * 1e6)
    print(
        f"trace_encoders: {a.count} notifications in entries of {a.batch}, {a.passes} passes,"
        f" {size / a.count:.0f} bytes a notification; build: {weeble.BUILD}; "
        f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}; load average"
        f" {os.getloadavg()[0]:.1f}"
    )
    print(f"{'CPU µs per notification':<24}  {'min':>6}  {'median':>6}")
    for name, values in parts.items():
        print(f"{name:<24}  {min(values):>6.3f}  {statistics.median(values):>6.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
