"""User-space netem for one direction of a link: delay, jitter, loss, duplication, corruption,
rate.

The kernel on the testbed machines has no netem qdisc, so each broker shapes its own egress in
the link layer (this also works unchanged in Docker and on Kubernetes). Unlike netem with
jitter, FIFO order is preserved: a message never leaves before the one queued ahead of it, as
the routing algorithms assume FIFO links. The price is that jitter also lengthens the mean
delay of messages stuck behind a late one.

`ShapedQueue` is the outgoing queue of a link: `put` decides the message's fate and release
time; the link's writer `get`s messages as they come due. The queue is bounded: a message that
finds it full (typically while the link is down) is dropped and counted. Corruption (netem's
`corrupt`) needs to know what an item is, so the owner passes a `garble` function: the link
flips one byte of the serialized envelope.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LinkShape:
    """Egress shaping of one link. All zero = a perfect link."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0  # each message gets delay + U(-jitter, +jitter), never below 0
    loss: float = 0.0  # probability that a message is lost
    duplicate: float = 0.0  # probability that a message is sent twice
    rate_bps: float = 0.0  # serialization rate in bits/s; 0 = unlimited
    corrupt: float = 0.0  # probability that a message is garbled on the way (fault F9)

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms", "rate_bps"):
            value = getattr(self, name)
            if not value >= 0 or value == float("inf"):  # also rejects NaN
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
        for name in ("loss", "duplicate", "corrupt"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be a probability in [0, 1], got {value!r}")

    def updated(self, **changes: float | None) -> LinkShape:
        """A copy with the non-None changes applied (validated; unknown names raise)."""
        known = set(asdict(self))
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown link parameter(s) {unknown}; known: {sorted(known)}")
        return replace(self, **{k: float(v) for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class Fate(StrEnum):
    SENT = "sent"
    DUPLICATED = "duplicated"
    CORRUPTED = "corrupted"  # sent, garbled
    LOST = "lost"
    OVERFLOW = "overflow"


class ShapedQueue(Generic[T]):
    """Bounded FIFO whose items come out no earlier than their shaped release time.

    Single consumer. Times come from `clock`, in seconds: time.monotonic, which is also what
    asyncio's loop.time() reads, so the sleeps in `get_batch` line up with it.
    """

    def __init__(
        self,
        shape: LinkShape | None = None,
        limit: int = 10_000,
        rng: random.Random | None = None,
        clock: Callable[[], float] | None = None,
        garble: Callable[[T, random.Random], T] | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit: must be >= 1, got {limit}")
        self.shape = shape or LinkShape()
        self.limit = limit
        self._rng = rng or random.Random()
        self._clock = clock or time.monotonic
        self._garble = garble
        self._items: deque[tuple[float, T]] = deque()
        self._last_release = 0.0  # FIFO: nothing leaves before its predecessor
        self._busy_until = 0.0  # rate: when the emulated wire finishes the previous message
        self._wakeup = asyncio.Event()
        self.counters: dict[str, int] = {fate.value: 0 for fate in Fate}

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T, size: int = 0) -> Fate:
        """Admit one message of `size` bytes: lose, duplicate, garble or schedule it."""
        shape, rng = self.shape, self._rng
        if shape.loss and rng.random() < shape.loss:
            return self._count(Fate.LOST)
        copies = 2 if shape.duplicate and rng.random() < shape.duplicate else 1
        if len(self._items) + copies > self.limit:
            return self._count(Fate.OVERFLOW)
        garbled = (shape.corrupt and self._garble is not None
                   and rng.random() < shape.corrupt)
        if garbled:
            item = self._garble(item, rng)  # type: ignore[misc]
        now = self._clock()
        for _ in range(copies):
            self._items.append((self._release_time(now, size), item))
        self._wakeup.set()
        if garbled:
            return self._count(Fate.CORRUPTED)
        return self._count(Fate.DUPLICATED if copies == 2 else Fate.SENT)

    def _release_time(self, now: float, size: int) -> float:
        shape = self.shape
        sent = now
        if shape.rate_bps > 0:
            sent = max(now, self._busy_until) + size * 8 / shape.rate_bps
            self._busy_until = sent
        delay = shape.delay_ms / 1000
        if shape.jitter_ms:
            delay += self._rng.uniform(-shape.jitter_ms, shape.jitter_ms) / 1000
        release = max(sent + max(delay, 0.0), self._last_release)
        self._last_release = release
        return release

    def _count(self, fate: Fate) -> Fate:
        self.counters[fate.value] += 1
        return fate

    async def get_batch(self, max_items: int = 1) -> list[T]:
        """Wait for the head to come due, then take it and up to max_items-1 more that are due."""
        while True:
            if self._items:
                delay = self._items[0][0] - self._clock()
                if delay <= 0:
                    return self._take_due(max_items)
                # a newly admitted item never overtakes the head, so sleeping is safe
                await asyncio.sleep(delay)
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    async def get(self) -> T:
        return (await self.get_batch(1))[0]

    def _take_due(self, max_items: int) -> list[T]:
        now = self._clock()
        out = [self._items.popleft()[1]]
        while self._items and len(out) < max_items and self._items[0][0] <= now:
            out.append(self._items.popleft()[1])
        return out

    def clear(self) -> int:
        """Drop everything queued; returns how many items that was."""
        n = len(self._items)
        self._items.clear()
        return n

    def stats(self) -> dict[str, Any]:
        return {"queued": len(self._items), **self.counters}
