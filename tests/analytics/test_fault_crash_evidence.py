"""`weeble analyze` judges a client crash that reported no `took_effect` by the trace's `crash`
records, matched by (client, sub_id): sub ids are unique per client only (R1)."""

from __future__ import annotations

from weeble.analytics.jobs.faults import crash_hits


def test_another_clients_crash_of_the_same_id_is_no_evidence() -> None:
    seen = {("bob", "s0", 12.0), ("alice", "s0", 30.0)}
    # alice's s0 crashed at 30, after the window [10, 20]: bob's crash of `s0` at 12 does not
    # count for her (it did, matched by bare id)
    assert crash_hits([("alice", "s0")], seen, 10.0, 20.0) == []
    assert crash_hits([("bob", "s0")], seen, 10.0, 20.0) == [("bob", "s0")]
    assert crash_hits([("alice", "s0")], seen, 25.0, 35.0) == [("alice", "s0")]
    # a fault record that names no client (an older trace): by sub_id alone
    assert crash_hits([(None, "s0")], seen, 10.0, 20.0) == [(None, "s0")]
    assert crash_hits([("alice", "s1")], seen, 0.0, 40.0) == []
