"""RoutingTable.loaned is routing RAM like the mergers: a snapshot shows it, the corruption
registry can set and clear it (any value of the right type), and what a loan does follows from
it (merging.py `expired`): a loaned entry that expires unrefreshed is unsubscribed upstream."""

from __future__ import annotations

import pytest

from weeble.core.broker import Broker
from weeble.core.corruption import CorruptionError
from weeble.core.events import Corrupt, Receive, Send, Start, TimerFired
from weeble.core.filters import Filter
from weeble.core.messages import Sub, Unsub
from weeble.core.rom import Algorithm, Params, Rom

P = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
F = Filter.equals("class", 1)


def make(alg: Algorithm) -> Broker:
    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p", "x"}), root="p", parent="p",
                   algorithm=alg, params=P))
    b.step(0.0, Start())
    return b


def test_a_loan_is_in_the_snapshot_until_its_destination_refreshes_the_entry() -> None:
    b = make(Algorithm.MERGING1)
    assert "loaned" not in b.snapshot()  # none: left out, as the schema says
    b.step(1.0, Corrupt("merger.loaned.insert", {"dest": "x", "filter": "class == 1"}))
    assert b.snapshot()["loaned"] == [[{"dest": "x", "filter": str(F)}]]
    b.step(2.0, Receive("x", Sub("s1", F)))  # the destination refreshes it: no longer on loan
    assert "loaned" not in b.snapshot()


def test_a_corrupted_loan_acts_when_its_entry_expires_unrefreshed() -> None:
    b = make(Algorithm.MERGING2)
    b.step(1.0, Receive("x", Sub("s1", F)))
    b.step(1.5, Corrupt("merger.loaned.insert", {"dest": "x", "filter": "class == 1"}))
    b.step(10.0, TimerFired("overrun"))
    effects = b.step(20.0, TimerFired("overrun"))  # s1 expires, never refreshed
    unsubs = [e for e in effects if isinstance(e, Send) and isinstance(e.message, Unsub)]
    assert [(e.neighbor, e.message.sub_id) for e in unsubs] == [("p", "s1")]
    assert "loaned" not in b.snapshot()


def test_loans_are_cleared_and_bad_values_named() -> None:
    b = make(Algorithm.MERGING1)
    b.step(1.0, Corrupt("merger.loaned.insert", {"dest": "x", "filter": "class == 2"}))
    b.step(1.0, Corrupt("merger.loaned.clear"))
    assert "loaned" not in b.snapshot()
    with pytest.raises(CorruptionError, match=r"merger\.loaned\.insert"):
        b.step(1.0, Corrupt("merger.loaned.insert", {"dest": "x", "sub_id": "s"}))


def test_a_handed_over_renewal_is_on_loan_and_withdrawn_if_the_heir_never_refreshes() -> None:
    """The subscription that renewed the neighbours' entry for F ends; the next holder (a
    crashed client's entry, never refreshed) takes over and is re-sent at once. When that
    entry expires, the neighbours' entries it renewed are withdrawn, as an unsubscription
    would: the re-send gave them a fresh lease beyond the heir's own, and the neighbours,
    counting this broker as a holder, kept their other subscribers' refreshes from coming
    here (identity seed 28 of the issue-28 sweep, shrunk: a live subscriber cut off 7.4 s
    after the episode, Δ = 6.1 s)."""
    from weeble.core.events import ClientSubscribe, ClientUnsubscribe

    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p", "x"}), root="p", parent="p",
                   algorithm=Algorithm.IDENTITY, params=P))
    b.step(0.0, Start())
    b.step(1.0, ClientSubscribe("c1", "c1/0", F))
    b.step(2.0, ClientSubscribe("c2", "c2/0", F))  # crashes: never refreshed
    b.step(10.0, TimerFired("overrun"))
    b.step(11.0, ClientSubscribe("c1", "c1/0", F))  # c1 renews p's and x's entries
    handed = b.step(12.0, ClientUnsubscribe("c1", "c1/0", F))
    subs = [e for e in handed if isinstance(e, Send) and isinstance(e.message, Sub)]
    assert sorted(e.neighbor for e in subs) == ["p", "x"]  # c2's entry takes over at once
    assert not any(isinstance(e, Send) and isinstance(e.message, Unsub) for e in handed)
    assert b.snapshot()["loaned"] == [[{"dest": "c2", "filter": str(F)}]]
    effects = b.step(20.0, TimerFired("overrun"))  # c2's entry expires, never refreshed
    unsubs = [e for e in effects if isinstance(e, Send) and isinstance(e.message, Unsub)]
    assert sorted(e.neighbor for e in unsubs) == ["p", "x"]
    assert all(e.message.filter == F for e in unsubs)
    assert "loaned" not in b.snapshot()


