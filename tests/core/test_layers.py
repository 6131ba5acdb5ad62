"""The core as layers: faults on the overlay and exchange RAM, and overlay legitimacy."""

from __future__ import annotations

import random

import pytest

from weeble.core.broker import TARGETS, Broker
from weeble.core.corruption import CorruptionError
from weeble.core.events import (
    AddNeighbor,
    ClientAdvertise,
    ClientSubscribe,
    Corrupt,
    Leave,
    Receive,
    RemoveNeighbor,
    Send,
    Start,
    StartExchange,
    Trace,
)
from weeble.core.filters import Filter
from weeble.core.legitimacy import overlay
from weeble.core.messages import Bye, Lock, Notification, Notify, Sub, Unsub
from weeble.core.reconfig.faults import random_layer_fault
from weeble.core.rom import Algorithm, ConfigError, Mode, Params, Rom
from weeble.core.routing.faults import random_fault
from weeble.core.sketch.messages import AeObserve

P = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
F = Filter.equals("class", 1)


def make(me: str = "b", neighbors=("a", "c"), parent: str | None = "a", root: str = "a",
         alg: Algorithm = Algorithm.IDENTITY, adverts: bool = False,
         mode: Mode = Mode.LEASING) -> Broker:
    b = Broker(Rom(broker_id=me, neighbors=frozenset(neighbors), root=root, parent=parent,
                   algorithm=alg, params=P, adverts=adverts, mode=mode))
    b.step(0.0, Start())
    return b


def tree(edges: list[tuple[str, str]], root: str) -> dict[str, Broker]:
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    parent: dict[str, str | None] = {root: None}
    order = [root]
    for v in order:
        for n in sorted(adj[v]):
            if n not in parent:
                parent[n] = v
                order.append(n)
    return {v: make(v, tuple(adj[v]), parent[v], root) for v in adj}


LAYER_FAULTS = [
    ("overlay.neighbors", ["a", "x"], {}),
    ("overlay.neighbor.add", "x", {}),
    ("overlay.neighbor.remove", "c", {}),
    ("overlay.parent", "c", {}),
    ("exchange.locked", True, {}),
    ("exchange.pointer", "c", {"name": "new"}),
    ("exchange.color", True, {}),
    ("exchange.relaying", True, {}),
    ("exchange.gray_set", ["a", "b"], {}),
    ("exchange.queue_set", ["c"], {}),
    ("exchange.rid", "bogus", {}),
]


@pytest.mark.parametrize(("target", "value", "args"), LAYER_FAULTS)
def test_each_layer_fault_takes_effect_and_says_so(target: str, value: object,
                                                    args: dict) -> None:
    b = make()
    before = b.snapshot()
    effects = b.step(1.0, Corrupt(target, value, args))
    (evidence,) = [e for e in effects if isinstance(e, Trace) and e.kind == "fault"]
    assert evidence.fields["layer"] == target.split(".")[0]
    assert evidence.fields["before"] != evidence.fields["after"]
    assert b.snapshot() != before
    assert target in TARGETS


@pytest.mark.parametrize(("target", "value", "args", "message"), [
    ("overlay.neighbors", "a", {}, "value must be a list of broker ids"),
    ("overlay.neighbor.remove", "zz", {}, "'zz' is not a neighbour"),
    ("exchange.locked", 1, {}, "value must be true or false"),
    ("exchange.pointer", "c", {"name": "sideways"}, "args.name must be one of"),
    ("exchange.queue.clear", None, {"queue": "qx"}, "args.queue must be qnot, qsub or qrel"),
    ("adv.entry.insert", {"filter": "true"}, {}, "keeps no advertisement tables"),
])
def test_bad_layer_faults_are_rejected_with_a_message(target: str, value: object, args: dict,
                                                      message: str) -> None:
    with pytest.raises(CorruptionError) as info:
        make().step(1.0, Corrupt(target, value, args))
    assert message in str(info.value)


