"""FIFO links to neighbour brokers: one bidirectional gRPC stream per pair of neighbours.

On a link of the broker's configured tree the broker with the lexicographically smaller id dials
(`Link.dial_forever`), the other accepts (`LinkService`); the dialer's first envelope is a Hello
carrying its id and the per-run link token, which the acceptor checks and answers with its own
Hello. Links the overlay gains at run time (a reconfiguration's new link a, a new leaf) and the
out-of-band channels of the coordinated link exchange (thesis 4.4.2: B1 to Br1, Br2 to Bn) are
*dynamic*: the broker that first needs one dials it from its address book, and when both dial at
once the smaller id's stream wins (the larger drops its own dial and accepts; the smaller
refuses the larger's). A dynamic link that nobody needs any more is closed (server.py).
Each direction of the stream is one FIFO channel. A broken stream is redialled with exponential
backoff (tenacity); a stream for a neighbour that still has a live session is refused
(ALREADY_EXISTS), so that nobody with the link token can take over a live neighbour's session;
the neighbour redials until its old session has ended.
With TLS on links (`link_tls`), identities are certificates: the dialer checks that the
acceptor's certificate names the neighbour it dialled (as its DNS name), the acceptor that
the dialer's certificate names (as its common name) the broker its hello claims; a session
that claims another broker's id is refused (UNAUTHENTICATED).

Outgoing messages pass the link shaper (delay, jitter, loss, duplication, rate) into a bounded
queue that also holds them while the link is down; a message that finds the queue full is
dropped and counted (`overflow`), as is one lost by the shaper, one sent over a cut link, or one
in flight when a stream breaks. The receiver acknowledges what it received (Envelope.ack, on
its own writes, or alone every 0.1 s and every ACK_EVERY messages); what a broken session
leaves unacknowledged (the peer was killed with it in its socket or its read buffer) is
dropped and counted as `unacked`, with a `drop` record each, so a sender's trace never leaves
at its `send` record a message it cannot vouch for. Incoming bytes are decoded here: a garbage
envelope, an unknown kind or a field the core cannot represent is counted, logged and dropped,
and the link stays up.

Streams carry raw bytes (no gRPC deserializer) precisely so that undecodable input reaches this
code instead of failing the RPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import random
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from tenacity import AsyncRetrying, RetryCallState, wait_exponential, wait_random

from weeble.codec.wire import (
    MAX_BATCH,
    UINT64_MAX,
    WireError,
    batch_bytes,
    check_count,
    check_notification_size,
    decode_notification,
    envelope_seq,
    envelope_to_message,
    hello,
    kind_of,
    message_to_envelope,
    notification_parser,
    notify_envelope,
    with_ack,
)
from weeble.core.messages import Message, Notification, Notify
from weeble.proto.v1 import link_pb2
from weeble.runtime.config import BrokerConfig, TlsConfig
from weeble.runtime.linkshaper import Fate, LinkShape, ShapedQueue
from weeble.runtime.metrics import Metrics
from weeble.runtime.quiet import clip, clipped, rate_limited
from weeble.trace.writer import LiveSink, message_ids

LINK_SERVICE = "weeble.v1.Link"
CONNECT_METHOD = f"/{LINK_SERVICE}/Connect"
_ENVELOPE_SLACK = 64  # room for a batch header around a message at the size limit
GRPC_DEFAULT_MAX = 4 * 1024 * 1024  # what a peer that states no limit accepts
_FRAMING = 6  # at most: the tag and length varint of one envelope inside a Batch
# The receiver acknowledges every 0.1 s (server.py), on its own messages when it has some, and
# alone after ACK_EVERY messages: what the sender keeps for a possible `unacked` drop is about
# 0.1 s of traffic. An ack alone is a gRPC message of its own (tens of µs of CPU at both ends):
# one per 128 messages cost a chain of 3 brokers ~15 % CPU per notification, batched
# (benchmarks/before_after.py live_throughput); the timer alone costs ~10 messages per second.
ACK_EVERY = 8192
# A dialer of the address book that is not admitted yet (a planned link whose announcement is
# still on its way) waits this long, polling, before it is refused; a stranger's session holds
# a stream no longer than that (and the per-peer stream cap bounds how many).
ADMIT_WAIT_S = 0.5
ADMIT_POLL_S = 0.02
# link-level round-trip probes (live link costs): envelopes, but no message of the core's
PROBES = ("ping", "pong")

# receive(neighbour, message, wire): `wire` is the notification's encoded form for Notify
Receiver = Callable[[str, Message, bytes | None], None]
# The notifications of one envelope batch, in order, with their encoded forms.
NotifyReceiver = Callable[[str, list[tuple[Notify, bytes]]], None]

log = rate_limited(logging.getLogger(__name__))


class LinkState(StrEnum):
    DOWN = "down"
    CONNECTING = "connecting"
    UP = "up"
    CUT = "cut"  # connected or not, everything is dropped at this broker


class LinkError(Exception):
    """The peer broke the link protocol (no hello, wrong peer, wrong token)."""


@dataclass
class Session:
    """One connected stream, seen the same way from the dialing and the accepting side."""

    read: Callable[[], Awaitable[Any]]  # -> bytes, or grpc.aio.EOF at the end
    write: Callable[[bytes], Awaitable[None]]
    close: Callable[[], Any]
    replaced: asyncio.Event = field(default_factory=asyncio.Event)


def channel_options(config: BrokerConfig) -> list[tuple[str, Any]]:
    t = config.tuning
    return [
        ("grpc.max_send_message_length", t.max_message_bytes),
        ("grpc.max_receive_message_length", t.max_message_bytes),
        # We redial ourselves; keep gRPC's own subchannel backoff from stretching our schedule.
        ("grpc.initial_reconnect_backoff_ms", int(t.reconnect_min_s * 1000)),
        ("grpc.min_reconnect_backoff_ms", int(t.reconnect_min_s * 1000)),
        ("grpc.max_reconnect_backoff_ms", int(t.reconnect_max_s * 1000)),
        # Notice a dead peer on an idle link.
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def tls_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    """A link dialer's (or a health check's) TLS: the run's CA, this broker's certificate."""
    assert tls.ca is not None
    return grpc.ssl_channel_credentials(root_certificates=tls.ca.read_bytes(),
                                        private_key=tls.key.read_bytes(),
                                        certificate_chain=tls.cert.read_bytes())


def listen_credentials(config: BrokerConfig) -> grpc.ServerCredentials | None:
    """The listen port's TLS (None: plain): every peer must present a certificate of the run's
    CA; which broker it may claim to be is checked per link session (LinkService)."""
    tls = config.link_tls
    if tls is None or tls.ca is None:
        return None
    return grpc.ssl_server_credentials([(tls.key.read_bytes(), tls.cert.read_bytes())],
                                       root_certificates=tls.ca.read_bytes(),
                                       require_client_auth=True)


def peer_common_name(context: grpc.aio.ServicerContext) -> str | None:
    """The common name of the peer's verified certificate (None without TLS or certificate)."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode(errors="replace") if len(names) == 1 else None