def test_a_merger_the_expiries_re_form_outlives_the_overrun_that_formed_it() -> None:
    """c expires at an overrun and dissolves x's merger; the rest merges again and goes out at
    once. That new merger has flag 0 (its constituents' flags were just cleared) and the
    records' second chance, run after the expiries, dropped it at once: never renewed nor
    withdrawn, its entries upstream outlived it by 2π (merging1 on the tree of 15, seed 11)."""
    b = make(Algorithm.MERGING1)
    a, g, c = (Filter.parse(f"class range [{lo}, {hi}]") for lo, hi in ((0, 10), (5, 15), (10, 20)))
    for sub_id, f in (("a", a), ("g", g), ("c", c)):
        b.step(1.0, Receive("x", Sub(sub_id, f)))
    assert [m["filter"] for m in b.snapshot()["mergers"][0]] == ["class range [0, 20]"]
    b.step(10.0, TimerFired("overrun"))
    b.step(12.0, Receive("x", Sub("a", a)))  # c is never refreshed again
    b.step(12.0, Receive("x", Sub("g", g)))
    effects = b.step(20.0, TimerFired("overrun"))
    sent = {(e.neighbor, type(e.message).__name__, str(e.message.filter)) for e in effects
            if isinstance(e, Send)}
    assert ("p", "Sub", "class range [0, 15]") in sent  # the rest merged again, sent upstream
    assert ("p", "Unsub", "class range [0, 20]") in sent  # the dissolved one withdrawn
    assert [m["filter"] for m in b.snapshot()["mergers"][0]] == ["class range [0, 15]"]


def test_an_uncovered_re_send_is_on_loan_and_withdrawn_if_never_refreshed() -> None:
    """y's covering subscription ends, and x's covered one, held unrefreshed (a bogus entry,
    a crashed client's), is re-sent to p at once (`Covering.uncovered`): the re-send gave it a
    fresh lease at p, so when it expires here it is unsubscribed there (merging1 on the tree
    of 15, seed 11: an `entry.dest` corruption's entry spurious upstream for 18.5 s)."""
    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p", "x", "y"}), root="p", parent="p",
                   algorithm=Algorithm.COVERING1, params=P))
    b.step(0.0, Start())
    big, small = Filter.parse("class range [0, 50]"), Filter.parse("class range [30, 47]")
    b.step(1.0, Receive("y", Sub("big", big)))
    b.step(1.0, Receive("x", Sub("s", small)))  # covered by y's: goes to y alone
    b.step(10.0, TimerFired("overrun"))
    handed = b.step(12.0, Receive("y", Unsub("big", big)))
    assert ("p", small) in {(e.neighbor, e.message.filter) for e in handed
                            if isinstance(e, Send) and isinstance(e.message, Sub)}
    effects = b.step(20.0, TimerFired("overrun"))  # s expires, never refreshed
    unsubs = {(e.neighbor, e.message.filter) for e in effects
              if isinstance(e, Send) and isinstance(e.message, Unsub)}
    assert ("p", small) in unsubs


@pytest.mark.parametrize("alg", [Algorithm.SIMPLE, Algorithm.IDENTITY, Algorithm.COVERING1])
def test_an_exchange_lends_the_far_side_what_the_relays_copied(alg: Algorithm) -> None:
    """A link exchange adds a = (a, b) here (b is Bn of the cycle ⟨a, p, b⟩, r = (a, p)): the
    relays give a this side's routes with a fresh lease. A route whose entry here expires
    unrefreshed (a crashed client's) is withdrawn over a then; one refreshed is no longer on
    loan (simple peer-to-peer seeds 45 and 381 of the issue-28 sweep: the relayed copy of a
    crashed client's route lived 8.3 s after the crash, L = 6.1 s)."""
    from weeble.core.events import ClientSubscribe
    from weeble.core.messages import End, Lock, Separator, Unlock

    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p"}), root="p", parent="p",
                   algorithm=alg, params=P))
    b.step(0.0, Start())
    g = Filter.equals("class", 2)
    b.step(1.0, ClientSubscribe("c1", "c1/0", F))  # crashes: never refreshed
    b.step(1.0, ClientSubscribe("c2", "c2/0", g))  # lives on
    b.step(2.0, Receive("p", Lock("r1", ("a", "p", "b"), ("a", "p"))))  # the lock: a is added
    # the rest of the exchange as b sees it: p (Br2) relays nothing of b's side, then its
    # separator and End; the unlocks come from p and over a
    for m in (Separator("r1", frozenset(), relayed=True), End("r1"), Unlock("r1")):
        b.step(2.1, Receive("p", m))
    b.step(2.2, Receive("a", Unlock("r1")))
    assert not b.snapshot()["exchange"]["locked"] and "a" in b.snapshot()["neighbors"]
    assert sorted(x["dest"] for x in b.snapshot()["loaned"][0]) == ["c1", "c2"]
    b.step(10.0, TimerFired("overrun"))
    b.step(11.0, ClientSubscribe("c2", "c2/0", g))  # c2 refreshes: repaid
    assert b.snapshot()["loaned"] == [[{"dest": "c1", "filter": str(F)}]]
    effects = b.step(20.0, TimerFired("overrun"))  # c1's entry expires, never refreshed
    unsubs = [e for e in effects if isinstance(e, Send) and isinstance(e.message, Unsub)]
    assert "a" in {e.neighbor for e in unsubs}
    assert all(e.message.filter == F for e in unsubs)
    assert "loaned" not in b.snapshot()


