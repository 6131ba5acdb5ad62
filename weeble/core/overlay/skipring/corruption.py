"""Transient faults of the skip ring: arbitrary RAM values and junk messages (spec seed23 §C.1-10).

Each function writes values of the right type, not only plausible ones: any label in the label
space (mostly near the live range, so they collide with real labels), references to any node of
the system (the model assumes no reference to a node that never existed), a database with every
corruption condition of §3.1 (tuples without a subscriber, a subscriber under several labels,
gaps, labels out of range). Randomness comes from the caller's seeded generator.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from weeble.core.overlay.skipring.labels import MAX_LABEL
from weeble.core.overlay.skipring.member import TopicMember
from weeble.core.overlay.skipring.messages import (
    CheckAndPublish,
    CheckTrie,
    Config,
    ConfigRequest,
    ConfigRequestFor,
    Introduce,
    IntroduceShortcut,
    LabelFix,
    NotMember,
    Probe,
    Ref,
    RemoveMe,
    SendPrefix,
    Suspect,
)
from weeble.core.overlay.skipring.supervisor import TopicSupervisor
from weeble.core.overlay.skipring.trie import KEY_BITS, Prefix, Summary


def random_label(rng: random.Random, n: int) -> int:
    """Mostly within 0…2n (colliding with live labels), sometimes anywhere in the label space."""
    return rng.randrange(2 * n + 2) if rng.random() < 0.9 else rng.randrange(MAX_LABEL + 1)


def _ref(rng: random.Random, nodes: Sequence[str], n: int) -> Ref | None:
    return None if rng.random() < 0.2 else Ref(rng.choice(nodes), random_label(rng, n))


def corrupt_member(m: TopicMember, rng: random.Random, nodes: Sequence[str]) -> None:
    """Random own label (or none), random ring edges and shortcuts with random stored labels."""
    n = len(nodes)
    m.label = None if rng.random() < 0.1 else random_label(rng, n)
    m.left, m.right, m.ring = _ref(rng, nodes, n), _ref(rng, nodes, n), _ref(rng, nodes, n)
    m.shortcuts = {random_label(rng, n): rng.choice(nodes) for _ in range(rng.randrange(6))}
    m.confirmed = {rng.choice(nodes): random_label(rng, n) for _ in range(rng.randrange(4))}


def corrupt_database(sup: TopicSupervisor, rng: random.Random, nodes: Sequence[str]) -> None:
    """A database with tuples without subscriber, duplicates, gaps and out-of-range labels, and a
    failure detector view that holds live nodes dead or suspected."""
    n = len(nodes)
    db: dict[int, str | None] = {}
    for v in nodes:
        if rng.random() < 0.2:
            continue  # not recorded
        for _ in range(1 + (rng.random() < 0.2)):  # sometimes under two labels
            db[random_label(rng, n)] = v
    for _ in range(rng.randrange(1, 4)):
        db[random_label(rng, n)] = None
    # and a wrong view of who crashed: live nodes held dead or under suspicion
    dead = rng.sample(list(nodes), k=min(len(nodes), rng.randrange(3)))
    suspects = {v: rng.randrange(-3, 20) for v in rng.sample(list(nodes), k=min(len(nodes), 2))}
    sup.load(db=db, next_=rng.randrange(1 << 16), dead=dead, suspects=suspects)


def junk_messages(rng: random.Random, *, topic: str, nodes: Sequence[str], supervisor: str,
                  count: int) -> list[tuple[str, object]]:
    """`count` arbitrary in-flight messages (destination, message), of every kind, some with
    values outside the label space (which receivers must reject, not crash on)."""
    n = len(nodes)
    out: list[tuple[str, object]] = []

    def lab() -> int:
        return random_label(rng, n) if rng.random() < 0.95 else -rng.randrange(1, 99)

    def prefix() -> Prefix:
        length = rng.randrange(0, 12)
        return Prefix(rng.getrandbits(length) if length else 0, length)

    for _ in range(count):
        v, u, w = rng.choice(nodes), rng.choice(nodes), rng.choice(nodes)
        kind = rng.randrange(10)
        msg: object
        if kind == 0:
            msg = Config(topic=topic, label=lab(), pred=Ref(u, lab()), succ=Ref(w, lab()))
        elif kind == 1:
            msg = Introduce(topic=topic, node=u, label=lab(),
                            belief=lab() if rng.random() < 0.5 else None,
                            via_ring=rng.random() < 0.3)
        elif kind == 2:
            msg = IntroduceShortcut(topic=topic, node=u, label=lab())
        elif kind == 3:
            msg = LabelFix(topic=topic, node=u, label=lab())
        elif kind == 4:
            msg = RemoveMe(topic=topic, node=u)
        elif kind == 5:
            msg = NotMember(topic=topic, node=u) if rng.random() < 0.5 else Probe(topic=topic)
        elif kind == 6:
            msg = CheckTrie(topic=topic, node=u,
                            entries=(Summary(prefix(), rng.getrandbits(KEY_BITS)),))
        elif kind == 7:
            msg = CheckAndPublish(topic=topic, node=u,
                                  summary=Summary(prefix(), rng.getrandbits(KEY_BITS)),
                                  prefix=prefix())
        elif kind == 8:
            msg = SendPrefix(topic=topic, node=u, prefix=prefix())
        else:
            msg = rng.choice([ConfigRequest(topic=topic, node=u),
                              ConfigRequestFor(topic=topic, node=u, about=w),
                              Suspect(topic=topic, node=u, about=w)])
            v = supervisor
        out.append((v, msg))
    return out
