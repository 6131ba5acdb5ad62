"""The broker state machine, one step at a time: forwarding decisions of each algorithm."""

import pytest

from weeble.core.broker import Broker
from weeble.core.corruption import CorruptionError
from weeble.core.events import (
    ClientPublish,
    ClientSubscribe,
    ClientUnsubscribe,
    Corrupt,
    Deliver,
    Receive,
    Send,
    SetTimer,
    Start,
    TimerFired,
    Trace,
)
from weeble.core.filters import Filter
from weeble.core.messages import Notification, Notify, Sub, Switch, Unsub
from weeble.core.rom import Algorithm, Options, Params, Rom

P = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
F = Filter.equals("class", 1)


def make(alg: Algorithm, *, neighbors=("p", "x", "y"), parent="p", hierarchical=False,
         wrapper=False, root="p", me="b", options=None) -> Broker:
    rom = Rom(broker_id=me, neighbors=frozenset(neighbors), root=root,
              parent=parent if me != root else None, algorithm=alg, params=P,
              hierarchical=hierarchical, wrapper=wrapper, options=options or Options())
    b = Broker(rom)
    b.step(0.0, Start())
    return b


def sends(effects) -> list[tuple[str, str, str]]:
    return sorted((e.neighbor, type(e.message).__name__, getattr(e.message, "sub_id", ""))
                  for e in effects if isinstance(e, Send))


def test_start_arms_the_overrun_timer_and_overrun_expires_stale_entries() -> None:
    b = Broker(Rom(broker_id="b", neighbors=frozenset(), root="b", parent=None,
                   algorithm=Algorithm.SIMPLE, params=P))
    assert b.step(1.0, Start()) == [SetTimer("overrun", 11.0)]
    b.step(1.0, ClientSubscribe("c", "s1", F))
    assert b.step(11.0, TimerFired("overrun"))[-1] == SetTimer("overrun", 21.0)
    effects = b.step(21.0, TimerFired("overrun"))
    assert any(isinstance(e, Trace) and e.kind == "expire" for e in effects)
    assert len(b.ram.tables[0]) == 0


def test_stale_timer_is_ignored_after_clock_corruption() -> None:
    b = make(Algorithm.SIMPLE)
    effects = b.step(2.0, Corrupt("clock", 9.0))
    assert SetTimer("overrun", 3.0) in effects
    assert b.step(3.0, TimerFired("overrun"))  # the new overrun runs
    assert b.step(10.0, TimerFired("overrun")) == []  # the original timer is stale


def test_simple_p2p_floods_subscriptions_and_routes_notifications_back() -> None:
    b = make(Algorithm.SIMPLE)
    assert sends(b.step(0, Receive("x", Sub("s1", F)))) == [("p", "Sub", "s1"), ("y", "Sub", "s1")]
    n = Notification("pub", 1, {"class": 1})
    effects = b.step(0, Receive("y", Notify(n)))
    assert effects == [Send("x", Notify(n))]
    assert b.step(0, Receive("y", Notify(Notification("pub", 2, {"class": 2})))) == []


def test_hierarchical_notifications_climb_to_the_root_and_descend_by_entries() -> None:
    b = make(Algorithm.SIMPLE, hierarchical=True)
    # the access broker qualifies the client's id with the client (core.events.network_id)
    assert sends(b.step(0, ClientSubscribe("c", "s1", F))) == [("p", "Sub", "c/s1")]
    n = Notification("pub", 1, {"class": 1})
    assert b.step(0, Receive("x", Notify(n))) == [Deliver("c", n), Send("p", Notify(n))]
    assert b.step(0, Receive("p", Notify(n))) == [Deliver("c", n)]
    # subscriptions never come down from the parent
    assert sends(b.step(0, Receive("p", Sub("s9", F)))) == []


def test_identity_forwards_only_the_first_identical_subscription() -> None:
    b = make(Algorithm.IDENTITY, hierarchical=True)
    assert sends(b.step(0, ClientSubscribe("c1", "s1", F))) == [("p", "Sub", "c1/s1")]
    assert sends(b.step(0, ClientSubscribe("c2", "s2", F))) == []
    # after an overrun all flags are 0: the first refresh is forwarded again (flag-1 counting)
    b.step(10.0, TimerFired("overrun"))
    assert sends(b.step(11, ClientSubscribe("c2", "s2", F))) == [("p", "Sub", "c2/s2")]
    assert sends(b.step(12, ClientSubscribe("c1", "s1", F))) == []


