"""Conversions between the core's values/messages and the weeble.v1 protobuf types.

Filters travel as their canonical text and are parsed again on arrival (once per distinct
text: a refresh of a known filter is a lookup), within the size limits of `Limits`; attribute
values as a oneof of string/int/double/bool. Anything a peer may send that the core cannot
represent raises WireError naming the field, so the link layer can count and drop it.

Notifications are decoded once per broker and forwarded as the bytes they arrived in: the
receive paths parse the *View messages of the .proto files (wire-identical, notifications left
as bytes), and the send paths wrap those bytes in an envelope, a batch or a subscription event
by concatenating protobuf records (tag, length, bytes), never re-encoding the notification.
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from weeble.codec.wire_skipring import SKIP_RING_TYPES, SkipRingWireError
from weeble.codec.wire_skipring import from_pb as skip_ring_from_pb
from weeble.codec.wire_skipring import to_pb as skip_ring_to_pb
from weeble.core.filters import (
    Filter,
    FilterLimitError,
    FilterSyntaxError,
    Value,
    attribute_error,
)
from weeble.core.messages import (
    Adv,
    AskPlace,
    Begin,
    Bye,
    End,
    Lock,
    Message,
    Notification,
    Notify,
    Place,
    Recolor,
    RecolorAck,
    Reconfigure,
    Relayed,
    Reroute,
    Separator,
    Sub,
    Switch,
    Unadv,
    Unlock,
    Unsub,
)
from weeble.core.optimize.messages import Broadcast, Propose
from weeble.core.sketch.bloom import MAX_BITS, MAX_HASHES, BloomFilter
from weeble.core.sketch.messages import AeCorrect, AeObserve, AeReply
from weeble.proto.v1 import client_pb2, link_pb2

PROTOCOL_VERSION = 1
_INT64 = (-(2**63), 2**63 - 1)
_UINT32 = 2**32 - 1
UINT64_MAX = 2**64 - 1


class WireError(ValueError):
    """A message that cannot cross the wire in this direction; the text names the field."""


# ---- bounds: what one envelope may make a broker do ----------------------------------------
# Every count a peer chooses is checked when its envelope is decoded, before the core sees it;
# over a bound, WireError names the field and the bound (the link drops the envelope and
# counts it, dropped_malformed). The sizes of filters and notifications are `Limits` (Tuning);
# a sketch's m and k are the core's (core/sketch/bloom.py: MAX_BITS, MAX_HASHES).
# docs/guide/live-limits.md lists them all.
MAX_BATCH = 256  # envelopes in one Batch (Tuning.link_batch_max is at most this): a batch
# is handled without a pause, and a Sub of a new filter takes ~0.3 ms on a loaded machine
MAX_PATH = 4096  # brokers in a lock's path, a separator, an optimizer broadcast or cycle
MAX_MOVES = 4096  # moves of one recolor or reconfigure
MAX_RIDS = 1024  # reconfiguration ids of one recolor
MAX_ITEMS = 1024  # subscriptions of one anti-entropy list (each a filter to parse and a table
# change: ~1 ms at load 14 on 2 cores, so up to ~1 s of loop there; a held set larger than
# this cannot be sent in an exact round),
# skip-ring trie entries and publications


def check_count(n: int, field: str, bound: str, limit: int) -> None:
    """WireError when a peer-chosen count `n` of `field` is over `bound` (= `limit`)."""
    if n > limit:
        raise WireError(f"{field}: {n}, over the bound {bound} = {limit}")


# ---- values and notifications --------------------------------------------------------------


def value_to_pb(value: Any, field: str) -> client_pb2.Value:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return client_pb2.Value(b=value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise WireError(f"{field}: integer {value} does not fit in 64 bits")
        return client_pb2.Value(i=value)
    if isinstance(value, float):
        if not math.isfinite(value):  # refused at every entry (filters.attribute_error)
            raise WireError(f"{field}: {attribute_error(field.rpartition('.')[2], value)}")
        return client_pb2.Value(d=value)
    if isinstance(value, str):
        return client_pb2.Value(s=value)
    raise WireError(f"{field}: unsupported value type {type(value).__name__}")


def value_from_pb(value: client_pb2.Value, field: str) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None:
        raise WireError(f"{field}: value has no member set")
    return getattr(value, kind)


def notification_to_pb(n: Notification) -> client_pb2.Notification:
    if not 0 <= n.seq <= UINT64_MAX:
        raise WireError(f"notification.seq: {n.seq} out of range")
    pb = client_pb2.Notification(publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    for name, value in n.attributes.items():
        pb.attributes[name].CopyFrom(value_to_pb(value, f"attributes.{name}"))
    return pb


def notification_from_pb(pb: client_pb2.Notification,
                         field: str = "notification") -> Notification:
    if not pb.publisher:
        raise WireError(f"{field}.publisher: must not be empty")
    return Notification(pb.publisher, pb.seq, _attributes(pb, field), pb.published_at)


def _attributes(pb: client_pb2.Notification, field: str) -> dict[str, Value]:
    attrs: dict[str, Value] = {}
    m = pb.attributes
    for k in m:  # keys and lookups: the map's items() is a slow pure-Python view
        v = m[k]
        kind = v.WhichOneof("kind")
        if kind is None:
            raise WireError(f"{field}.attributes.{k}: value has no member set")
        value = attrs[k] = getattr(v, kind)
        if kind == "d" and not math.isfinite(value):
            raise WireError(f"{field}.attributes.{k}: {attribute_error(k, value)}")
    return attrs


def decode_notification(data: bytes, field: str = "notification",
                        parse: Parser | None = None) -> Notification:
    """Decode one encoded Notification; WireError (naming `field`) if it is not one. `parse`:
    the caller's `notification_parser()` (one message for all its notifications)."""
    try:
        pb = (parse or _decode)(data)
    except DecodeError as e:
        raise WireError(f"{field}: undecodable ({e})") from None
    return notification_from_pb(pb, field)


