"""The supervised skip ring with topic pub/sub (spec seed23 §C.1-6..14), through the one Simulation
(weeble/analytics/reproduce/skipring_world.py: SkipRingWorld is a view of it in mode skip_ring)."""

from __future__ import annotations

import random

import pytest

from weeble.analytics.reproduce.skipring import crash, leave
from weeble.analytics.reproduce.skipring_world import SkipRingWorld
from weeble.core.overlay.skipring.corruption import (
    corrupt_database,
    corrupt_member,
    junk_messages,
)
from weeble.core.overlay.skipring.labels import diameter, skip_ring_neighbours
from weeble.core.overlay.skipring.member import MemberParams
from weeble.core.overlay.skipring.trie import Publication


def legit_world(n: int, *, seed: int = 0, pubs: int = 0, **kw: object) -> SkipRingWorld:
    w = SkipRingWorld(n, seed=seed, **kw)  # type: ignore[arg-type]
    w.install_legitimate(list(w.ids), [Publication(f"n{i % n}", i, b"p") for i in range(pubs)])
    assert w.problems() == []
    return w


def test_joins_from_nothing_reach_sr_n() -> None:
    w = SkipRingWorld(40, seed=2)
    for v in w.ids:
        w.subscribe(v)
    assert w.run_until_legitimate(60) is not None


def test_closure_no_change_over_many_intervals() -> None:
    """C.1-9: in SR(n), nothing changes; anti-entropy gets no replies, no Deliver."""
    w = legit_world(50, pubs=30)
    w.net.run(2)
    snap = w.snapshot()
    w.net.reset_counts()
    w.net.run(42)  # 40 intervals
    assert w.snapshot() == snap and w.problems() == []
    kinds = set(w.net.kinds)
    assert kinds <= {"Introduce", "IntroduceShortcut", "CheckTrie", "Config", "ConfigRequest"}
    assert w.net.kinds["CheckTrie"] == pytest.approx(40 * 50, rel=0.05)  # one per node, no reply


@pytest.mark.parametrize(("n", "seed"), [(8, 1), (32, 2), (32, 3), (64, 4)])
def test_convergence_from_arbitrary_states(n: int, seed: int) -> None:
    """C.1-10: random labels, random edges, a corrupted database (all four conditions) and junk
    messages in flight; the publications stay and every trie ends holding all of them."""
    w = legit_world(n, seed=seed, pubs=10)
    rng = random.Random(seed)
    nodes = [w.sup, *w.ids]
    for v in w.ids:
        corrupt_member(w.member(v), rng, nodes)
    corrupt_database(w.supervisor_state, rng, w.ids)
    assert w.supervisor_state.corrupted()
    for dst, msg in junk_messages(rng, topic=w.TOPIC, nodes=nodes, supervisor=w.sup, count=3 * n):
        w.inject(dst, dst, msg)
    took = w.run_until_legitimate(200)
    assert took is not None, w.problems()[:3]
    assert sum(w.layer(v).rejected for v in nodes) >= 1  # junk with bad labels


def test_database_repairs_send_nothing() -> None:
    w = legit_world(16)
    corrupt_database(w.supervisor_state, random.Random(1), w.ids)
    sup = w.supervisor_state
    sup.suspects = {}  # (a probe that times out costs a Config; that is detection, not repair)
    # R1 and R3 act at once, R2 when the duplicated subscriber's turn comes (within n Timeouts)
    assert all(len(sup.timeout()) == 1 for _ in range(3 * 16))  # one Config each, repairs silent
    assert not sup.corrupted()


@pytest.mark.parametrize("n", [16, 128])
def test_steady_state_loads(n: int) -> None:
    """C.1-7/8: per interval, exactly supervisor_rate Configs out and < 0.75 + q requests in,
    whatever n; members send O(1) messages (max and mean reported in the benchmark)."""
    w = legit_world(n, seed=n)
    w.net.run(1)
    w.net.reset_counts()
    intervals = 200
    w.net.run(1 + intervals)
    configs = w.net.sent[w.sup] / intervals
    requests = w.net.received[w.sup] / intervals
    # one round-robin Config per supervisor Timeout (period 0.25) plus one answer per request
    assert configs - requests == pytest.approx(4.0, abs=0.05)
    assert requests < 0.75 + 0.5 + 0.2
    per_node = [w.net.sent[v] / intervals for v in w.ids]
    assert max(per_node) < 7.5  # 2 introductions, ≤ 2 shortcut introductions, 1 CheckTrie, …