def test_advertisement_tables_take_faults_too_f16() -> None:
    b = make(adverts=True)
    b.step(0.0, ClientAdvertise("p", "ad1", F))
    effects = b.step(1.0, Corrupt("adv.entry.dest", "ghost", {"index": 0}))
    (after,) = [e.fields["after"] for e in effects if isinstance(e, Trace)]
    assert after["sample"][0]["dest"] == "ghost"
    rng = random.Random(3)
    kinds = {random_fault(b, rng, [F]).target for _ in range(60)}
    assert any(k.startswith("adv.") for k in kinds) and "clock" in kinds


def test_random_layer_faults_are_type_correct() -> None:
    rng = random.Random(1)
    for _ in range(200):
        b = make()
        b.step(1.0, random_layer_fault(b, rng, ["a", "b", "c", "d"]))  # never raises


def test_overlay_legitimacy_a_tree_with_parents_towards_the_root() -> None:
    brokers = tree([("a", "b"), ("b", "c"), ("b", "d")], "a")
    assert overlay(brokers, "a") == []
    brokers["c"].step(1.0, Corrupt("overlay.parent", "d"))
    assert overlay(brokers, "a") == ["c: parent d, towards the root is b"]
    brokers = tree([("a", "b"), ("b", "c"), ("b", "d")], "a")
    brokers["d"].step(1.0, Corrupt("overlay.neighbor.add", "c"))
    problems = overlay(brokers, "a")
    assert "d–c: c does not have d as a neighbour" in problems
    brokers["c"].step(1.0, Corrupt("overlay.neighbor.add", "d"))
    assert "4 brokers need 3 links, have 4" in overlay(brokers, "a")
    brokers = tree([("a", "b"), ("b", "c")], "a")
    brokers["b"].step(1.0, Corrupt("overlay.neighbors", []))
    assert any("not connected" in p for p in overlay(brokers, "a"))
    brokers = tree([("a", "b"), ("b", "c")], "a")
    brokers["b"].step(1.0, Corrupt("exchange.locked", True))
    assert overlay(brokers, "a") == ["b: locked in a reconfiguration"]


@pytest.mark.parametrize(("mode", "locked", "message"), [
    (Mode.LEASING, False, Notify(Notification("p", 1, {"class": 1}))),
    (Mode.LEASING, False, Sub("s9", F)),
    (Mode.LEASING, True, Notify(Notification("p", 1, {"class": 1}))),
    (Mode.LEASING, True, Sub("s9", F)),
    (Mode.ANTI_ENTROPY, False, Notify(Notification("p", 1, {"class": 1}))),
    (Mode.ANTI_ENTROPY, False, AeObserve(1, True)),
])
def test_what_only_a_neighbour_may_send_is_refused_from_a_stranger(
        mode: Mode, locked: bool, message: object) -> None:
    """A routing or anti-entropy message from a broker that is not a neighbour, at the dispatch,
    the anti-entropy stage or a locked exchange: one garbage record, nothing sent or held."""
    b = make(alg=Algorithm.SIMPLE, mode=mode)
    b.step(0.5, ClientSubscribe("c1", "s1", F))
    if locked:
        b.step(0.5, Corrupt("exchange.locked", True))
    before = b.snapshot()
    effects = b.step(1.0, Receive("x", message))
    assert [(type(e).__name__, getattr(e, "fields", None)) for e in effects] == [
        ("Trace", {"from": "x", "why": "not a neighbour"})]
    assert b.snapshot() == before
    # the same message from a neighbour is taken
    assert b.step(1.0, Receive("a", message)) != effects


def test_routing_follows_the_overlay_in_ram() -> None:
    """Neighbours are RAM: a corrupted neighbour set changes where routing sends, and a message
    from a broker no longer in it is garbage."""
    b = make(neighbors=("a", "c"))
    assert {e.neighbor for e in b.step(0.0, Receive("a", Sub("s1", F)))
            if isinstance(e, Send)} == {"c"}
    b.step(1.0, Corrupt("overlay.neighbors", ["a", "c", "d"]))
    assert {e.neighbor for e in b.step(1.0, Receive("a", Sub("s2", Filter.equals("k", 2))))
            if isinstance(e, Send)} == {"c", "d"}
    b.step(2.0, Corrupt("overlay.neighbor.remove", "c"))
    effects = b.step(2.0, Receive("c", Unsub("s1", F)))
    assert [e.fields["why"] for e in effects if isinstance(e, Trace)] == ["not a neighbour"]