def test_identity_without_the_flag_rule_suppresses_refreshes_forever() -> None:
    b = make(Algorithm.IDENTITY, hierarchical=True, options=Options(flag_rule=False))
    b.step(0, ClientSubscribe("c1", "s1", F))
    b.step(0, ClientSubscribe("c2", "s2", F))
    b.step(10.0, TimerFired("overrun"))
    assert sends(b.step(11, ClientSubscribe("c2", "s2", F))) == []


def test_identity_p2p_algorithm1_cases() -> None:
    b = make(Algorithm.IDENTITY)
    # i = 0 from a neighbour: everyone but the sender
    assert sends(b.step(0, Receive("x", Sub("s1", F)))) == [("p", "Sub", "s1"), ("y", "Sub", "s1")]
    # i = 1 and D' is a neighbour: only to D'
    assert sends(b.step(0, Receive("y", Sub("s2", F)))) == [("x", "Sub", "s2")]
    # i = 2: nowhere
    assert sends(b.step(0, ClientSubscribe("c", "s3", F))) == []
    # unsubscription of the local one: i = 2 remain, so it stays here
    assert sends(b.step(0, ClientUnsubscribe("c", "s3", F))) == []
    # the neighbour y withdraws: x remains (i = 1, neighbour) -> tell x only
    assert sends(b.step(0, Receive("y", Unsub("s2", F)))) == [("x", "Unsub", "s2")]


def test_covering_suppresses_covered_and_reforwards_on_unsubscribe() -> None:
    wide, narrow = Filter.parse("class < 10"), Filter.parse("class < 5")
    for alg in (Algorithm.COVERING1, Algorithm.COVERING2):
        b = make(alg, hierarchical=True)
        assert sends(b.step(0, ClientSubscribe("c1", "w", wide))) == [("p", "Sub", "c1/w")]
        assert sends(b.step(0, ClientSubscribe("c2", "n", narrow))) == []
        # the coverer leaves: the covered subscription goes up before the unsubscription
        effects = b.step(0, ClientUnsubscribe("c1", "w", wide))
        assert [(e.neighbor, type(e.message).__name__) for e in effects] == [
            ("p", "Sub"), ("p", "Unsub")]


def test_covering_variants_differ_on_flag0_coverers() -> None:
    wide, narrow = Filter.parse("class < 10"), Filter.parse("class < 5")
    out = {}
    for alg in (Algorithm.COVERING1, Algorithm.COVERING2):
        b = make(alg, hierarchical=True)
        b.step(0, ClientSubscribe("c1", "w", wide))
        b.step(0, ClientSubscribe("c2", "n", narrow))
        b.step(10.0, TimerFired("overrun"))  # every flag drops to 0
        out[alg] = sends(b.step(11, ClientSubscribe("c2", "n", narrow)))
    assert out[Algorithm.COVERING1] == [("p", "Sub", "c2/n")]  # flag-0 coverer does not count
    assert out[Algorithm.COVERING2] == []  # coverer counts whatever its flag


def test_merging_forwards_a_perfect_merger_instead_of_constituents() -> None:
    lo, hi = Filter.parse("price range [0, 10]"), Filter.parse("price range [10, 20]")
    b = make(Algorithm.MERGING2, hierarchical=True)
    assert sends(b.step(0, Receive("x", Sub("s1", lo)))) == [("p", "Sub", "s1")]
    effects = b.step(0, Receive("x", Sub("s2", hi)))
    (send,) = [e for e in effects if isinstance(e, Send)]
    assert send.message.filter == Filter.parse("price range [0, 20]")
    assert send.message.sub_id.startswith("merge:b:x:")
    # a constituent leaves: the rest goes up on its own before the merger is withdrawn
    effects = b.step(0, Receive("x", Unsub("s2", hi)))
    msgs = [(type(e.message).__name__, str(e.message.filter)) for e in effects
            if isinstance(e, Send)]
    merged = ("Unsub", str(Filter.parse("price range [0, 20]")))
    assert ("Sub", str(lo)) in msgs and merged in msgs
    assert msgs.index(("Sub", str(lo))) < msgs.index(merged)
    assert b.ram.tables[0].mergers == {}


