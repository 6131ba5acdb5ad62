"""Logs and traces that a hostile or broken peer cannot grow without limit.

* Warnings are rate-limited per message template and logger (`RateLimit`, installed on every
  runtime logger by `rate_limited`): the first BURST of a kind pass, then at most one per
  PERIOD seconds, which says how many like it were suppressed meanwhile; every suppressed one
  is counted (`RateLimit.suppressed`, the broker's `log_suppressed` counter). The probe found
  one WARNING per bad frame: over 1,500 lines for 2,000 fuzz frames.
* Long free-text values in trace records (error texts, a refresh's repeated filter) are cut to
  a prefix and keep the SHA-256 of the whole (`clip`): a trace reached 30 MB in the fuzz run,
  mostly repeated copies of one 1 MB filter. The values the analysis needs whole (a
  subscription's filter, a publication's attributes) stay whole; the size limits of Tuning
  (max_filter_bytes, max_notification_bytes) bound them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally

from weeble.trace.writer import CLIP_CHARS, clip, clipped

__all__ = ["BURST", "CLIP_CHARS", "LIMIT", "PERIOD", "RateLimit", "clip", "clipped",
           "rate_limited"]
BURST = 5  # messages of one kind that always pass
PERIOD = 10.0  # seconds: then one of that kind per period


class RateLimit(logging.Filter):
    """Lets through the first BURST records of each (logger, template), then one per PERIOD
    seconds; counts the rest. Records below WARNING always pass (link up/down and the like are
    the story of a run, and rare)."""

    def __init__(self, burst: int = BURST, period: float = PERIOD) -> None:
        super().__init__()
        self.burst = burst
        self.period = period
        self._seen: dict[tuple[str, str], list[float]] = {}  # key -> [count, next_allowed]
        self._held: Tally[tuple[str, str]] = Tally()
        self.suppressed = 0
        self._lock = threading.Lock()  # records may come from the trace flusher thread too

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        with self._lock:
            state = self._seen.get(key)
            if state is None:
                if len(self._seen) >= 10_000:  # bounded: forget the old kinds
                    self._seen.clear()
                state = self._seen[key] = [0, 0.0]
            state[0] += 1
            if state[0] <= self.burst or now >= state[1]:
                if state[0] > self.burst:
                    state[1] = now + self.period
                held = self._held.pop(key, 0)
                if held:
                    record.msg = (f"{record.msg} [{held} more like this suppressed in the last"
                                  f" {self.period:g} s]")
                return True
            self._held[key] += 1
            self.suppressed += 1
            return False


LIMIT = RateLimit()


def rate_limited(logger: logging.Logger) -> logging.Logger:
    """`logger` with the runtime's one RateLimit (shared: one count per process)."""
    if LIMIT not in logger.filters:
        logger.addFilter(LIMIT)
    return logger
