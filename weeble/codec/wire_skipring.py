"""The skip-ring messages (seed 003, mode skip_ring) on the wire: `Envelope.skip_ring`.

One envelope kind carries them all (proto SkipRingMsg: topic, node, and one of the kinds).
Decoding checks shapes only (a label is any integer, a hash 16 bytes, a prefix at most 128 bits):
whether a label lies in the label space is the core's to judge, which refuses and counts junk
exactly as in the simulator.
"""

from __future__ import annotations

from typing import Any

from weeble.core.overlay.skipring.messages import (
    Announce,
    CheckAndPublish,
    CheckTrie,
    Config,
    ConfigRequest,
    ConfigRequestFor,
    DeliverPublications,
    Introduce,
    IntroduceShortcut,
    LabelFix,
    NotMember,
    Probe,
    Publish,
    PublishNew,
    Ref,
    RemoveMe,
    SendPrefix,
    Subscribe,
    Suspect,
    Unsubscribe,
)
from weeble.core.overlay.skipring.trie import KEY_BITS, Prefix, Publication, Summary
from weeble.proto.v1 import link_pb2

_U64 = (1 << 64) - 1

SKIP_RING_TYPES: frozenset[type] = frozenset({
    Announce, CheckAndPublish, CheckTrie, Config, ConfigRequest, ConfigRequestFor,
    DeliverPublications, Introduce, IntroduceShortcut, LabelFix, NotMember, Probe, Publish,
    PublishNew, RemoveMe, SendPrefix, Subscribe, Suspect, Unsubscribe})


class SkipRingWireError(ValueError):
    """A skip-ring envelope whose fields cannot be a skip-ring message."""


def _prefix_pb(p: Prefix) -> link_pb2.SrPrefix:
    bits = p.bits << (KEY_BITS - p.length) if p.length else 0
    return link_pb2.SrPrefix(hi=bits >> 64, lo=bits & _U64, length=p.length)


def _prefix(pb: link_pb2.SrPrefix) -> Prefix:
    if pb.length > KEY_BITS:
        raise SkipRingWireError(f"skip_ring: a prefix of {pb.length} bits (at most {KEY_BITS})")
    bits = (pb.hi << 64) | pb.lo
    return Prefix(bits >> (KEY_BITS - pb.length) if pb.length else 0, pb.length)


def _summary_pb(s: Summary) -> link_pb2.SrSummary:
    return link_pb2.SrSummary(label=_prefix_pb(s.label), hash=s.hash.to_bytes(16, "big"))


def _summary(pb: link_pb2.SrSummary) -> Summary:
    if len(pb.hash) != 16:
        raise SkipRingWireError(f"skip_ring: a trie hash of {len(pb.hash)} bytes (16)")
    return Summary(_prefix(pb.label), int.from_bytes(pb.hash, "big"))


def _pub_pb(p: Publication) -> link_pb2.SrPublication:
    return link_pb2.SrPublication(publisher=p.publisher, seq=p.seq & _U64, payload=p.payload)


def _pub(pb: link_pb2.SrPublication) -> Publication:
    return Publication(publisher=pb.publisher, seq=pb.seq, payload=pb.payload)


def _ref_pb(r: Ref | None) -> link_pb2.SrRef | None:
    return None if r is None else link_pb2.SrRef(node=r.node, label=r.label)


