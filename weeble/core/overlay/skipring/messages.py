"""Messages of the supervised skip ring and its publication layer (seed 003), one topic each.

A reference to a node is its id (compare-store-send: ids are compared, stored and forwarded, never
made up). Where a message carries a label it is the label index (labels.py). Every message names
its topic, so one node runs one independent instance per topic (§4).

`size()` is an estimate of the encoded size in bytes (ids 16, labels 8, hashes 16, headers 8), for
load figures until the wire protocol carries these messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from weeble.core.overlay.skipring.trie import Prefix, Publication, Summary

_ID, _LABEL, _HASH, _HDR = 16, 8, 16, 8


@dataclass(frozen=True, slots=True)
class Ref:
    """A stored edge: the node's id and the label we believe it has."""

    node: str
    label: int


# ---- subscriber → supervisor ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscribe:
    topic: str
    node: str

    def size(self) -> int:
        return _HDR + _ID


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    topic: str
    node: str

    def size(self) -> int:
        return _HDR + _ID


@dataclass(frozen=True, slots=True)
class ConfigRequest:
    """Actions (i), (ii), (iv): integrate `node` if unknown and send it its configuration."""

    topic: str
    node: str

    def size(self) -> int:
        return _HDR + _ID


@dataclass(frozen=True, slots=True)
class ConfigRequestFor:
    """Action (iii): `node` found `about` closer than its configured neighbour."""

    topic: str
    node: str
    about: str

    def size(self) -> int:
        return _HDR + 2 * _ID


@dataclass(frozen=True, slots=True)
class Suspect:
    """Neighbour-assisted failure detection (spec seed23 §A.8 [D]): `node` has not heard its ring
    neighbour `about` for several intervals; the supervisor probes `about` before removing it."""

    topic: str
    node: str
    about: str

    def size(self) -> int:
        return _HDR + 2 * _ID


@dataclass(frozen=True, slots=True)
class Publish:
    """A publication from a broker that is no member of the topic (spec seed23 §D.3): the supervisor
    hands it to the member labelled r(0), which floods it."""

    topic: str
    node: str
    pub: Publication

    def size(self) -> int:
        return _HDR + 2 * _ID + 8 + len(self.pub.payload)


@dataclass(frozen=True, slots=True)
class Announce:
    """`node` is about to open a link to `about` (a planned edge; ours, not the paper's): sent to
    the topic's supervisor, which relays it to `about`, so that `about` admits `node`'s link
    session (a live broker admits sessions only from its neighbours and planned ones) for
    `SkipRing.planned_lease` seconds. Only with `SkipRing.announce` (a live run)."""

    topic: str
    node: str
    about: str

    def size(self) -> int:
        return _HDR + 2 * _ID


# ---- supervisor → subscriber ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """(label, pred, succ) from the supervisor's database; label None is the unsubscribe grant."""

    topic: str
    label: int | None
    pred: Ref | None
    succ: Ref | None

    def size(self) -> int:
        return _HDR + _LABEL + 2 * (_ID + _LABEL)


@dataclass(frozen=True, slots=True)
class Probe:
    """Are you alive? A member answers with a ConfigRequest, which clears the suspicion."""

    topic: str

    def size(self) -> int:
        return _HDR


@dataclass(frozen=True, slots=True)
class NotMember:
    """The NotMember fix (spec seed23 §A.8): `node` is not a live member, delete every reference to
    it."""

    topic: str
    node: str

    def size(self) -> int:
        return _HDR + _ID


# ---- subscriber ↔ subscriber: the extended BuildRing and the shortcuts ----------------------


@dataclass(frozen=True, slots=True)
class Introduce:
    """`node` (label `label`) introduced to the receiver: by itself (with `belief`, the label the
    sender stores for the receiver, for the label check of §2.2) or by delegation (belief None).
    `via_ring` marks the periodic introduction over the min↔max edge, which is never delegated."""

    topic: str
    node: str
    label: int
    belief: int | None = None
    via_ring: bool = False

    def size(self) -> int:
        return _HDR + _ID + 2 * _LABEL


@dataclass(frozen=True, slots=True)
class LabelFix:
    topic: str
    node: str
    label: int

    def size(self) -> int:
        return _HDR + _ID + _LABEL


@dataclass(frozen=True, slots=True)
class IntroduceShortcut:
    topic: str
    node: str
    label: int

    def size(self) -> int:
        return _HDR + _ID + _LABEL


@dataclass(frozen=True, slots=True)
class RemoveMe:
    """A node that is not (or no longer) a member asks the receiver to drop its edge."""

    topic: str
    node: str

    def size(self) -> int:
        return _HDR + _ID


# ---- the publication layer (§4.2, §4.3) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckTrie:
    """Compare these nodes of the sender's trie. `parent` (spec seed23 §A.11 improvement) names the
    node whose children these are; `empty` (improvement) says the sender's trie is empty."""

    topic: str
    node: str
    entries: tuple[Summary, ...]
    parent: Prefix | None = None
    empty: bool = False

    def size(self) -> int:
        return _HDR + _ID + len(self.entries) * (_HASH + _LABEL + 1) + _HASH + 1


@dataclass(frozen=True, slots=True)
class CheckAndPublish:
    """Check `summary` of the requester's trie and send it every publication under `prefix` that is
    not under summary.label (all of those are missing at the requester)."""

    topic: str
    node: str
    summary: Summary
    prefix: Prefix

    def size(self) -> int:
        return _HDR + _ID + 2 * (_HASH + _LABEL + 1)


@dataclass(frozen=True, slots=True)
class SendPrefix:
    """Send the requester every publication under `prefix` (its subtrie is missing there)."""

    topic: str
    node: str
    prefix: Prefix

    def size(self) -> int:
        return _HDR + _ID + _HASH + 1


@dataclass(frozen=True, slots=True)
class DeliverPublications:
    topic: str
    pubs: tuple[Publication, ...]

    def size(self) -> int:
        return _HDR + sum(_ID + 8 + len(p.payload) for p in self.pubs)


@dataclass(frozen=True, slots=True)
class PublishNew:
    """Flooding of a new publication over ring and shortcut edges (§4.3)."""

    topic: str
    node: str
    pub: Publication

    def size(self) -> int:
        return _HDR + 2 * _ID + 8 + len(self.pub.payload)


SupervisorMessage = (Subscribe | Unsubscribe | ConfigRequest | ConfigRequestFor | Suspect
                     | Publish)
MemberMessage = (Config | Probe | NotMember | Introduce | LabelFix | IntroduceShortcut | RemoveMe
                 | CheckTrie | CheckAndPublish | SendPrefix | DeliverPublications | PublishNew)
SkipRingMessage = SupervisorMessage | MemberMessage | Announce
