"""The Client gRPC service of one broker: publish (unary and stream), subscribe streams,
refresh, unsubscribe.

The core names local clients by id and delivers to a client, not to a subscription. A client
may hold several subscribe streams (one per sub_id); a delivery goes to the first of its
streams whose filter matches, else to any of its streams (a corrupted local entry must stay
visible to the analytics as a spurious delivery, not vanish here). With no open stream the
delivery is counted as undeliverable (the client crashed or is reconnecting; its lease runs
out on its own, SC-4).

Every Subscribe RPC and every Refresh RPC is a ClientSubscribe event for the core: the first
one for a (client, sub_id) subscribes, the next ones refresh the lease. Closing a stream does
not unsubscribe: only Unsubscribe does, or lease expiry.

Notifications travel as bytes: a publication is decoded once (for the core) and its encoded
form is what the links and subscribe streams forward; a subscribe stream sends batches of
what is waiting, bounded in count and bytes (never above the client's maximum message size),
and the `deliver` trace record and the delivery counter are written only once gRPC has taken
the message, so the trace says what went on the wire. A stream's queue is bounded in count
and bytes: a slow consumer costs notifications (undeliverable, reason stream_full), not
broker memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import grpc
from google.protobuf.message import DecodeError

from weeble.codec.wire import (
    DEFAULT_LIMITS,
    Limits,
    WireError,
    check_notification_size,
    decode_publication,
    encode_notification,
    notification_parser,
    parse_filter,
    sub_id_field,
    subscription_event,
)
from weeble.core.events import ClientSubscribe, ClientUnsubscribe, Event, valid_client
from weeble.core.filters import Filter, Value
from weeble.core.messages import Notification
from weeble.proto.v1 import client_pb2
from weeble.runtime.clientauth import TOKEN_KEY, token_matches
from weeble.runtime.metrics import Metrics
from weeble.runtime.quiet import clipped, rate_limited
from weeble.trace.writer import LiveSink

log = rate_limited(logging.getLogger(__name__))

CLIENT_SERVICE = "weeble.v1.Client"
GRPC_DEFAULT_MAX = 4 * 1024 * 1024  # what a client that states no limit accepts
MAX_BATCH = 4096  # notifications per subscribe-stream message, whatever a client asks
_EVENT_SLACK = 64  # the SubscriptionEvent's own fields around a batch
_FRAMING = 6  # at most: the tag and length varint of one notification inside a batch
_KEEP_DECODED = 4096  # bytes: a larger queued notification keeps only its encoded form
ACCEPTED_KEY = "weeble-accepted"  # trailing metadata of a failed PublishStream
HALT_WAIT_S = 2.0  # a refused PublishStream waits this long at most for its last ack's write

# Carry out a client event: step(event, notification, wire) -> False if the core failed.
# `wire` is the encoded notification of a ClientPublish (forwarded as those bytes).
Stepper = Callable[[Event, Notification | None, bytes | None], bool]


# Carry out the publications of one request, in order: publish(client, [(notification, wire)]).
Publisher = Callable[[str, list[tuple[Notification, bytes]]], None]


def _field(accepted: list[tuple[Notification, bytes]]) -> str:
    """The name of the notification after those `accepted`, for an error."""
    return f"notifications[{len(accepted)}]"


@dataclass(eq=False)
class SubStream:
    """One open Subscribe RPC: its queue of (encoded notification, notification, the sub_id
    whose filter matched it or None: a wrong table delivered it, see `deliver`)."""

    client: str
    sub_id: str
    filter: Filter
    limit: int  # notifications queued at most
    byte_limit: int  # bytes queued at most
    items: deque[tuple[bytes, Notification, str | None]] = field(default_factory=deque)
    size: int = 0
    closed: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    opened: float = field(default_factory=time.monotonic)

    def offer(self, wire: bytes, n: Notification, matched: str | None) -> bool:
        """Queue one notification; False if the queue is full (count or bytes)."""
        size = len(wire)
        if len(self.items) >= self.limit or self.size + size > self.byte_limit:
            return False
        if size > _KEEP_DECODED:
            # its decoded attributes would double what the queue holds beyond what it counts
            # (the bytes); the records written from the queue need only its ids
            n = Notification(publisher=n.publisher, seq=n.seq, attributes={},
                             published_at=n.published_at)
        self.items.append((wire, n, matched))
        self.size += size
        self.wakeup.set()
        return True

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()

    async def next_batch(self, max_items: int,
                         max_bytes: int) -> list[tuple[bytes, Notification, str | None]] | None:
        """Wait for one notification, then take up to max_items of those already waiting,
        within max_bytes of framed size (the first is taken whatever its size). None: the
        stream was closed and nothing is left."""
        items = self.items
        while not items:
            if self.closed:
                return None
            self.wakeup.clear()
            await self.wakeup.wait()
        first = items.popleft()
        batch = [first]
        raw = len(first[0])
        size = raw + _FRAMING
        while items and len(batch) < max_items:
            n = len(items[0][0])
            if size + n + _FRAMING > max_bytes:
                break
            size += n + _FRAMING
            raw += n
            batch.append(items.popleft())
        self.size -= raw
        return batch


class ClientService:
    def __init__(
        self,
        broker_id: str,
        is_broker: Callable[[str], bool],
        step: Stepper,
        publish: Publisher,
        trace: LiveSink,
        metrics: Metrics,
        *,
        queue_limit: int,
        queue_bytes: int,
        max_message_bytes: int,
        limits: Limits = DEFAULT_LIMITS,
        client_secret: str | None,
        hello_timeout: float = 5.0,
    ) -> None:
        self.broker_id = broker_id
        # client ids share the core's namespace: no broker id of the run, whichever broker
        # is asked (the probe: b1 was refused only at b1 and its neighbours)
        self._is_broker = is_broker
        self._step = step
        self._publish_all = publish
        self._parse = notification_parser()  # the publish streams' (one loop), traced
        self._trace = trace
        self._metrics = metrics
        self._queue_limit = queue_limit
        self._queue_bytes = queue_bytes
        self._max_message = max_message_bytes
        self._limits = limits
        self._hello_timeout = hello_timeout
        self._secret = client_secret  # None: the open mode (see clientauth.py)
        self.streams: dict[str, dict[str, SubStream]] = {}
        # last filter seen per subscription, and when (monotonic): pruned once the lease it
        # renewed has surely run out (prune), so ids that are never refreshed again cost nothing.
        # Oldest first (a subscribe or refresh moves its entry to the end), so that prune reads
        # only the stale ones, not every subscription on every sampling tick.
        self._filters: OrderedDict[tuple[str, str], tuple[Filter, float]] = OrderedDict()
        self.closing = False

    def handler(self) -> grpc.GenericRpcHandler:
        """The weeble.v1.Client service. Publish requests arrive and subscription events
        leave as bytes (wire-identical views of the .proto messages), so that notifications
        are forwarded without being encoded again."""
        views = client_pb2.PublishRequestView
        return grpc.method_handlers_generic_handler(CLIENT_SERVICE, {
            "Publish": grpc.unary_unary_rpc_method_handler(
                self.Publish, request_deserializer=views.FromString,
                response_serializer=client_pb2.PublishReply.SerializeToString),
            "PublishStream": grpc.stream_stream_rpc_method_handler(self.PublishStream),
            "Subscribe": grpc.unary_stream_rpc_method_handler(
                self.Subscribe, request_deserializer=client_pb2.SubscribeRequest.FromString),
            "Refresh": grpc.unary_unary_rpc_method_handler(
                self.Refresh, request_deserializer=client_pb2.SubscribeRequest.FromString,
                response_serializer=client_pb2.RefreshReply.SerializeToString),
            "Unsubscribe": grpc.unary_unary_rpc_method_handler(
                self.Unsubscribe, request_deserializer=client_pb2.UnsubscribeRequest.FromString,
                response_serializer=client_pb2.UnsubscribeReply.SerializeToString),
        })

    # ---- delivery (called from the broker's effect dispatch) --------------------------------

    def deliver(self, client: str, n: Notification, wire: bytes | None = None) -> None:
        streams = self.streams.get(client)
        if not streams:
            self._undeliverable(client, n, "no_stream")
            return
        tracing = self._trace.enabled
        if len(streams) == 1 and not tracing:
            target = next(iter(streams.values()))
            matched: str | None = target.sub_id
        else:
            attrs = n.attributes
            found = next((s for s in streams.values() if _matches(s.filter, attrs)), None)
            # none matches: a wrong table delivered it; the client still gets it (and the
            # trace shows a delivery without a sub_id)
            target = found if found is not None else next(iter(streams.values()))
            matched = found.sub_id if found is not None else None
        if wire is None:
            try:
                wire = encode_notification(n)
            except WireError as e:  # a corrupted notification the wire cannot carry
                self._undeliverable(client, n, "unencodable", detail=str(e))
                return
        if not target.offer(wire, n, matched):
            self._undeliverable(client, n, "stream_full", sub_id=target.sub_id)

    def deliver_all(self, client: str, items: list[tuple[Notification, bytes]]) -> None:
        """`deliver` of each (notification, its encoded form) to `client`, in order: the
        Delivers of notifications that arrived together. To a client with one stream (the hot
        path) with one look-up for all of them."""
        streams = self.streams.get(client)
        if not streams or len(streams) != 1:
            for n, wire in items:
                self.deliver(client, n, wire)
            return
        target = next(iter(streams.values()))
        sub_id = target.sub_id
        offer = target.offer
        if self._trace.enabled:  # as `deliver`: unmatched, traced without a sub_id
            f = target.filter
            for n, wire in items:
                if not offer(wire, n, sub_id if _matches(f, n.attributes) else None):
                    self._undeliverable(client, n, "stream_full", sub_id=sub_id)
            return
        for n, wire in items:
            if not offer(wire, n, sub_id):
                self._undeliverable(client, n, "stream_full", sub_id=sub_id)

    def _undeliverable(self, client: str, n: Notification, reason: str, **more: str) -> None:
        self._metrics.undeliverable(reason)
        if self._trace.enabled:
            self._trace.record("undeliverable", clipped(**more), client=client, nid=n.id,
                               publisher=n.publisher, seq=n.seq, reason=reason)

    def close_all(self) -> None:
        self.closing = True
        for streams in self.streams.values():
            for stream in streams.values():
                stream.close()

    def prune(self, older_than: float) -> int:
        """Forget the subscriptions last subscribed or refreshed more than `older_than`
        seconds ago that have no open stream (their lease has run out in the core too).
        Returns how many were forgotten."""
        cutoff = time.monotonic() - older_than
        stale = []
        for key, (_f, seen) in self._filters.items():
            if seen >= cutoff:
                break  # the rest were seen later still
            if key[1] not in self.streams.get(key[0], {}):
                stale.append(key)
        for key in stale:
            del self._filters[key]
        return len(stale)

    def known_subscriptions(self) -> int:
        return len(self._filters)

    def open_streams(self) -> list[str]:
        return sorted(f"{c}/{s}" for c, subs in self.streams.items() for s in subs)

    # ---- publishing -------------------------------------------------------------------------

    async def Publish(
        self, request: client_pb2.PublishRequestView, context: grpc.aio.ServicerContext
    ) -> client_pb2.PublishReply:
        client = await self._client_id(request.client, context)
        accepted = await self._publish(client, request.notifications, context)
        return client_pb2.PublishReply(accepted=accepted)

    async def PublishStream(self, requests: object, context: grpc.aio.ServicerContext) -> None:
        """Requests in, cumulative acknowledgements out (see PublishAck in client.proto).

        A writer task sends the count accepted so far whenever it grew, so acknowledgements
        coalesce when requests come faster than they can be answered."""
        state = _AckState()
        writer = state.writer = asyncio.get_running_loop().create_task(
            self._acknowledge(state, context))
        try:
            client = ""
            while True:
                if client:
                    data = await context.read()
                else:
                    data = await self._first_request(context)
                if data is grpc.aio.EOF:
                    break
                try:
                    request = client_pb2.PublishRequestView.FromString(data)
                except DecodeError as e:
                    await self._abort(context, state, grpc.StatusCode.INVALID_ARGUMENT,
                                      f"undecodable PublishRequest: {e}")
                if not client:
                    client = await self._client_id(request.client, context)
                elif request.client and request.client != client:
                    await self._abort(context, state, grpc.StatusCode.INVALID_ARGUMENT,
                                      f"client: this stream publishes for {client!r},"
                                      f" not {request.client!r}")
                state.accepted += await self._publish(client, request.notifications, context,
                                                      state)
                state.changed.set()
            state.done = True
            state.changed.set()
            await writer
        finally:
            if not writer.done():
                writer.cancel()

    async def _first_request(self, context: grpc.aio.ServicerContext) -> bytes | object:
        """A PublishStream's first request names its client (and so proves who it is): it
        must come within hello_timeout_s, as a link's hello must; the probe held 5,000 silent
        streams open for good (RSS 72 -> 154 MB)."""
        timeout = self._hello_timeout
        try:
            async with asyncio.timeout(timeout):
                return await context.read()
        except TimeoutError:
            self._metrics.client_request("timed_out")
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"{self.broker_id}: no PublishRequest within {timeout:g} s"
                                " (hello_timeout_s)")
            raise AssertionError("unreachable") from None

    @staticmethod
    async def _acknowledge(state: _AckState, context: grpc.aio.ServicerContext) -> None:
        acked = 0
        while True:
            await state.changed.wait()
            state.changed.clear()
            if state.halted:  # a refusal is on its way: its status must be the next operation
                return
            if state.accepted > acked:
                acked = state.accepted
                await context.write(client_pb2.PublishAck(accepted=acked).SerializeToString())
            if state.done and acked == state.accepted:
                return

    async def _publish(self, client: str, raws: Sequence[bytes],
                       context: grpc.aio.ServicerContext, state: _AckState | None = None) -> int:
        """Validate every notification of one request, then hand them to the core in order;
        a request with a bad notification is refused whole."""
        now = time.time()
        limits = self._limits
        largest = limits.notification_bytes
        secret = self._secret
        parse = self._parse if self._trace.enabled else None  # see notification_parser
        accepted: list[tuple[Notification, bytes]] = []
        for raw in raws:
            # the field's name is written only for an error (an f-string per notification
            # was a few per cent of a batched broker)
            try:
                if len(raw) > largest:
                    check_notification_size(raw, _field(accepted), limits)
                item = decode_publication(raw, "", client, now, parse)
            except WireError as e:
                error = str(e)
                if len(raw) <= largest:  # decoded again, for the error naming the notification
                    try:
                        decode_publication(raw, _field(accepted), client, now, parse)
                    except WireError as named:
                        error = str(named)
                await self._abort(context, state, grpc.StatusCode.INVALID_ARGUMENT, error)
            publisher = item[0].publisher
            if secret is not None and publisher != client:
                # a publisher id is the authenticated client's own (or left empty)
                await self._abort(context, state, grpc.StatusCode.PERMISSION_DENIED,
                                  f"{_field(accepted)}.publisher: client {client!r} may not"
                                  f" publish as {publisher!r}")
            accepted.append(item)
        if self._trace.enabled:
            # the attributes too: the analytics match them against the subscriptions (fresh
            # per decode, never changed); one entry for the request, encoded off this path
            self._trace.published(client, self.broker_id, [n for n, _ in accepted])
        self._publish_all(client, accepted)
        self._metrics.publish(len(accepted))
        return len(accepted)

    @staticmethod
    async def _abort(context: grpc.aio.ServicerContext, state: _AckState | None,
                     code: grpc.StatusCode, details: str) -> None:
        if state is not None:
            # gRPC allows one send at a time: a status sent while an acknowledgement is still
            # being written fails (TOO_MANY_OPERATIONS) and the client never learns why its
            # stream ended. So the writer stops first and its last write completes.
            await state.halt()
            context.set_trailing_metadata(((ACCEPTED_KEY, str(state.accepted)),))
        await context.abort(code, details)
        raise AssertionError("unreachable")

    # ---- subscribe streams ------------------------------------------------------------------

    async def Subscribe(self, request: client_pb2.SubscribeRequest,
                        context: grpc.aio.ServicerContext) -> None:
        client, sub_id, f = await self._subscription(request, context)
        stream = SubStream(client, sub_id, f, self._queue_limit, self._queue_bytes)
        old = self.streams.setdefault(client, {}).get(sub_id)
        if old is not None:
            old.close()  # the client reconnected; the old stream is dead or about to be
        self.streams[client][sub_id] = stream
        try:
            self._subscribe(client, sub_id, f, op="subscribe")
            await context.write(client_pb2.SubscriptionEvent(
                sub_id=sub_id,
                subscribed=client_pb2.Subscribed(sub_id=sub_id, filter=str(f),
                                                 broker_id=self.broker_id),
            ).SerializeToString())
            await self._pump(stream, request, context)
        finally:
            subs = self.streams.get(client, {})
            if subs.get(sub_id) is stream:
                del subs[sub_id]
                if not subs:
                    self.streams.pop(client, None)
            # what it still queued can never be sent: recorded and counted (the probe: 1,023
            # of 3,000 left without a trace), then freed now. The ended RPC's frames (a
            # cancelled stream's traceback) may hold the stream until a full garbage collection,
            # and RSS kept its queue's bytes that long (up to client_queue_bytes per stream)
            stream.close()
            for _, n, _ in stream.items:
                self._undeliverable(client, n, "stream_ended", sub_id=sub_id)
            stream.items.clear()
            stream.size = 0

    async def _pump(self, stream: SubStream, request: client_pb2.SubscribeRequest,
                    context: grpc.aio.ServicerContext) -> None:
        """Write what the stream's queue holds, in batches, until the stream is closed."""
        max_items = max(1, min(request.max_batch, MAX_BATCH))
        head = sub_id_field(stream.sub_id)
        limit = min(request.max_batch_bytes or GRPC_DEFAULT_MAX, self._max_message)
        max_bytes = max(1, limit - len(head) - _EVENT_SLACK)
        while True:
            batch = await stream.next_batch(max_items, max_bytes)
            if batch is None:
                return
            if len(batch[0][0]) + _FRAMING > max_bytes:
                # larger than this client accepts: gRPC would end the stream on it
                self._undeliverable(stream.client, batch[0][1], "oversize",
                                    sub_id=stream.sub_id)
                continue
            data = subscription_event(head, [w for w, _, _ in batch])
            try:
                await context.write(data)
            except BaseException as e:
                for _, n, _ in batch:
                    self._undeliverable(stream.client, n, "write_failed", sub_id=stream.sub_id,
                                        detail=type(e).__name__)
                raise
            self._metrics.delivery(len(batch))
            if self._trace.enabled:
                self._trace.delivered(stream.client, self.broker_id,
                                      [(matched, n) for _, n, matched in batch])

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
            known = self._filters.get((client, sub_id), (None, 0.0))[0]
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
        self._step(ClientUnsubscribe(client, sub_id, f), None, None)
        stream = self.streams.get(client, {}).get(sub_id)
        if stream is not None:
            stream.close()
        return client_pb2.UnsubscribeReply()

    # ---- helpers ----------------------------------------------------------------------------

    def _subscribe(self, client: str, sub_id: str, f: Filter, op: str) -> None:
        # the first request for a (client, sub_id) subscribes; any later one refreshes (SC-4)
        key = (client, sub_id)
        filters = self._filters
        kind = "refresh" if key in filters else "subscribe"
        filters[key] = (f, time.monotonic())
        filters.move_to_end(key)  # the newest last (prune)
        self._metrics.client_request(op)
        # a refresh repeats the filter of its subscribe every rho: a long one is clipped
        # there (with its digest); the subscribe record keeps it whole for the analysis
        text = str(f)
        fields = {"filter": text} if kind == "subscribe" else clipped(filter=text)
        self._trace.record(kind, fields, client=client, broker=self.broker_id, sub_id=sub_id,
                           rpc=op)
        self._step(ClientSubscribe(client, sub_id, f), None, None)

    async def _subscription(
        self, request: client_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> tuple[str, str, Filter]:
        client = await self._subscriber(request.client, context)
        sub_id = await self._sub_id(request.sub_id, context)
        return client, sub_id, await self._filter(request.filter, context)

    async def _client_id(self, client: str, context: grpc.aio.ServicerContext) -> str:
        if self.closing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.broker_id} is shutting down")
        if not client:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "client: must not be empty")
        if client == self.broker_id or self._is_broker(client):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"client: {client!r} is a broker id")
        if self._secret is not None:
            token = next((v for k, v in context.invocation_metadata() or ()
                          if k == TOKEN_KEY), None)
            if not token:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    f"client {client!r}: no client token (gRPC metadata"
                                    f" {TOKEN_KEY!r}); this broker authenticates its clients")
            if not token_matches(self._secret, client, str(token)):
                self._metrics.client_request("refused")
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    f"client {client!r}: the token is not this client's")
        return client

    async def _subscriber(self, client: str, context: grpc.aio.ServicerContext) -> str:
        """A client that subscribes: its id also qualifies its sub ids (`network_id`)."""
        client = await self._client_id(client, context)
        why = valid_client(client)
        if why:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"client: {why}")
        return client

    async def _sub_id(self, sub_id: str, context: grpc.aio.ServicerContext) -> str:
        if not sub_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "sub_id: must not be empty")
        return sub_id

    async def _filter(self, text: str, context: grpc.aio.ServicerContext) -> Filter:
        try:
            return parse_filter(text, "filter", self._limits)
        except WireError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise AssertionError("unreachable") from None


@dataclass(eq=False)
class _AckState:
    """Shared by a PublishStream's reader and its acknowledgement writer."""

    accepted: int = 0
    done: bool = False
    halted: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.Task[None] | None = None

    async def halt(self) -> None:
        """Stop the writer and wait until its write in flight, if any, has completed (at most
        HALT_WAIT_S: a client that reads nothing can hold a write once gRPC's flow-control
        window is full; then the writer is cancelled and the status may not get through)."""
        self.halted = True
        self.changed.set()
        writer = self.writer
        if writer is None or writer.done():
            return
        done, _ = await asyncio.wait({writer}, timeout=HALT_WAIT_S)
        if not done:
            writer.cancel()
            log.warning("PublishStream: an acknowledgement was still unread by the client after"
                        " %g s; its refusal may not reach it", HALT_WAIT_S)


def _matches(f: Filter, attrs: Mapping[str, Value]) -> bool:
    try:
        return bool(f.matches(attrs))
    except Exception:  # a filter the core accepted must not take delivery down
        return False
