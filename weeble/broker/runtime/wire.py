"""Conversions between the core's values/messages and the weeble.v1 protobuf types.

Filters travel as their canonical text and are parsed again on arrival; attribute values as a
oneof of string/int/double/bool. Anything a peer may send that the core cannot represent
raises WireError naming the field, so the link layer can count and drop it.
"""

from __future__ import annotations

from typing import Any

from weeble.broker.core.filters import Filter, FilterSyntaxError
from weeble.broker.core.messages import Message, Notification, Notify, Sub, Switch, Unsub
from weeble.proto.v1 import client_pb2, link_pb2

PROTOCOL_VERSION = 1
_INT64 = (-(2**63), 2**63 - 1)
_UINT32 = 2**32 - 1
_UINT64 = 2**64 - 1


class WireError(ValueError):
    """A message that cannot cross the wire in this direction; the text names the field."""


# ---- values and notifications --------------------------------------------------------------


def value_to_pb(value: Any, field: str) -> client_pb2.Value:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return client_pb2.Value(b=value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise WireError(f"{field}: integer {value} does not fit in 64 bits")
        return client_pb2.Value(i=value)
    if isinstance(value, float):
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
    if not 0 <= n.seq <= _UINT64:
        raise WireError(f"notification.seq: {n.seq} out of range")
    pb = client_pb2.Notification(publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    for name, value in n.attributes.items():
        pb.attributes[name].CopyFrom(value_to_pb(value, f"attributes.{name}"))
    return pb


def notification_from_pb(pb: client_pb2.Notification) -> Notification:
    if not pb.publisher:
        raise WireError("notification.publisher: must not be empty")
    attrs = {k: value_from_pb(v, f"attributes.{k}") for k, v in pb.attributes.items()}
    return Notification(pb.publisher, pb.seq, attrs, pb.published_at)


def parse_filter(text: str, field: str) -> Filter:
    try:
        return Filter.parse(text)
    except FilterSyntaxError as e:
        text = str(e)
        if "position" not in text:  # the position is what a user needs to find the mistake
            text += f" (at position {e.position})"
        raise WireError(f"{field}: {text}") from None


# ---- link messages --------------------------------------------------------------------------


def message_to_envelope(message: Message, seq: int) -> link_pb2.Envelope:
    env = link_pb2.Envelope(seq=seq)
    if isinstance(message, Notify):
        env.notify.notification.CopyFrom(notification_to_pb(message.notification))
    elif isinstance(message, Sub):
        env.sub.CopyFrom(link_pb2.SubMsg(sub_id=message.sub_id, filter=str(message.filter),
                                         tag=_tag(message.tag)))
    elif isinstance(message, Unsub):
        env.unsub.CopyFrom(link_pb2.UnsubMsg(sub_id=message.sub_id, filter=str(message.filter),
                                             tag=_tag(message.tag)))
    elif isinstance(message, Switch):
        env.switch.CopyFrom(link_pb2.SwitchMsg(tag=_tag(message.tag)))
    else:
        raise WireError(f"message: no wire form for {type(message).__name__}")
    return env


def envelope_to_message(env: link_pb2.Envelope) -> Message:
    """Decode one non-hello, non-batch envelope; WireError on an unknown kind or bad field."""
    kind = env.WhichOneof("kind")
    if kind == "notify":
        return Notify(notification_from_pb(env.notify.notification))
    if kind == "sub":
        return Sub(env.sub.sub_id, parse_filter(env.sub.filter, "sub.filter"), env.sub.tag)
    if kind == "unsub":
        return Unsub(env.unsub.sub_id, parse_filter(env.unsub.filter, "unsub.filter"),
                     env.unsub.tag)
    if kind == "switch":
        return Switch(env.switch.tag)
    raise WireError(f"envelope: unexpected kind {kind!r}")


def _tag(tag: int) -> int:
    if not 0 <= tag <= _UINT32:
        raise WireError(f"tag: {tag} out of range")
    return tag


def kind_of(message: Message) -> str:
    return _KINDS.get(type(message), type(message).__name__.lower())


_KINDS: dict[type, str] = {Notify: "notify", Sub: "sub", Unsub: "unsub", Switch: "switch"}


def hello(broker_id: str, link_token: str) -> link_pb2.Envelope:
    return link_pb2.Envelope(
        hello=link_pb2.Hello(broker_id=broker_id, link_token=link_token,
                             protocol_version=PROTOCOL_VERSION)
    )


# ---- batching -------------------------------------------------------------------------------
# A Batch is built from already-serialized envelopes without re-encoding them: in the protobuf
# wire format a repeated message field is the concatenation of (tag, length, bytes) records.

_BATCH_ENVELOPES_TAG = b"\x0a"  # Batch.envelopes: field 1, wire type 2
_ENVELOPE_BATCH_TAG = b"\x7a"  # Envelope.batch: field 15, wire type 2


def _varint(n: int) -> bytes:
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
    inner = b"".join(_BATCH_ENVELOPES_TAG + _varint(len(e)) + e for e in envelopes)
    return _ENVELOPE_BATCH_TAG + _varint(len(inner)) + inner