def test_subscribe_costs_one_and_unsubscribe_two_supervisor_messages() -> None:
    """C.1-6, and the database is correct right after the request."""
    w = legit_world(16)
    sup = w.supervisor_state
    from weeble.core.overlay.skipring.messages import Subscribe, Unsubscribe

    out = sup.receive(Subscribe(topic=w.TOPIC, node="new"))
    assert len(out) == 1 and sup.members()["new"] == 16 and not sup.corrupted()
    out = sup.receive(Unsubscribe(topic=w.TOPIC, node="n3"))
    assert len(out) == 2 and "n3" not in sup.members() and not sup.corrupted()
    assert sup.members()["new"] == 3  # the newest took the freed label


def test_unsubscribe_leaves_no_edge_to_the_leaver() -> None:
    """C.1-11 (the run of `weeble reproduce skipring`)."""
    r = leave(24, 3)
    assert r["took"] >= 0 and r["edges_to_leaver"] == 0 and r["left"] == 1


@pytest.mark.parametrize("victims", [1, 3])
def test_crash_converges_to_sr_n_minus_one(victims: int) -> None:
    """C.1-12: after the failure detector removes u (n7; or n0, n1 and n11), the database has no
    gap and the ring heals, stale references to u included (the NotMember fix)."""
    r = crash(24, 4, victims, oracle=True)
    assert r["took"] >= 0 and r["no_gap"] == 1 and r["stale"] == 0


@pytest.mark.parametrize("victims", [["n7"], ["n0", "n1", "n11"]])
def test_crash_found_by_ring_neighbours_without_an_external_detector(victims: list[str]) -> None:
    """Spec seed23 §A.8 [D]: silent ring neighbours are reported, probed and removed: O(1) messages
    per crash, no heartbeat per subscriber; in a legitimate state nobody is suspected (closure)."""
    w = legit_world(24, seed=5, pubs=5, oracle_detector=False)
    w.net.run(5)
    w.net.reset_counts()
    w.net.run(15)
    assert "Suspect" not in w.net.kinds and "Probe" not in w.net.kinds
    for v in victims:
        w.crash(v)
    assert w.run_until_legitimate(120) is not None
    assert set(victims) <= w.supervisor_state.dead
    assert sorted(w.supervisor_state.db) == list(range(24 - len(victims)))


def test_a_live_node_wrongly_held_dead_comes_back() -> None:
    w = legit_world(16, seed=6, oracle_detector=False)
    w.supervisor_state.failure_report(["n4"])  # a false suspicion from outside
    w.net.run(3)
    assert w.run_until_legitimate(80) is not None
    assert "n4" in w.supervisor_state.members() and "n4" not in w.supervisor_state.dead


def test_publications_converge_from_any_distribution() -> None:
    """C.1-13: every trie ends holding P, from arbitrary subsets."""
    w = legit_world(20, seed=6)
    rng = random.Random(6)
    pubs = [Publication(f"n{rng.randrange(20)}", i, b"q%d" % i) for i in range(60)]
    w.published |= {p.key for p in pubs}
    for v in w.ids:
        w.member(v).store.rebuild(p for p in pubs if rng.random() < 0.3)
    assert w.run_until_legitimate(40) is not None


def test_anti_entropy_rules() -> None:
    """C.1-13: equal tries cost one message per initiator; under the paper's pull-only rules a
    single missing publication is repaired by exactly one of the two initiation directions; with
    the parent hints (spec seed23 §A.11 improvement) by both."""
    w = legit_world(10, seed=1, pubs=100)
    w.net.reset_counts()
    w.net.run(w.net.now + 10)
    assert w.net.kinds["CheckTrie"] == pytest.approx(100, abs=3)
    assert "DeliverPublications" not in w.net.kinds
    for which in range(40):
        by_holder = _single(False, which, holder_initiates=True)
        by_lacker = _single(False, which, holder_initiates=False)
        assert by_holder != by_lacker, which
        assert _single(True, which, holder_initiates=True)
        assert _single(True, which, holder_initiates=False)