def decode_publication(data: bytes, field: str, client: str, now: float,
                       parse: Parser | None = None) -> tuple[Notification, bytes]:
    """Decode a notification a client publishes: an empty publisher is the client, an unset
    published_at is `now`. Returns it and its encoded form with those defaults filled in.
    `parse` as in `decode_notification`."""
    try:
        pb = (parse or _decode)(data)
    except DecodeError as e:
        raise WireError(f"{field}: undecodable ({e})") from None
    publisher, stamp = pb.publisher, pb.published_at
    if not publisher or not stamp:
        data = with_defaults(data, None if publisher else client, None if stamp else now)
        publisher, stamp = publisher or client, stamp or now
    return Notification(publisher, pb.seq, _attributes(pb, field), stamp), data


_decode = client_pb2.Notification.FromString
Parser = Callable[[bytes], client_pb2.Notification]
PARSER_RENEW_BYTES = 1 << 16


def notification_parser() -> Parser:
    """A parser of encoded Notifications into one reused message, for one thread's hot path
    (a broker's publish streams, a link's receive): the message is valid until its next parse,
    so the caller copies out what it needs at once. `FromString` makes a message and an arena
    per notification, and protobuf's allocator calls `malloc_trim(0)` every 10,000 arena frees,
    which hands the heap's free pages back to the kernel; a traced broker's next trace entries
    then fault them in again (perf: ~5 % of its loop thread at 120,000 notifications/s). The
    message is renewed after `PARSER_RENEW_BYTES` of input (its arena keeps what every parse
    since allocated). Brokers use it when they trace: untraced, whose heap holds no trace
    entries, it measured 0.3 µs a notification slower than `FromString` (docs/performance.md)."""
    pb = client_pb2.Notification()
    left = PARSER_RENEW_BYTES

    def parse(data: bytes) -> client_pb2.Notification:
        nonlocal pb, left
        left -= len(data)
        if left < 0:
            pb = client_pb2.Notification()
            left = PARSER_RENEW_BYTES
        pb.ParseFromString(data)  # clears it first
        return pb

    return parse


def encode_notification(n: Notification) -> bytes:
    return notification_to_pb(n).SerializeToString()