@pytest.mark.parametrize("alg", [Algorithm.MERGING1, Algorithm.MERGING2])
def test_a_merger_whose_rest_merges_again_to_the_same_filter_is_not_withdrawn(
        alg: Algorithm) -> None:
    """The rest of a dissolved merger merged again into the same filter goes out under the same
    id: an unsubscription behind it dropped it upstream (issue 23: mergers churned along a
    fault-free chain)."""
    a, b_, c = (Filter.parse(f"price range [{lo}, {hi}]") for lo, hi in ((0, 10), (10, 20),
                                                                           (5, 15)))
    b = make(alg, hierarchical=True)
    for i, f in enumerate((a, b_, c)):
        b.step(0, Receive("x", Sub(f"s{i}", f)))
    (m,) = b.ram.tables[0].mergers.values()
    assert m.constituents == {a, b_, c}
    effects = b.step(1, Receive("x", Unsub("s2", c)))  # [0, 10] ∪ [10, 20] is [0, 20] again
    assert ("p", "Sub", m.merger_id) in sends(effects)
    assert ("p", "Unsub", m.merger_id) not in sends(effects)
    if alg is Algorithm.MERGING2:  # never a constituent of an existing merger (3.9)
        assert sends(effects) == [("p", "Sub", m.merger_id), ("p", "Unsub", "s2")]
    (again,) = b.ram.tables[0].mergers.values()
    assert again.merger_id == m.merger_id and again.constituents == {a, b_}


def test_false_merger_is_dropped_at_first_use() -> None:
    b = make(Algorithm.MERGING2, hierarchical=True)
    b.step(0, Corrupt("merger.insert", {"filter": "true", "dest": "x",
                                         "constituents": ["class == 1", "class == 2"]}))
    effects = b.step(0, Receive("x", Sub("s1", F)))
    assert any(isinstance(e, Trace) and e.kind == "merger_invalid" for e in effects)
    assert sends(effects) == [("p", "Sub", "s1")]
    assert b.ram.tables[0].mergers == {}


@pytest.mark.parametrize("alg", [Algorithm.MERGING1, Algorithm.MERGING2])
def test_a_false_merger_lends_nothing_to_a_new_one(alg: Algorithm) -> None:
    """A false merger of `true` (F14) that no subscription names is not merged with a new
    subscription of its destination: the new merger would have been `true`, forwarded at once
    (scenarios/explore/finding-merging1-merger-insert.yaml: 7.73 s against Δ = 6.1 s)."""
    b = make(alg, hierarchical=True)
    b.step(0, Corrupt("merger.insert", {"filter": "true", "dest": "x", "flag": 1,
                                         "constituents": ["class == 1", "class == 2"]}))
    effects = b.step(0, Receive("x", Sub("s3", Filter.equals("class", 3))))
    assert [(e.neighbor, e.message) for e in effects if isinstance(e, Send)] == [
        ("p", Sub("s3", Filter.equals("class", 3)))]


def test_flooding_sends_everywhere_but_the_sender_and_delivers_locally() -> None:
    b = make(Algorithm.FLOODING)
    assert b.step(0, ClientSubscribe("c", "s1", F)) == []
    n = Notification("pub", 1, {"class": 1})
    effects = b.step(0, Receive("x", Notify(n)))
    assert sends(effects) == [("p", "Notify", ""), ("y", "Notify", "")]
    assert Deliver("c", n) in effects
    # a corrupted entry naming a neighbour must not duplicate the flood
    b.step(0, Corrupt("entry.dest", "p", {"index": 0}))
    assert sends(b.step(0, Receive("x", Notify(n)))) == [("p", "Notify", ""), ("y", "Notify", "")]


def test_client_does_not_get_its_own_publication_back() -> None:
    b = make(Algorithm.SIMPLE)
    b.step(0, ClientSubscribe("c", "s1", F))
    n = Notification("c", 1, {"class": 1})
    assert not any(isinstance(e, Deliver) for e in b.step(0, ClientPublish("c", n)))


