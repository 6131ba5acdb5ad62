"""User-space netem: delay, jitter, loss, duplication and rate statistics; FIFO under jitter."""

from __future__ import annotations

import asyncio
import random
import statistics

import pytest

from weeble.runtime.linkshaper import Fate, LinkShape, ShapedQueue


async def _pump(q: ShapedQueue[int], n: int, size: int = 100,
                spacing: float = 0.0) -> list[tuple[int, float]]:
    """Put n items (optionally spaced in time) and collect (item, latency) as they come out."""
    loop = asyncio.get_running_loop()
    sent: dict[int, float] = {}
    out: list[tuple[int, float]] = []

    async def producer() -> None:
        for i in range(n):
            sent[i] = loop.time()
            q.put(i, size)
            if spacing:
                await asyncio.sleep(spacing)

    async def consumer() -> None:
        expected = None
        while True:
            item = await q.get()
            out.append((item, loop.time() - sent[item]))
            expected = n - 1
            if item == expected and not len(q):
                return

    prod = asyncio.create_task(producer())
    try:
        async with asyncio.timeout(20):
            await consumer()
    except TimeoutError:
        pass
    await prod
    return out


def test_shape_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="loss"):
        LinkShape(loss=1.5)
    with pytest.raises(ValueError, match="delay_ms"):
        LinkShape(delay_ms=-1)
    with pytest.raises(ValueError, match=r"unknown link parameter.*bogus"):
        LinkShape().updated(bogus=1.0)
    assert LinkShape().updated(delay_ms=5, loss=None) == LinkShape(delay_ms=5)


def test_delay() -> None:
    q: ShapedQueue[int] = ShapedQueue(LinkShape(delay_ms=30))
    out = asyncio.run(_pump(q, 50, spacing=0.002))
    latencies = [lat for _, lat in out]
    assert [i for i, _ in out] == list(range(50))
    assert min(latencies) >= 0.029
    assert statistics.median(latencies) < 0.045


def test_jitter_keeps_fifo() -> None:
    q: ShapedQueue[int] = ShapedQueue(LinkShape(delay_ms=20, jitter_ms=15),
                                      rng=random.Random(1))
    out = asyncio.run(_pump(q, 200, spacing=0.001))
    assert [i for i, _ in out] == list(range(200))  # never reordered
    latencies = [lat for _, lat in out]
    assert min(latencies) >= 0.004  # delay - jitter
    assert statistics.pstdev(latencies) > 0.002  # it does jitter


def test_loss_rate() -> None:
    q: ShapedQueue[int] = ShapedQueue(LinkShape(loss=0.3), rng=random.Random(2))
    fates = [q.put(i, 10) for i in range(5000)]
    lost = fates.count(Fate.LOST) / len(fates)
    assert 0.27 < lost < 0.33
    assert q.counters["lost"] == fates.count(Fate.LOST)
    assert len(q) == 5000 - fates.count(Fate.LOST)


def test_duplication_rate_and_order() -> None:
    q: ShapedQueue[int] = ShapedQueue(LinkShape(duplicate=0.2), rng=random.Random(3))

    async def scenario() -> list[int]:
        fates = [q.put(i, 10) for i in range(2000)]
        dup = fates.count(Fate.DUPLICATED) / len(fates)
        assert 0.17 < dup < 0.23
        return [await q.get() for _ in range(len(q))]

    items = asyncio.run(scenario())
    assert items == sorted(items)  # duplicates follow their original: FIFO holds
    assert len(items) - len(set(items)) == q.counters["duplicated"]


def test_rate_limits_throughput() -> None:
    # 100 messages of 1250 bytes = 1 Mbit at 10 Mbit/s: about 0.1 s
    q: ShapedQueue[int] = ShapedQueue(LinkShape(rate_bps=10_000_000))

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(100):
            q.put(i, 1250)
        for _ in range(100):
            await q.get()
        return loop.time() - start

    elapsed = asyncio.run(scenario())
    assert 0.095 <= elapsed < 0.3


def test_overflow_is_counted() -> None:
    q: ShapedQueue[int] = ShapedQueue(limit=10)
    fates = [q.put(i) for i in range(15)]
    assert fates.count(Fate.OVERFLOW) == 5 and len(q) == 10
    assert q.counters["overflow"] == 5


def test_shape_changes_at_run_time() -> None:
    q: ShapedQueue[int] = ShapedQueue()

    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        t = loop.time()
        q.put(1)
        await q.get()
        fast = loop.time() - t
        q.shape = q.shape.updated(delay_ms=50)
        t = loop.time()
        q.put(2)
        await q.get()
        return fast, loop.time() - t

    fast, slow = asyncio.run(scenario())
    assert fast < 0.02 and slow >= 0.049


def test_put_sized_admits_what_put_admits() -> None:
    one: ShapedQueue[bytes] = ShapedQueue(limit=10, byte_limit=500)
    many: ShapedQueue[bytes] = ShapedQueue(limit=10, byte_limit=500)
    items = [bytes(30 + 7 * i) for i in range(12)]
    fates = [one.put(item, len(item)) for item in items[:6]]
    assert many.put_sized([(item, len(item)) for item in items[:6]]) == 6
    # the byte limit cuts the next batch short, counted as overflow
    fates += [one.put(item, len(item)) for item in items[6:]]
    admitted = many.put_sized([(item, len(item)) for item in items[6:]])
    assert fates.count(Fate.SENT) == 6 + admitted < 12
    assert many.take_due(20) == one.take_due(20) == items[:6 + admitted]
    assert many.counters == one.counters and many.bytes == one.bytes == 0
    shaped: ShapedQueue[bytes] = ShapedQueue(LinkShape(delay_ms=1))
    with pytest.raises(AssertionError):
        shaped.put_sized([(b"x", 1)])
