"""Layer skip_ring's fault targets: the topic overlay of mode skip_ring (seed 003, spec seed23
§C.1-10).

Each takes args.topic (default: the first topic the broker is a member of, or supervises) and
args.seed (the values are drawn from it: a run stays a function of its seed). References are
to brokers this one knows of (the model assumes no reference to a node that never existed). The
values themselves are drawn by corruption.py beside (imported when a fault strikes).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, broker_ids
from weeble.core.events import Corrupt, Effect, Send

if TYPE_CHECKING:
    from weeble.core.overlay.skipring.node import SkipRingNode

FAULTS: Faults[SkipRingNode] = Faults("skip_ring", kind="skip_ring")


def _view_skip_ring(node: SkipRingNode, fault: Corrupt) -> Any:
    return node.snapshot()


def _sr_rng(fault: Corrupt) -> random.Random:
    seed = fault.args.get("seed", 0)
    if not isinstance(seed, int):
        raise CorruptionError(f"{fault.target}: args.seed must be an integer, got {seed!r}")
    return random.Random(seed)


def _sr_member(node: SkipRingNode, fault: Corrupt) -> Any:
    topic = fault.args.get("topic")
    members = node.layer.members
    if topic is None:
        active = sorted(t for t, m in members.items() if m.active)
        if not active:
            raise CorruptionError(f"{fault.target}: this broker is a member of no topic")
        topic = active[0]
    m = members.get(topic)
    if m is None or not m.active:
        raise CorruptionError(f"{fault.target}: this broker is no member of topic {topic!r}")
    return m


def _sr_supervisor(node: SkipRingNode, fault: Corrupt) -> Any:
    topic = fault.args.get("topic")
    supervised = node.layer.supervised
    if topic is None:
        if not supervised:
            raise CorruptionError(f"{fault.target}: this broker supervises no topic yet")
        topic = sorted(supervised)[0]
    sup = supervised.get(topic)
    if sup is None:
        raise CorruptionError(f"{fault.target}: this broker does not supervise {topic!r}")
    return sup


@FAULTS.target("skipring.label", _view_skip_ring)
def _sr_label(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """A member's own label: value an index (r(value)), null (⊥), or absent: a random one."""
    from weeble.core.overlay.skipring.corruption import random_label
    from weeble.core.overlay.skipring.labels import check_label

    m = _sr_member(node, fault)
    value = fault.value
    if value is None and "value" not in fault.args:
        value = random_label(_sr_rng(fault), len(node.known()))
        while value == m.label:
            value += 1
    try:
        m.label = None if value is None else check_label(value)
    except ValueError as e:
        raise CorruptionError(f"skipring.label: {e}") from None
    return []


@FAULTS.target("skipring.edges", _view_skip_ring)
def _sr_edges(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """A member's ring edges and shortcuts: random nodes with random stored labels."""
    from weeble.core.overlay.skipring.corruption import corrupt_member

    m = _sr_member(node, fault)
    label = m.label
    corrupt_member(m, _sr_rng(fault), node.known())
    m.label = label
    return []


@FAULTS.target("skipring.member", _view_skip_ring)
def _sr_member_all(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """Everything a member holds of the overlay: label, edges, shortcuts, confirmations."""
    from weeble.core.overlay.skipring.corruption import corrupt_member

    corrupt_member(_sr_member(node, fault), _sr_rng(fault), node.known())
    return []


@FAULTS.target("skipring.database", _view_skip_ring)
def _sr_database(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """The supervisor's database with every corruption condition of §3.1 (tuples without a
    subscriber, duplicates, gaps, labels out of range) and a wrong failure-detector view."""
    from weeble.core.overlay.skipring.corruption import corrupt_database

    sup = _sr_supervisor(node, fault)
    known = sorted(set(node.known()) | set(sup.members()))
    corrupt_database(sup, _sr_rng(fault), known)
    return []


@FAULTS.target("skipring.dead", _view_skip_ring)
def _sr_dead(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """The supervisor's failure-detector view: value the brokers it holds crashed (live ones
    too: a wrong suspicion), which it removes from its database at once."""
    sup = _sr_supervisor(node, fault)
    dead = broker_ids(fault.value, "skipring.dead")
    return node.deliver_effects(now, sup.failure_report(dead))


@FAULTS.target("skipring.junk", _view_skip_ring)
def _sr_junk(node: SkipRingNode, now: float, fault: Corrupt) -> list[Effect]:
    """Junk messages in the channels: args.count arbitrary skip-ring messages of every kind
    (some with labels outside the label space) sent from this broker to brokers it knows."""
    from weeble.core.overlay.skipring.corruption import junk_messages

    count = fault.args.get("count", 10)
    if not isinstance(count, int) or count < 1:
        raise CorruptionError(f"skipring.junk: args.count must be an integer >= 1, "
                              f"got {count!r}")
    rng = _sr_rng(fault)
    topics = sorted(node.layer.members) or sorted(node.layer.supervised)
    topic = fault.args.get("topic") or (topics[0] if topics else "t0")
    known = node.known()
    out: list[Effect] = []
    for dst, msg in junk_messages(rng, topic=topic, nodes=known,
                                  supervisor=node.layer.supervisor_of(topic), count=count):
        out.append(Send(dst, msg))
    node.junk_sent += count
    return node.deliver_effects(now, out)