def test_wrapper_root_switches_and_neighbours_reset_the_new_table() -> None:
    root = make(Algorithm.IDENTITY, wrapper=True, hierarchical=True, me="p", root="p",
                neighbors=("b",))
    effects = root.step(10.0, TimerFired("switch"))
    assert Send("b", Switch(1)) in effects and root.ram.rebuild_bit == 1
    b = make(Algorithm.IDENTITY, wrapper=True, hierarchical=True)
    b.step(0, ClientSubscribe("c", "s1", F))  # into T^0
    assert b.step(1, Receive("p", Switch(1)))[0] == Send("x", Switch(1))
    b.step(2, ClientSubscribe("c", "s1", F))  # into T^1, tagged 1
    assert len(b.ram.tables[0]) == 1 and len(b.ram.tables[1]) == 1
    # A7: a repeated subscription within the period is dropped
    assert b.step(3, ClientSubscribe("c", "s1", F)) == []
    # switch back to 0: T^0 is reset, T^1 keeps routing (A1 uses the union)
    b.step(4, Receive("p", Switch(0)))
    assert len(b.ram.tables[0]) == 0 and len(b.ram.tables[1]) == 1


def test_wrapper_unsubscription_applies_to_both_tables() -> None:
    b = make(Algorithm.IDENTITY, wrapper=True, hierarchical=True)
    b.step(0, ClientSubscribe("c", "s1", F))
    b.step(1, Receive("p", Switch(1)))
    b.step(2, ClientSubscribe("c", "s1", F))
    effects = b.step(3, ClientUnsubscribe("c", "s1", F))
    assert sends(effects) == [("p", "Unsub", "c/s1")]
    assert all(len(t) == 0 for t in b.ram.tables)


@pytest.mark.parametrize(
    ("target", "value", "args"),
    [
        ("entry.filter", "class == 7", {"index": 0}),
        ("entry.sub_id", "other", {"sub_id": "c/s1"}),  # the id the table holds
        ("entry.dest", "ghost", {"index": 0}),
        ("entry.flag", None, {"index": 0}),
        ("entry.insert", {"sub_id": "z", "filter": "true", "dest": "x", "flag": 0}, {}),
        ("entry.delete", None, {"sub_id": "c/s1"}),
        ("table.clear", None, {}),
        ("clock", 3.0, {}),
    ],
)
def test_each_corruption_takes_effect_and_says_so(target, value, args) -> None:
    b = make(Algorithm.SIMPLE)
    b.step(0, ClientSubscribe("c", "s1", F))
    before = b.snapshot()
    effects = b.step(1.0, Corrupt(target, value, args))
    (evidence,) = [e for e in effects if isinstance(e, Trace) and e.kind == "fault"]
    assert evidence.fields["before"] != evidence.fields["after"]
    assert b.snapshot() != before


@pytest.mark.parametrize(
    ("target", "value", "args", "message"),
    [
        ("nonsense", None, {}, "unknown corruption target 'nonsense'"),
        ("clock", 99.0, {}, "clock: value must be in [0, pi=10)"),
        ("clock", "x", {}, "clock: expected a number"),
        ("entry.flag", 2, {"index": 0}, "entry.flag: value must be 0 or 1"),
        ("entry.dest", "x", {"index": 5}, "no entry at index 5"),
        ("entry.dest", "x", {"sub_id": "nope"}, "no entry with sub_id 'nope'"),
        ("entry.filter", "class ==", {"index": 0}, "entry.filter:"),
        ("entry.insert", {"bogus": 1}, {}, "unknown field(s) ['bogus']"),
        ("table.clear", None, {"table": 3}, "no table 3"),
    ],
)
def test_bad_corruptions_are_rejected_with_a_message_naming_the_problem(
    target, value, args, message
) -> None:
    b = make(Algorithm.SIMPLE)
    b.step(0, ClientSubscribe("c", "s1", F))
    with pytest.raises(CorruptionError, match=None) as info:
        b.step(1.0, Corrupt(target, value, args))
    assert message in str(info.value)


def test_garbage_from_a_stranger_is_traced_not_routed() -> None:
    b = make(Algorithm.SIMPLE)
    effects = b.step(0, Receive("stranger", Sub("s1", F)))
    assert [e.kind for e in effects if isinstance(e, Trace)] == ["garbage"]
    assert len(b.ram.tables[0]) == 0
