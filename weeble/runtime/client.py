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
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from weeble.codec.wire import notification_from_pb, notification_to_pb, publish_request
from weeble.core.filters import Value
from weeble.core.messages import Notification
from weeble.proto.v1 import client_pb2, client_pb2_grpc
from weeble.runtime.clientauth import TOKEN_KEY
from weeble.trace.writer import LiveSink

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
PERMANENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
                       grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED})
PUBLISH_STREAM = "/weeble.v1.Client/PublishStream"
_REQUEST_SLACK = 1024  # the PublishRequest's own fields around its notifications

log = logging.getLogger(__name__)


def credentials(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """The gRPC metadata that proves a client's id to a broker that authenticates its clients
    (the token the run gave this client); None for a broker in the open mode."""
    return ((TOKEN_KEY, token),) if token else None


@dataclass(frozen=True, slots=True)
class ClientTls:
    """TLS to brokers whose listen port requires it (a run with `live.tls`): the run's CA and
    the run's client certificate and key (PEM). The certificate admits the client to the port;
    its id is still proved by its token."""

    ca: bytes
    cert: bytes
    key: bytes

    @classmethod
    def from_files(cls, ca: Any, cert: Any, key: Any) -> ClientTls:
        from pathlib import Path

        return cls(Path(ca).read_bytes(), Path(cert).read_bytes(), Path(key).read_bytes())

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def _channel(target: str, tls: ClientTls | None = None) -> grpc.aio.Channel:
    options = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
        # notice a broker that went silent (stopped, partitioned) on an open stream
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if tls is not None:
        return grpc.aio.secure_channel(target, tls.credentials(), options=options)
    return grpc.aio.insecure_channel(target, options=options)


@dataclass(frozen=True, slots=True)
class Delivery:
    sub_id: str
    notification: Notification


# ---- publisher ------------------------------------------------------------------------------


class Publisher:
    """Publishes over one PublishStream: notifications are written in order, in batches of
    what is waiting (up to max_batch and max_batch_bytes), and the broker's cumulative
    acknowledgements complete them (see PublishAck in proto/weeble/v1/client.proto for what
    an acknowledgement promises).

    Batching is Nagle's, with the broker's acknowledgement as TCP's ACK: a request goes out
    at once when every request before it is acknowledged, and what is sent meanwhile waits
    for that acknowledgement and leaves as one request (a full batch leaves at once). No
    timer holds anything: an idle stream costs no latency, and a broker that falls behind
    gets fewer, larger requests, whose batches its links and streams carry on (at 1,000/s
    through a chain of 3 one request per notification kept every hop at one gRPC message per
    notification and the chain saturated: docs/performance.md, issue 25 item 2, stop 36).
    `nodelay=True` (TCP_NODELAY's name) writes what is waiting as soon as the previous
    request is written, acknowledged or not (this class before stop 36).

    `publish`/`publish_many` wait for the acknowledgement; `send` only queues (at most
    `window` notifications may be unacknowledged) and `flush` waits for everything sent. A
    broken stream fails every notification not yet acknowledged with its error (they may or
    may not have reached the broker: never publish them again under the same seq); the next
    call opens a new stream. A stream that acknowledges nothing a call waits for within
    `timeout` counts as broken too: that call raises TimeoutError.
    """

    def __init__(self, target: str, publisher_id: str, *, token: str | None = None,
                 start_seq: int = 1, trace: LiveSink | None = None, timeout: float = 10.0,
                 max_batch: int = 256, max_batch_bytes: int = MAX_MESSAGE_BYTES,
                 window: int = 10_000, tls: ClientTls | None = None,
                 nodelay: bool = False) -> None:
        if max_batch < 1 or window < 1:
            raise ValueError("max_batch and window: must be >= 1")
        self.target = target
        self.tls = tls
        self.publisher_id = publisher_id
        self._metadata = credentials(token)
        self.next_seq = start_seq
        self.timeout = timeout
        self.max_batch = max_batch
        self.max_batch_bytes = max(1, max_batch_bytes - _REQUEST_SLACK)
        self.window = window
        self.nodelay = nodelay
        self._trace = trace
        self._channel: grpc.aio.Channel | None = None
        self._queued: deque[tuple[Notification, bytes]] = deque()  # not yet written
        self._queued_bytes = 0  # their size in a request
        self._inflight: deque[tuple[int, list[Notification]]] = deque()  # (stream count, ...)
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()  # (count, future)
        self._enqueued = 0  # notifications handed to this publisher (since the last failure)
        # notifications that broken streams left unacknowledged, and the last such error:
        # `send` alone never raises for them, so a caller that only sends can still tell
        self.unacknowledged = 0
        self.last_error: BaseException | None = None
        self._acked = 0
        self._stream_base = 0  # self._acked when the current stream opened
        self._stream_sent = 0  # notifications written on the current stream
        self._call: Any = None
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._writing: Any = None  # the stream the writer is writing on (awaiting its write)
        self._reader: asyncio.Task[None] | None = None

    # ---- API --------------------------------------------------------------------------------

    async def publish(self, attributes: Mapping[str, Value]) -> Notification:
        """Publish one notification and wait until the broker has accepted it."""
        return (await self.publish_many([attributes]))[0]

    async def publish_many(self, batch: Iterable[Mapping[str, Value]]) -> list[Notification]:
        """Publish several notifications in order and wait until the broker has accepted them
        all; returns them with their seqs."""
        notifications = [await self.send(a) for a in batch]
        if notifications:
            await self._wait_acked(self._enqueued)
        return notifications

    async def send(self, attributes: Mapping[str, Value]) -> Notification:
        """Queue one notification for publishing (waits only while `window` notifications are
        unacknowledged); `flush` reports whether it was accepted."""
        while self._enqueued - self._acked >= self.window:
            self._room.clear()
            try:
                async with asyncio.timeout(self.timeout):
                    await self._room.wait()
            except TimeoutError:
                raise self._give_up() from None
        n = Notification(self.publisher_id, self.next_seq, dict(attributes), time.time())
        wire = notification_to_pb(n).SerializeToString()
        self.next_seq += 1
        self._queued.append((n, wire))
        self._queued_bytes += len(wire) + 6  # as a request frames it
        self._enqueued += 1
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_forever(), name="publish-writer")
        return n

    @property
    def pending(self) -> int:
        """Notifications sent and not (yet) acknowledged."""
        return self._enqueued - self._acked

    async def flush(self) -> None:
        """Wait until every notification sent so far is acknowledged (or raise the error that
        ended the stream)."""
        if self._enqueued > self._acked:
            await self._wait_acked(self._enqueued)

    async def _wait_acked(self, count: int) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((count, future))
        try:
            async with asyncio.timeout(self.timeout):
                await future
        except TimeoutError:
            raise self._give_up() from None

    def _give_up(self) -> TimeoutError:
        """No acknowledgement within `timeout`: the current stream counts as broken (a waiter
        still waiting means no stream failed since it was sent, so the current one carries
        it). Kept, it would hold everything sent later behind its unacknowledged request
        (Nagle) for good; failed, the next call opens a new stream. Returns the error to
        raise: it names the publisher, the broker and the timeout (asyncio's says nothing)."""
        error = TimeoutError(f"publisher {self.publisher_id}: no acknowledgement from"
                             f" {self.target} within {self.timeout:g} s")
        self._fail(self._call, error)
        return error

    # ---- the stream -------------------------------------------------------------------------

    def _open(self) -> Any:
        if self._channel is None:
            self._channel = _channel(self.target, self.tls)
        call = self._channel.stream_stream(
            PUBLISH_STREAM, request_serializer=None,
            response_deserializer=client_pb2.PublishAck.FromString)(metadata=self._metadata)
        self._call = call
        self._stream_base, self._stream_sent = self._acked, 0
        self._reader = asyncio.create_task(self._read_acks(call), name="publish-acks")
        return call

    async def _write_forever(self) -> None:
        while True:
            # Nagle: wait for something to write, and while a request is unacknowledged, for
            # its acknowledgement or a full batch
            while not self._queued or (self._inflight and not self.nodelay
                                       and len(self._queued) < self.max_batch
                                       and self._queued_bytes < self.max_batch_bytes):
                self._wake.clear()
                await self._wake.wait()
            call = self._call or self._open()
            batch: list[tuple[Notification, bytes]] = [self._queued.popleft()]
            size = len(batch[0][1])
            while self._queued and len(batch) < self.max_batch:
                n = len(self._queued[0][1]) + 6
                if size + n > self.max_batch_bytes:
                    break
                size += n
                batch.append(self._queued.popleft())
            self._queued_bytes -= sum(len(w) + 6 for _, w in batch)
            self._stream_sent += len(batch)
            self._inflight.append((self._stream_sent, [n for n, _ in batch]))
            self._writing = call
            try:
                await call.write(publish_request(self.publisher_id, [w for _, w in batch]))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError) as e:
                self._writing = None
                self._fail(call, e)
            finally:
                if self._writing is call:
                    self._writing = None

    async def _read_acks(self, call: Any) -> None:
        try:
            while (ack := await call.read()) is not grpc.aio.EOF:
                self._advance(self._stream_base + ack.accepted)
            error: BaseException = RuntimeError("the broker ended the publish stream")
        except grpc.aio.AioRpcError as e:
            error = e
        self._fail(call, error)

    def _advance(self, acked: int) -> None:
        while self._inflight and self._stream_base + self._inflight[0][0] <= acked:
            _, notifications = self._inflight.popleft()
            if self._trace is not None:
                for n in notifications:
                    self._trace.record("client_publish", nid=n.id, publisher=n.publisher,
                                       seq=n.seq, published_at=n.published_at)
        self._acked = max(self._acked, acked)
        while self._waiters and self._waiters[0][0] <= self._acked:
            _, future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
        self._room.set()
        if not self._inflight and self._queued:
            self._wake.set()  # what waited for this acknowledgement goes now

    def _fail(self, call: Any, error: BaseException) -> None:
        """The stream `call` broke: nothing unacknowledged on it will be; start afresh."""
        if call is not self._call:
            return  # an older stream, already failed
        self._call = None
        if self._writing is not None and self._writing is call and self._writer is not None:
            # the writer waits on this stream's write, which may never complete (gRPC's write
            # first waits for the call's initial metadata to go out): a new writer, on the
            # next stream, takes over what is sent next
            self._writer.cancel()
            self._writer = None
            self._writing = None
        if self._inflight or self._queued:
            log.debug("publisher %s: stream failed with %d unacknowledged: %s",
                      self.publisher_id, self._enqueued - self._acked, error)
        self._inflight.clear()
        self._queued.clear()
        self._queued_bytes = 0
        if self._enqueued > self._acked:
            self.unacknowledged += self._enqueued - self._acked
            self.last_error = error
        self._enqueued = self._acked
        while self._waiters:
            _, future = self._waiters.popleft()
            if not future.done():
                future.set_exception(error)
        self._room.set()
        with contextlib.suppress(Exception):
            call.cancel()

    async def close(self) -> None:
        for task in (self._writer, self._reader):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._writer, self._reader) if t is not None),
                             return_exceptions=True)
        self._writer = self._reader = None
        if self._call is not None:
            self._fail(self._call, RuntimeError("publisher closed"))
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> Publisher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---- subscriber -----------------------------------------------------------------------------


