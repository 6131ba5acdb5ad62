"""Legitimacy of a supervised skip ring with its publications (spec seed23 §A.12), computed, not
guessed.

For a topic with live subscribers V, the legitimate state is unique up to which subscriber holds
which label, and the supervisor's database fixes that: labels r(0)…r(n−1), each subscriber
storing its label, exactly the edges of SR(n) with correct stored labels, and every trie holding
exactly the publication set P. `expected_state` computes it; `problems` lists every way a state
differs (empty list = legitimate); `install` writes a legitimate state (for closure tests and for
measurements that start in SR(n)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weeble.core.legitimacy_rules import Adverts, LiveSub, Rule
from weeble.core.overlay.skipring.labels import ring_order, shortcut_labels
from weeble.core.overlay.skipring.member import TopicMember
from weeble.core.overlay.skipring.messages import Ref
from weeble.core.overlay.skipring.supervisor import TopicSupervisor
from weeble.core.overlay.skipring.trie import Publication


@dataclass(frozen=True, slots=True)
class MemberState:
    label: int
    left: Ref | None
    right: Ref | None
    ring: Ref | None
    shortcuts: dict[int, str]


def expected_state(by_label: Mapping[int, str]) -> dict[str, MemberState]:
    """The legitimate member states for the subscribers `by_label` (labels must be 0…n−1)."""
    n = len(by_label)
    if sorted(by_label) != list(range(n)):
        raise ValueError("a legitimate database holds exactly the labels r(0)…r(n−1)")
    if n == 1:
        ((lab, v),) = by_label.items()
        return {v: MemberState(label=lab, left=None, right=None, ring=None, shortcuts={})}
    order = ring_order(by_label)
    out: dict[str, MemberState] = {}
    for i, lab in enumerate(order):
        p, s = order[i - 1], order[(i + 1) % n]
        pred, succ = Ref(by_label[p], p), Ref(by_label[s], s)
        first, last = i == 0, i == n - 1
        out[by_label[lab]] = MemberState(
            label=lab,
            left=None if first else pred,
            right=None if last else succ,
            ring=pred if first else (succ if last else None),
            shortcuts={c: by_label[c] for c in shortcut_labels(lab, p, s)},
        )
    return out


def problems(sup: TopicSupervisor, members: Mapping[str, TopicMember], *,
             alive: Iterable[str], publications: Iterable[int] | None = None) -> list[str]:
    """Every way this topic's state is not legitimate. `alive` are the nodes that want the topic
    and have not crashed; `publications` the keys every trie must hold (None: not checked)."""
    out: list[str] = []
    if sup.corrupted():
        out.append("supervisor database corrupted")
        return out
    want = set(alive)
    db = sup.members()
    if set(db) != want:
        missing, extra = sorted(want - set(db))[:5], sorted(set(db) - want)[:5]
        out.append(f"database members differ: missing {missing}, extra {extra}")
        return out
    if not db:
        return out
    expected = expected_state({lab: v for v, lab in db.items()})
    keys = None if publications is None else set(publications)
    for v, exp in expected.items():
        m = members[v]
        got = MemberState(label=m.label, left=m.left, right=m.right, ring=m.ring,  # type: ignore[arg-type]
                          shortcuts=m.shortcuts)
        if got != exp:
            out.append(f"{v}: {got} != expected {exp}")
        if keys is not None and m.store.keys() != keys:
            out.append(f"{v}: holds {len(m.store)} publications, "
                       f"{len(keys - m.store.keys())} missing, {len(m.store.keys() - keys)} extra")
    return out


def install(sup: TopicSupervisor, members: Mapping[str, TopicMember], order: Iterable[str],
            publications: Iterable[Publication] = ()) -> None:
    """Write the legitimate state for subscribers joined in `order` (first gets r(0))."""
    by_label = dict(enumerate(order))
    sup.load(db=dict(by_label))
    pubs = list(publications)
    for v, st in expected_state(by_label).items():
        m = members[v]
        m.active, m.leaving = True, False
        m.label, m.left, m.right, m.ring = st.label, st.left, st.right, st.ring
        m.shortcuts = dict(st.shortcuts)
        m.store.rebuild(pubs)


# ---- over broker snapshots (the simulator's brokers and live admin snapshots alike) ----------


def snapshot_problems(views: Mapping[str, Mapping[str, Any]],
                      required: Mapping[str, set[str]],
                      allowed: Mapping[str, set[str]]) -> list[str]:
    """Spec seed23 §A.12 over the brokers' `skip_ring` snapshots (`SkipRingNode.snapshot`): for
    every topic, a clean database whose members include every broker with a required subscription
    to the topic and no broker without an allowed one, and every member storing exactly its SR(n)
    state once no join or leave of the topic is inside its window (allowed = required). The
    members' tries are not judged here: the paper's Publication Convergence is for a fixed set P
    ("eventually every subscriber's trie contains exactly P"), and while clients publish some
    publication is always on its way, flooded or handed from a supervisor to r(0), so two tries
    differ at an instant in a correct run (of equal size too: each holds one the other has yet to
    get), and a snapshot's count and digest cannot tell that from a publication missing for good.
    A member that lacks one for good is one whose local clients miss it, which the service level
    counts (R3)."""
    out: list[str] = []
    topics = set(required) | {t for v in views.values() for t in v.get("supervised", {})}
    topics |= {t for v in views.values() for t in v.get("members", {})}
    for topic in sorted(topics):
        sups = [(b, v["supervised"][topic]) for b, v in sorted(views.items())
                if topic in v.get("supervised", {})]
        need, may = required.get(topic, set()), allowed.get(topic, set()) | required.get(topic,
                                                                                        set())
        holders = {b for b, v in views.items() if topic in v.get("members", {})
                   and not v["members"][topic].get("leaving")}
        if not sups:
            if need:
                out.append(f"{topic}: no supervisor holds the topic")
            continue
        _, sup = sups[0]
        if sup.get("corrupted"):
            out.append(f"{topic}: supervisor database corrupted")
            continue
        db = {int(i): v for i, v in sup["db"].items()}
        members = set(db.values())
        if not need <= members or not members <= may:
            out.append(f"{topic}: database members differ: missing "
                       f"{sorted(need - members)[:5]}, extra {sorted(members - may)[:5]}")
            continue
        # A joining broker is an active member one hop before the supervisor's database has it
        # (paper §4.1 Subscribe): while it is in may (its join's window A) that is no problem.
        if holders - members - may:
            out.append(f"{topic}: {sorted(holders - members - may)[:5]} act as members "
                       "unrecorded")
        if not db:
            continue
        # The paper promises closure only "if no subscribers join or leave" (§5): each join or
        # leave leaves SR(n) of the database unmet for a few member intervals while the ring
        # re-stabilizes (§4.1). So the members' states are judged only when no broker of the
        # topic is inside a join's A or a leave's L window (may = need), as R9's windows make a
        # settling (un)subscription's entries optional in mode leasing.
        settled = may == need
        expected = expected_state(db)
        for v, exp in sorted(expected.items()):
            got = views.get(v, {}).get("members", {}).get(topic)
            if got is None:
                if settled:
                    out.append(f"{topic}: {v} holds no member state")
                continue
            want = {"label": exp.label, "left": _ref(exp.left), "right": _ref(exp.right),
                    "ring": _ref(exp.ring),
                    "shortcuts": {str(k): n for k, n in sorted(exp.shortcuts.items())}}
            have = {k: got.get(k) for k in want}
            if settled and have != want:
                out.append(f"{topic}: {v}: {have} != expected {want}")
    return out


def _ref(r: Ref | None) -> list[Any] | None:
    return None if r is None else [r.node, r.label]


def topics(brokers: Mapping[str, Any], required: set[LiveSub], allowed: set[LiveSub],
           adverts: Adverts | None = None) -> list[str]:
    """The rule of mode skip_ring: spec seed23 §A.12 per topic, over the skip-ring states."""
    from weeble.core.overlay.skipring.node import NotATopic, topic_of

    def by_topic(subs: set[LiveSub]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for s in subs:
            try:
                out.setdefault(topic_of(s.filter), set()).add(s.broker)
            except NotATopic:
                continue  # refused by the brokers: holds nothing anywhere
        return out

    views = {b: broker.skip_ring for b, broker in brokers.items()}
    return snapshot_problems(views, by_topic(required), by_topic(allowed))


# The routing rule of the skip_ring mode (a `Rule` of core/legitimacy_rules.py, composed by
# the broker): a broker in that mode shows its skip-ring state.
RULE = Rule("skip_ring", lambda broker: getattr(broker, "skip_ring", None) is not None,
            routing=topics)
