"""User-space netem for one direction of a link: delay, jitter, loss, duplication, corruption,
rate.

The kernel on the testbed machines has no netem qdisc, so each broker shapes its own egress in
the link layer (this also works unchanged in Docker and on Kubernetes). Unlike netem with
jitter, FIFO order is preserved: a message never leaves before the one queued ahead of it, as
the routing algorithms assume FIFO links. The price is that jitter also lengthens the mean
delay of messages stuck behind a late one.

`ShapedQueue` is the outgoing queue of a link: `put` decides the message's fate and release
time; the link's writer `get`s messages as they come due. The queue is bounded in count and
(optionally) in bytes: a message that finds it full (typically while the link is down, or the
peer reads slowly) is dropped and counted. Corruption (netem's
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
        *,
        byte_limit: int | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit: must be >= 1, got {limit}")
        self._shape = shape or LinkShape()
        self._perfect = self._shape == LinkShape()
        self.limit = limit
        self.byte_limit = byte_limit  # None: bounded by count only
        self.bytes = 0  # sizes (as given to put) of what is queued
        self._rng = rng or random.Random()
        self._clock = clock or time.monotonic
        self._garble = garble
        self._items: deque[tuple[float, T, int]] = deque()  # (release time, item, size)
        self._last_release = 0.0  # FIFO: nothing leaves before its predecessor
        self._busy_until = 0.0  # rate: when the emulated wire finishes the previous message
        self._wakeup = asyncio.Event()
        self._nudged = False  # nudge(): the consumer's get_batch returns even if empty
        self.counters: dict[str, int] = {fate.value: 0 for fate in Fate}

    def __len__(self) -> int:
        return len(self._items)

    @property
    def shape(self) -> LinkShape:
        return self._shape

    @shape.setter
    def shape(self, shape: LinkShape) -> None:
        self._shape = shape
        self._perfect = shape == LinkShape()

    def put(self, item: T, size: int = 0) -> Fate:
        """Admit one message of `size` bytes: lose, duplicate, garble or schedule it."""
        if self._perfect:
            # the hot path of an unshaped link: due at once (release 0.0 is never later than
            # what is queued before it, so FIFO holds when a shape is set later)
            if len(self._items) >= self.limit or self._over_bytes(size):
                return self._count(Fate.OVERFLOW)
            self._items.append((0.0, item, size))
            self.bytes += size
            self._wakeup.set()
            self.counters["sent"] += 1
            return Fate.SENT
        shape, rng = self._shape, self._rng
        if shape.loss and rng.random() < shape.loss:
            return self._count(Fate.LOST)
        copies = 2 if shape.duplicate and rng.random() < shape.duplicate else 1
        if len(self._items) + copies > self.limit or self._over_bytes(copies * size):
            return self._count(Fate.OVERFLOW)
        garbled = (shape.corrupt and self._garble is not None
                   and rng.random() < shape.corrupt)
        if garbled:
            item = self._garble(item, rng)  # type: ignore[misc]
        now = self._clock()
        for _ in range(copies):
            self._items.append((self._release_time(now, size), item, size))
            self.bytes += size
        self._wakeup.set()
        if garbled:
            return self._count(Fate.CORRUPTED)
        return self._count(Fate.DUPLICATED if copies == 2 else Fate.SENT)

    @property
    def perfect(self) -> bool:
        """Unshaped: every message is due at once, none lost, duplicated or garbled."""
        return self._perfect

    def put_sized(self, items: list[tuple[T, int]]) -> int:
        """`put` of each (item, size) in order on a perfect queue (see `perfect`), with one
        wake-up: returns how many were admitted (the first ones; the rest overflowed, counted
        as by `put`)."""
        assert self._perfect, "put_sized: a shaped queue decides each message's fate by put"
        queue = self._items
        room = self.limit - len(queue)
        admitted = 0
        for item, size in items:
            if admitted >= room or self._over_bytes(size):
                break
            queue.append((0.0, item, size))
            self.bytes += size
            admitted += 1
        if admitted:
            self._wakeup.set()
            self.counters["sent"] += admitted
        if admitted < len(items):
            self.counters["overflow"] += len(items) - admitted
        return admitted

    def _release_time(self, now: float, size: int) -> float:
        shape = self._shape
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

    async def get_batch(self, max_items: int = 1, max_bytes: int | None = None) -> list[T]:
        """Wait for the head to come due, then take it and up to max_items-1 more that are due
        (or return [] after a nudge() while nothing is queued).

        With `max_bytes` (items must then be sized: bytes), the batch also stops before the
        item that would make it larger than max_bytes; the first item is always taken.
        """
        while True:
            if self._items:
                delay = self._items[0][0] - self._clock()
                if delay <= 0:
                    return self.take_due(max_items, max_bytes)
                if self._nudged:
                    self._nudged = False
                    return []
                # a newly admitted item never overtakes the head, so sleeping is safe
                await asyncio.sleep(delay)
            elif self._nudged:
                self._nudged = False
                return []
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    def nudge(self) -> None:
        """Wake the consumer now: its waiting get_batch returns [] if nothing is due (the
        link's writer then sends what it owes besides messages, an acknowledgement)."""
        self._nudged = True
        self._wakeup.set()

    async def get(self) -> T:
        return (await self.get_batch(1))[0]

    def take_due(self, max_items: int, max_bytes: int | None = None,
                 taken_bytes: int = 0) -> list[T]:
        """Take what is due now, without waiting: up to max_items, and (with max_bytes) up to
        max_bytes - taken_bytes bytes; when nothing is taken yet, the head is taken anyway."""
        items = self._items
        out: list[T] = []
        if not items or max_items < 1:
            return out
        now = self._clock()
        taken = 0
        if max_bytes is None:
            while items and len(out) < max_items and items[0][0] <= now:
                _, item, n = items.popleft()
                taken += n
                out.append(item)
        else:
            size = taken_bytes
            while items and len(out) < max_items and items[0][0] <= now:
                n = len(items[0][1])  # type: ignore[arg-type]
                if size + n > max_bytes and (out or taken_bytes):
                    break
                size += n
                _, item, n = items.popleft()
                taken += n
                out.append(item)
        self.bytes -= taken
        return out

    def _over_bytes(self, size: int) -> bool:
        return self.byte_limit is not None and self.bytes + size > self.byte_limit

    def clear(self) -> list[T]:
        """Drop everything queued; returns the items, in queue order."""
        items = [item for _, item, _ in self._items]
        self._items.clear()
        self.bytes = 0
        return items

    def stats(self) -> dict[str, Any]:
        return {"queued": len(self._items), "queued_bytes": self.bytes, **self.counters}
