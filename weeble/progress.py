"""The progress of long work on stderr: a bar on a terminal, plain lines in a log.

A bar redraws itself in place and writes nothing a log file can keep, so a run started as
`weeble reproduce ch5 --full > log 2>&1 &` (an hour or more) said nothing until its end. When the
stream is not a terminal, a line is printed at each twentieth of the work (at most one every
`GAP` seconds, so work of seconds gives one line) and at its end, with the time elapsed and an
estimate of the time left; and one a minute while the work's detail changes between them (a
warm start of minutes that has no part of the run done yet). Stdlib and rich only, so any layer
may use it.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

LINES = 20  # lines over the whole work when the stream is not a terminal
GAP = 5.0  # seconds at least between two of them, but for the last
HEARTBEAT = 60.0  # seconds after which a changed detail gets a line of its own
# The time left is estimated from the recent pace: the last fifth of the time elapsed, at least
# RECENT seconds (a grid's closed forms come at once, its long simulations after them).
RECENT = 30.0


def duration_text(seconds: float) -> str:
    """7s, 12m03s, 1h05m: short enough for a progress line."""
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _amount(x: float) -> str:
    return f"{x:.0f}" if x >= 10 or abs(x - round(x)) < 0.05 else f"{x:.1f}"


class Progress:
    """One piece of work measured in `unit`s (points, seeds, simulated s), from 0 to a total.

    `update(done, total=..., detail=...)`: `skipped=True` marks work that cost nothing (a grid
    point reused from an earlier run), which the estimate of the time left leaves out."""

    def __init__(self, what: str, *, unit: str, total: float | None = None,
                 quiet: bool = False, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.unit, self.total, self.quiet = what, unit, total, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.terminal = self.stream.isatty()
        self._start = clock()
        self._done = 0.0
        self._skipped = 0.0  # of `_done`, what cost nothing
        self._pace: deque[tuple[float, float]] = deque([(self._start, 0.0)])  # (when, worked)
        self._line = -1  # the last twentieth a line was printed for
        self._printed = self._start  # when
        self._detail = ""  # the detail of the last line
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.terminal and not self.quiet:
            from rich import progress as rich
            from rich.console import Console

            self._bar = rich.Progress(
                rich.TextColumn("{task.fields[what]}"), rich.BarColumn(),
                rich.TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} {self.unit}"),
                rich.TimeElapsedColumn(), rich.TimeRemainingColumn(),
                rich.TextColumn("{task.description}"),
                console=Console(file=self.stream), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("", total=self.total, what=self.what)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)
            self._bar = None

    def update(self, done: float, *, total: float | None = None, detail: str = "",
               skipped: bool = False) -> None:
        if total is not None:
            self.total = total
        if skipped:
            self._skipped += max(0.0, done - self._done)
        self._done = done
        now = self.clock()
        self._paced(now)
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=self.total, description=detail)
            return
        if not self.total:
            return
        twentieth = min(LINES, int(done / self.total * LINES))
        due = done > 0 and twentieth > self._line and (
            done >= self.total or now - self._printed >= GAP)
        if not due and not (now - self._printed >= HEARTBEAT and detail != self._detail):
            return
        self._line, self._printed, self._detail = max(self._line, twentieth), now, detail
        print(self.line(detail), file=self.stream, flush=True)

    def line(self, detail: str = "") -> str:
        """A log's line: `reproduce ch5: 15/100 evaluations, 21m30s, about 2h01m left; DETAIL`."""
        now = self.clock()
        elapsed = now - self._start
        text = f"{self.what}: {_amount(self._done)}/{_amount(self.total or 0)} {self.unit}, " \
               f"{duration_text(elapsed)}"
        left = (self.total or 0) - self._done
        since, then = self._paced(now)
        if left > 0 and self._done - self._skipped > then and now - since >= 1:
            pace = (now - since) / (self._done - self._skipped - then)
            text += f", about {duration_text(left * pace)} left"
        return text + (f"; {detail}" if detail else "")

    def _paced(self, now: float) -> tuple[float, float]:
        """Note (now, work done but not skipped); return the oldest such note of the recent
        window. The window's start only moves forward, so what falls out is never needed."""
        pace = self._pace
        if pace[-1][1] != self._done - self._skipped:
            pace.append((now, self._done - self._skipped))
        start = now - max(RECENT, (now - self._start) / 5)
        while len(pace) > 1 and pace[1][0] <= start:
            pace.popleft()
        return pace[0]

    def describe(self, what: str, detail: str = "") -> None:
        """The work enters a phase of its own (`starting 7 brokers`, `run r1`, `stopping`): a new
        name on the bar, a line of its own in a log; the time elapsed and left count from here."""
        self.what = what
        self._start = self._printed = self.clock()
        self._skipped, self._line = self._done, -1
        self._pace = deque([(self._start, 0.0)])
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, what=what, description=detail)
        else:
            print(what + (f": {detail}" if detail else ""), file=self.stream, flush=True)

    def print(self, text: str) -> None:
        """A message of the work's own, above the bar on a terminal."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            print(text, file=self.stream, flush=True)