def with_defaults(data: bytes, publisher: str | None, published_at: float | None) -> bytes:
    """The encoded notification with `publisher` and/or `published_at` set, without decoding
    it: protobuf merges concatenated messages and the last value of a scalar field wins."""
    if publisher is not None:
        raw = publisher.encode()
        data += b"\x0a" + _varint(len(raw)) + raw  # Notification.publisher, field 1
    if published_at is not None:
        data += b"\x21" + struct.pack("<d", published_at)  # published_at, field 4, fixed64
    return data


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request or envelope may cost a broker (Tuning.max_filter_bytes and friends).

    Checked here, at the runtime boundary, before the core sees anything: a filter's text is
    measured before it is parsed and its terms are counted while it is parsed, so the largest
    filter a peer can send costs a bounded, small amount of the event loop."""

    filter_bytes: int = 16 * 1024
    filter_terms: int = 256
    filter_attributes: int = 128
    notification_bytes: int = 1024 * 1024


DEFAULT_LIMITS = Limits()


def parse_filter(text: str, field: str, limits: Limits = DEFAULT_LIMITS) -> Filter:
    """The filter of `text`, parsed at most once per distinct text (see FilterCache); WireError
    naming `field` and, for a filter over a limit, the limit's Tuning name and value."""
    size = len(text)
    if size > limits.filter_bytes or (size * 4 > limits.filter_bytes
                                      and len(text.encode()) > limits.filter_bytes):
        raise WireError(f"{field}: {len(text.encode())} bytes, over the limit "
                        f"max_filter_bytes={limits.filter_bytes}")
    try:
        f = FILTERS.get(text, limits.filter_terms)
    except FilterLimitError as e:
        raise WireError(f"{field}: {e} (limit max_filter_terms={e.limit})") from None
    except FilterSyntaxError as e:
        text = str(e)
        if "position" not in text:  # the position is what a user needs to find the mistake
            text += f" (at position {e.position})"
        raise WireError(f"{field}: {text}") from None
    if len(f.attributes) > limits.filter_attributes:
        raise WireError(f"{field}: {len(f.attributes)} attributes, over the limit "
                        f"max_filter_attributes={limits.filter_attributes}")
    return f


def check_notification_size(data: bytes, field: str, limits: Limits) -> None:
    if len(data) > limits.notification_bytes:
        raise WireError(f"{field}: {len(data)} bytes, over the limit "
                        f"max_notification_bytes={limits.notification_bytes}")


