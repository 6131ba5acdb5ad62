"""What the broker's services keep and queue, without gRPC: `ClientService.prune` forgets
exactly the subscriptions last seen before its cutoff that have no open stream, reading only
those; a link's batched send queues what one send per notification queues."""

from __future__ import annotations

import random
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from weeble.codec.wire import decode_notification, encode_notification
from weeble.core.events import Event
from weeble.core.filters import Filter
from weeble.core.messages import Notification, Notify, Sub
from weeble.runtime import client_service
from weeble.runtime.client_service import ClientService, SubStream
from weeble.runtime.config import BrokerConfig
from weeble.runtime.links import Link
from weeble.runtime.metrics import Metrics
from weeble.trace.reader import read_trace
from weeble.trace.writer import LiveSink


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(client_service, "time", types.SimpleNamespace(monotonic=c.monotonic,
                                                                      time=c.monotonic))
    return c


def service(stepped: list[Event], trace: LiveSink | None = None) -> ClientService:
    def step(event: Event, n: Notification | None, wire: bytes | None) -> bool:
        stepped.append(event)
        return True

    return ClientService("b0", lambda name: False, step, lambda client, accepted: None,
                         trace or LiveSink(None, "b0"), Metrics("b0"), queue_limit=10,
                         queue_bytes=10_000, max_message_bytes=1 << 20, client_secret=None)


def open_stream(svc: ClientService, client: str, sub_id: str) -> None:
    svc.streams.setdefault(client, {})[sub_id] = SubStream(client, sub_id, Filter.parse("x == 1"),
                                                           limit=10, byte_limit=10_000)


def test_prune_forgets_the_stale_subscriptions_without_a_stream(clock: Clock) -> None:
    stepped: list[Event] = []
    svc = service(stepped)
    f = Filter.parse("x == 1")
    for i, sub in enumerate(("a", "b", "c")):
        clock.t = 100.0 + i
        svc._subscribe("c1", sub, f, op="subscribe")
    clock.t = 103.0
    svc._subscribe("c1", "a", f, op="refresh")  # a: seen last, though subscribed first
    open_stream(svc, "c1", "b")
    clock.t = 104.5
    assert svc.prune(2.0) == 1  # c (seen at 102); b (101) has its stream, a was refreshed
    assert svc.known_subscriptions() == 2
    clock.t = 110.0
    assert svc.prune(2.0) == 1  # a now; b still streams
    del svc.streams["c1"]
    assert svc.prune(2.0) == 1 and svc.known_subscriptions() == 0
    # forgotten: the next request for c subscribes again (a `subscribe`, not a `refresh`)
    assert len(stepped) == 4


def test_prune_agrees_with_a_scan_of_every_subscription(clock: Clock) -> None:
    rng = random.Random(7)
    svc = service([])
    f = Filter.parse("x == 1")
    seen: dict[tuple[str, str], float] = {}
    for _ in range(2_000):
        clock.t += rng.random()
        key = (f"c{rng.randrange(5)}", f"s{rng.randrange(40)}")
        op = rng.random()
        if op < 0.6:
            svc._subscribe(*key, f, op="refresh")
            seen[key] = clock.t
        elif op < 0.7:
            open_stream(svc, *key)
        elif op < 0.8:
            svc.streams.get(key[0], {}).pop(key[1], None)
        else:
            older = rng.uniform(0, 30)
            cutoff = clock.t - older
            expected = {k for k, t in seen.items()
                        if t < cutoff and k[1] not in svc.streams.get(k[0], {})}
            assert svc.prune(older) == len(expected)
            for k in expected:
                del seen[k]
            assert set(svc._filters) == set(seen)


def test_a_links_batched_send_queues_what_send_queues(
        configs: Callable[..., BrokerConfig]) -> None:
    cfg = configs("a", neighbors={"b": "127.0.0.1:1"}, trace=False,
                  tuning={"link_queue_limit": 20, "max_message_bytes": 1024})

    def link() -> Link:
        return Link(cfg, "b", receive=lambda *a: None, trace=LiveSink(None, "a"),
                    metrics=Metrics("a"), rng=random.Random(1))

    one, many = link(), link()
    wires = [encode_notification(Notification("p", i, {"x": i, "pad": "y" * (i % 3) * 500}))
             for i in range(50)]
    batch = [(Notify(decode_notification(w)), w) for w in wires]
    for message, wire in batch[:30]:
        one.send(message, wire)
    many.send_notifies(batch[:30])
    one.send(Sub("s", Filter.parse("x == 1")))  # another message between two batches
    many.send(Sub("s", Filter.parse("x == 1")))
    for message, wire in batch[30:]:
        one.send(message, wire)
    many.send_notifies(batch[30:])
    # oversize ones refused (no sequence number spent), the queue's limit overflowed
    assert one.counters["dropped_oversize"] > 0 and one.counters["dropped_overflow"] > 0
    assert many.counters == one.counters
    assert many.queue.take_due(100) == one.queue.take_due(100)
    assert many.queue.counters == one.queue.counters