class Link:
    def __init__(
        self,
        config: BrokerConfig,
        neighbor: str,
        *,
        receive: Receiver,
        receive_notifies: NotifyReceiver | None = None,
        trace: LiveSink,
        metrics: Metrics,
        rng: random.Random,
        address: str | None = None,
        dynamic: bool = False,
    ) -> None:
        self.config = config
        self.neighbor = neighbor
        self._ends_out = (config.broker_id, neighbor)  # (from, to) of send/receive records
        self._ends_in = (neighbor, config.broker_id)
        self.address = address if address is not None else config.neighbors.get(neighbor, "")
        # a dynamic link is dialled by whoever needs it; a configured one by the smaller id
        self.dynamic = dynamic
        self.dialer = config.dials(neighbor) or dynamic
        self.last_used = time.monotonic()  # of the last message either way (idle links close)
        self._receive = receive
        self._receive_notifies = receive_notifies
        self._trace = trace
        self._metrics = metrics
        self._parse = notification_parser()  # this link's receive (its loop's), traced
        shape = config.links.get(neighbor, LinkShape())
        self.queue: ShapedQueue[bytes] = ShapedQueue(
            shape, config.tuning.link_queue_limit, rng, garble=garble,
            byte_limit=config.tuning.link_queue_bytes)
        self.cut = False
        self._state = LinkState.DOWN
        self._session: Session | None = None
        self._seq = 0
        self._last_in_seq = 0  # the peer's highest seq received (and accounted for) this session
        self._acked_out = 0  # the highest of them acknowledged to the peer
        self._peer_ack = 0  # the highest of our seqs the peer acknowledged this session
        # what was written and not yet acknowledged: (seq of the write's last item, items);
        # bounded by link_queue_limit items (beyond it the oldest are forgotten, counted)
        self._unacked: deque[tuple[int, list[bytes]]] = deque()
        self._unacked_items = 0
        self.counters: Tally[str] = Tally()
        self._channel: grpc.aio.Channel | None = None
        self._channel_address = ""  # the address _channel dials (the book may change it)
        self._dial_task: asyncio.Task[None] | None = None
        self._limit = config.tuning.max_message_bytes - _ENVELOPE_SLACK
        # batches: the tuning's bound, never above what this side or the peer may send/accept
        self._batch_bytes = min(config.tuning.link_batch_bytes, self._limit)
        self._limits = config.limits()
        self._peer_max = GRPC_DEFAULT_MAX
        # round-trip probes (live link costs): a Pong's round trip in s goes to on_rtt
        self.on_rtt: Callable[[str, float], None] | None = None
        self._pings: dict[int, float] = {}  # ping id -> when it was queued (monotonic)
        self._ping_ids = itertools.count(1)
        metrics.link_state(neighbor, LinkState.DOWN)

    # ---- state ------------------------------------------------------------------------------

    @property
    def state(self) -> LinkState:
        return LinkState.CUT if self.cut else self._state

    @property
    def connected(self) -> bool:
        return self._session is not None

    def _set_state(self, state: LinkState) -> None:
        if state is not self._state:
            self._state = state
            self._metrics.link_state(self.neighbor, self.state)

    @property
    def shape(self) -> LinkShape:
        return self.queue.shape

    def set_shape(self, shape: LinkShape) -> None:
        self.queue.shape = shape
        self._trace.record("link_shape", peer=self.neighbor, **shape.as_dict())

    def set_cut(self, cut: bool) -> None:
        """Cut: drop everything both ways at this broker, including what is queued; heal: stop."""
        if cut == self.cut:
            return
        self.cut = cut
        if cut:
            self._lose(self.queue.clear(), "cut")
        self._metrics.link_state(self.neighbor, self.state)
        self._trace.record("link_cut" if cut else "link_heal", peer=self.neighbor)

    def _drop(self, reason: str, n: int = 1) -> None:
        self.counters[f"dropped_{reason}"] += n
        self._metrics.dropped(self.neighbor, reason, n)

    def _refuse(self, message: Message, reason: str) -> None:
        """`message` will not enter the queue (cut link, cannot be encoded, over the peer's
        size): counted, and traced as a `drop` without an lseq (none was spent on it)."""
        self._drop(reason)
        if self._trace.enabled:
            self._trace.record("drop", message_ids(message), reason=reason,
                               **{"from": self.config.broker_id, "to": self.neighbor})

    # ---- outgoing ---------------------------------------------------------------------------

    @property
    def unacked(self) -> int:
        """Messages written to the peer that it has not acknowledged yet."""
        return self._unacked_items

    @property
    def dialing(self) -> bool:
        """A dial task runs and has no session (yet)."""
        return self._dial_task is not None and not self._dial_task.done() and not self.connected

    def stop_dialing(self) -> None:
        """Give up my own dial (the peer's stream won a dial collision)."""
        if self._dial_task is not None:
            self._dial_task.cancel()
            self._dial_task = None

    def send(self, message: Message, wire: bytes | None = None) -> None:
        """Carry out a Send effect: shape and queue the message (never blocks, never raises).

        `wire`: the notification of a Notify message as it arrived (it is forwarded as those
        bytes instead of being encoded again); given for Notify messages only."""
        if self.cut:
            self._refuse(message, "cut")
            return
        self.last_used = time.monotonic()
        seq = self._seq + 1
        if wire is not None:  # a Notify (the caller passes bytes for nothing else)
            data = notify_envelope(seq, wire, message.color)  # type: ignore[union-attr]
            kind = "notify"
        else:
            try:
                data = message_to_envelope(message, seq).SerializeToString()
            except WireError as e:
                self._refuse(message, "unencodable")
                log.warning("link %s: cannot encode %s: %s", self.neighbor,
                            type(message).__name__, e)
                return
            kind = kind_of(message)
        size = len(data)
        if size > self._limit:
            # gRPC would fail the whole stream on it; refuse this one message instead
            self._refuse(message, "oversize")
            log.warning("link %s: dropped a %d-byte message (limit %d bytes)",
                        self.neighbor, size, self._limit)
            return
        self._seq = seq
        fate = self.queue.put(data, size)
        if fate is Fate.SENT:
            self.counters["queued"] += 1
            self._metrics.message("out", kind, self.neighbor)
        elif fate is Fate.DUPLICATED or fate is Fate.CORRUPTED:
            copies = 2 if fate is Fate.DUPLICATED else 1
            self.counters["queued"] += copies
            if fate is Fate.CORRUPTED:
                self.counters["corrupted"] += 1
            self._metrics.message("out", kind, self.neighbor, copies)
        else:
            self._drop(fate.value)
        if self._trace.enabled:
            # `queued`, not `sent`: it entered the queue; a `drop` record follows if the link
            # cannot vouch that it reached the peer (in_flight, oversize, unacked, cut)
            state = "queued" if fate is Fate.SENT else fate.value
            if wire is not None:  # a Notify: its record without a dict (the hot path)
                self._trace.notify_sent(message.notification,  # type: ignore[union-attr]
                                        seq, size, self._ends_out, state)
            else:
                self._trace.record("send", message_ids(message), lseq=seq, bytes=size,
                                   **{"from": self.config.broker_id, "to": self.neighbor},
                                   fate=state)

    def send_notifies(self, batch: list[tuple[Notify, bytes]]) -> None:
        """`send` for each (Notify, the bytes its notification arrived in) of `batch`, in
        order: the Send effects towards this link of the notifications that arrived together
        (a request, a link batch). On an unshaped, uncut link (the hot path) with one clock
        reading, one queue admission and one count for all of them, and traced, their `send`
        records as one entry at one time; otherwise each goes through `send`."""
        queue = self.queue
        if self.cut or not queue.perfect:
            for message, wire in batch:
                self.send(message, wire)
            return
        self.last_used = time.monotonic()
        limit = self._limit
        seq = self._seq
        items: list[tuple[bytes, int]] = []
        kept: list[Notification] = []  # traced: the notifications of `items`
        tracing = self._trace.enabled
        for message, wire in batch:
            data = notify_envelope(seq + 1, wire, message.color)
            size = len(data)
            if size > limit:  # as send: refused alone, no sequence number spent
                self._refuse(message, "oversize")
                log.warning("link %s: dropped a %d-byte message (limit %d bytes)",
                            self.neighbor, size, limit)
                continue
            seq += 1
            items.append((data, size))
            if tracing:
                kept.append(message.notification)
        first = self._seq + 1
        self._seq = seq
        admitted = queue.put_sized(items)
        if admitted:
            self.counters["queued"] += admitted
            self._metrics.message("out", "notify", self.neighbor, admitted)
        if admitted < len(items):
            self._drop(Fate.OVERFLOW.value, len(items) - admitted)
        if tracing:
            # as send: `queued`, or the fate that kept it out (a drop record follows if the
            # link cannot vouch that it reached the peer)
            k = len(items)
            self._trace.notifies_sent(
                self._ends_out, kept, list(range(first, first + k)), [size for _, size in items],
                ["queued"] * admitted + [Fate.OVERFLOW.value] * (k - admitted))

    def ping(self) -> bool:
        """Queue a round-trip probe: a Ping the peer answers at once with a Pong, both through
        the link shapers, so what the link emulates is in the round trip (`on_rtt` gets it).
        False if there is no session to probe over."""
        if self.cut or not self.connected:
            return False
        now = time.monotonic()
        # a Ping whose Pong never came (an emulated loss, a broken session) is forgotten
        self._pings = {i: t for i, t in self._pings.items() if now - t < 30.0}
        ident = next(self._ping_ids)
        self._pings[ident] = now
        self._put_probe(link_pb2.Envelope(seq=self._seq + 1, ping=link_pb2.PingMsg(id=ident)))
        return True

    def _put_probe(self, env: link_pb2.Envelope) -> None:
        """Queue a link-level envelope (no core message: not counted or traced as a send)."""
        if self.cut:
            return
        data = env.SerializeToString()
        self._seq = env.seq
        self.queue.put(data, len(data))

    def _on_probe(self, env: link_pb2.EnvelopeView, kind: str) -> None:
        seq = env.seq
        if seq != self._last_in_seq + 1:
            self._sequence_anomaly(seq)
        self._last_in_seq = seq
        if kind == "ping":
            self._put_probe(link_pb2.Envelope(seq=self._seq + 1,
                                              pong=link_pb2.PongMsg(id=env.ping.id)))
            return
        sent = self._pings.pop(env.pong.id, None)
        if sent is not None and self.on_rtt is not None:
            self.on_rtt(self.neighbor, time.monotonic() - sent)

    def batch_limit(self) -> int:
        """Bytes a batch may have: the tuning's bound, within both sides' message limits."""
        return max(1, min(self._batch_bytes, self._peer_max - _ENVELOPE_SLACK))

    async def _write_loop(self, session: Session) -> None:
        t = self.config.tuning
        batch_max, linger = t.link_batch_max, t.link_linger_s
        queue = self.queue
        while True:
            limit = self.batch_limit()
            # the queue counts item bytes; a batch adds a tag and a length to each
            payload = max(1, limit - _FRAMING * batch_max)
            items = await queue.get_batch(batch_max, payload)
            if not items:  # nudged: an acknowledgement is due and nothing else is
                if self._last_in_seq > self._acked_out:
                    await self._write(session, b"", items)
                continue
            if linger > 0 and len(items) < batch_max:
                # wait a little for more to share this gRPC message (throughput over latency)
                size = sum(len(i) for i in items)
                if size < payload:
                    await asyncio.sleep(linger)
                    items += queue.take_due(batch_max - len(items), payload, size)
            if len(items) == 1:
                if len(items[0]) > self._peer_max:  # the peer would end the stream on it
                    self._lose(items, "oversize")
                    continue
                await self._write(session, items[0], items)
            else:
                await self._write(session, batch_bytes(items), items)

    async def _write(self, session: Session, data: bytes, items: list[bytes]) -> None:
        ack = self._last_in_seq
        if ack > self._acked_out:
            data = with_ack(data, ack)
        try:
            await session.write(data)
        except BaseException:
            self._lose(items, "in_flight")
            raise
        if ack > self._acked_out:
            self._acked_out = ack
        if not items:
            return
        self._track(items)
        # `sent` counts what gRPC took, `queued` what entered the queue (send())
        self.counters["sent"] += len(items)
        self._metrics.written(self.neighbor, len(items))
        self.counters["writes"] += 1  # gRPC messages: sent / writes is the mean batch size

    def _track(self, items: list[bytes]) -> None:
        """Keep written items until the peer acknowledges them (see _lose_unacked)."""
        for item in reversed(items):
            last = envelope_seq(item)
            if last:
                break
        else:
            return  # only garbled copies: nothing to vouch for
        if last <= self._peer_ack:
            return
        self._unacked.append((last, items))
        self._unacked_items += len(items)
        limit = self.config.tuning.link_queue_limit
        while self._unacked_items > limit and len(self._unacked) > 1:
            # a peer that never acknowledges (or a very long silence): bounded memory; the
            # forgotten ones are counted, they can no longer be vouched for either way
            _, old = self._unacked.popleft()
            self._unacked_items -= len(old)
            self.counters["unacked_forgotten"] += len(old)

    def _on_ack(self, ack: int) -> None:
        if ack <= self._peer_ack:
            return
        self._peer_ack = ack
        unacked = self._unacked
        while unacked and unacked[0][0] <= ack:
            self._unacked_items -= len(unacked.popleft()[1])

    def _lose_unacked(self) -> None:
        """The session ended: what the peer did not acknowledge may never have arrived (its
        process died with it in the socket or its read buffer). Dropped, counted, traced."""
        ack = self._peer_ack
        lost = [item for _, items in self._unacked for item in items
                if envelope_seq(item) > ack]
        self._unacked.clear()
        self._unacked_items = 0
        self._lose(lost, "unacked")

    def ack_if_due(self) -> None:
        """Acknowledge now what arrived since the last acknowledgement (called every 0.1 s)."""
        if self._session is not None and self._last_in_seq > self._acked_out:
            self.queue.nudge()

    def _lose(self, items: list[bytes], reason: str) -> None:
        """Queued messages that will not reach the peer: counted, and traced as `drop`, so the
        trace does not leave them at their `send` record (fate: queued)."""
        envelopes: list[link_pb2.EnvelopeView | None] = []
        for item in items:
            try:
                envelopes.append(link_pb2.EnvelopeView.FromString(item))
            except DecodeError:  # garbled by the shaper
                envelopes.append(None)
        self._drop_messages(envelopes, reason,
                            {"from": self.config.broker_id, "to": self.neighbor})

    def _drop_messages(self, envelopes: Sequence[link_pb2.EnvelopeView | None], reason: str,
                       ends: dict[str, str]) -> None:
        """Count the messages among `envelopes` (None: one that did not decode) of a link from
        `ends["from"]` to `ends["to"]` as dropped, and give each a `drop` record with the ids
        that pair it with its `send` record (lseq) and, for a Notify, its notification's. A
        link-level probe (Ping, Pong) is no message: never a `send`, so neither counted nor
        traced (its sender, cut, counts none either)."""
        messages = [e for e in envelopes if e is None or e.WhichOneof("kind") not in PROBES]
        if not messages:
            return
        self._drop(reason, len(messages))
        if not self._trace.enabled:
            return
        for env in messages:
            ids: dict[str, Any] = {}  # garbled: nothing to name it by
            if env is not None:
                ids = {"lseq": env.seq, "msg": env.WhichOneof("kind")}
                if ids["msg"] == "notify":
                    try:
                        n = decode_notification(env.notify.notification)
                        ids.update(nid=n.id, publisher=n.publisher, seq=n.seq)
                    except WireError:  # garbled by the shaper: the lseq is all we have
                        ids = {"lseq": env.seq}
            self._trace.record("drop", ids, reason=reason, **ends)

    # ---- incoming ---------------------------------------------------------------------------

    async def _read_loop(self, session: Session) -> None:
        while True:
            data = await session.read()
            if data is grpc.aio.EOF:
                return
            self.receive_bytes(data)

    def receive_bytes(self, data: bytes) -> None:
        self.last_used = time.monotonic()
        try:
            env = link_pb2.EnvelopeView.FromString(data)
        except DecodeError as e:
            if self.cut:
                self._drop_messages([None], "cut",
                                    {"from": self.neighbor, "to": self.config.broker_id})
            else:
                self._drop("malformed")
                log.warning("link %s: undecodable envelope (%d bytes): %s", self.neighbor,
                            len(data), e)
                self._trace.record("garbage", peer=self.neighbor, why="undecodable",
                                   size=len(data))
            return
        if env.ack:
            self._on_ack(env.ack)
        kind = env.WhichOneof("kind")
        if kind is None and env.seq == 0 and env.ack:
            return  # an acknowledgement alone (not a message: a cut link drops none)
        envelopes = env.batch.envelopes if kind == "batch" else (env,)
        if len(envelopes) > MAX_BATCH and not self.cut:
            # each envelope costs a step of the loop: 4 MB of empty ones would be a million
            try:
                check_count(len(envelopes), "batch.envelopes", "MAX_BATCH", MAX_BATCH)
            except WireError as e:
                self._malformed("batch", e)
                return
        if self.cut:
            # dropped here, and counted and traced here: acknowledged, so the sender does not
            # count them again as unacked (its `send` records pair with these by lseq)
            # over the bound: one for the whole frame (a peer's million empty envelopes must
            # not become a million records)
            self._drop_messages(envelopes if len(envelopes) <= MAX_BATCH else [None], "cut",
                                {"from": self.neighbor, "to": self.config.broker_id})
            last = envelopes[-1].seq if envelopes else 0
            if last > self._last_in_seq:
                self._last_in_seq = last
            return
        # The hot path: a batch of notifications, decoded once and handed on with their bytes.
        # Same checks and counts as _receive_envelope, counted once per batch.
        receive, neighbor = self._receive, self.neighbor
        tracing = self._trace.enabled
        parse = self._parse if tracing else None  # see notification_parser
        together = self._receive_notifies is not None or tracing
        pending: list[tuple[Notify, bytes]] = []  # handed on together (receive_notifies)
        seqs: list[int] = []  # of `pending`, for their receive records (traced only)
        notifies = 0
        for e in envelopes:
            if e.WhichOneof("kind") != "notify":
                if pending:  # those before it first: the core sees the batch in order
                    self._hand_on(pending, seqs)
                    pending, seqs = [], []
                self._receive_envelope(e)
                continue
            notify = e.notify
            wire = notify.notification
            try:
                if len(wire) > self._limits.notification_bytes:
                    check_notification_size(wire, "notify.notification", self._limits)
                n = decode_notification(wire, "notify.notification", parse)
            except WireError as err:
                self._malformed("notify", err)
                continue
            seq = e.seq
            if seq != self._last_in_seq + 1:
                self._sequence_anomaly(seq)
            self._last_in_seq = seq
            notifies += 1
            if together:
                pending.append((Notify(n, notify.gray, notify.color), wire))
                if tracing:
                    seqs.append(seq)
            else:
                receive(neighbor, Notify(n, notify.gray, notify.color), wire)
        if pending:
            self._hand_on(pending, seqs)
        if notifies:
            self.counters["received"] += notifies
            self._metrics.message("in", "notify", neighbor, notifies)
        self._ack_soon()

    def _hand_on(self, pending: list[tuple[Notify, bytes]], seqs: list[int]) -> None:
        """Hand received Notify messages on to the core, in order; traced (`seqs`, their link
        sequence numbers), their receive records first, as one entry."""
        if seqs:
            self._trace.notifies_received(self._ends_in, seqs,
                                          [m.notification for m, _ in pending])
        if self._receive_notifies is not None:
            self._receive_notifies(self.neighbor, pending)
        else:
            for m, wire in pending:
                self._receive(self.neighbor, m, wire)

    def _ack_soon(self) -> None:
        if self._last_in_seq - self._acked_out >= ACK_EVERY:
            self.queue.nudge()

    def _receive_envelope(self, env: link_pb2.EnvelopeView) -> None:
        kind = env.WhichOneof("kind")
        wire: bytes | None = None
        if kind in PROBES:
            self._on_probe(env, kind)
            return
        try:
            if kind == "notify":
                wire = env.notify.notification
                check_notification_size(wire, "notify.notification", self._limits)
                parse = self._parse if self._trace.enabled else None
                message: Message = Notify(decode_notification(wire, "notify.notification",
                                                              parse),
                                          env.notify.gray, env.notify.color)
            elif kind is None or kind == "hello" or kind == "batch":
                # unknown (newer) kind, a nested batch, or a repeated hello: not for the core
                reason = "unknown_kind" if kind is None else f"unexpected_{kind}"
                self._drop(reason)
                log.warning("link %s: dropped envelope seq=%d: %s", self.neighbor, env.seq,
                            reason)
                return
            else:
                message = envelope_to_message(env, self._limits)  # type: ignore[arg-type]
        except WireError as e:
            self._malformed(kind, e)
            return
        seq = env.seq
        if seq != self._last_in_seq + 1:
            self._sequence_anomaly(seq)
        self._last_in_seq = seq
        self.counters["received"] += 1
        self._metrics.message("in", kind, self.neighbor)
        if self._trace.enabled:
            self._trace.record("receive", message_ids(message), lseq=seq,
                               **{"from": self.neighbor, "to": self.config.broker_id})
        self._receive(self.neighbor, message, wire)

    def _sequence_anomaly(self, seq: int) -> None:
        # the peer chooses seq (any uint64): the counters saturate at the uint64 maximum, what
        # Snapshot can report (the probe: seq 1, 2^64-1, 1, 2^64-1 broke Snapshot for good)
        counters = self.counters
        if seq <= self._last_in_seq:
            key, n = "seq_repeat_or_reorder", 1  # duplicates or a peer restart
        elif self._last_in_seq:
            key, n = "seq_gap", seq - self._last_in_seq - 1  # loss upstream
        else:
            return
        counters[key] = min(UINT64_MAX, counters[key] + n)

    def _malformed(self, kind: str | None, error: WireError) -> None:
        self._drop("malformed")
        log.warning("link %s: dropped %s envelope: %s", self.neighbor, kind, error)
        self._trace.record("garbage", clipped(why=str(error)), peer=self.neighbor)

    # ---- sessions ---------------------------------------------------------------------------

    async def run_session(self, session: Session, peer_max: int = 0) -> None:
        """Pump one connected stream both ways until it breaks or a newer one replaces it.

        peer_max: the largest message the peer accepts, from its hello (0: gRPC's default)."""
        self.last_used = time.monotonic()
        if self._session is not None:
            self._session.replaced.set()
        self._session = session
        self._peer_max = peer_max or GRPC_DEFAULT_MAX
        self._last_in_seq = self._acked_out = self._peer_ack = 0
        self._set_state(LinkState.UP)
        self.counters["sessions"] += 1
        self._trace.record("link_up", peer=self.neighbor, dialer=self.dialer)
        log.info("link %s up", self.neighbor)
        tasks = [
            asyncio.create_task(self._read_loop(session), name=f"read-{self.neighbor}"),
            asyncio.create_task(self._write_loop(session), name=f"write-{self.neighbor}"),
            asyncio.create_task(session.replaced.wait(), name=f"replaced-{self.neighbor}"),
        ]
        why = "closed"
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is tasks[2]:
                    why = "replaced"
                elif not task.cancelled() and task.exception() is not None:
                    why = f"{type(task.exception()).__name__}: {task.exception()}"
        finally:
            for task in tasks:
                task.cancel()
            try:
                await asyncio.gather(*tasks, return_exceptions=True)
                if why == "replaced" and self._last_in_seq > self._acked_out:
                    # we end it (close, stop): acknowledge what arrived, so that the peer does
                    # not count it as unacked
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(0.05):
                            await session.write(with_ack(b"", self._last_in_seq))
            finally:
                # also when this task is cancelled while it waits above (gRPC cancels the
                # accepting handler when the peer's call ends, which may come just after the
                # read loop saw the end): else the link stayed 'connected' to a gone session
                with contextlib.suppress(Exception):
                    session.close()
                self._lose_unacked()
                if self._session is session:
                    self._session = None
                    self._set_state(LinkState.DOWN)
                self._trace.record("link_down", peer=self.neighbor, why=why)
                log.info("link %s down: %s", self.neighbor, why)

    # ---- dialing ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.dialer and self._dial_task is None and self.address:
            self._dial_task = asyncio.create_task(self.dial_forever(), name=f"dial-{self.neighbor}")

    def dial(self) -> None:
        """Dial this (dynamic) link now: it is needed and has no session."""
        if self._dial_task is None or self._dial_task.done():
            self._dial_task = None
            self.dialer = True
            self.start()

    async def dial_forever(self) -> None:
        """Dial, pump the session, redial when it breaks; a dynamic link dials once: whether
        it is still needed when its session ends is the broker's call (server.py)."""
        while True:
            session, peer_max = await self._dial_with_backoff()
            await self.run_session(session, peer_max)
            if self.dynamic:
                return

    async def _dial_with_backoff(self) -> tuple[Session, int]:
        t = self.config.tuning
        retrying = AsyncRetrying(
            wait=wait_exponential(multiplier=t.reconnect_min_s, min=t.reconnect_min_s,
                                  max=t.reconnect_max_s) + wait_random(0, t.reconnect_min_s),
            before_sleep=self._log_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                self._set_state(LinkState.CONNECTING)
                return await self._dial_once()
        raise AssertionError("unreachable: tenacity retries forever")

    def _log_retry(self, state: RetryCallState) -> None:
        self._set_state(LinkState.DOWN)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, grpc.aio.AioRpcError):
            why = f"{exc.code().name}: {exc.details()}"
        else:
            why = f"{type(exc).__name__}: {exc}"
        # the first failure says what is wrong; the retries after it would only repeat it
        level = logging.INFO if state.attempt_number == 1 else logging.DEBUG
        log.log(level, "link %s: dial %s failed (attempt %d), retrying: %s", self.neighbor,
                self.address, state.attempt_number, why)

    async def _dial_once(self) -> tuple[Session, int]:
        if self._channel is not None and self._channel_address != self.address:
            # the address book moved the peer (a planned link gone, the peer network instead)
            old, self._channel = self._channel, None
            await old.close()
        if self._channel is None:
            self._channel_address = self.address
            tls = self.config.link_tls
            if tls is None:
                self._channel = grpc.aio.insecure_channel(
                    self.address, options=channel_options(self.config))
            else:  # the acceptor's certificate must name the neighbour we mean to reach
                self._channel = grpc.aio.secure_channel(
                    self.address, tls_credentials(tls),
                    options=[*channel_options(self.config),
                             ("grpc.ssl_target_name_override", self.neighbor)])
        call = self._channel.stream_stream(CONNECT_METHOD)()  # raw bytes both ways
        try:
            await call.write(hello(self.config.broker_id, self.config.link_token,
                                   self.config.tuning.max_message_bytes).SerializeToString())
            async with asyncio.timeout(self.config.tuning.hello_timeout_s):
                reply = await call.read()
            if reply is grpc.aio.EOF:
                raise LinkError("stream closed before the hello reply")
            env = link_pb2.Envelope.FromString(reply)
            if env.WhichOneof("kind") != "hello" or env.hello.broker_id != self.neighbor:
                # never the envelope itself: a hello carries the link token, and this is logged
                got = env.hello.broker_id if env.HasField("hello") else env.WhichOneof("kind")
                raise LinkError(f"expected a hello from {self.neighbor!r}, got {got!r}")
            if not hmac.compare_digest(env.hello.link_token, self.config.link_token):
                raise LinkError(f"{self.neighbor!r} answered with a different link token")
        except BaseException:
            call.cancel()
            raise
        return (Session(read=call.read, write=call.write, close=call.cancel),
                env.hello.max_message_bytes)

    # ---- shutdown ---------------------------------------------------------------------------

    async def drain(self, deadline: float) -> None:
        """Wait (until loop time `deadline`) for the queue to empty while the link is up."""
        loop = asyncio.get_running_loop()
        while len(self.queue) and self.connected and not self.cut and loop.time() < deadline:
            await asyncio.sleep(0.01)
        # acknowledge what arrived last, so the peer does not count it as unacked when this
        # session ends; and give the peer's last acknowledgement a moment to arrive
        self.ack_if_due()
        end = min(deadline, loop.time() + 0.15)  # the peer acknowledges every 0.1 s
        while (self.connected and (self._last_in_seq > self._acked_out or self._unacked)
               and loop.time() < end):
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        if self._dial_task is not None:
            self._dial_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dial_task
            self._dial_task = None
        if self._session is not None:
            self._session.replaced.set()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    def status(self) -> dict[str, Any]:
        return {
            "neighbor": self.neighbor,
            "address": self.address,
            "state": self.state.value,
            "dialer": self.dialer,
            "shape": self.shape.as_dict(),
            "queued": len(self.queue),
            "unacked": self._unacked_items,
            "counters": dict(self.counters),
        }


