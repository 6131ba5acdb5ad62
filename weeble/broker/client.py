"""Client library for live brokers: Publisher, Subscriber, and sync wrappers for the CLI.

A `Subscriber` keeps one Subscribe stream per subscription, refreshes every subscription's lease
once per ρ with a Refresh RPC (SC-4: a client that stops refreshing loses its subscriptions
within 2π), and after a broken stream (broker restart, network) reopens it with backoff, which
re-subscribes. A `Publisher` numbers its notifications 1, 2, 3, ... (per-publisher sequence
numbers, the ids the analytics join on).

    async with Subscriber("127.0.0.2:7000", "alice", rho=1.0) as sub:
        await sub.subscribe('temp > 30 && city == "Oslo"')
        async for delivery in sub:
            print(delivery.sub_id, delivery.notification)

    async with Publisher("127.0.0.2:7000", "sensor-1") as pub:
        await pub.publish({"temp": 31.5, "city": "Oslo"})
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import random
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from weeble.broker.core.filters import Value
from weeble.broker.core.messages import Notification
from weeble.broker.runtime.wire import notification_from_pb, notification_to_pb
from weeble.proto.v1 import client_pb2, client_pb2_grpc
from weeble.trace.writer import LiveSink

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
PERMANENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
                       grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED})

log = logging.getLogger(__name__)


def _channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=[
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ])


@dataclass(frozen=True, slots=True)
class Delivery:
    sub_id: str
    notification: Notification


# ---- publisher ------------------------------------------------------------------------------


class Publisher:
    def __init__(self, target: str, publisher_id: str, *, start_seq: int = 1,
                 trace: LiveSink | None = None, timeout: float = 10.0) -> None:
        self.target = target
        self.publisher_id = publisher_id
        self.next_seq = start_seq
        self.timeout = timeout
        self._trace = trace
        self._channel: grpc.aio.Channel | None = None
        self._stub: client_pb2_grpc.ClientStub | None = None

    def _client(self) -> client_pb2_grpc.ClientStub:
        if self._stub is None:
            self._channel = _channel(self.target)
            self._stub = client_pb2_grpc.ClientStub(self._channel)
        return self._stub

    async def publish(self, attributes: Mapping[str, Value]) -> Notification:
        return (await self.publish_many([attributes]))[0]

    async def publish_many(self, batch: Iterable[Mapping[str, Value]]) -> list[Notification]:
        """Publish several notifications in one RPC (in order); returns them with their seqs."""
        now = time.time()
        notifications = []
        for attributes in batch:
            notifications.append(
                Notification(self.publisher_id, self.next_seq, dict(attributes), now)
            )
            self.next_seq += 1
        request = client_pb2.PublishRequest(
            client=self.publisher_id,
            notifications=[notification_to_pb(n) for n in notifications],
        )
        await self._client().Publish(request, timeout=self.timeout)
        if self._trace is not None:
            for n in notifications:
                self._trace.record("client_publish", nid=n.id, publisher=n.publisher, seq=n.seq,
                                   published_at=n.published_at)
        return notifications

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None

    async def __aenter__(self) -> Publisher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---- subscriber -----------------------------------------------------------------------------


@dataclass(eq=False)
class _Subscription:
    sub_id: str
    filter: str
    acked: asyncio.Event = field(default_factory=asyncio.Event)
    error: grpc.aio.AioRpcError | None = None
    up: bool = False
    unsubscribed: bool = False
    task: asyncio.Task[None] | None = None
    streams_opened: int = 0


class Subscriber:
    def __init__(
        self,
        target: str,
        client_id: str,
        *,
        rho: float,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
        queue_limit: int = 100_000,
        max_batch: int = 256,
        trace: LiveSink | None = None,
    ) -> None:
        """max_batch: the broker may send up to this many waiting notifications in one stream
        message (1 = never batch); batching never holds a notification back."""
        if rho <= 0:
            raise ValueError(f"rho: must be > 0, got {rho}")
        self.target = target
        self.client_id = client_id
        self.rho = rho
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.max_batch = max_batch
        self._trace = trace
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue(queue_limit)
        self._subs: dict[str, _Subscription] = {}
        self._ids = itertools.count(1)
        self._channel: grpc.aio.Channel | None = None
        self._stub: client_pb2_grpc.ClientStub | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0  # deliveries lost because the local queue was full

    def _client(self) -> client_pb2_grpc.ClientStub:
        if self._stub is None:
            self._channel = _channel(self.target)
            self._stub = client_pb2_grpc.ClientStub(self._channel)
        return self._stub

    @property
    def subscriptions(self) -> dict[str, str]:
        return {s.sub_id: s.filter for s in self._subs.values() if not s.unsubscribed}

    async def subscribe(self, filter_text: str, sub_id: str | None = None, *,
                        timeout: float | None = 10.0) -> str:
        """Open a subscription and wait until the broker has it (or raise its error)."""
        if self._closed:
            raise RuntimeError("subscriber is closed")
        sub_id = sub_id or f"{self.client_id}.{next(self._ids)}"
        if sub_id in self._subs and not self._subs[sub_id].unsubscribed:
            raise ValueError(f"sub_id {sub_id!r} is already active")
        sub = _Subscription(sub_id, filter_text)
        self._subs[sub_id] = sub
        sub.task = asyncio.create_task(self._stream(sub), name=f"sub-{sub_id}")
        if self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_forever(), name="refresh")
        if timeout is None or timeout > 0:
            async with asyncio.timeout(timeout):
                await sub.acked.wait()
            if sub.error is not None:
                del self._subs[sub_id]
                raise sub.error
        return sub_id

    async def unsubscribe(self, sub_id: str) -> None:
        sub = self._subs.get(sub_id)
        if sub is None or sub.unsubscribed:
            raise KeyError(f"no active subscription {sub_id!r}")
        sub.unsubscribed = True
        await self._client().Unsubscribe(
            client_pb2.UnsubscribeRequest(client=self.client_id, sub_id=sub_id,
                                          filter=sub.filter),
            timeout=10,
        )
        if sub.task is not None:
            sub.task.cancel()

    async def _stream(self, sub: _Subscription) -> None:
        failures = 0
        request = client_pb2.SubscribeRequest(client=self.client_id, sub_id=sub.sub_id,
                                              filter=sub.filter, max_batch=self.max_batch)
        while not sub.unsubscribed and not self._closed:
            try:
                call = self._client().Subscribe(request)
                sub.streams_opened += 1
                async for event in call:
                    if event.HasField("subscribed"):
                        sub.up, failures = True, 0
                        sub.acked.set()
                    elif event.HasField("notification"):
                        self._push(sub.sub_id, event.notification)
                    elif event.HasField("batch"):
                        for pb in event.batch.notifications:
                            self._push(sub.sub_id, pb)
                # the broker ended the stream: unsubscribed, superseded or shutting down
            except grpc.aio.AioRpcError as e:
                if e.code() in PERMANENT:
                    sub.error = e
                    sub.acked.set()
                    return
                log.debug("subscription %s: stream broke: %s", sub.sub_id, e.code())
            sub.up = False
            if sub.unsubscribed or self._closed:
                return
            failures += 1
            delay = min(self.reconnect_max, self.reconnect_min * 2 ** min(failures, 16))
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))

    def _push(self, sub_id: str, pb: client_pb2.Notification) -> None:
        try:
            n = notification_from_pb(pb)
        except ValueError as e:
            log.warning("subscription %s: undecodable notification: %s", sub_id, e)
            return
        if self._trace is not None:
            self._trace.record("client_deliver", client=self.client_id, sub_id=sub_id, nid=n.id,
                               publisher=n.publisher, seq=n.seq, published_at=n.published_at)
        try:
            self._queue.put_nowait(Delivery(sub_id, n))
        except asyncio.QueueFull:
            self.dropped += 1

    async def _refresh_forever(self) -> None:
        """SC-4: re-issue every active subscription once per ρ."""
        while not self._closed:
            await asyncio.sleep(self.rho)
            subs = [s for s in self._subs.values() if not s.unsubscribed and s.error is None]
            await asyncio.gather(*(self._refresh(s) for s in subs))

    async def _refresh(self, sub: _Subscription) -> None:
        request = client_pb2.SubscribeRequest(client=self.client_id, sub_id=sub.sub_id,
                                              filter=sub.filter)
        try:
            await self._client().Refresh(request, timeout=max(self.rho, 1.0))
        except grpc.aio.AioRpcError as e:  # the stream's reconnect will resubscribe
            log.debug("refresh of %s failed: %s", sub.sub_id, e.code())

    async def get(self, timeout: float | None = None) -> Delivery:
        async with asyncio.timeout(timeout):
            return await self._queue.get()

    def pending(self) -> list[Delivery]:
        """Deliveries received and not consumed yet (without waiting)."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        return await self._queue.get()

    async def close(self, *, unsubscribe: bool = False) -> None:
        """Stop refreshing and close the streams. Without `unsubscribe` this is what a crash
        looks like to the brokers: the leases run out within 2π."""
        if unsubscribe:
            for sub_id in list(self.subscriptions):
                with contextlib.suppress(grpc.aio.AioRpcError, KeyError):
                    await self.unsubscribe(sub_id)
        self._closed = True
        tasks = [s.task for s in self._subs.values() if s.task is not None]
        if self._refresher is not None:
            tasks.append(self._refresher)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None

    async def __aenter__(self) -> Subscriber:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---- sync wrappers (CLI) --------------------------------------------------------------------


