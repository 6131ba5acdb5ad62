"""One node's part of the topic-based skip-ring overlay: its member instance per topic, and the
supervisor instance of every topic this node supervises.

Topics are assigned to a static supervisor set (ROM) by MurmurHash3 of the topic, as the paper
suggests for scaling beyond one supervisor (§1.3, spec seed23 §D.3). A message that cannot be valid
(a label outside the label space, a supervisor message for a topic this node does not supervise, an
unknown type) is rejected and counted, never raised: junk must not stop the loop.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import mmh3

from weeble.core.events import Send
from weeble.core.overlay.skipring.member import Delivered, MemberParams, TopicMember
from weeble.core.overlay.skipring.messages import (
    ConfigRequest,
    ConfigRequestFor,
    Publish,
    Subscribe,
    Suspect,
    Unsubscribe,
)
from weeble.core.overlay.skipring.supervisor import TopicSupervisor
from weeble.core.overlay.skipring.trie import Publication

SUPERVISOR_MESSAGES = (Subscribe, Unsubscribe, ConfigRequest, ConfigRequestFor, Suspect, Publish)


def supervisor_of(topic: str, supervisors: tuple[str, ...]) -> str:
    if not supervisors:
        raise ValueError("the skip-ring mode needs at least one supervisor")
    return supervisors[mmh3.hash(topic.encode(), 0, signed=False) % len(supervisors)]


class SkipRingLayer:
    def __init__(self, me: str, *, supervisors: tuple[str, ...], seed: int,
                 params: MemberParams | None = None) -> None:
        self.me = me
        self.supervisors = tuple(supervisors)
        self.params = params or MemberParams()
        self.rng = random.Random(mmh3.hash(f"{seed}|{me}".encode(), 0, signed=False))
        self.members: dict[str, TopicMember] = {}
        self.supervised: dict[str, TopicSupervisor] = {}
        self.rejected = 0

    def supervisor_of(self, topic: str) -> str:
        return supervisor_of(topic, self.supervisors)

    def member(self, topic: str) -> TopicMember:
        m = self.members.get(topic)
        if m is None:
            m = self.members[topic] = TopicMember(
                topic=topic, me=self.me, supervisor=supervisor_of(topic, self.supervisors),
                rng=self.rng, params=self.params)
        return m

    def supervisor(self, topic: str) -> TopicSupervisor:
        s = self.supervised.get(topic)
        if s is None:
            if supervisor_of(topic, self.supervisors) != self.me:
                raise ValueError(f"{self.me} does not supervise topic {topic!r}")
            s = self.supervised[topic] = TopicSupervisor(topic)
        return s

    # ---- client operations ---------------------------------------------------------------------

    def subscribe(self, topic: str) -> list[Send | Delivered]:
        return self.member(topic).subscribe()

    def unsubscribe(self, topic: str) -> list[Send | Delivered]:
        return self.member(topic).unsubscribe()

    def publish(self, topic: str, pub: Publication) -> list[Send | Delivered]:
        m = self.member(topic)
        if not m.member:
            raise ValueError(f"{self.me} publishes on {topic!r} without being subscribed to it")
        return m.publish(pub)

    # ---- events --------------------------------------------------------------------------------

    def receive(self, msg: object) -> list[Send | Delivered]:
        try:
            topic = msg.topic  # type: ignore[attr-defined]
            if not isinstance(topic, str):
                raise ValueError("a skip-ring message names its topic")
            if isinstance(msg, SUPERVISOR_MESSAGES):
                return self.supervisor(topic).receive(msg)
            return self.member(topic).receive(msg)  # type: ignore[arg-type]
        except (ValueError, AttributeError, TypeError):
            self.rejected += 1
            return []

    def member_timeout(self) -> list[Send | Delivered]:
        out: list[Send | Delivered] = []
        for m in self.members.values():
            out.extend(m.timeout())
        return out

    def supervisor_timeout(self) -> list[Send | Delivered]:
        out: list[Send | Delivered] = []
        for s in self.supervised.values():
            out.extend(s.timeout())
        return out

    def failure_report(self, dead: Iterable[str]) -> list[Send | Delivered]:
        dead = set(dead)
        out: list[Send | Delivered] = []
        for s in self.supervised.values():
            out.extend(s.failure_report(dead))
        return out