def to_pb(m: Any) -> link_pb2.SkipRingMsg:
    """The SkipRingMsg of a core skip-ring message."""
    out = link_pb2.SkipRingMsg(topic=m.topic, node=getattr(m, "node", ""))
    t = type(m)
    if t is Subscribe:
        out.subscribe.SetInParent()
    elif t is Unsubscribe:
        out.unsubscribe.SetInParent()
    elif t is ConfigRequest:
        out.config_request.SetInParent()
    elif t is ConfigRequestFor:
        out.config_request_for = m.about
    elif t is Suspect:
        out.suspect = m.about
    elif t is Announce:
        out.announce = m.about
    elif t is Publish:
        out.publish.CopyFrom(_pub_pb(m.pub))
    elif t is Config:
        c = out.config
        c.grant = m.label is None
        c.label = 0 if m.label is None else m.label
        for name in ("pred", "succ"):
            ref = _ref_pb(getattr(m, name))
            if ref is not None:
                getattr(c, name).CopyFrom(ref)
    elif t is Probe:
        out.probe.SetInParent()
    elif t is NotMember:
        out.not_member.SetInParent()
    elif t is Introduce:
        out.introduce.CopyFrom(link_pb2.SrIntroduce(
            label=m.label, has_belief=m.belief is not None,
            belief=0 if m.belief is None else m.belief, via_ring=m.via_ring))
    elif t is LabelFix:
        out.label_fix = m.label
    elif t is IntroduceShortcut:
        out.introduce_shortcut = m.label
    elif t is RemoveMe:
        out.remove_me.SetInParent()
    elif t is CheckTrie:
        ct = out.check_trie
        ct.entries.extend(_summary_pb(e) for e in m.entries)
        if m.parent is not None:
            ct.parent.CopyFrom(_prefix_pb(m.parent))
        ct.empty = m.empty
    elif t is CheckAndPublish:
        out.check_and_publish.CopyFrom(link_pb2.SrCheckAndPublish(
            summary=_summary_pb(m.summary), prefix=_prefix_pb(m.prefix)))
    elif t is SendPrefix:
        out.send_prefix.CopyFrom(_prefix_pb(m.prefix))
    elif t is DeliverPublications:
        out.deliver_publications.pubs.extend(_pub_pb(p) for p in m.pubs)
    elif t is PublishNew:
        out.publish_new.CopyFrom(_pub_pb(m.pub))
    else:
        raise SkipRingWireError(f"skip_ring: no wire form for {t.__name__}")
    return out


def from_pb(pb: link_pb2.SkipRingMsg) -> Any:
    """The core message of a SkipRingMsg; SkipRingWireError when it cannot be one."""
    kind = pb.WhichOneof("kind")
    topic, node = pb.topic, pb.node
    if not topic:
        raise SkipRingWireError("skip_ring.topic: must not be empty")
    if kind is None:
        raise SkipRingWireError("skip_ring: no kind set")
    simple = {"subscribe": Subscribe, "unsubscribe": Unsubscribe,
              "config_request": ConfigRequest, "not_member": NotMember, "remove_me": RemoveMe}
    if kind in simple:
        return simple[kind](topic=topic, node=node)
    if kind == "probe":
        return Probe(topic=topic)
    if kind == "config_request_for":
        return ConfigRequestFor(topic=topic, node=node, about=pb.config_request_for)
    if kind == "suspect":
        return Suspect(topic=topic, node=node, about=pb.suspect)
    if kind == "announce":
        return Announce(topic=topic, node=node, about=pb.announce)
    if kind == "publish":
        return Publish(topic=topic, node=node, pub=_pub(pb.publish))
    if kind == "publish_new":
        return PublishNew(topic=topic, node=node, pub=_pub(pb.publish_new))
    if kind == "config":
        c = pb.config
        if c.grant:
            return Config(topic=topic, label=None, pred=None, succ=None)
        refs = [Ref(r.node, r.label) if c.HasField(name) else None
                for name, r in (("pred", c.pred), ("succ", c.succ))]
        return Config(topic=topic, label=c.label, pred=refs[0], succ=refs[1])
    if kind == "introduce":
        i = pb.introduce
        return Introduce(topic=topic, node=node, label=i.label,
                         belief=i.belief if i.has_belief else None, via_ring=i.via_ring)
    if kind == "label_fix":
        return LabelFix(topic=topic, node=node, label=pb.label_fix)
    if kind == "introduce_shortcut":
        return IntroduceShortcut(topic=topic, node=node, label=pb.introduce_shortcut)
    if kind == "check_trie":
        ct = pb.check_trie
        return CheckTrie(topic=topic, node=node, entries=tuple(_summary(e) for e in ct.entries),
                         parent=_prefix(ct.parent) if ct.HasField("parent") else None,
                         empty=ct.empty)
    if kind == "check_and_publish":
        cp = pb.check_and_publish
        return CheckAndPublish(topic=topic, node=node, summary=_summary(cp.summary),
                               prefix=_prefix(cp.prefix))
    if kind == "send_prefix":
        return SendPrefix(topic=topic, node=node, prefix=_prefix(pb.send_prefix))
    if kind == "deliver_publications":
        return DeliverPublications(topic=topic,
                                   pubs=tuple(_pub(p) for p in pb.deliver_publications.pubs))
    raise SkipRingWireError(f"skip_ring: unknown kind {kind!r}")