def test_leaf_add_bootstraps_the_new_neighbour_and_bye_withdraws_it() -> None:
    b = make(neighbors=("a",), parent="a")
    b.step(0.0, ClientSubscribe("c1", "s1", F))
    b.step(0.0, Receive("a", Sub("s2", Filter.equals("k", 2))))
    effects = b.step(1.0, AddNeighbor("leaf"))
    sent = sorted((e.neighbor, e.message.sub_id) for e in effects if isinstance(e, Send))
    assert sent == [("leaf", "c1/s1"), ("leaf", "s2")]  # every filter held for others
    b.step(1.0, Receive("leaf", Sub("s3", Filter.equals("k", 3))))
    effects = b.step(2.0, Receive("leaf", Bye()))
    assert ("a", "Unsub", "s3") in {(e.neighbor, type(e.message).__name__, e.message.sub_id)
                                    for e in effects if isinstance(e, Send)}
    assert "leaf" not in b.neighbors and not any(e.dest == "leaf" for _, e in b.entries())
    leaf = make("leaf", ("b",), "b")
    assert [e for e in leaf.step(3.0, Leave()) if isinstance(e, Send)] == [Send("b", Bye())]
    assert leaf.neighbors == frozenset()


def test_strawman_link_drop_withdraws_what_came_over_it() -> None:
    b = make(neighbors=("a", "c"))
    b.step(0.0, Receive("c", Sub("s1", F)))
    effects = b.step(1.0, RemoveNeighbor("c"))
    assert ("a", "s1") in {(e.neighbor, e.message.sub_id) for e in effects
                           if isinstance(e, Send) and isinstance(e.message, Unsub)}
    assert "c" not in b.neighbors


def test_exchange_requests_are_checked() -> None:
    b = make("a", ("b",), None, "a")
    refused = [e.fields for e in b.step(1.0, StartExchange("x", ("a", "b"), ("a", "b")))
               if isinstance(e, Trace)]
    assert refused[0]["phase"] == "refused" and "at least 3 brokers" in refused[0]["why"]
    refused = [e.fields for e in b.step(1.0, StartExchange("x", ("a", "b", "c"), ("b", "d")))
               if isinstance(e, Trace)]
    assert "is not a link of the path" in refused[0]["why"]
    m = Broker(Rom(broker_id="a", neighbors=frozenset({"b"}), root="a", parent=None,
                   algorithm=Algorithm.MERGING1, params=P))
    refused = [e.fields for e in m.step(1.0, StartExchange("x", ("a", "b", "c"), ("b", "c")))
               if isinstance(e, Trace)]
    assert "merging-based routing" in refused[0]["why"]


def test_a_locked_broker_bounces_another_reconfigurations_lock_d4() -> None:
    b = make("b", ("a", "c"), "a")
    b.step(1.0, Receive("a", Lock("x1", ("a", "b", "c"), ("b", "c"))))
    assert b.locked
    effects = b.step(1.0, Receive("c", Lock("x2", ("c", "b", "a"), ("a", "b"))))
    bounced = [e.message for e in effects if isinstance(e, Send)]
    assert bounced == [Lock("x2", ("c", "b", "a"), ("a", "b"), refused="busy")]
    assert b.ram.exchange.rid == "x1"


def test_advertisements_need_peer_to_peer_filtering() -> None:
    with pytest.raises(ConfigError, match="adverts"):
        Broker(Rom(broker_id="a", neighbors=frozenset(), root="a", parent=None,
                   algorithm=Algorithm.FLOODING, params=P, adverts=True))