def _single(push_hints: bool, which: int, *, holder_initiates: bool) -> bool:
    """Ring neighbours n0 (holds all 200) and n1 (lacks publication `which`): one round."""
    w = legit_world(2, seed=which, params=MemberParams(push_hints=push_hints))
    pubs = [Publication("n0", i, b"p") for i in range(200)]
    w.published = {p.key for p in pubs}
    w.member("n0").store.rebuild(pubs)
    w.member("n1").store.rebuild(p for i, p in enumerate(pubs) if i != which)
    _one_round(w, "n0" if holder_initiates else "n1", "n1" if holder_initiates else "n0")
    return w.member("n1").store.keys() == w.published


def _one_round(w: SkipRingWorld, src: str, dst: str) -> int:
    """Send one CheckTrie src→dst and let the exchange it starts finish (no Timeouts run)."""
    from weeble.core.overlay.skipring.messages import CheckTrie

    root = w.member(src).store.root
    w.net.reset_counts()
    w.stop_timers()
    w.inject(src, dst, CheckTrie(topic=w.TOPIC, node=src, entries=(root,) if root else (),
                                 empty=root is None))
    w.net.run(w.net.now + 100)
    return sum(w.net.sent.values())


def test_newcomer_gets_the_whole_history_in_three_messages() -> None:
    """C.1-13: an empty newcomer gets everything in one bulk Deliver, whatever |P|."""
    for size in (10, 1000):
        w = legit_world(2, seed=size, params=MemberParams(push_hints=False))
        pubs = [Publication("n0", i, b"p") for i in range(size)]
        w.published = {p.key for p in pubs}
        w.member("n0").store.rebuild(pubs)
        w.member("n1").store.rebuild([])
        assert _one_round(w, "n0", "n1") == 3  # CheckTrie, SendPrefix, DeliverPublications
        assert w.member("n1").store.keys() == w.published


def test_newcomer_joining_a_live_ring_gets_history_in_few_rounds() -> None:
    w = legit_world(30, seed=8, pubs=200)
    w.net.run(1)
    w.add_member("new")
    w.subscribe("new")
    took = w.run_until_legitimate(20)
    assert took is not None and took <= 6
    assert w.member("new").store.keys() == w.published


def test_flooding_reaches_everyone_within_the_diameter() -> None:
    """C.1-14: one hop per time unit: everyone within ⌈log₂ n⌉ hops; 3n − 5 messages when the
    sender is excluded; duplicates dropped."""
    n = 64
    w = legit_world(n, seed=9, delay=(1.0, 1.0))
    w.stop_timers()  # no Timeouts: flooding alone
    w.net.reset_counts()
    pub = w.publish("n17")
    w.net.run(w.net.now + diameter(skip_ring_neighbours(n)) + 0.5)
    assert all(pub.key in w.member(v).store for v in w.ids)
    assert w.net.kinds["PublishNew"] == 3 * n - 5
    w.net.run(w.net.now + 20)
    assert w.net.kinds["PublishNew"] == 3 * n - 5


def test_a_wrong_dead_verdict_heals_without_the_plausibility_check() -> None:
    """A corrupted failure-detector view holds live members dead; with the paper's rules alone
    (no plausibility check) such a member asks by itself with probability 4^-k per interval, so
    its neighbours' reports must make the supervisor probe it (n = 64 never converged before)."""
    w = legit_world(64, seed=1, params=MemberParams(plausibility=False))
    w.net.run(2)
    rng = random.Random(1)
    for v in w.ids:
        corrupt_member(w.member(v), rng, [w.sup, *w.ids])
    corrupt_database(w.supervisor_state, rng, w.ids)
    assert w.supervisor_state.dead  # live members held dead
    assert w.run_until_legitimate(150, publications=False) is not None
    assert not w.supervisor_state.dead & w.alive()


@pytest.mark.parametrize("slot", ["left", "right"])
def test_a_ring_slot_holding_itself_or_the_wrong_side_is_re_placed(slot: str) -> None:
    """BuildRing keeps the closest neighbour below in `left` and above in `right`. A corrupted
    slot that holds the node itself, or a node on the other side under its true label, broke
    that for good: every closer candidate was delegated to the slot's node (to itself: nowhere)
    and no LabelFix came (explore seed 25 of the flag-rule shape under --mode skip_ring)."""
    from weeble.core.overlay.skipring.messages import Ref

    for seed, holder in ((7, "self"), (8, "other side")):
        w = legit_world(16, seed=seed)
        m = w.member("n5")
        own = m.label
        assert own is not None and m.left is not None and m.right is not None
        # the ring neighbour on the other side, under its true label
        other = m.right if slot == "left" else m.left
        bad = Ref(m.me, own + 16) if holder == "self" else other
        setattr(m, slot, bad)
        assert w.problems() != []
        took = w.run_until_legitimate(10)
        assert took is not None and took <= 3, (slot, holder, w.problems()[:2])


