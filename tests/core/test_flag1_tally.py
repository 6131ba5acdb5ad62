"""The count of flag-1 forwards (weeble.core.routing.leasing.NewSubscriptionTally): which of
the first messages of a new subscription only the flag-1 rule of the self-stabilizing identity
routing (thesis §3.3.1) sent, counted apart for `weeble reproduce ch3`'s control traffic bc.

A chain leaf b -> p -> root r, hierarchical identity routing as ch3 simulates it (the thesis's
algorithm: renew_forwarded off), one tally shared by the three."""

from weeble.core.broker import Broker
from weeble.core.events import ClientSubscribe, ClientUnsubscribe, Receive, Send, Start, TimerFired
from weeble.core.filters import Filter
from weeble.core.rom import Algorithm, Options, Params, Rom
from weeble.core.routing.leasing import Leasing, NewSubscriptionTally

P = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
F = Filter.equals("class", 1)
ZERO = {"repeat_new": 0, "repeat_refresh": 0}
CHAIN = {"b": (("p",), "p"), "p": (("b", "y", "r"), "r"), "r": (("p",), None)}


def chain() -> tuple[dict[str, Broker], NewSubscriptionTally]:
    tally = NewSubscriptionTally()
    brokers = {}
    for me, (neighbors, parent) in CHAIN.items():
        b = Broker(
            Rom(
                broker_id=me,
                neighbors=frozenset(neighbors),
                root="r",
                parent=parent,
                algorithm=Algorithm.IDENTITY,
                params=P,
                hierarchical=True,
                options=Options(renew_forwarded=False),
            )
        )
        b.step(0.0, Start())
        scheme = b.routing.subs
        assert isinstance(scheme, Leasing)
        scheme.tally = tally
        brokers[me] = b
    return brokers, tally


def run(brokers: dict[str, Broker], t: float, at: str, event: object) -> list[tuple[str, str]]:
    """One event at one broker, then every message it sets off, hop by hop: the hops taken."""
    hops = []
    pending = [(at, e) for e in brokers[at].step(t, event)]
    while pending:
        here, effect = pending.pop(0)
        if isinstance(effect, Send):
            hops.append((here, effect.neighbor))
            there = effect.neighbor
            pending += [(there, e) for e in brokers[there].step(t, Receive(here, effect.message))]
    return hops


def overrun(brokers: dict[str, Broker], t: float) -> None:
    for b in brokers.values():
        b.step(t, TimerFired("overrun"))


def test_a_new_subscription_after_an_overrun_is_a_counted_flag1_forward() -> None:
    brokers, tally = chain()
    # the first subscription for f toggles both brokers on the way up
    assert run(brokers, 0, "b", ClientSubscribe("c1", "s1", F)) == [("b", "p"), ("p", "r")]
    assert tally.counts() == {"flag1": 0, "relayed": 0, "toggle": 2, "other": 0, **ZERO}
    overrun(brokers, 10.0)  # every flag is 0 now
    # c2's new subscription: b already routes f (c1's entry, flag 0), yet forwards it (flag 1
    # counting); p holds f only from b, so it passes it on (relayed)
    assert run(brokers, 11, "b", ClientSubscribe("c2", "s2", F)) == [("b", "p"), ("p", "r")]
    FIRST = {"flag1": 1, "relayed": 1, "toggle": 2, "other": 0}
    assert tally.counts() == {**FIRST, **ZERO}
    # c2 refreshes within the same overrun period (π > ρ): b and p hold no flagged entry of
    # another destination, so both send f up a second time in the period: two repeats
    assert run(brokers, 12, "b", ClientSubscribe("c2", "s2", F)) == [("b", "p"), ("p", "r")]
    assert tally.counts() == {**FIRST, "repeat_new": 0, "repeat_refresh": 2}
    # c2, whose entry is f's only flagged one here, leaves: c1 still holds f, so nothing goes
    # up; c1's next refresh finds no flagged entry and sends f up again: two more repeats
    assert run(brokers, 13, "b", ClientUnsubscribe("c2", "s2", F)) == []
    assert run(brokers, 14, "b", ClientSubscribe("c1", "s1", F)) == [("b", "p"), ("p", "r")]
    assert tally.counts() == {**FIRST, "repeat_new": 0, "repeat_refresh": 4}
    # after an overrun the first refresh is no repeat
    overrun(brokers, 20.0)
    assert run(brokers, 21, "b", ClientSubscribe("c1", "s1", F)) == [("b", "p"), ("p", "r")]
    assert tally.counts() == {**FIRST, "repeat_new": 0, "repeat_refresh": 4}
    assert not tally.fresh  # c1 refreshed, c2 gone: neither is new any more


def test_no_flag1_forward_while_a_flag_is_set() -> None:
    brokers, tally = chain()
    run(brokers, 0, "b", ClientSubscribe("c1", "s1", F))
    # before an overrun c1's entry has flag 1: c2's new subscription stays at b
    assert run(brokers, 1, "b", ClientSubscribe("c2", "s2", F)) == []
    overrun(brokers, 10.0)
    # after it, c1 refreshes first (forwarded: a refresh, not counted), then c3 subscribes
    assert run(brokers, 11, "b", ClientSubscribe("c1", "s1", F)) == [("b", "p"), ("p", "r")]
    assert run(brokers, 12, "b", ClientSubscribe("c3", "s3", F)) == []
    assert tally.counts() == {"flag1": 0, "relayed": 0, "toggle": 2, "other": 0, **ZERO}
    run(brokers, 13, "b", ClientUnsubscribe("c3", "s3", F))
    assert tally.fresh == {"c2/s2"}  # c2 has not refreshed yet; c3 is gone


def test_brokers_without_a_tally_count_nothing() -> None:
    b = Broker(
        Rom(
            broker_id="b",
            neighbors=frozenset({"p"}),
            root="p",
            parent="p",
            algorithm=Algorithm.IDENTITY,
            params=P,
            hierarchical=True,
        )
    )
    scheme = b.routing.subs
    assert isinstance(scheme, Leasing) and scheme.tally is None
