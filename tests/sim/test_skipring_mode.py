"""Mode skip_ring (seed 003) as a mode of the brokers: the scenario and the CLI, the one
Simulation, chaos through the fault vocabulary, the checker's verdict online and offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weeble.check.history import check_run
from weeble.cli import main
from weeble.core.broker import Broker
from weeble.core.events import ClientPublish, ClientSubscribe, Deliver, Send, Start, Trace
from weeble.core.filters import Filter
from weeble.core.messages import Notification
from weeble.core.rom import Algorithm, Mode, Params, Rom, SkipRing
from weeble.model.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "skipring.yaml"
PARAMS = Params(pi=3.2, rho=3, delta_min=0.005, delta_max=0.02, d=2)


def rom(b: str, **sr: Any) -> Rom:
    return Rom(broker_id=b, neighbors=frozenset(), root="b0", parent=None,
               algorithm=Algorithm.SIMPLE, params=PARAMS, mode=Mode.SKIP_RING,
               skip_ring=SkipRing(supervisors=("b0",), **sr))


def test_the_scenario_run_passes_its_verdict_with_every_fault_stabilized(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Random label, random edges, a corrupted database, junk messages, a wrong failure-detector
    view and a crashed broker: each took effect and each episode is legitimate again (state
    and service level) within the skip ring's bound; nothing lost outside the crash, no
    duplicate; `weeble check` over the trace finds the same."""
    assert main(["simulate", str(SCENARIO), "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err  # no terminal here: plain lines, the last one at the end
    progress = [line for line in err.splitlines() if line.startswith("simulating skipring: ")]
    assert 1 <= len(progress) <= 21 and progress[-1].startswith(
        "simulating skipring: 180/180 simulated s, ")
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["verdict"]["pass"], s["verdict"]["reasons"]
    kinds = [f["type"] for f in s["verdict"]["faults"]]
    assert kinds == ["corrupt"] * 5 + ["crash"]
    for f in s["verdict"]["faults"]:
        assert f["took_effect"] and f["state_time"] is not None
        assert f["state_time"] <= s["bound"] and f["service_time"] <= s["bound"]
        assert f["duplicated"] == 0 and (f["lost"] == 0 or f["type"] == "crash")
    d = s["deliveries"]
    assert d["spurious"] == d["duplicate"] == d["phantom"] == 0
    assert d["expected"] > 3000 and d["missing"] < d["expected"] / 100
    report = check_run(tmp_path)
    assert report["verdict"]["pass"]
    assert report["deliveries"]["missing"] == d["missing"]
    assert report["deliveries"]["expected"] == d["expected"]


def test_content_filters_are_refused_by_the_scenario_and_the_cli(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(ROOT / "scenarios" / "sim-small.yaml"), "--mode",
                 "skip_ring", "--out", "/nonexistent", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "subscriptions[0].filter: the skip_ring mode is topic-based" in err
    assert "'class == 3 && price < 100'" in err
    data = json.loads(json.dumps(load_scenario(SCENARIO).model_dump(mode="json",
                                                                     exclude_none=True)))
    data["publications"] = [{"at": 1, "broker": "b1", "attributes": {"class": 1}}]
    with pytest.raises(ScenarioError, match=r"publications\[0\].attributes: the skip_ring mode"):
        parse_scenario(data)
    data["publications"] = []
    data["skip_ring"]["supervisors"] = ["b99"]
    with pytest.raises(ScenarioError, match=r"skip_ring.supervisors\[0\]: unknown broker 'b99'"):
        parse_scenario(data)


def test_a_broker_refuses_a_content_filter_and_serves_a_topic() -> None:
    b0, b1 = Broker(rom("b0")), Broker(rom("b1"))
    assert [e.timer for e in b1.step(0.0, Start())] == ["skipring.member"]
    assert [e.timer for e in b0.step(0.0, Start())] == ["skipring.member", "skipring.supervisor"]
    out = b1.step(0.1, ClientSubscribe("alice", "alice/1", Filter.parse("class == 3")))
    assert [type(e) for e in out] == [Trace] and "topic-based" in out[0].fields["why"]
    # a topic: b1 asks the supervisor b0, which answers with b1's configuration (label r(0))
    (send,) = b1.step(0.2, ClientSubscribe("alice", "alice/2", Filter.parse('topic == "news"')))
    assert isinstance(send, Send) and send.neighbor == "b0"
    from weeble.core.events import Receive

    (config,) = b0.step(0.3, Receive("b1", send.message))
    b1.step(0.4, Receive("b0", config.message))
    assert b1.snapshot()["skip_ring"]["members"]["news"]["label"] == 0
    # a publication at a broker that is no member goes to the supervisor, then to r(0)
    n = Notification("bob", 1, {"topic": "news", "x": 1}, 0.5)
    (to_sup,) = b0.step(0.5, ClientPublish("bob", n))
    (to_member,) = b0.step(0.5, Receive("b0", to_sup.message)) if to_sup.neighbor == "b0" \
        else [to_sup]
    out = b1.step(0.6, Receive("b0", to_member.message))
    assert [e for e in out if isinstance(e, Deliver)] == [Deliver("alice", n)]


def test_a_local_lease_that_ends_is_traced_as_the_contract_says() -> None:
    """A client that stops refreshing (it crashed) loses its lease after π: the expire record
    carries the contract's required `count` (a live run's trace once lacked it, and every
    reader refused the trace: CI of 8632060, test_fifteen_brokers_on_skip_rings...)."""
    from weeble.core.events import Receive, TimerFired
    from weeble.core.overlay.skipring.node import MEMBER_TIMER
    from weeble.trace.reader import validate
    from weeble.trace.schema import VERSION

    b0, b1 = Broker(rom("b0")), Broker(rom("b1"))
    b0.step(0.0, Start())
    b1.step(0.0, Start())
    for sub in ("alice/1", "alice/2"):  # the first asks the supervisor b0 to join the topic
        for send in b1.step(0.2, ClientSubscribe("alice", sub, Filter.parse('topic == "news"'))):
            for reply in b0.step(0.3, Receive("b1", send.message)):
                if isinstance(reply, Send) and reply.neighbor == "b1":
                    b1.step(0.4, Receive("b0", reply.message))
    expired = [e for e in b1.step(0.2 + PARAMS.pi + 0.1, TimerFired(MEMBER_TIMER))
               if isinstance(e, Trace) and e.kind == "expire"]
    assert len(expired) == 1 and expired[0].fields["count"] == 2
    assert {e["sub_id"] for e in expired[0].fields["entries"]} == {"alice/1", "alice/2"}
    validate({"v": VERSION, "t": 3_500_000_000, "node": "b1", "kind": "expire",
              **expired[0].fields}, "b1")


def test_a_member_announces_a_link_through_the_supervisor_before_its_first_message() -> None:
    """With `announce` (a live run: brokers admit link sessions only from neighbours and
    planned ones), a member's first message to a broker follows an Announce to the topic's
    supervisor, which relays it to that broker; there the announcer is planned for the lease
    (8 intervals), then no more. Without `announce` (the simulator) nothing changes."""
    from weeble.core.events import Receive
    from weeble.core.overlay.skipring.messages import Announce, Introduce

    b0, b1, b2 = (Broker(rom(b, announce=True, interval=0.5)) for b in ("b0", "b1", "b2"))
    member = b1.skip_ring_node.layer.member("t")
    member.active, member.label = True, 0
    # a message to b2 from b1's member layer, as its Timeout would send one
    out = b1.skip_ring_node.deliver_effects(1.0, [Send("b2", Introduce("t", "b1", 0))])
    assert out == [Send("b0", Announce("t", "b1", "b2")), Send("b2", Introduce("t", "b1", 0))]
    # the next one within half a lease goes alone
    again = b1.skip_ring_node.deliver_effects(2.0, [Send("b2", Introduce("t", "b1", 0))])
    assert again == [Send("b2", Introduce("t", "b1", 0))]
    (relay,) = b0.step(1.1, Receive("b1", out[0].message))
    assert relay == Send("b2", Announce("t", "b1", "b2"))
    assert b2.step(1.2, Receive("b0", relay.message)) == []
    assert b2.skip_ring_node.planned_links(1.2) == {"b1"}
    assert b2.skip_ring_node.planned_links(1.2 + 4.0) == set()  # the lease ran out
    # an Announce that does not come from the supervisor plans nothing
    (junk,) = b2.step(1.3, Receive("b1", Announce("t", "b3", "b2")))
    assert isinstance(junk, Trace) and "Announce" in junk.fields["why"]
    assert "b3" not in b2.skip_ring_node.planned_links(1.3)
    # without announce, the member sends as before
    quiet = Broker(rom("b1"))
    assert quiet.skip_ring_node.deliver_effects(
        1.0, [Send("b2", Introduce("t", "b1", 0))]) == [Send("b2", Introduce("t", "b1", 0))]


def test_every_skip_ring_message_crosses_the_wire_unchanged() -> None:
    """Envelope.skip_ring carries each kind, junk labels (outside the label space) included:
    the receiving core refuses those, exactly as in the simulator."""
    import random

    from weeble.codec.wire import WireError, envelope_to_message, message_to_envelope
    from weeble.codec.wire_skipring import SKIP_RING_TYPES
    from weeble.core.overlay.skipring import messages as m
    from weeble.core.overlay.skipring.corruption import junk_messages
    from weeble.core.overlay.skipring.trie import Prefix, Publication, Summary
    from weeble.proto.v1 import link_pb2

    pub = Publication("p", 3, b'{"a":{"topic":"t"},"t":1.5}')
    summary = Summary(Prefix(0b1011, 4), (1 << 127) | 5)
    msgs: list[Any] = [m for _, m in junk_messages(random.Random(1), topic="t",
                                                   nodes=["a", "b", "c"], supervisor="a",
                                                   count=400)]
    msgs += [m.Subscribe("t", "a"), m.Unsubscribe("t", "a"), m.Publish("t", "a", pub),
             m.PublishNew("t", "b", pub), m.DeliverPublications("t", (pub, pub)),
             m.Config("t", None, None, None), m.Config("t", 3, None, m.Ref("x", 5)),
             m.CheckTrie("t", "a", (summary,), Prefix(0, 0), False),
             m.CheckTrie("t", "a", (), None, True), m.Probe("t"), m.Announce("t", "a", "b")]
    assert {type(x) for x in msgs} == SKIP_RING_TYPES
    for msg in msgs:
        wire = message_to_envelope(msg, 7).SerializeToString()
        assert envelope_to_message(link_pb2.Envelope.FromString(wire)) == msg
    bad = link_pb2.Envelope(skip_ring=link_pb2.SkipRingMsg(topic="t", node="a"))
    with pytest.raises(WireError, match="skip_ring: no kind set"):
        envelope_to_message(bad)
    bad.skip_ring.send_prefix.length = 200
    with pytest.raises(WireError, match="a prefix of 200 bits"):
        envelope_to_message(bad)


def test_two_clients_of_one_broker_may_share_a_sub_id(tmp_path: Path) -> None:
    """Sub ids are unique per client only (R1): alice and bob at b1 both subscribe as `s0`,
    each to its own topic. The broker kept its local leases by bare sub_id, so each one's
    refresh took the lease from the other, and 17 of 70 expected deliveries were missing."""
    from weeble.sim.run import simulate

    subs = [{"client": c, "broker": b, "filter": f'topic == "{t}"', "sub_id": "s0"}
            for c, b, t in (("alice", "b1", "t0"), ("bob", "b1", "t1"), ("carol", "b2", "t0"))]
    data = {"name": "sr-shared", "seed": 3, "duration": 30, "mode": "skip_ring",
            "topology": {"kind": "kary", "m": 2, "levels": 2},
            "routing": {"algorithm": "simple"},
            "timing": {"pi": 3.2, "rho": 3, "delta_min": 0.005, "delta_max": 0.02},
            "skip_ring": {"supervisors": ["b0"], "interval": 1.0, "supervisor_interval": 0.25},
            "subscriptions": [*subs, {"client": "dave", "broker": "b2",
                                      "filter": 'topic == "t1"'}],
            "publications": [{"at": 2 + i / 2, "broker": f"b{i % 3}", "client": "pub",
                              "attributes": {"topic": f"t{i % 2}"}} for i in range(50)],
            "check_every": 1.0}
    simulate(parse_scenario(data), tmp_path, progress=False)
    d = check_run(tmp_path)["deliveries"]
    assert d["expected"] == d["delivered"] == 70
    assert d["missing"] == d["spurious"] == d["duplicate"] == 0
