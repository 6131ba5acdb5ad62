"""Subscription ids are unique per client only (R1), and the brokers hold them network-unique:
the access broker qualifies a client's id with the client (`core.events.network_id`).

Before, two clients' `s0` were one id to the brokers: at a broker that learned both from one
neighbour, the per-destination refresh kept one entry of the two (the other client's
notifications stopped there), and one client's unsubscription removed the other's entries,
at its own broker and wherever the unsubscription went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.check.test_independent import agree
from tests.trace.test_trace_contract import run
from weeble.core.events import network_id
from weeble.core.rom import Algorithm, Params
from weeble.model.topology import chain
from weeble.sim.simulation import Simulation

# A chain b0-b1-b2-b3. alice (b0) and bob (b1): one neighbour apart, so b2 and b3 learn both
# `s0` from one neighbour; carol shares alice's broker and her id. alice unsubscribes at 8 s.
CLIENTS = (("alice", "b0", 0), ("carol", "b0", 2), ("bob", "b1", 1))


def shared(algorithm: str, hierarchical: bool) -> dict[str, Any]:
    subs = [{"client": c, "broker": b, "sub_id": "s0", "filter": f"class == {k}",
             **({"end": 8} if c == "alice" else {})} for c, b, k in CLIENTS]
    return {
        "name": f"shared-sub-ids-{algorithm}", "seed": 2, "duration": 24,
        "topology": {"kind": "chain", "brokers": 4},
        "routing": {"algorithm": algorithm, "hierarchical": hierarchical},
        "timing": {"pi": 5.5, "rho": 5.0, "delta_min": 0.01, "delta_max": 0.05},
        "subscriptions": subs,
        # every class from every broker, often: a lost entry costs deliveries at once
        "publications": [{"at": 1 + i / 4, "broker": f"b{i % 4}", "client": "pub",
                          "attributes": {"class": i % 3}} for i in range(88)],
        "check_every": 0.5, "trace": {"snapshots_every": 0.5}}


@pytest.mark.parametrize(("algorithm", "hierarchical"),
                         [("simple", False), ("identity", False), ("covering1", True),
                          ("merging2", False)])
def test_same_sub_id_of_different_clients(algorithm: str, hierarchical: bool,
                                          tmp_path: Path) -> None:
    """Every notification reaches bob and carol, before and after alice unsubscribes, and
    every state check passes; `weeble check` and the independent checker agree."""
    s = run(shared(algorithm, hierarchical), tmp_path)
    ours, _ = agree(tmp_path)
    d = ours["deliveries"]
    assert d["expected"] == d["delivered"] > 45
    assert d["missing"] == d["spurious"] == d["duplicate"] == 0
    assert ours["legitimacy"]["checks"] > 80
    assert ours["legitimacy"]["illegitimate"] == 0, ours["legitimacy"]
    assert s.as_dict()["legitimacy"]["illegitimate"] == 0


def test_tables_hold_network_ids() -> None:
    """The simulator API: two clients at one broker subscribe as `s0`; the tables hold
    `carol/s0` and `alice/s0` (ids of the form `<client>/<k>` are their own network ids),
    and `unsubscribe` names the client, so alice's leaves carol's entries alone."""
    assert network_id("alice", "s0") == "alice/s0"
    assert network_id("alice", "alice/3") == "alice/3"
    assert network_id("alice", "bob/3") == "alice/bob/3"
    assert network_id("al", "alice/3") == "al/alice/3"
    params = Params(pi=5.5, rho=5.0, delta_min=0.01, delta_max=0.05, d=2)
    sim = Simulation(chain(3), algorithm=Algorithm.IDENTITY, params=params, seed=1)
    assert sim.subscribe(0.0, "alice", "b0", "class == 0", sub_id="s0") == "alice/s0"
    sim.subscribe(0.0, "carol", "b0", "class == 2", sub_id="s0")
    sim.subscribe(0.0, "bob", "b1", "class == 1", sub_id="s0")
    sim.run(3.0)
    ids = {b: sorted({(e.sub_id, e.dest) for t in sim.brokers[b].routing.tables() for e in t})
           for b in ("b0", "b2")}
    assert ("alice/s0", "alice") in ids["b0"] and ("carol/s0", "carol") in ids["b0"]
    assert {i for i, _ in ids["b2"]} == {"alice/s0", "carol/s0", "bob/s0"}
    with pytest.raises(ValueError, match="name the client"):
        sim.unsubscribe(3.5, "s0")
    sim.unsubscribe(3.5, "s0", client="alice")
    sim.run(4.0)
    ids = {b: {e.sub_id for t in sim.brokers[b].routing.tables() for e in t}
           for b in ("b0", "b2")}
    assert ids == {"b0": {"carol/s0", "bob/s0"}, "b2": {"carol/s0", "bob/s0"}}


@pytest.mark.parametrize("alg", [Algorithm.SIMPLE, Algorithm.IDENTITY], ids=lambda a: a.value)
def test_same_advertisement_id_of_two_publishers(alg: Algorithm) -> None:
    """The advertisement plane the same way: pa (b0) and pb (b1) both advertise as `a0`,
    different filters; b2 and b3 learn both from one neighbour and keep two entries; pa's
    unadvertisement leaves pb's alone, so c's subscription at b3 still reaches pb."""
    params = Params(pi=5.5, rho=5.0, delta_min=0.01, delta_max=0.05, d=3)
    sim = Simulation(chain(4), algorithm=alg, params=params, adverts=True, seed=1)
    pa = sim.advertise(0.0, "pa", "b0", "class == 1", adv_id="a0")
    assert pa == "pa/a0"
    sim.advertise(0.0, "pb", "b1", "class == 2", adv_id="a0")
    sim.subscribe(0.0, "c", "b3", "class == 2")
    sim.run(3.0)

    def held(b: str) -> set[str]:
        return {e.sub_id for _, e in sim.brokers[b].adv_entries()}

    assert held("b2") == held("b3") == {"pa/a0", "pb/a0"}
    sim.unadvertise(3.5, pa)
    sim.run(14.0)  # beyond a lease, refreshes every ρ
    assert held("b2") == held("b3") == {"pb/a0"}
    assert any(e.dest == "b2" and str(e.filter) == "class == 2"
               for _, e in sim.brokers["b1"].entries())  # the subscription reached pb's side
    assert sim.legitimacy() == []
