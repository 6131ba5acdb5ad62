"""A broker in mode `skip_ring` (seed 003): the topic overlay in place of the routing tree.

The mapping of spec seed23 §D.3: a broker is a *member* (a subscriber of the paper) of topic t while
at least one of its local clients holds a subscription to t; its local clients keep leases with it
(they refresh every ρ, an unrefreshed one expires after π), so the client side stays
self-stabilizing as in Mühl's model. A broker joins t's skip ring when its first local client
subscribes and leaves it when the last one unsubscribes or its lease expires. Brokers named in
ROM (`SkipRing.supervisors`) supervise the topics MurmurHash3 assigns them.

Topics are the one constraint `topic == "<name>"`: a client subscription with any other filter is
refused (a `garbage` trace naming it; the scenario refuses it before a run). A publication's topic
is its `topic` attribute. A member inserts its local publications into its trie and floods them;
a broker that is no member hands them to the topic's supervisor, which passes them on to the
member labelled r(0) (spec seed23 §D.3 "entry member"), or drops them when the topic has no member.

Every publication a member's trie gains (flooding, anti-entropy, its own) is delivered once to
each local client subscribed to the topic, except the publisher. The trie holds the topic's whole
history (the paper's guarantee: every subscriber, here every member broker, eventually holds
every publication of its topic). Clients get what was published from the moment this broker took
their subscription on (Mühl's liveness), or with `SkipRing.history` the history too, at once when
the broker is already a member; the price: a broker that restarts with empty RAM takes its
clients' refreshes for new subscriptions and hands them the history again (duplicates).

Events in, effects out, like every layer: two timers (`skipring.member` every `interval`,
`skipring.supervisor` every `supervisor_interval` at a supervisor), `Receive` of any skip-ring
message from any broker (the overlay's edges are not the tree's links), and client requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from weeble.core.events import (
    ClientPublish,
    ClientSubscribe,
    ClientUnsubscribe,
    Deliver,
    Effect,
    Send,
    SetTimer,
    Trace,
)
from weeble.core.filters import Filter
from weeble.core.messages import Notification
from weeble.core.overlay.skipring.layer import SUPERVISOR_MESSAGES, SkipRingLayer
from weeble.core.overlay.skipring.member import Delivered, MemberParams, TopicMember
from weeble.core.overlay.skipring.messages import (
    Announce,
    Config,
    NotMember,
    Probe,
    Publish,
    PublishNew,
)
from weeble.core.overlay.skipring.trie import Publication
from weeble.core.rom import Rom, SkipRing

# Messages that cross between a broker's member and supervisor roles (so may be addressed to
# itself): the member's requests, and the supervisor's configurations, probes, verdicts and
# hand-offs of publications. A bound on them per event: corrupted RAM cannot make a step loop.
_ROLE_CROSSING: frozenset[type] = frozenset({
    *SUPERVISOR_MESSAGES, Config, Probe, NotMember, PublishNew})
_LOOP_LIMIT = 64

MEMBER_TIMER = "skipring.member"
SUPERVISOR_TIMER = "skipring.supervisor"
TOPIC = "topic"  # the attribute that names a publication's topic


class NotATopic(ValueError):
    """A content filter where the skip-ring mode takes topics only."""


def topic_of(f: Filter) -> str:
    """The topic of a topic subscription `topic == "<name>"`; NotATopic for anything else."""
    if len(f.constraints) == 1:
        name, c = f.constraints[0]
        value = getattr(c, "lo", None)
        if name == TOPIC and isinstance(value, str) and f == Filter.equals(TOPIC, value):
            return value
    raise NotATopic(f"the skip_ring mode is topic-based: subscribe with `topic == \"<name>\"`, "
                    f"not the content filter {str(f)!r}")


def to_publication(n: Notification) -> Publication:
    """A notification as a trie entry: (publisher, seq) and its attributes and time as payload."""
    payload = json.dumps({"a": dict(n.attributes), "t": n.published_at}, sort_keys=True,
                         separators=(",", ":")).encode()
    return Publication(publisher=n.publisher, seq=n.seq, payload=payload)


def to_notification(p: Publication) -> Notification | None:
    """The notification a trie entry holds; None for a payload that is not one (a corrupted or
    junk publication, which is kept, as the paper keeps every publication, but never delivered)."""
    try:
        body = json.loads(p.payload)
        attrs, t = body["a"], float(body["t"])
        if not isinstance(attrs, dict):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return Notification(p.publisher, p.seq, attrs, t)


@dataclass(slots=True)
class LocalSub:
    """A local client's lease on a topic (RAM)."""

    client: str
    topic: str
    renewed: float
    since: float  # when this broker took the subscription (not the client's own start)