def test_a_hand_off_reaching_a_member_that_left_goes_back_to_the_supervisor() -> None:
    """A non-member's publication goes to the supervisor, which hands it to the member holding
    r(0) (spec seed23 §D.3). If that member leaves meanwhile, no member holds the publication
    and anti-entropy cannot bring it back: it was lost for every subscriber (explore seeds 10,
    29, 101 of the flag-rule shape under --mode skip_ring). The leaver hands it back, once."""
    from weeble.core.events import Send
    from weeble.core.overlay.skipring.member import TopicMember
    from weeble.core.overlay.skipring.messages import Publish, PublishNew

    m = TopicMember(topic="t", me="b1", supervisor="s", rng=random.Random(0))
    m.subscribe()
    m.unsubscribe()  # leaving: the supervisor's db no longer lists b1 once this arrives
    pub = Publication("pb9", 1, b"x")
    out = m.receive(PublishNew(topic="t", node="b9", pub=pub))
    assert out == [Send("s", Publish(topic="t", node="b1", pub=pub))]  # type: ignore[arg-type]
    assert m.receive(PublishNew(topic="t", node="b1", pub=pub)) == []  # a second bounce stops
    m.drop()
    assert m.receive(PublishNew(topic="t", node="b9", pub=pub)) != []
    w = legit_world(8, seed=3)
    member = w.member("n2")
    assert member.receive(PublishNew(topic=w.TOPIC, node="n9", pub=pub)) != []  # a member floods
    held = member.store.keys()
    assert pub.key in held


def test_a_joining_members_publication_goes_through_the_supervisor() -> None:
    """A member publishes before its Config has come (label still ⊥): it has no edge to flood
    along, and when it leaves before anti-entropy runs its trie is the only one holding the
    publication, lost for every other member (sweep seeds 285, 843, 932 of scenarios/explore/
    sweep.yaml --mode skip_ring). It hands the publication to the supervisor as a non-member
    does; once configured, it floods along its edges and the supervisor hears nothing."""
    from weeble.core.events import Send
    from weeble.core.overlay.skipring.member import Delivered, TopicMember
    from weeble.core.overlay.skipring.messages import Publish

    m = TopicMember(topic="t", me="b1", supervisor="s", rng=random.Random(0))
    m.subscribe()
    pub = Publication("pb1", 1, b"x")
    assert m.publish(pub) == [Delivered("t", pub),
                              Send("s", Publish(topic="t", node="b1", pub=pub))]  # type: ignore[arg-type]
    w = legit_world(4, seed=1)
    again = Publication("pb1", 2, b"y")
    out = w.member("n1").publish(again)
    assert out[0] == Delivered(w.TOPIC, again)
    assert out[1:] and all(type(e) is Send and e.neighbor != "S" for e in out[1:]), out


def test_a_node_that_left_is_not_re_inserted_by_a_neighbours_stale_reference() -> None:
    """Action (iii) about a node that has unsubscribed (a ring neighbour still holds it) gets
    NotMember, as one about a crashed node does; re-inserting it made the leaver answer with
    another Unsubscribe and relabelled the ring at each round, and a publication handed to r(0)
    meanwhile was flooded to the leaver alone (explore seed 186 of the flag-rule shape under
    --mode skip_ring: a member missed it for 2.25 s, over the path window). The node's own
    Subscribe takes it back."""
    from weeble.core.events import Send
    from weeble.core.overlay.skipring.messages import (
        ConfigRequestFor,
        NotMember,
        Subscribe,
        Unsubscribe,
    )
    from weeble.core.overlay.skipring.supervisor import TopicSupervisor

    sup = TopicSupervisor("t")
    for v in ("a", "b", "c"):
        sup.receive(Subscribe(topic="t", node=v))
    sup.receive(Unsubscribe(topic="t", node="c"))
    out = sup.receive(ConfigRequestFor(topic="t", node="a", about="c"))
    assert Send("a", NotMember(topic="t", node="c")) in out  # type: ignore[arg-type]
    assert sup.members() == {"a": 0, "b": 1}
    sup.receive(Subscribe(topic="t", node="c"))
    assert sup.members() == {"a": 0, "b": 1, "c": 2}