class FilterCache:
    """Parsed filters by text: a refresh or a Sub of a known filter costs a lookup.

    Refreshes repeat the same filter texts every rho on every hop, and a Filter is immutable, so
    one parse per distinct text serves them all (failures are not cached: they raise). Bounded
    by entries and by the characters of the texts it keeps (least recently used go first).
    Shared by the brokers of one process, so each distinct text is parsed at most once per
    broker."""

    def __init__(self, max_entries: int = 8192, max_chars: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._filters: OrderedDict[tuple[str, int], Filter] = OrderedDict()
        self._chars = 0
        self.parses = 0  # texts actually parsed (misses), for tests and metrics
        self.hits = 0

    def get(self, text: str, max_terms: int) -> Filter:
        key = (text, max_terms)
        f = self._filters.get(key)
        if f is not None:
            self._filters.move_to_end(key)
            self.hits += 1
            return f
        self.parses += 1
        f = Filter.parse(text, max_terms=max_terms)
        self._filters[key] = f
        self._chars += len(text)
        while len(self._filters) > self.max_entries or self._chars > self.max_chars:
            (old, _), _ = self._filters.popitem(last=False)
            self._chars -= len(old)
        return f

    def __len__(self) -> int:
        return len(self._filters)


FILTERS = FilterCache()


# ---- link messages --------------------------------------------------------------------------


# Routing control messages: (core type, envelope/ControlMsg field, id attribute, pb type).
_CONTROL: tuple[tuple[type, str, str, Any], ...] = (
    (Sub, "sub", "sub_id", link_pb2.SubMsg),
    (Unsub, "unsub", "sub_id", link_pb2.UnsubMsg),
    (Adv, "adv", "adv_id", link_pb2.AdvMsg),
    (Unadv, "unadv", "adv_id", link_pb2.UnadvMsg),
)
_CONTROL_BY_TYPE = {t: (name, ident, pb) for t, name, ident, pb in _CONTROL}
_CONTROL_BY_NAME = {name: (t, ident) for t, name, ident, _ in _CONTROL}


def _control_pb(message: Any) -> tuple[str, Any]:
    name, ident, pb = _CONTROL_BY_TYPE[type(message)]
    return name, pb(**{ident: getattr(message, ident)}, filter=str(message.filter),
                    tag=_tag(message.tag), gray=message.gray)


def _control_from(name: str, pb: Any, limits: Limits) -> Any:
    t, ident = _CONTROL_BY_NAME[name]
    return t(getattr(pb, ident), parse_filter(pb.filter, f"{name}.filter", limits), pb.tag,
             pb.gray)


def _moves_pb(moves: Any) -> list[link_pb2.MoveMsg]:
    return [link_pb2.MoveMsg(broker=b, parent=p or "", leaves=p is None) for b, p in moves]


def _moves_from(pbs: Any, field: str) -> tuple[tuple[str, str | None], ...]:
    out: list[tuple[str, str | None]] = []
    for m in pbs:
        if not m.broker or (not m.leaves and not m.parent):
            raise WireError(f"{field}: a move needs a broker and a parent (or leaves)")
        out.append((m.broker, None if m.leaves else m.parent))
    return tuple(out)


def _rid(rid: str, field: str) -> str:
    if not rid:
        raise WireError(f"{field}.rid: must not be empty")
    return rid


def message_to_envelope(message: Message, seq: int) -> link_pb2.Envelope:
    env = link_pb2.Envelope(seq=seq)
    t = type(message)
    if t is Notify:
        m: Any = message
        env.notify.notification.CopyFrom(notification_to_pb(m.notification))
        env.notify.gray = m.gray
        env.notify.color = _tag(m.color)
    elif t in _CONTROL_BY_TYPE:
        name, pb = _control_pb(message)
        getattr(env, name).CopyFrom(pb)
    elif t is Switch:
        env.switch.CopyFrom(link_pb2.SwitchMsg(tag=_tag(message.tag)))  # type: ignore[union-attr]
    elif t is Lock:
        m = message
        env.lock.CopyFrom(link_pb2.LockMsg(rid=m.rid, path=list(m.path), edge_a=m.edge[0],
                                           edge_b=m.edge[1], refused=m.refused))
    elif t is Begin:
        env.begin.rid = message.rid  # type: ignore[union-attr]
    elif t is Relayed or t is Reroute:
        m = message
        name, pb = _control_pb(m.message)
        target = env.relayed if t is Relayed else env.reroute
        target.rid = m.rid
        getattr(target.message, name).CopyFrom(pb)
        if t is Relayed:
            target.reroute = m.reroute
            if m.lease is not None:
                target.lease = m.lease
    elif t is Separator:
        m = message
        env.separator.CopyFrom(link_pb2.SeparatorMsg(rid=m.rid, brokers=sorted(m.brokers),
                                                     relayed=m.relayed))
    elif t is End:
        env.end.rid = message.rid  # type: ignore[union-attr]
    elif t is Unlock:
        m = message
        env.unlock.CopyFrom(link_pb2.UnlockMsg(rid=m.rid, flip=m.flip))
    elif t is Bye:
        env.bye.SetInParent()
    elif t is Recolor:
        m = message
        env.recolor.CopyFrom(link_pb2.RecolorMsg(color=_tag(m.color), moves=_moves_pb(m.moves),
                                                 rids=list(m.rids), round=_tag(m.round),
                                                 activating=m.activating))
    elif t is RecolorAck:
        env.recolor_ack.color = _tag(message.color)  # type: ignore[union-attr]
    elif t is AskPlace:
        env.ask_place.SetInParent()
    elif t is Place:
        env.place.pointer = message.pointer  # type: ignore[union-attr]
    elif t is Reconfigure:
        m = message
        env.reconfigure.CopyFrom(link_pb2.ReconfigureMsg(rid=m.rid, moves=_moves_pb(m.moves)))
    elif t is Broadcast:
        m = message
        f = m.summary
        env.opt_broadcast.CopyFrom(link_pb2.OptBroadcastMsg(
            path=list(m.path), p=list(m.p), c=list(m.c), summary=f.to_bytes(), m=f.m, k=f.k,
            seed=f.seed & _UINT32))
    elif t is Propose:
        m = message
        env.opt_propose.CopyFrom(link_pb2.OptProposeMsg(
            rid=m.rid, path=list(m.path), p=list(m.p), c=list(m.c), cost=list(m.cost)))
    elif t is AeObserve:
        m = message
        env.ae_observe.CopyFrom(link_pb2.AeObserveMsg(round=m.round_no, full=m.full, m=m.m,
                                                      k=m.k, seed=m.seed & _UINT32))
    elif t is AeReply:
        m = message
        pb = link_pb2.AeReplyMsg(round=m.round_no, cardinality=m.cardinality,
                                 items=_items_pb(m.items))
        if m.sketch is not None:
            _sketch_pb(pb, m.sketch, "sketch")
        env.ae_reply.CopyFrom(pb)
    elif t is AeCorrect:
        m = message
        pb = link_pb2.AeCorrectMsg(round=m.round_no, subscribe=_items_pb(m.subscribe),
                                   unsubscribe=_items_pb(m.unsubscribe))
        if m.probe is not None:
            _sketch_pb(pb, m.probe, "probe")
        env.ae_correct.CopyFrom(pb)
    elif t in SKIP_RING_TYPES:
        try:
            env.skip_ring.CopyFrom(skip_ring_to_pb(message))
        except SkipRingWireError as e:
            raise WireError(str(e)) from None
    else:
        raise WireError(f"message: no wire form for {type(message).__name__}")
    return env


def _items_pb(items: Any) -> list[link_pb2.AeItem]:
    return [link_pb2.AeItem(sub_id=s, filter=str(f)) for s, f in items]


def _items_from(pbs: Any, field: str, limits: Limits) -> tuple[tuple[str, Filter], ...]:
    check_count(len(pbs), field, "MAX_ITEMS", MAX_ITEMS)
    return tuple((m.sub_id, parse_filter(m.filter, f"{field}.filter", limits)) for m in pbs)


def _sketch_pb(pb: Any, f: BloomFilter, field: str) -> None:
    setattr(pb, field, f.to_bytes())
    pb.m, pb.k, pb.seed = f.m, f.k, f.seed & _UINT32
    setattr(pb, f"has_{field}", True)


def _check_sketch(m: int, k: int, field: str) -> None:
    if not 8 <= m <= MAX_BITS:
        raise WireError(f"{field}.m: {m} bits, outside 8 .. MAX_BITS = {MAX_BITS}")
    if not 1 <= k <= MAX_HASHES:
        raise WireError(f"{field}.k: {k} hashes, outside 1 .. MAX_HASHES = {MAX_HASHES}")


def _sketch_from(pb: Any, field: str) -> BloomFilter | None:
    if not getattr(pb, f"has_{field}"):
        return None
    _check_sketch(pb.m, pb.k, field)
    try:
        return BloomFilter.from_bytes(getattr(pb, field), m=pb.m, k=pb.k, seed=pb.seed)
    except ValueError as e:
        raise WireError(f"{field}: {e}") from None


def wire_size(message: Message) -> int:
    """The bytes `message` takes on a link (its envelope, sequence number and ack aside): what
    the simulator's `send` records say a message costs, as a live broker's do."""
    return message_to_envelope(message, 0).ByteSize()


def envelope_to_message(env: link_pb2.Envelope, limits: Limits = DEFAULT_LIMITS) -> Message:
    """Decode one non-hello, non-batch envelope; WireError on an unknown kind or bad field."""
    kind = env.WhichOneof("kind")
    if kind == "notify":
        n = env.notify
        return Notify(notification_from_pb(n.notification), n.gray, n.color)
    if kind in _CONTROL_BY_NAME:
        return _control_from(kind, getattr(env, kind), limits)
    if kind == "switch":
        return Switch(env.switch.tag)
    if kind == "lock":
        m = env.lock
        check_count(len(m.path), "lock.path", "MAX_PATH", MAX_PATH)
        path = tuple(m.path)
        if len(path) < 2 or not m.edge_a or not m.edge_b:
            raise WireError("lock: needs a path and both ends of the link to remove")
        return Lock(_rid(m.rid, "lock"), path, (m.edge_a, m.edge_b), m.refused)
    if kind == "begin":
        return Begin(_rid(env.begin.rid, "begin"))
    if kind == "relayed" or kind == "reroute":
        m = getattr(env, kind)
        inner = m.message.WhichOneof("kind")
        if inner is None:
            raise WireError(f"{kind}.message: no control message set")
        control = _control_from(inner, getattr(m.message, inner), limits)
        if kind == "relayed":
            lease = m.lease if m.HasField("lease") else None
            if lease is not None and not math.isfinite(lease):
                raise WireError(f"relayed.lease: {lease} is not a finite number of seconds")
            return Relayed(_rid(m.rid, kind), control, m.reroute, lease)
        return Reroute(_rid(m.rid, kind), control)
    if kind == "separator":
        m = env.separator
        check_count(len(m.brokers), "separator.brokers", "MAX_PATH", MAX_PATH)
        return Separator(_rid(m.rid, kind), frozenset(m.brokers), m.relayed)
    if kind == "end":
        return End(_rid(env.end.rid, kind))
    if kind == "unlock":
        return Unlock(_rid(env.unlock.rid, kind), env.unlock.flip)
    if kind == "bye":
        return Bye()
    if kind == "recolor":
        m = env.recolor
        check_count(len(m.moves), "recolor.moves", "MAX_MOVES", MAX_MOVES)
        check_count(len(m.rids), "recolor.rids", "MAX_RIDS", MAX_RIDS)
        return Recolor(m.color, _moves_from(m.moves, "recolor.moves"), tuple(m.rids), m.round,
                       m.activating)
    if kind == "recolor_ack":
        return RecolorAck(env.recolor_ack.color)
    if kind == "ask_place":
        return AskPlace()
    if kind == "place":
        if not env.place.pointer:
            raise WireError("place.pointer: must not be empty")
        return Place(env.place.pointer)
    if kind == "reconfigure":
        m = env.reconfigure
        check_count(len(m.moves), "reconfigure.moves", "MAX_MOVES", MAX_MOVES)
        return Reconfigure(_rid(m.rid, kind), _moves_from(m.moves, "reconfigure.moves"))
    if kind == "opt_broadcast":
        m = env.opt_broadcast
        check_count(len(m.path), "opt_broadcast.path", "MAX_PATH", MAX_PATH)
        if not m.path or len(m.p) != len(m.path) or len(m.c) != len(m.path) - 1:
            raise WireError("opt_broadcast: needs a path, one p per broker, one c per link")
        _check_sketch(m.m, m.k, "opt_broadcast")
        try:
            summary = BloomFilter.from_bytes(m.summary, m=m.m, k=m.k, seed=m.seed)
        except ValueError as e:
            raise WireError(f"opt_broadcast.summary: {e}") from None
        return Broadcast(tuple(m.path), tuple(m.p), tuple(m.c), summary)
    if kind == "opt_propose":
        m = env.opt_propose
        n = len(m.path)
        check_count(n, "opt_propose.path", "MAX_PATH", MAX_PATH)
        if n < 3 or not len(m.p) == len(m.c) == len(m.cost) == n:
            raise WireError("opt_propose: a cycle of 3 or more, one p, c and cost per broker")
        return Propose(_rid(m.rid, kind), tuple(m.path), tuple(m.p), tuple(m.c),
                       tuple(m.cost))
    if kind == "ae_observe":
        m = env.ae_observe
        if not m.full:  # an exact round names no sketch
            _check_sketch(m.m, m.k, "ae_observe")
        return AeObserve(m.round, m.full, m.m, m.k, m.seed)
    if kind == "ae_reply":
        m = env.ae_reply
        return AeReply(m.round, m.cardinality, _sketch_from(m, "sketch"),
                       _items_from(m.items, "ae_reply.items", limits))
    if kind == "ae_correct":
        m = env.ae_correct
        return AeCorrect(m.round, _items_from(m.subscribe, "ae_correct.subscribe", limits),
                         _items_from(m.unsubscribe, "ae_correct.unsubscribe", limits),
                         _sketch_from(m, "probe"))
    if kind == "skip_ring":
        sr = env.skip_ring
        check_count(len(sr.check_trie.entries), "skip_ring.check_trie.entries", "MAX_ITEMS",
                    MAX_ITEMS)
        check_count(len(sr.deliver_publications.pubs), "skip_ring.deliver_publications.pubs",
                    "MAX_ITEMS", MAX_ITEMS)
        try:
            return skip_ring_from_pb(env.skip_ring)  # type: ignore[no-any-return]
        except SkipRingWireError as e:
            raise WireError(str(e)) from None
    raise WireError(f"envelope: unexpected kind {kind!r}")


def _tag(tag: int) -> int:
    if not 0 <= tag <= _UINT32:
        raise WireError(f"tag: {tag} out of range")
    return tag


def kind_of(message: Message) -> str:
    return _KINDS.get(type(message), type(message).__name__.lower())


_KINDS: dict[type, str] = {Notify: "notify", Sub: "sub", Unsub: "unsub", Switch: "switch",
                           Adv: "adv", Unadv: "unadv", Lock: "lock", Begin: "begin",
                           Relayed: "relayed", Reroute: "reroute", Separator: "separator",
                           End: "end", Unlock: "unlock", Bye: "bye", Recolor: "recolor",
                           RecolorAck: "recolor_ack", AskPlace: "ask_place", Place: "place",
                           Reconfigure: "reconfigure", Broadcast: "opt_broadcast",
                           Propose: "opt_propose"}


def hello(broker_id: str, link_token: str, max_message_bytes: int = 0) -> link_pb2.Envelope:
    return link_pb2.Envelope(
        hello=link_pb2.Hello(broker_id=broker_id, link_token=link_token,
                             protocol_version=PROTOCOL_VERSION,
                             max_message_bytes=max_message_bytes)
    )


# ---- batching -------------------------------------------------------------------------------
# A Batch is built from already-serialized envelopes without re-encoding them: in the protobuf
# wire format a repeated message field is the concatenation of (tag, length, bytes) records.

_BATCH_ENVELOPES_TAG = b"\x0a"  # Batch.envelopes: field 1, wire type 2
_ENVELOPE_BATCH_TAG = b"\x7a"  # Envelope.batch: field 15, wire type 2
_SMALL = [bytes((n,)) for n in range(128)]


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    if n < 16384:  # lengths and sequence numbers mostly end here: no loop
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 268435456:  # link sequence numbers of a long run
        if n < 2097152:
            return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, ((n >> 14) & 0x7F) | 0x80,
                      n >> 21))
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def batch_bytes(envelopes: list[bytes]) -> bytes:
    return _ENVELOPE_BATCH_TAG + _length_delimited(_BATCH_ENVELOPES_TAG, envelopes)


