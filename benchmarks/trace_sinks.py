"""What a process's trace sinks cost its event loop (issue 25 item 3), before and after, in one
process.

    python benchmarks/trace_sinks.py
    python benchmarks/trace_sinks.py --sinks 1000 12000 --repeat 3 --seconds 5

The workload's runner (`weeble run`) keeps one trace sink per client: 12,000 at the paper's
N_s = 10,000. "before" is each sink flushed by a timer of its own every flush interval (0.2 s),
as `LiveSink.start` did until stop 40; "after" is `LiveSink.start` now: one ticker per loop
flushes only the sinks that recorded since its last tick. Figures: the loop's CPU seconds per
wall second with every sink idle, and with each sink recording once a second (a client's share
of 10,000 deliveries a second); medians over --repeat, and the ratio after/before of each.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _live import cpu_model

from weeble.trace.writer import LiveSink


class PerSinkTimer(LiveSink):
    """The baseline: a sink started on a loop ticks on a timer of its own (before stop 40)."""

    def start(self) -> None:
        super().start()
        if self._ticker is not None:  # leave the shared ticker: this sink ticks itself
            self._ticker.sinks -= 1
            self._ticker = None
        self._dirty = True  # never marked: its own timer flushes it every period
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self._flush_on_loop()
            if self._file is not None:
                loop.call_later(self.flush_interval, tick)

        loop.call_later(self.flush_interval, tick)


async def loop_cpu(kind: type[LiveSink], sinks: int, seconds: float, *, active: bool,
                   directory: Path) -> float:
    """CPU s per wall s of this process with `sinks` sinks of `kind` on the running loop."""
    open_sinks = [kind(directory / f"c{i}.jsonl", f"c{i}") for i in range(sinks)]
    for sink in open_sinks:
        sink.start()
    stop = False

    async def record_each_once_a_second() -> None:
        rng = random.Random(1)
        order = list(open_sinks)
        while not stop:
            rng.shuffle(order)
            start = time.monotonic()
            for i, sink in enumerate(order):  # spread over the second
                sink.record("client_deliver", client=sink.node, nid=f"p#{i}")
                if i % 100 == 99:
                    await asyncio.sleep(max(0.0, start + (i + 1) / len(order) - time.monotonic()))
            await asyncio.sleep(max(0.0, start + 1.0 - time.monotonic()))

    recorder = asyncio.create_task(record_each_once_a_second()) if active else None
    await asyncio.sleep(1.0)  # settle: the first tick flushes every sink once
    c0, t0 = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    used = (time.process_time() - c0) / (time.monotonic() - t0)
    stop = True
    if recorder is not None:
        await recorder
    for sink in open_sinks:
        sink.close()
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sinks", type=int, nargs="+", default=[1000, 12000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured s per point")
    args = parser.parse_args(argv)
    print(f"trace sinks on one loop: {cpu_model()}, python {platform.python_version()},"
          f" medians of {args.repeat}, {args.seconds:g} s each")
    print(f"{'sinks':>6} {'records':>9} {'before CPU s/s':>15} {'after CPU s/s':>14}"
          f" {'after/before':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sinks:
            for active in (False, True):
                runs: dict[str, list[float]] = {"before": [], "after": []}
                for r in range(args.repeat):
                    for name, kind in (("before", PerSinkTimer), ("after", LiveSink)):
                        d = Path(tmp) / f"{name}-{n}-{active}-{r}"
                        d.mkdir()
                        runs[name].append(asyncio.run(loop_cpu(
                            kind, n, args.seconds, active=active, directory=d)))
                before, after = (statistics.median(runs[k]) for k in ("before", "after"))
                rate = f"{n}/s" if active else "idle"
                print(f"{n:>6} {rate:>9} {before:>15.3f} {after:>14.3f}"
                      f" {after / before if before else float('nan'):>13.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