def _flags(b: Broker, dest: str) -> list[int]:
    return [x["flag"] for x in b.snapshot()["tables"][0] if x["dest"] == dest]


@pytest.mark.parametrize("alg", [Algorithm.SIMPLE, Algorithm.IDENTITY, Algorithm.COVERING1])
@pytest.mark.parametrize(("begin", "stale"), [(16.0, True), (12.1, False)])
def test_a_route_relayed_to_myself_that_missed_its_refresh_keeps_flag_0(
        alg: Algorithm, begin: float, stale: bool) -> None:
    """b is both Br2 and Bn of the cycle ⟨a, p, b⟩ (r = (p, b)): at Begin it relays its routes
    across r to itself as come over a. A route that has missed its refresh (flag 0 for longer
    than ρ + d·(δmax − δmin) = 5.36 s after the overrun at 10.0) keeps flag 0 and goes at b's
    next overrun, as its original does, not a lease later (covering1 peer-to-peer seed 45 of
    the issue-28 sweep: an unsubscribed client's route lived 7.1 s after its end, L = 6.1 s).
    At flag 0 for less than that, its refresh may still come, over a, where the exchange may
    drop it (a black one): a fresh lease. A refreshed one gets a fresh lease too."""
    from weeble.core.messages import Begin, Lock

    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p"}), root="p", parent="p",
                   algorithm=alg, params=P))
    b.step(0.0, Start())
    g = Filter.equals("class", 2)
    b.step(1.0, Receive("p", Sub("s1", F)))  # never refreshed
    b.step(2.0, Receive("p", Sub("s2", g)))
    b.step(10.0, TimerFired("overrun"))  # both at flag 0
    b.step(11.0, Receive("p", Sub("s2", g)))  # s2 refreshed: flag 1
    b.step(12.0, Receive("p", Lock("r1", ("a", "p", "b"), ("p", "b"))))  # the lock: a is added
    b.step(begin, Receive("a", Begin("r1")))
    relayed = {x["sub_id"]: x["flag"] for x in b.snapshot()["tables"][0] if x["dest"] == "a"}
    assert relayed == {"s1": 0 if stale else 1, "s2": 1}
    b.step(20.0, TimerFired("overrun"))
    left = [x["sub_id"] for x in b.snapshot()["tables"][0] if x["dest"] == "a"]
    assert left == (["s2"] if stale else ["s1", "s2"])


@pytest.mark.parametrize(("lease", "flag"), [(5.0, 0), (7.9, 0), (8.5, 1), (15.0, 1)])
def test_a_route_relayed_from_the_r_endpoint_keeps_flag_0_only_if_it_ends_no_earlier(
        lease: float, flag: int) -> None:
    """b is Bn of the cycle ⟨a, q, p, b⟩ (r = (q, p)): p relays its routes across r with the
    time each had left there. b's next overrun is at 10.0: a copy whose original goes by then
    keeps flag 0 (it goes at 10.0, up to π after its original, not 2π); one that lives longer
    gets flag 1, since its refresh, now coming over a, may land after b's next overrun."""
    from weeble.core.messages import Lock, Relayed

    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p"}), root="p", parent="p",
                   algorithm=Algorithm.IDENTITY, params=P))
    b.step(0.0, Start())
    b.step(2.0, Receive("p", Lock("r1", ("a", "q", "p", "b"), ("q", "p"))))
    b.step(2.1, Receive("p", Relayed("r1", Sub("s1", F, 0, True), reroute=True, lease=lease)))
    assert _flags(b, "a") == [flag]
    b.step(2.1, Receive("p", Relayed("r1", Sub("s2", F, 0, True), reroute=True)))
    assert [x["flag"] for x in b.snapshot()["tables"][0] if x["sub_id"] == "s2"] == [1]


def test_the_lease_of_a_relay_crosses_the_wire() -> None:
    from weeble.codec.wire import WireError, envelope_to_message, message_to_envelope
    from weeble.core.messages import Relayed
    from weeble.proto.v1 import link_pb2

    for lease in (None, 0.0, 2.75):
        m = Relayed("r1", Sub("s1", F, 0, True), reroute=True, lease=lease)
        env = link_pb2.Envelope.FromString(message_to_envelope(m, 1).SerializeToString())
        assert envelope_to_message(env) == m
    env = message_to_envelope(Relayed("r1", Sub("s1", F), reroute=True, lease=1.0), 1)
    env.relayed.lease = float("nan")
    with pytest.raises(WireError, match=r"relayed\.lease"):
        envelope_to_message(env)