class LinkService:
    """The accepting side: validates the dialer's hello and hands the stream to its Link."""

    def __init__(self, config: BrokerConfig, links: dict[str, Link], metrics: Metrics,
                 accept: Callable[[str], Link | None] | None = None,
                 may_wait: Callable[[str], bool] | None = None) -> None:
        self.config = config
        self.links = links
        self.metrics = metrics
        # the Link for a dialer that is not (yet) a neighbour: a dynamic link (None: refuse)
        self.accept = accept or self.links.get
        # whether a dialer accept refused may become admitted (a broker of the address book)
        self.may_wait = may_wait or (lambda _peer: False)

    def handler(self) -> grpc.GenericRpcHandler:
        # No (de)serializers: undecodable bytes must reach Link.receive_bytes, not fail the RPC.
        method = grpc.stream_stream_rpc_method_handler(self.connect)
        return grpc.method_handlers_generic_handler(LINK_SERVICE, {"Connect": method})

    async def connect(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        greeting = await self._await_hello(context)
        if greeting is None:
            return
        if self.config.link_tls is not None:
            named = peer_common_name(context)
            if named != greeting.broker_id:
                # the link token is shared by the run; the certificate is the broker's own
                self.metrics.dropped(greeting.broker_id, "session_unauthenticated")
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    f"{self.config.broker_id}: the hello claims "
                                    f"{greeting.broker_id!r}, the certificate names {named!r}")
                return
        link = await self._admitted(greeting.broker_id)
        if link is None:
            # a session is admitted only from a current neighbour or a planned one, even from
            # the address book (docs/guide/live-limits.md)
            me, peer = self.config.broker_id, greeting.broker_id
            self.metrics.dropped("(unknown)", "session_not_admitted")  # no label per name
            log.warning("%s: refused a link session from %r (%s): not a neighbour, nor a"
                        " planned one", me, clip(peer)[0], context.peer())
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"{me}: {peer!r} is not a neighbour of {me}, nor a planned"
                                " one: no link session")
            return
        if link.dialing:
            # both dialled at once: the smaller id's stream wins (no await until run_session)
            if self.config.broker_id < greeting.broker_id:
                await context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                    f"{self.config.broker_id}: dial collision with "
                                    f"{greeting.broker_id!r}; my own dial wins")
                return
            link.stop_dialing()
        await context.write(hello(self.config.broker_id, self.config.link_token,
                                  self.config.tuning.max_message_bytes).SerializeToString())
        if link.connected:
            # Anyone with the link token could otherwise take a live neighbour's place (and
            # every takeover cost the real one its session and messages). A restarted
            # neighbour gets in once its old session has ended: a dead process's stream breaks
            # at once, a silent one within the keepalive (server_options), and it redials.
            # No await between this check and run_session taking the link: no race.
            self.metrics.dropped(greeting.broker_id, "session_refused")
            await context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                f"{self.config.broker_id}: {greeting.broker_id!r} already has a "
                                "live link session; a second one is refused")
            return
        await link.run_session(Session(read=context.read, write=context.write, close=_noop),
                               greeting.max_message_bytes)

    async def _admitted(self, peer: str) -> Link | None:
        """The Link for `peer`'s session, or None: not admitted. A broker of the address book
        that is not admitted yet gets ADMIT_WAIT_S to become so: a planned link's dialer
        dials as soon as it has announced it, and the announcement takes two hops (the
        skip ring's supervisor relays it) while the dial takes one."""
        link = self.links.get(peer) or self.accept(peer)
        if link is not None or not self.may_wait(peer):
            return link
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADMIT_WAIT_S
        while link is None and loop.time() < deadline:
            await asyncio.sleep(ADMIT_POLL_S)
            link = self.links.get(peer) or self.accept(peer)
        return link

    async def _await_hello(self, context: grpc.aio.ServicerContext) -> link_pb2.Hello | None:
        me = self.config.broker_id
        try:
            async with asyncio.timeout(self.config.tuning.hello_timeout_s):
                while True:
                    data = await context.read()
                    if data is grpc.aio.EOF:
                        return None
                    try:
                        env = link_pb2.Envelope.FromString(data)
                    except DecodeError:
                        env = None
                    if env is not None and env.WhichOneof("kind") == "hello":
                        break
                    # garbage before the hello: nobody to blame yet, count and keep waiting
                    self.metrics.dropped("(unknown)", "before_hello")
                    log.warning("link stream from %s: dropped %d bytes before hello",
                                context.peer(), len(data))
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"{me}: no hello within {self.config.tuning.hello_timeout_s}s")
            return None
        h = env.hello
        if not hmac.compare_digest(h.link_token, self.config.link_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                f"{me}: wrong link token from {h.broker_id!r}")
        if h.broker_id == me:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{me}: a link to myself")
        link = self.links.get(h.broker_id)
        if link is not None and not link.dynamic and self.config.dials(h.broker_id):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"{me}: link to {h.broker_id!r} is dialled by {me}, not accepted")
        return h


def garble(data: bytes, rng: random.Random) -> bytes:
    """Flip the bits of one random byte (the link shaper's `corrupt`): the receiver then finds
    an undecodable envelope, or a valid one that says something else than was sent."""
    if not data:
        return data
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ rng.randrange(1, 256)]) + data[i + 1:]


def _noop() -> None:
    """The accepting side closes its stream by returning from the handler."""