class SkipRingNode:
    """Layer `skip_ring` of a broker: its SkipRingLayer (members and supervised topics) and
    its local clients' leases."""

    name = "skip_ring"
    kind = "skip_ring"

    def __init__(self, rom: Rom) -> None:
        sr = rom.skip_ring
        self.rom, self.sr = rom, sr
        self.me = rom.broker_id
        self.layer = SkipRingLayer(self.me, supervisors=sr.supervisors, seed=sr.seed,
                                   params=params_of(sr))
        # (client, sub_id) -> lease: ids are unique per client only (R1)
        self.local: dict[tuple[str, str], LocalSub] = {}
        # planned edges (sr.announce): broker -> when my announcement of a link to it is due
        # again, and broker -> the end of its lease here (it announced a link to me)
        self.announced: dict[str, float] = {}
        self.planned: dict[str, float] = {}
        self.junk_sent = 0  # junk messages a fault made this broker send (evidence)
        self.skew: float | None = None  # publishers' clock minus ours, as far as seen

    # ---- timers ---------------------------------------------------------------------------

    def on_start(self, now: float) -> list[Effect]:
        """The first Timeouts at a random phase (the seeded generator of the layer): brokers
        booted together must not run their Timeouts in lockstep."""
        rng = self.layer.rng
        out: list[Effect] = [SetTimer(MEMBER_TIMER, now + self.sr.interval * rng.random())]
        if self.me in self.sr.supervisors:
            out.append(SetTimer(SUPERVISOR_TIMER,
                                now + self.sr.supervisor_interval * rng.random()))
        return out

    def on_timer(self, now: float, timer: str) -> list[Effect]:
        if timer == SUPERVISOR_TIMER:
            out = self._effects(now, self.layer.supervisor_timeout())
            out.append(SetTimer(SUPERVISOR_TIMER, now + self.sr.supervisor_interval))
            return out
        if timer != MEMBER_TIMER:
            return [Trace("garbage", {"why": f"unknown timer {timer!r}"})]
        out = self._expire(now)
        self._expire_planned(now)
        out += self._effects(now, self.layer.member_timeout())
        out.append(SetTimer(MEMBER_TIMER, now + self.sr.interval))
        return out

    def _expire(self, now: float) -> list[Effect]:
        """Leases not renewed within π end (the client crashed or left without a word)."""
        pi = self.rom.params.pi
        gone = [key for key, lease in self.local.items() if now - lease.renewed > pi]
        if not gone:
            return []
        leases = [self.local.pop(key) for key in gone]
        # the contract's expire record: `count` required, `entries` the leases that ended
        out: list[Effect] = [Trace("expire", {"count": len(gone), "entries": [
            {"sub_id": key[1], "client": lease.client, "topic": lease.topic}
            for key, lease in zip(gone, leases, strict=True)]})]
        for lease in leases:
            out += self._leave_if_unwanted(now, lease.topic)
        return out

    # ---- clients --------------------------------------------------------------------------

    def on_subscribe(self, now: float, event: ClientSubscribe) -> list[Effect]:
        try:
            topic = topic_of(event.filter)
        except NotATopic as e:
            return [Trace("garbage", {"from": event.client, "why": str(e)})]
        key = (event.client, event.sub_id)
        lease = self.local.get(key)
        if lease is not None and lease.topic == topic:
            lease.renewed = now  # a refresh
            return []
        self.local[key] = LocalSub(event.client, topic, now, now)
        m = self.layer.member(topic)
        if m.member:  # already in the ring: with `history`, the topic's history at once
            if not self.sr.history:
                return []
            return [Deliver(event.client, n) for n in _notifications(m)
                    if n.publisher != event.client]
        return self._effects(now, self.layer.subscribe(topic))

    def on_unsubscribe(self, now: float, event: ClientUnsubscribe) -> list[Effect]:
        lease = self.local.pop((event.client, event.sub_id), None)
        if lease is None:
            return []
        return self._leave_if_unwanted(now, lease.topic)

    def _leave_if_unwanted(self, now: float, topic: str) -> list[Effect]:
        if any(s.topic == topic for s in self.local.values()):
            return []
        return self._effects(now, self.layer.unsubscribe(topic))

    def on_publish(self, now: float, event: ClientPublish) -> list[Effect]:
        n = event.notification
        topic = n.attributes.get(TOPIC)
        if not isinstance(topic, str):
            return [Trace("garbage", {"from": event.client,
                                      "why": f"a skip_ring publication names its `{TOPIC}` "
                                             f"(a string attribute), got {topic!r}"})]
        skew = n.published_at - now
        if self.skew is None or skew > self.skew:
            self.skew = skew
        pub = to_publication(n)
        m = self.layer.member(topic)
        if m.member:
            return self._effects(now, m.publish(pub))
        return self._effects(now, [Send(self.layer.supervisor_of(topic),  # type: ignore[arg-type]
                                        Publish(topic=topic, node=self.me, pub=pub))])

    # ---- messages -------------------------------------------------------------------------

    def on_receive(self, now: float, source: str, msg: Any) -> list[Effect]:
        if type(msg) is Announce:
            return self._on_announce(now, source, msg)
        before = self.layer.rejected
        out = self._effects(now, self.layer.receive(msg))
        if self.layer.rejected != before:
            out.append(Trace("garbage", {"from": source,
                                         "why": f"invalid skip-ring {type(msg).__name__}"}))
        return out

    # ---- planned edges (sr.announce) -------------------------------------------------------

    def _on_announce(self, now: float, source: str, msg: Announce) -> list[Effect]:
        """At the topic's supervisor: relay an announcement to the broker it names. At that
        broker: admit the announcer's link session for the lease."""
        sr = self.sr
        if (not sr.announce or not isinstance(msg.topic, str) or not msg.topic
                or msg.node == msg.about):
            return [Trace("garbage", {"from": source, "why": "invalid skip-ring Announce"})]
        supervisor = self.layer.supervisor_of(msg.topic)
        if msg.about == self.me and source == supervisor:
            self.planned[msg.node] = now + sr.planned_lease
            return []
        if self.me == supervisor and source == msg.node:
            return [Send(msg.about, msg)]  # type: ignore[arg-type]
        return [Trace("garbage", {"from": source, "why": "a skip-ring Announce that is neither "
                                  "from its announcer to the supervisor nor relayed by it"})]

    def _announce(self, now: float, out: list[Effect]) -> list[Effect]:
        """Before the first message to a broker (and again every half lease while I send to
        it), an Announce through the topic's supervisor: that broker admits my link session
        only if it names me or my link is planned. Supervisors need none (everyone admits
        them, and they admit every broker of the run: a join reaches them first)."""
        supervisors = self.sr.supervisors
        if self.me in supervisors:
            return out
        announced = self.announced
        done: list[Effect] = []
        for e in out:
            if type(e) is Send and e.neighbor not in supervisors:
                to = e.neighbor
                if announced.get(to, -1.0) <= now:
                    topic = getattr(e.message, "topic", None)
                    if isinstance(topic, str):
                        announced[to] = now + self.sr.planned_lease / 2
                        done.append(Send(self.layer.supervisor_of(topic),  # type: ignore[arg-type]
                                         Announce(topic=topic, node=self.me, about=to)))
            done.append(e)
        return done

    def _expire_planned(self, now: float) -> None:
        for table in (self.announced, self.planned):
            for peer in [p for p, until in table.items() if until <= now]:
                del table[peer]

    def planned_links(self, now: float) -> set[str]:
        """The brokers whose announced link to me is planned now (their lease runs)."""
        return {p for p, until in self.planned.items() if until > now}

    def _effects(self, now: float, effects: list[Any]) -> list[Effect]:
        """Layer output as broker effects: sends stay, a publication new at this member is
        delivered to the local clients of its topic, and a message to this broker itself (a
        supervisor that is also a member) is handled here, in order, not sent."""
        out: list[Effect] = []
        todo = list(effects)
        fresh: list[tuple[str, Notification]] = []
        looped = 0
        while todo:
            e = todo.pop(0)
            if type(e) is Send and e.neighbor == self.me:
                # only between the two roles (member -> own supervisor and back); a member's
                # message to itself comes from corrupted RAM and goes nowhere, as on a link
                if type(e.message) in _ROLE_CROSSING and looped < _LOOP_LIMIT:
                    looped += 1
                    todo.extend(self.layer.receive(e.message))
                else:
                    out.append(Trace("garbage", {"why": f"{type(e.message).__name__} to itself"}))
            elif type(e) is Delivered:
                n = to_notification(e.pub)
                if n is None:
                    continue
                # the publisher's clock against ours: the least skew seen (delays only lower
                # it), so "published since this lease began" is judged on one clock (a live
                # broker's `now` is its own monotonic time; published_at is the publisher's)
                skew = n.published_at - now
                if self.skew is None or skew > self.skew:
                    self.skew = skew
                fresh.append((e.topic, n))
            else:
                out.append(e)
        if self.sr.announce:
            out = self._announce(now, out)
        history, skew = self.sr.history, self.skew or 0.0
        for topic, n in fresh:
            for lease in self.local.values():
                if (lease.topic == topic and lease.client != n.publisher
                        and (history or n.published_at >= lease.since + skew)):
                    out.append(Deliver(lease.client, n))
        return out

    def deliver_effects(self, now: float, effects: list[Any]) -> list[Effect]:
        """Carry out layer output produced outside an event (a fault): like any other."""
        return self._effects(now, effects)

    def known(self) -> list[str]:
        """Every broker this one knows of: itself, the supervisors, and whoever its members and
        supervised databases refer to (faults draw references from these)."""
        out = {self.me, *self.sr.supervisors}
        for m in self.layer.members.values():
            out |= m.neighbours()
        for s in self.layer.supervised.values():
            out |= {v for v in s.db.values() if v is not None}
        return sorted(out)

    # ---- views ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """JSON-able: every topic this broker is a member of or supervises."""
        members: dict[str, Any] = {}
        for topic, m in sorted(self.layer.members.items()):
            if not m.active:
                continue
            members[topic] = member_view(m)
        supervised = {topic: {"db": {str(i): v for i, v in sorted(s.db.items())},
                              "dead": sorted(s.dead), "corrupted": s.corrupted()}
                      for topic, s in sorted(self.layer.supervised.items())}
        return {"members": members, "supervised": supervised, "junk_sent": self.junk_sent,
                "local": [[client, sub_id, lease.topic] for (client, sub_id), lease in
                          sorted(self.local.items())]}


def member_view(m: TopicMember) -> dict[str, Any]:
    def ref(r: Any) -> list[Any] | None:
        return None if r is None else [r.node, r.label]

    root = m.store.root
    return {"label": m.label, "leaving": m.leaving, "left": ref(m.left), "right": ref(m.right),
            "ring": ref(m.ring),
            "shortcuts": {str(k): v for k, v in sorted(m.shortcuts.items())},
            "pubs": len(m.store), "digest": None if root is None else f"{root.hash:032x}"}


def _notifications(m: TopicMember) -> list[Notification]:
    out = [n for n in (to_notification(p) for p in m.store) if n is not None]
    out.sort(key=lambda n: (n.published_at, n.publisher, n.seq))
    return out


def params_of(sr: SkipRing) -> MemberParams:
    return MemberParams(p_base=sr.p_base, q=sr.q, plausibility=sr.plausibility,
                        push_hints=sr.push_hints, flood=sr.flood,
                        suspect_after=sr.suspect_after)