def publish_sync(target: str, publisher_id: str, batch: Iterable[Mapping[str, Value]], *,
                 start_seq: int = 1) -> list[Notification]:
    """Publish notifications from synchronous code (one RPC); returns them with their seqs."""

    async def run() -> list[Notification]:
        async with Publisher(target, publisher_id, start_seq=start_seq) as pub:
            return await pub.publish_many(list(batch))

    return asyncio.run(run())


def subscribe_sync(
    target: str,
    client_id: str,
    filter_text: str,
    *,
    rho: float,
    max_count: int | None = None,
    timeout: float | None = None,
    unsubscribe_at_end: bool = True,
) -> Iterator[Delivery]:
    """Yield deliveries of one subscription from synchronous code (a background loop thread
    runs the Subscriber). Stops after max_count deliveries, after `timeout` seconds, or when
    the caller closes the generator; raises the broker's error if subscribing fails."""
    out: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    done = object()

    async def run() -> None:
        async with Subscriber(target, client_id, rho=rho) as sub:
            try:
                await sub.subscribe(filter_text)
            except BaseException as e:
                out.put(e)
                return
            try:
                while not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        out.put(await sub.get(timeout=0.1))
            finally:
                if unsubscribe_at_end:
                    await sub.close(unsubscribe=True)

    def thread_main() -> None:
        try:
            asyncio.run(run())
        except BaseException as e:
            out.put(e)
        finally:
            out.put(done)

    thread = threading.Thread(target=thread_main, name=f"subscribe-{client_id}", daemon=True)
    thread.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    count = 0
    try:
        while max_count is None or count < max_count:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return
            try:
                item = out.get(timeout=wait)
            except queue.Empty:
                return
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            count += 1
            yield item
    finally:
        stop.set()
        thread.join(timeout=15)