def test_a_traced_links_batched_send_writes_the_records_send_writes(
        configs: Callable[..., BrokerConfig], tmp_path: Path) -> None:
    cfg = configs("a", neighbors={"b": "127.0.0.1:1"}, trace=False,
                  tuning={"link_queue_limit": 20, "max_message_bytes": 1024})
    wires = [encode_notification(Notification("p", i, {"x": i, "pad": "y" * (i % 3) * 500}))
             for i in range(40)]
    batch = [(Notify(decode_notification(w)), w) for w in wires]
    records = []
    for together in (False, True):
        sink = LiveSink(tmp_path / f"{together}.jsonl", "a")
        link = Link(cfg, "b", receive=lambda *a: None, trace=sink, metrics=Metrics("a"),
                    rng=random.Random(1))
        if together:
            link.send_notifies(batch)
        else:
            for message, wire in batch:
                link.send(message, wire)
        sink.close()
        # one time for the records of a batch, otherwise the same bytes
        records.append([{k: v for k, v in r.items() if k != "t"}
                        for r in read_trace(tmp_path / f"{together}.jsonl")])
    # (a refused message's drop record is written as it is refused, before its batch's sends)
    for kind in ("send", "drop"):
        assert [r for r in records[0] if r["kind"] == kind] == [
            r for r in records[1] if r["kind"] == kind]
    assert len(records[0]) == len(records[1])
    fates = [r["fate"] for r in records[0] if r["kind"] == "send"]
    assert fates.count("queued") == 20 and fates.count("overflow") > 0
    # the ones over the peer's size never entered the queue: a drop each, without an lseq
    drops = [r for r in records[0] if r["kind"] == "drop"]
    assert [(r["seq"], r["reason"]) for r in drops] == [
        (i, "oversize") for i in range(40) if i % 3 == 2]
    assert not any("lseq" in r for r in drops)
    assert link.counters["dropped_oversize"] == len(drops)


@pytest.mark.parametrize("traced", [False, True])
def test_delivering_together_queues_what_delivering_one_by_one_queues(
        traced: bool, tmp_path: Path) -> None:
    """Traced, each queued notification keeps the sub_id whose filter matches it, or None (a
    wrong table delivered it: its `deliver` record has no sub_id), with one stream too."""
    wires = [encode_notification(Notification("p", i, {"x": i})) for i in range(12)]
    items = [(decode_notification(w), w) for w in wires]
    services = []
    for together in (False, True):
        sink = LiveSink(tmp_path / f"{together}.jsonl", "b0") if traced else None
        svc = service([], sink)
        open_stream(svc, "one", "s1")  # a queue of 10: two are stream_full
        open_stream(svc, "two", "s1")  # two streams: the first whose filter matches
        svc.streams["two"]["s2"] = SubStream("two", "s2", Filter.parse("x >= 5"), limit=10,
                                             byte_limit=10_000)
        for client in ("one", "two", "nobody"):
            if together:
                svc.deliver_all(client, items)
            else:
                for n, wire in items:
                    svc.deliver(client, n, wire)
        services.append(svc)
    one_by_one, together = services
    for client, sub_id in (("one", "s1"), ("two", "s1"), ("two", "s2")):
        q1 = one_by_one.streams[client][sub_id].items
        q2 = together.streams[client][sub_id].items
        assert [(w, n.seq, m) for w, n, m in q1] == [(w, n.seq, m) for w, n, m in q2]
    assert len(together.streams["one"]["s1"].items) == 10
    # one stream whose filter (x == 1) matches one of them: untraced, each is queued as its
    # sub_id's; traced, only the one it matches
    assert [m for _, _, m in together.streams["one"]["s1"].items] == (
        [None, "s1", *[None] * 8] if traced else ["s1"] * 10)
    assert together._metrics.counters == one_by_one._metrics.counters
    counters = one_by_one._metrics.counters
    assert counters["undeliverable_stream_full"] == 2 and counters["undeliverable_no_stream"] == 12
    if traced:  # the same undeliverable records (their times aside)
        for svc in services:
            svc._trace.close()
        assert [{k: v for k, v in r.items() if k != "t"}
                for r in read_trace(tmp_path / "False.jsonl")] == [
            {k: v for k, v in r.items() if k != "t"} for r in read_trace(tmp_path / "True.jsonl")]