_ENVELOPE_ACK_TAG = b"\x10"  # Envelope.ack: field 2, varint


def with_ack(envelope: bytes, ack: int) -> bytes:
    """An encoded Envelope with its `ack` set: appending a field to an encoded message sets
    it (the protobuf wire format merges), so nothing is encoded again. ack > 0."""
    return envelope + _ENVELOPE_ACK_TAG + _varint(ack)


def envelope_seq(envelope: bytes) -> int:
    """The `seq` of an encoded Envelope written by this module or by protobuf (field 1 comes
    first); 0 when it does not start with one (a garbled copy, an ack alone)."""
    if not envelope or envelope[0] != 0x08:
        return 0
    n = shift = 0
    for i in range(1, min(len(envelope), 11)):
        byte = envelope[i]
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n
        shift += 7
    return 0


# Envelope{seq = 1 (varint), notify = 13 {notification = 1 {...}}}
_ENVELOPE_SEQ_TAG = b"\x08"
_ENVELOPE_NOTIFY_TAG = b"\x6a"
_NOTIFY_NOTIFICATION_TAG = b"\x0a"
_NOTIFY_COLOR_TAG = b"\x18"  # NotifyMsg.color: field 3, varint
# SubscriptionEvent{sub_id = 1, notification = 3, batch = 4 {notifications = 1}}
_EVENT_SUB_ID_TAG = b"\x0a"
_EVENT_NOTIFICATION_TAG = b"\x1a"
_EVENT_BATCH_TAG = b"\x22"
_BATCH_NOTIFICATIONS_TAG = b"\x0a"
# PublishRequest{client = 1, notifications = 2}
_REQUEST_CLIENT_TAG = b"\x0a"
_REQUEST_NOTIFICATIONS_TAG = b"\x12"


