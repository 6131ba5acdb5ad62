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