REFRESH_MARGIN = 0.01  # refresh rounds are due this fraction of ρ early (see _refresh_forever)


def _event(*, is_set: bool) -> asyncio.Event:
    event = asyncio.Event()
    if is_set:
        event.set()
    return event


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
    # Held while a Refresh or the Unsubscribe of this subscription is in flight: the two are
    # separate unary calls, and the broker re-creates a subscription it receives a refresh of
    # (a refresh is a subscribe, SC-4). A refresh sent just before the unsubscribe but served
    # after it resurrected the subscription at the broker, until its lease ran out (seen in
    # the main job under load). The client-broker channel is FIFO in the model; this makes it so.
    rpc: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Clear while a Subscribe stream is being opened and the broker has not answered it. The
    # Unsubscribe waits for the answer: a stream sent before it but served after it made the
    # broker hold the subscription with no stream until its lease ran out (seen live in the
    # paper workload: every matching notification undeliverable, and counted missing).
    settled: asyncio.Event = field(default_factory=lambda: _event(is_set=True))


class Subscriber:
    def __init__(
        self,
        target: str,
        client_id: str,
        *,
        rho: float,
        token: str | None = None,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
        queue_limit: int = 100_000,
        max_batch: int = 256,
        trace: LiveSink | None = None,
        on_status: Callable[[str], None] | None = None,
        tls: ClientTls | None = None,
        first_refresh: float | None = None,
    ) -> None:
        """first_refresh: s from the first subscription to the first refresh round (then every
        ρ); default ρ. The workload plan gives each subscriber its phase, as the simulator has
        it, so that a live replay of a simulated run refreshes when the simulated one did.

        max_batch: the broker may send up to this many waiting notifications in one stream
        message (1 = never batch); batching never holds a notification back. Batches are never
        larger than this client's maximum message size, which the request states.

        on_status: called with a sentence when a subscription's stream to the broker is lost
        (and when the next attempt is due) and when it is open again; the Subscriber
        reconnects by itself, with exponential backoff between reconnect_min and
        reconnect_max seconds."""
        if rho <= 0:
            raise ValueError(f"rho: must be > 0, got {rho}")
        self.target = target
        self.tls = tls
        self.client_id = client_id
        self._metadata = credentials(token)
        self.rho = rho
        if first_refresh is not None and not 0 <= first_refresh <= rho:
            raise ValueError(f"first_refresh: must be in [0, rho], got {first_refresh}")
        self.first_refresh = rho if first_refresh is None else first_refresh
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
        self._on_status = on_status
        self.dropped = 0  # deliveries lost because the local queue was full

    def _client(self) -> client_pb2_grpc.ClientStub:
        if self._stub is None:
            self._channel = _channel(self.target, self.tls)
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
        sub.unsubscribed = True  # no refresh or new stream of it starts from now on
        with contextlib.suppress(TimeoutError):  # the broker has answered the stream sent
            async with asyncio.timeout(10):
                await sub.settled.wait()
        async with sub.rpc:  # the broker has served any refresh already sent
            await self._client().Unsubscribe(
                client_pb2.UnsubscribeRequest(client=self.client_id, sub_id=sub_id,
                                              filter=sub.filter),
                timeout=10, metadata=self._metadata,
            )
        if sub.task is not None:
            sub.task.cancel()

    async def _stream(self, sub: _Subscription) -> None:
        request = client_pb2.SubscribeRequest(client=self.client_id, sub_id=sub.sub_id,
                                              filter=sub.filter, max_batch=self.max_batch,
                                              max_batch_bytes=MAX_MESSAGE_BYTES)
        try:
            await self._streams(sub, request)
        finally:
            sub.settled.set()
            sub.acked.set()  # a subscribe() still waiting returns (unsubscribed or closed)

    async def _streams(self, sub: _Subscription, request: client_pb2.SubscribeRequest) -> None:
        failures = 0
        lost = False
        while not sub.unsubscribed and not self._closed:
            why = "the broker ended the stream"
            try:
                sub.settled.clear()
                call = self._client().Subscribe(request, metadata=self._metadata)
                sub.streams_opened += 1
                async for event in call:
                    if event.HasField("subscribed"):
                        sub.up, failures = True, 0
                        sub.settled.set()
                        sub.acked.set()
                        if lost:
                            lost = False
                            self._status(f"subscription {sub.sub_id}: reconnected to"
                                         f" {self.target} (broker {event.subscribed.broker_id}),"
                                         " subscribed again")
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
                why = f"{e.code().name}: {e.details()}"
                log.debug("subscription %s: stream broke: %s", sub.sub_id, why)
            sub.settled.set()  # this attempt is over: the broker answered it, or never will
            was_up, sub.up = sub.up, False
            if sub.unsubscribed or self._closed:
                return
            failures += 1
            delay = min(self.reconnect_max, self.reconnect_min * 2 ** min(failures, 16))
            delay *= random.uniform(0.5, 1.0)
            if was_up or lost:
                lost = True
                self._status(f"subscription {sub.sub_id}: lost broker {self.target} ({why});"
                             f" reconnecting in {delay:.1f} s (attempt {failures})")
            await asyncio.sleep(delay)

    def _status(self, text: str) -> None:
        log.info("%s", text)
        if self._on_status is not None:
            try:
                self._on_status(text)
            except Exception:  # a reporting callback must not end the subscription
                log.exception("on_status callback failed")

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
        """SC-4: re-issue every active subscription once per ρ. The rounds keep a fixed
        rhythm (due every ρ from the first): sleeping ρ after each round made every gap ρ plus
        the round's own time, more than ρ (+ τ) on a loaded machine, a timing violation (R13b)
        in every live run. A round more than a period late starts the rhythm afresh (no burst).
        Every round is due REFRESH_MARGIN·ρ (at most 0.5 s) early: ρ bounds the
        gap from above, and a round due exactly at ρ exceeds it by whatever the loop is late
        (29 ms, 19 times, with 1,000 clients on one runner in the paper workload)."""
        loop = asyncio.get_running_loop()
        margin = min(REFRESH_MARGIN * self.rho, 0.5)
        period = self.rho - margin
        due = loop.time() + max(0.0, self.first_refresh - margin)
        while not self._closed:
            await asyncio.sleep(max(0.0, due - loop.time()))
            due += period
            if due < loop.time():
                due = loop.time() + period
            subs = [s for s in self._subs.values() if not s.unsubscribed and s.error is None]
            await asyncio.gather(*(self._refresh(s) for s in subs))

    async def _refresh(self, sub: _Subscription) -> None:
        request = client_pb2.SubscribeRequest(client=self.client_id, sub_id=sub.sub_id,
                                              filter=sub.filter)
        async with sub.rpc:
            if sub.unsubscribed:  # unsubscribed while this round waited: never after it
                return
            try:
                await self._client().Refresh(request, timeout=max(self.rho, 1.0),
                                             metadata=self._metadata)
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
                 start_seq: int = 1, token: str | None = None,
                 tls: ClientTls | None = None) -> list[Notification]:
    """Publish notifications from synchronous code (one RPC); returns them with their seqs."""

    async def run() -> list[Notification]:
        async with Publisher(target, publisher_id, start_seq=start_seq, token=token,
                             tls=tls) as pub:
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
    token: str | None = None,
    tls: ClientTls | None = None,
) -> Iterator[Delivery]:
    """Yield deliveries of one subscription from synchronous code (a background loop thread
    runs the Subscriber). Stops after max_count deliveries, after `timeout` seconds, or when
    the caller closes the generator; raises the broker's error if subscribing fails."""
    out: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    done = object()

    async def run() -> None:
        async with Subscriber(target, client_id, rho=rho, token=token, tls=tls) as sub:
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