def notify_envelope(seq: int, notification: bytes, color: int = 0) -> bytes:
    """The encoded Envelope(seq, notify=NotifyMsg(notification, color)) around an encoded
    notification (a gray one is encoded by message_to_envelope; it is rare)."""
    n = len(notification)
    if color:
        inner = (_NOTIFY_NOTIFICATION_TAG + _varint(n) + notification + _NOTIFY_COLOR_TAG
                 + _varint(color))
        return (_ENVELOPE_SEQ_TAG + _varint(seq) + _ENVELOPE_NOTIFY_TAG + _varint(len(inner))
                + inner)
    if n < 126:  # the common case, without a call per length: both lengths fit one byte
        return (_ENVELOPE_SEQ_TAG + _varint(seq) + _ENVELOPE_NOTIFY_TAG + _SMALL[n + 2]
                + _NOTIFY_NOTIFICATION_TAG + _SMALL[n] + notification)
    inner = _NOTIFY_NOTIFICATION_TAG + _varint(n) + notification
    return _ENVELOPE_SEQ_TAG + _varint(seq) + _ENVELOPE_NOTIFY_TAG + _varint(len(inner)) + inner


def subscription_event(sub_id: bytes, notifications: list[bytes]) -> bytes:
    """The encoded SubscriptionEvent carrying encoded notifications: one as `notification`,
    several as a NotificationBatch. `sub_id` is the encoded `sub_id` field (`sub_id_field`)."""
    if len(notifications) == 1:
        n = notifications[0]
        return sub_id + _EVENT_NOTIFICATION_TAG + _varint(len(n)) + n
    return sub_id + _EVENT_BATCH_TAG + _length_delimited(_BATCH_NOTIFICATIONS_TAG, notifications)


