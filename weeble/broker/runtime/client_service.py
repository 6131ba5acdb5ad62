"""The Client gRPC service of one broker: publish, subscribe streams, refresh, unsubscribe.

The core names local clients by id and delivers to a client, not to a subscription. A client
may hold several subscribe streams (one per sub_id); a delivery goes to the first of its
streams whose filter matches, else to any of its streams (a corrupted local entry must stay
visible to the analytics as a spurious delivery, not vanish here). With no open stream the
delivery is counted as undeliverable (the client crashed or is reconnecting; its lease runs
out on its own, SC-4).

Every Subscribe RPC and every Refresh RPC is a ClientSubscribe event for the core: the first
one for a (client, sub_id) subscribes, the next ones refresh the lease. Closing a stream does
not unsubscribe: only Unsubscribe does, or lease expiry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import grpc

from weeble.broker.core.events import ClientPublish, ClientSubscribe, ClientUnsubscribe, Event
from weeble.broker.core.filters import Filter, Value
from weeble.broker.core.messages import Notification
from weeble.broker.runtime.metrics import Metrics
from weeble.broker.runtime.wire import (
    WireError,
    notification_from_pb,
    notification_to_pb,
    parse_filter,
)
from weeble.proto.v1 import client_pb2, client_pb2_grpc
from weeble.trace.writer import LiveSink

log = logging.getLogger(__name__)


@dataclass(eq=False)
class SubStream:
    """One open Subscribe RPC; None in the queue ends it."""

    client: str
    sub_id: str
    filter: Filter
    queue: asyncio.Queue[Notification | None]
    opened: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:  # make room: the end marker matters more than a notification
            self.queue.get_nowait()
            self.queue.put_nowait(None)


class ClientService(client_pb2_grpc.ClientServicer):
    def __init__(
        self,
        broker_id: str,
        reserved_ids: frozenset[str],
        step: Callable[[Event], bool],
        trace: LiveSink,
        metrics: Metrics,
        queue_limit: int,
    ) -> None:
        self.broker_id = broker_id
        self._reserved = reserved_ids | {broker_id}  # client ids share the core's namespace
        self._step = step
        self._trace = trace
        self._metrics = metrics
        self._queue_limit = queue_limit
        self.streams: dict[str, dict[str, SubStream]] = {}
        self._filters: dict[tuple[str, str], Filter] = {}  # last filter seen per subscription
        self.closing = False

    # ---- delivery (called from the broker's effect dispatch) --------------------------------

    def deliver(self, client: str, n: Notification) -> None:
        streams = self.streams.get(client)
        if not streams:
            self._metrics.undeliverable("no_stream")
            self._trace.record("undeliverable", client=client, nid=n.id, publisher=n.publisher,
                               seq=n.seq, reason="no_stream")
            return
        attrs = n.attributes
        matched = next((s for s in streams.values() if _matches(s.filter, attrs)), None)
        # none matches: a wrong table delivered it; the client still gets it (and the trace
        # shows a delivery without a sub_id)
        target = matched if matched is not None else next(iter(streams.values()))
        try:
            target.queue.put_nowait(n)
        except asyncio.QueueFull:
            self._metrics.undeliverable("stream_full")
            self._trace.record("undeliverable", client=client, nid=n.id, publisher=n.publisher,
                               seq=n.seq, reason="stream_full")
            return
        self._metrics.delivery()
        self._trace.record("deliver", client=client, broker=self.broker_id,
                           sub_id=matched.sub_id if matched is not None else None, nid=n.id,
                           publisher=n.publisher, seq=n.seq, published_at=n.published_at)

    def close_all(self) -> None:
        self.closing = True
        for streams in self.streams.values():
            for stream in streams.values():
                stream.close()

    def open_streams(self) -> list[str]:
        return sorted(f"{c}/{s}" for c, subs in self.streams.items() for s in subs)

    # ---- RPCs -------------------------------------------------------------------------------

    async def Publish(
        self, request: client_pb2.PublishRequest, context: grpc.aio.ServicerContext
    ) -> client_pb2.PublishReply:
        client = await self._client_id(request.client, context)
        notifications: list[Notification] = []
        now = time.time()
        for i, pb in enumerate(request.notifications):
            if not pb.publisher:
                pb.publisher = client
            if not pb.published_at:
                pb.published_at = now
            try:
                notifications.append(notification_from_pb(pb))
            except WireError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"notifications[{i}].{e}")
        for n in notifications:
            self._metrics.publish()
            # the attributes too: the analytics match them against the subscriptions
            self._trace.record("publish", client=client, broker=self.broker_id, nid=n.id,
                               publisher=n.publisher,
                               seq=n.seq, published_at=n.published_at,
                               attributes=dict(n.attributes))
            self._step(ClientPublish(client, n))
        return client_pb2.PublishReply(accepted=len(notifications))

    async def Subscribe(
        self, request: client_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[client_pb2.SubscriptionEvent]:
        client, sub_id, f = await self._subscription(request, context)
        stream = SubStream(client, sub_id, f, asyncio.Queue(self._queue_limit))
        old = self.streams.setdefault(client, {}).get(sub_id)
        if old is not None:
            old.close()  # the client reconnected; the old stream is dead or about to be
        self.streams[client][sub_id] = stream
        try:
            self._subscribe(client, sub_id, f, op="subscribe")
            yield client_pb2.SubscriptionEvent(
                sub_id=sub_id,
                subscribed=client_pb2.Subscribed(sub_id=sub_id, filter=str(f),
                                                 broker_id=self.broker_id),
            )
            max_batch = max(1, request.max_batch)
            while True:
                batch = await self._next_batch(stream.queue, max_batch)
                if batch is None:
                    return
                if len(batch) == 1:
                    yield client_pb2.SubscriptionEvent(sub_id=sub_id,
                                                       notification=notification_to_pb(batch[0]))
                else:
                    yield client_pb2.SubscriptionEvent(
                        sub_id=sub_id,
                        batch=client_pb2.NotificationBatch(
                            notifications=[notification_to_pb(n) for n in batch]),
                    )
        finally:
            subs = self.streams.get(client, {})
            if subs.get(sub_id) is stream:
                del subs[sub_id]
                if not subs:
                    self.streams.pop(client, None)

    @staticmethod
    async def _next_batch(
        queue: asyncio.Queue[Notification | None], max_batch: int
    ) -> list[Notification] | None:
        """Wait for one notification, then take up to max_batch-1 more that are already there.

        None: the stream was closed and nothing is left.
        """
        first = await queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < max_batch and not queue.empty():
            n = queue.get_nowait()
            if n is None:  # closed: send what we have, then end
                queue.put_nowait(None)
                break
            batch.append(n)
        return batch

    async def Refresh(
        self, request: client_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> client_pb2.RefreshReply:
        client, sub_id, f = await self._subscription(request, context)
        self._subscribe(client, sub_id, f, op="refresh")
        return client_pb2.RefreshReply()

    async def Unsubscribe(
        self, request: client_pb2.UnsubscribeRequest, context: grpc.aio.ServicerContext
    ) -> client_pb2.UnsubscribeReply:
        client = await self._client_id(request.client, context)
        sub_id = await self._sub_id(request.sub_id, context)
        if request.filter:
            f = await self._filter(request.filter, context)
        else:
            known = self._filters.get((client, sub_id))
            if known is None:
                await context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"subscription {sub_id!r} of client {client!r} is unknown here; "
                    "send its filter",
                )
                raise AssertionError("unreachable")
            f = known
        self._filters.pop((client, sub_id), None)
        self._metrics.client_request("unsubscribe")
        self._trace.record("unsubscribe", client=client, broker=self.broker_id, sub_id=sub_id,
                           filter=str(f))
        self._step(ClientUnsubscribe(client, sub_id, f))
        stream = self.streams.get(client, {}).get(sub_id)
        if stream is not None:
            stream.close()
        return client_pb2.UnsubscribeReply()

    # ---- helpers ----------------------------------------------------------------------------

    def _subscribe(self, client: str, sub_id: str, f: Filter, op: str) -> None:
        # the first request for a (client, sub_id) subscribes; any later one refreshes (SC-4)
        key = (client, sub_id)
        kind = "refresh" if key in self._filters else "subscribe"
        self._filters[key] = f
        self._metrics.client_request(op)
        self._trace.record(kind, client=client, broker=self.broker_id, sub_id=sub_id,
                           filter=str(f), rpc=op)
        self._step(ClientSubscribe(client, sub_id, f))

    async def _subscription(
        self, request: client_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> tuple[str, str, Filter]:
        client = await self._client_id(request.client, context)
        sub_id = await self._sub_id(request.sub_id, context)
        return client, sub_id, await self._filter(request.filter, context)

    async def _client_id(self, client: str, context: grpc.aio.ServicerContext) -> str:
        if self.closing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.broker_id} is shutting down")
        if not client:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "client: must not be empty")
        if client in self._reserved:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"client: {client!r} is a broker id")
        return client

    async def _sub_id(self, sub_id: str, context: grpc.aio.ServicerContext) -> str:
        if not sub_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "sub_id: must not be empty")
        return sub_id

    async def _filter(self, text: str, context: grpc.aio.ServicerContext) -> Filter:
        try:
            return parse_filter(text, "filter")
        except WireError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise AssertionError("unreachable") from None


def _matches(f: Filter, attrs: Mapping[str, Value]) -> bool:
    try:
        return bool(f.matches(attrs))
    except Exception:  # a filter the core accepted must not take delivery down
        return False