def _length_delimited(tag: bytes, items: list[bytes]) -> bytes:
    """The records (tag, length, item) of a repeated field, with their total length first."""
    small, varint = _SMALL_TAGGED[tag], _varint
    inner = b"".join([(small[len(i)] if len(i) < 128 else tag + varint(len(i))) + i
                      for i in items])
    return varint(len(inner)) + inner


def sub_id_field(sub_id: str) -> bytes:
    raw = sub_id.encode()
    return _EVENT_SUB_ID_TAG + _varint(len(raw)) + raw


def publish_request(client: str, notifications: list[bytes]) -> bytes:
    """The encoded PublishRequest of a client around encoded notifications."""
    raw = client.encode()
    head = _REQUEST_CLIENT_TAG + _varint(len(raw)) + raw if raw else b""
    return head + b"".join([_REQUEST_NOTIFICATIONS_TAG + _varint(len(n)) + n
                            for n in notifications])


def framed_size(n: int) -> int:
    """Bytes that an n-byte item takes inside a batch: its tag, its length and itself."""
    return n + 1 + len(_varint(n))


# tag + one-byte length, for each tag that frames repeated items above
_SMALL_TAGGED = {tag: [tag + b for b in _SMALL]
                 for tag in (_BATCH_ENVELOPES_TAG, _BATCH_NOTIFICATIONS_TAG)}
