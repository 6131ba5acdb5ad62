"""The 3-colour scheme (thesis 4.5, seed 001; spec ch4 §5, §6.3): the recolor protocol, its
faults and the overlay's stabilization, proven in simulation (TC-24, TC-25, TC-27 to TC-30),
each claim with its negative or ablation test (ξ′ too short, control messages coloured c_cur as
in Fig. 4.20, no colour check, E1, E2, E3). Traffic, ordering and reconfigurations at large are
in test_colours_traffic.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from weeble.core.broker import Broker
from weeble.core.corruption import CorruptionError
from weeble.core.events import (
    AddNeighbor,
    ClientSubscribe,
    Corrupt,
    Receive,
    Send,
    Start,
    SubmitReconfig,
    Trace,
)
from weeble.core.filters import Filter
from weeble.core.legitimacy import SnapshotView
from weeble.core.messages import Notify, Recolor, RecolorAck, Sub, Unsub
from weeble.core.overlay.coloured_legitimacy import coloured_overlay
from weeble.core.reconfig.faults import random_layer_fault
from weeble.core.reconfig.plan import ExchangeLink, Tree, apply, edge, moves
from weeble.core.reconfig.recolor_faults import random_colour_fault
from weeble.core.rom import Algorithm, Colours, ConfigError, OverlayKind, Params, Rom
from weeble.model.topology import Topology, chain, from_edges, kary_tree, random_tree
from weeble.sim.reconfigure import Reconfigurator
from weeble.sim.simulation import Simulation

XI, RHO, DMIN, DMAX = 1.0, 0.4, 0.005, 0.02
H = 9  # h: the bound on the tree height; trees here have at most 10 brokers (h ≤ η − 1)
P = Params(pi=1.0, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=2 * H)
C = Colours(xi=XI, height=H)
XI_PRIME = C.timeout_of(P)  # ξ + h·δmax
DELTA_R = C.bound(P)  # ∆r = 4ξ + h(2δmax − δmin)


def net_of(topology: Topology, seed: int = 0, colours: Colours = C, **kw: Any) -> Simulation:
    return Simulation(topology, algorithm=kw.pop("algorithm", Algorithm.IDENTITY), params=P,
                      colours=colours, seed=seed, root="b0", **kw)


def traces(net: Simulation, kind: str, since: float = 0.0) -> list[tuple[float, str, dict]]:
    return [(t, n, tr.fields) for t, n, tr in net.traces if tr.kind == kind and t >= since]


def legit_since(net: Simulation, check: Callable[[], list[str]], until: float,
                step: float = 0.02) -> float | None:
    """Run to `until`; the time from which `check` stayed [] (None if it never did)."""
    since = None
    while net.now < until - 1e-9:
        net.run(min(until, net.now + step))
        if check():
            since = None
        elif since is None:
            since = net.now
    return since


def corrupt(net: Simulation, t: float, broker: str, target: str, value: Any = None,
            **args: Any) -> None:
    net.corrupt(t, broker, Corrupt(target, value, args))


def coloured_rom(me: str, neighbors: tuple[str, ...], parent: str | None,
                 colours: Colours = C) -> Rom:
    return Rom(broker_id=me, neighbors=frozenset(neighbors), root="a", parent=parent,
               algorithm=Algorithm.IDENTITY, params=P,
               overlay=OverlayKind.COLOURED, colours=colours)


# ---- configuration --------------------------------------------------------------------------


def test_constants_are_checked_against_eq_4_2_and_the_scheme_refuses_what_it_cannot_do() -> None:
    C.validate(P)
    with pytest.raises(ConfigError, match=r"Eq\. 4\.2"):
        Colours(xi=0.5, height=H).validate(P)
    with pytest.raises(ConfigError, match="height"):
        Colours(xi=XI).validate(P)
    with pytest.raises(ConfigError, match="advertisements"):
        Broker(Rom(broker_id="a", neighbors=frozenset(), root="a", parent=None,
                   algorithm=Algorithm.IDENTITY, params=P, adverts=True,
                   overlay=OverlayKind.COLOURED, colours=C))
    with pytest.raises(ConfigError, match="wrapper"):
        Broker(Rom(broker_id="a", neighbors=frozenset(), root="a", parent=None,
                   algorithm=Algorithm.IDENTITY, params=P, wrapper=True,
                   overlay=OverlayKind.COLOURED, colours=C))
    b = Broker(coloured_rom("b", ("a",), "a"))
    out = b.step(0.0, AddNeighbor("x"))
    assert next(e.fields["why"] for e in out if isinstance(e, Trace)).startswith("AddNeighbor")
    assert pytest.approx(XI + H * DMAX) == XI_PRIME
    thesis = Colours(xi=XI, height=H, timeout="thesis").timeout_of(P)
    assert pytest.approx(XI + H * (DMAX - DMIN)) == thesis


# ---- TC-24: the timeout -----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", ["paper", "thesis"])
@pytest.mark.parametrize("delay", ["uniform", "constant", "adversarial"])
def test_tc24_no_broker_times_out_in_a_fault_free_run(timeout: str, delay: str) -> None:
    for seed in range(3):
        topo = random_tree(10, seed)
        net = net_of(topo, seed, Colours(xi=XI, height=H, timeout=timeout), delay=delay)
        net.run(25.0)
        assert traces(net, "rejoin") == []
        assert net.overlay_legitimacy() == []
        assert len(traces(net, "recolor")) >= 9 * 23  # every broker, every round


def test_tc24_ablation_a_timeout_without_the_height_term_fires_without_faults() -> None:
    net = net_of(random_tree(10, 1), 1, Colours(xi=XI, height=H, xi_prime=XI))
    net.run(15.0)
    assert len(traces(net, "rejoin")) > 10


def test_tc24_a_partition_makes_every_cut_off_broker_time_out() -> None:
    topo = kary_tree(2, 3)  # b1 has the subtree b1, b3, b4
    net = net_of(topo)
    net.run(4.6)
    net.engine.set_link_fault("b0", "b1", drop=1.0)
    net.run(9.0)
    rejoined = {n for _, n, _ in traces(net, "rejoin")}
    assert rejoined == {"b1", "b3", "b4"}
    # the last recolor b1 heard was R's round at 4.x; it times out ξ′ after it
    first = min(t for t, n, _ in traces(net, "rejoin"))
    last_heard = max(t for t, n, _ in traces(net, "recolor") if n == "b1" and t < 4.6)
    assert first == pytest.approx(last_heard + XI_PRIME, abs=1e-6)


# ---- TC-25, TC-27: two rounds, colours as specified -------------------------------------------


class Watch:
    """Every link message, checked at send time against the sender's colour pointers."""

    def __init__(self, net: Simulation) -> None:
        self.net = net
        self.errors: list[str] = []
        self.colours: dict[str, set[int]] = {}  # notification id -> colours seen on the way
        self.sends: list[tuple[float, str, str, Any]] = []

    def __call__(self, t: float, kind: str, src: str, dst: str, msg: Any) -> None:
        if kind != "send" or not isinstance(msg, Notify | Sub):
            return
        self.sends.append((t, src, dst, msg))
        o = self.net.brokers[src].ram.overlay if src in self.net.brokers else None
        if o is None:
            return
        c = msg.color if isinstance(msg, Notify) else msg.tag
        if dst not in o.trees[c].neighbors:
            self.errors.append(f"{t:.3f} {src}→{dst}: {type(msg).__name__} of colour {c} to "
                               f"no neighbour of that colour")
        if isinstance(msg, Notify):
            self.colours.setdefault(msg.notification.id, set()).add(c)


def test_tc25_tc27_a_change_is_written_in_one_round_and_used_after_the_next() -> None:
    edges = [("b0", "b1"), ("b1", "b2"), ("b2", "b3"), ("b0", "b4"), ("b4", "b5")]
    tree = Tree.of(edges)
    op = ExchangeLink(remove=edge("b2", "b3"), add=("b3", "b5"))
    net = net_of(from_edges(edges))
    watch = Watch(net)
    net.engine._on_link = watch  # the engine's link observer, set after construction
    net.engine._arrive = net.engine._traced_arrival
    rounds: dict[str, list[tuple[float, int, dict, dict]]] = {}

    def on_recolor(now: float, node: Any, tr: Trace) -> None:
        if tr.kind == "recolor":
            o = net.brokers[node.id].ram.overlay
            rounds.setdefault(node.id, []).append((now, tr.fields["recolor_round"],
                                                   o.trees[o.c_new].as_dict(),
                                                   o.trees[o.c_cur].as_dict()))

    net.trace_observers.append(on_recolor)
    for i in range(6):
        net.subscribe(0.0, f"s{i}", f"b{i}", "class == 1")
    t = 0.5
    while t < 14:
        net.publish(t, "b3", {"class": 1})
        t += 0.01
    net.engine.schedule(5.5, lambda now, a, b: net.engine.inject(
        now, "b0", SubmitReconfig("x", moves(tree, apply(tree, op), "b0"))))
    net.run(15.0)
    disseminated = next(f["recolor_round"] for _, _, f in traces(net, "reconfig")
                        if f["phase"] == "disseminated")
    k = disseminated
    for b, seen in rounds.items():
        by_round = {r: (t, new, cur) for t, r, new, cur in seen}
        _, new_k, cur_k = by_round[k]
        t_k1, _, cur_k1 = by_round[k + 1]
        before = {"b3": "b2", "b2": "b1"}
        if b == "b3":  # round k: written into c_new only; round k+1: current
            assert new_k["parent"] == "b5" and cur_k["parent"] == "b2"
            assert cur_k1["parent"] == "b5"
        elif b == "b5":
            assert "b3" in new_k["children"] and "b3" not in cur_k["children"]
            assert "b3" in cur_k1["children"]
        elif b == "b2":
            assert "b3" not in new_k["children"] and "b3" in cur_k["children"]
        assert before.get(b) is None or cur_k["parent"] == before[b]
        # notifications over the new link a = b3–b5 only once its end has recolor k+1
        for ts, src, dst, msg in watch.sends:
            if {src, dst} == {"b3", "b5"} and isinstance(msg, Notify) and src == b:
                assert ts >= t_k1
            if {src, dst} == {"b2", "b3"} and isinstance(msg, Notify) and src == b:
                assert ts < by_round[k + 2][0] + 2 * DMAX  # r carries old colours only
    assert watch.errors == []
    assert all(len(cs) == 1 for cs in watch.colours.values())  # one colour, end to end
    assert net.delivery_errors(published_from=1.5, settle=3 * XI) == []


def test_tc27_ablation_subscriptions_coloured_c_cur_lose_notifications_fig_4_20() -> None:
    lost = {}
    for control in ("c_new", "c_cur"):
        net = net_of(kary_tree(2, 3), colours=Colours(xi=XI, height=H, control_colour=control))
        for i, b in enumerate(net.brokers):
            net.subscribe(0.0, f"s{i}", b, "class == 1")
        t = 0.5
        while t < 10:
            net.publish(t, f"b{int(t * 100) % 7}", {"class": 1})
            t += 0.02
        net.run(11)
        lost[control] = len(net.delivery_errors(published_from=3.0, settle=2 * XI))
    assert lost["c_new"] == 0 and lost["c_cur"] > 50, lost


# ---- TC-28: ignored recolors, dropped children, cycles ----------------------------------------


def test_tc28_a_recolor_from_anyone_but_p_cnew_is_ignored_and_not_acked() -> None:
    b = Broker(coloured_rom("b", ("a", "c"), "a"))
    b.step(0.0, Start())
    o = b.ram.overlay
    assert b.step(0.1, Receive("a", Recolor(0))) != []  # from P^{c_new}: accepted (joining)
    before = (o.c_old, o.c_cur, o.c_new)
    out = b.step(0.2, Receive("c", Recolor(1)))
    assert not any(isinstance(e, Send) for e in out)
    assert [e.fields["why"] for e in out] == ["recolor not from P^c_new"]
    assert (o.c_old, o.c_cur, o.c_new) == before
    # the paper's second check: a recolor with my c_new colour is refused too
    out = b.step(0.3, Receive("a", Recolor(o.c_new)))
    assert not any(isinstance(e, Send) for e in out)
    out = b.step(0.4, Receive("a", Recolor((o.c_new + 1) % 3)))
    assert Send("a", RecolorAck((before[2] + 1) % 3)) in out
    # ablation: without it the same colour is taken again
    b2 = Broker(coloured_rom("b", ("a",), "a", Colours(xi=XI, height=H, colour_check=False)))
    b2.step(0.0, Start())
    b2.step(0.1, Receive("a", Recolor(0)))
    assert any(isinstance(e, Send) for e in b2.step(0.2, Receive("a", Recolor(0))))


def test_tc28_a_child_that_does_not_ack_is_dropped_at_the_next_recolor_and_rejoins() -> None:
    net = net_of(kary_tree(2, 3))
    net.run(4.6)
    o = net.brokers["b3"].ram.overlay
    corrupt(net, 4.6, "b3", "colour.parent", "b2", colour=o.c_new)  # b3 refuses b1's recolors
    since = legit_since(net, net.overlay_legitimacy, 14.0)
    refused = [t for t, n, f in traces(net, "garbage") if n == "b3" and "P^c_new" in f["why"]]
    dropped = [t for t, n, f in traces(net, "child_dropped") if n == "b1" and f["peer"] == "b3"]
    assert refused and dropped
    assert XI - 3 * DMAX < dropped[0] - refused[0] < XI + H * DMAX  # the next round
    assert [n for _, n, _ in traces(net, "rejoin")] == ["b3"]
    assert since is not None and since - 4.6 <= DELTA_R


def _cycle_run(prune_all: bool) -> Simulation:
    """Chain b0…b4: b3 gets its ancestor b1 as a child in the colour about to be current."""
    net = net_of(chain(5), colours=Colours(xi=XI, height=H, prune_all=prune_all))
    net.run(4.6)
    c = net.brokers["b3"].ram.overlay.c_new
    corrupt(net, 4.6, "b3", "colour.child.add", "b1", colour=c)
    corrupt(net, 4.6, "b3", "recolor.flags", ["b1", "b4"])
    net.run(12.0)
    return net


def test_tc28_a_corrupted_pointer_cycle_is_broken_within_one_round() -> None:
    net = _cycle_run(prune_all=True)
    refused = [t for t, n, f in traces(net, "garbage") if n == "b1" and f["from"] == "b3"]
    dropped = [(t, f["peer"]) for t, n, f in traces(net, "child_dropped") if n == "b3"]
    assert len(refused) == 1 and [p for _, p in dropped] == ["b1"]
    assert dropped[0][0] - refused[0] < XI + H * (DMAX - DMIN) + DMAX
    assert traces(net, "rejoin") == [] and net.overlay_legitimacy() == []
    assert all("b1" not in t.children for t in net.brokers["b3"].ram.overlay.trees)


def test_tc28_e2_ablation_pruning_c_cur_only_keeps_the_cycle_pointer_for_ever() -> None:
    net = _cycle_run(prune_all=False)
    dropped = [t for t, n, f in traces(net, "child_dropped") if n == "b3"]
    assert len(dropped) >= 5  # dropped again every round: the c_new copy brings it back
    o = net.brokers["b3"].ram.overlay
    assert "b1" in o.trees[o.c_new].children


def _consistent_cycle(colour_check: bool) -> Simulation:
    """b3 and b4 point at each other in every colour (a consistent cycle, cut off from R), and
    a bogus recolor enters it."""
    net = net_of(chain(5), colours=Colours(xi=XI, height=H, colour_check=colour_check))
    net.run(4.6)
    for b, other in (("b3", "b4"), ("b4", "b3")):
        for c in range(3):
            corrupt(net, 4.6, b, "colour.parent", other, colour=c)
            corrupt(net, 4.6, b, "colour.children", [other], colour=c)
        corrupt(net, 4.6, b, "recolor.flags", [other])
    c = (net.brokers["b3"].ram.overlay.c_new + 1) % 3
    net.inject_message(4.6, "b4", "b3", Recolor(c))
    net.run(9.0)
    return net


def test_tc28_the_colour_check_stops_a_bogus_recolor_circling_a_consistent_cycle() -> None:
    net = _consistent_cycle(colour_check=True)
    circling = [t for t, n, _ in traces(net, "recolor", since=4.6)
                if n in ("b3", "b4") and t < 4.6 + XI / 2]
    assert len(circling) <= 2  # once round, then refused
    assert {n for _, n, _ in traces(net, "rejoin")} == {"b3", "b4"}
    ablation = _consistent_cycle(colour_check=False)
    circling = [t for t, n, _ in traces(ablation, "recolor", since=4.6) if n in ("b3", "b4")]
    assert len(circling) > 100  # for ever: the partition is never detected
    assert traces(ablation, "rejoin") == []


# ---- TC-29, TC-30: stabilization ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_tc29_after_a_partition_the_overlay_is_legitimate_within_delta_r(seed: int) -> None:
    """Cut links (counted from the heal: the thesis treats link crashes as transient) and
    corrupted parents (the thesis's partition by pointers, counted from the fault)."""
    topo = random_tree(10, seed)
    parents = topo.parent_map("b0")
    rng = random.Random(seed)
    victim = rng.choice([b for b in topo.brokers if b != "b0"])
    for degree in (0, 2):
        net = net_of(topo, seed, Colours(xi=XI, height=H, degree=degree))
        net.run(4.3)
        net.engine.set_link_fault(victim, parents[victim], drop=1.0)
        net.run(6.0)
        net.engine.set_link_fault(victim, parents[victim], drop=0.0)
        since = legit_since(net, net.overlay_legitimacy, 6.0 + 2 * DELTA_R)
        assert since is not None and since - 6.0 <= DELTA_R, (degree, since)
        net = net_of(topo, seed, Colours(xi=XI, height=H, degree=degree))
        net.run(4.3)
        o = net.brokers[victim].ram.overlay
        corrupt(net, 4.3, victim, "colour.parent", "ghost", colour=o.c_new)
        since = legit_since(net, net.overlay_legitimacy, 4.3 + 2 * DELTA_R)
        assert since is not None and since - 4.3 <= DELTA_R, (degree, since)


def test_tc29_a_bogus_entry_is_gone_within_3xi_and_a_bogus_unsubscription_repaired() -> None:
    bound_entry = 3 * XI + H * (DMAX - DMIN)
    bound_unsub = 2 * XI + 2 * H * (DMAX - DMIN) + RHO
    net = net_of(kary_tree(2, 3))
    for i in range(7):
        net.subscribe(0.0, f"s{i}", f"b{i}", "class == 1")
    net.run(5.2)
    # into b1's T^{c_new} soon after its recolor: the worst case of the thesis's bound
    t_recolor = max(t for t, n, _ in traces(net, "recolor") if n == "b1")
    o = net.brokers["b1"].ram.overlay
    spec = {"sub_id": "bogus", "filter": "class == 9", "dest": "b3", "flag": 1}
    net.engine.inject(net.now, "b1", Corrupt("entry.insert", spec, {"table": o.c_new}))
    injected = net.now
    gone = None
    while net.now < injected + 2 * bound_entry:
        net.run(net.now + 0.01)
        if not any(e.sub_id == "bogus" for _, e in net.brokers["b1"].entries()):
            gone = net.now
            break
    assert gone is not None and gone - t_recolor <= bound_entry
    assert gone - injected > 2 * XI - 2 * H * DMAX  # the rotation, not a lease, removes it
    # a bogus unsubscription of s3's entry at b1 (towards b3), in its c_new colour
    c = o.c_new
    net.inject_message(net.now, "b3", "b1", Unsub("s3/3", Filter.parse("class == 1"), c))
    start = net.now
    net.run(start + 0.01)
    assert not any(e.sub_id == "s3/3" for t, e in net.brokers["b1"].entries() if t == c)
    since = legit_since(net, lambda: net.legitimacy(settle=3 * XI), start + 2 * bound_unsub)
    assert since is not None and since - start <= bound_unsub


@pytest.mark.parametrize("colour_check", [False, True])
def test_tc30_corrupted_colours_converge_to_the_roots(colour_check: bool) -> None:
    """At most three accepted recolors without the paper's colour check (every rotation takes
    one value from R). With it (our default) a corrupted c_new that equals the next colour
    makes the broker refuse that recolor: it is dropped and rejoins (found by this test), and
    the overlay is still legitimate within ∆r."""
    rejoins = 0
    for seed in range(12):
        topo = random_tree(8, seed)
        net = net_of(topo, seed, Colours(xi=XI, height=H, colour_check=colour_check))
        net.run(4.5)
        rng = random.Random(seed)
        victims = rng.sample([b for b in topo.brokers if b != "b0"], 3)
        for v in victims:
            for name in ("c_old", "c_cur", "c_new"):
                corrupt(net, 4.5, v, f"colour.{name}", rng.randrange(3))
        accepted = {v: 0 for v in victims}
        agreed: dict[str, int] = {}

        def count(now: float, node: Any, tr: Trace, net: Simulation = net,
                  accepted: dict[str, int] = accepted, agreed: dict[str, int] = agreed) -> None:
            v = node.id
            if tr.kind == "recolor" and v in accepted and v not in agreed:
                accepted[v] += 1
                mine, root = net.brokers[v].ram.overlay, net.brokers["b0"].ram.overlay
                if (mine.c_old, mine.c_cur, mine.c_new) == (root.c_old, root.c_cur,
                                                             root.c_new):
                    agreed[v] = accepted[v]

        net.trace_observers.append(count)
        since = legit_since(net, net.overlay_legitimacy, 4.5 + 2 * DELTA_R)
        assert since is not None and since - 4.5 <= DELTA_R
        rejoins += len(traces(net, "rejoin"))
        if not colour_check:
            assert set(agreed) == set(victims) and max(agreed.values()) <= 3
    assert (rejoins == 0) is (not colour_check), rejoins


# ---- E1, E3 ablations ---------------------------------------------------------------------------


def _exchange_run(colours: Colours) -> Simulation:
    edges = [("b0", "b1"), ("b1", "b2"), ("b2", "b3"), ("b0", "b4")]
    tree = Tree.of(edges)
    net = net_of(from_edges(edges), colours=colours)
    reconf = Reconfigurator(net, tree, colours=True)
    reconf.start(4.5, ExchangeLink(remove=edge("b2", "b3"), add=("b3", "b4")))
    net.run(12.0)
    return net


def test_e1_a_child_inserted_by_a_reconfiguration_must_start_flagged() -> None:
    assert traces(_exchange_run(C), "rejoin") == []
    ablation = _exchange_run(Colours(xi=XI, height=H, flag_on_insert=False))
    assert next(f["peer"] for _, n, f in traces(ablation, "child_dropped") if n == "b4") == "b3"
    # dropped at once, and so is every join of it after: it never gets back
    assert {n for _, n, _ in traces(ablation, "rejoin")} == {"b3"}
    assert len(traces(ablation, "rejoin")) >= 2 and ablation.overlay_legitimacy() != []


def test_e3_join_pacing_sends_one_request_per_join() -> None:
    joins = {}
    for pacing in (True, False):
        net = net_of(kary_tree(2, 3), colours=Colours(xi=XI, height=H, join_pacing=pacing))
        net.run(4.6)
        o = net.brokers["b5"].ram.overlay
        corrupt(net, 4.6, "b5", "colour.parent", "ghost", colour=o.c_new)
        net.run(12.0)
        joins[pacing] = len([n for _, n, _ in traces(net, "join") if n == "b5"])
        assert net.overlay_legitimacy() == []
    assert joins[True] == 1 and joins[False] >= 2, joins


def test_a_corrupted_leaving_flag_is_cleared_by_the_next_recolor() -> None:
    net = net_of(kary_tree(2, 3))
    net.run(4.6)
    corrupt(net, 4.6, "b5", "recolor.leaving", True)
    net.run(4.61)
    assert net.brokers["b5"].layers["recolor"].ram.leaving
    net.run(6.0)
    assert not net.brokers["b5"].layers["recolor"].ram.leaving
    net.run(12.0)
    assert traces(net, "leave") == [] and net.overlay_legitimacy() == []


def test_a_broker_cut_off_with_its_leaving_flag_set_leaves_then_joins_again() -> None:
    """The flag is RAM: with it set when a partition cuts b3 off, b3 leaves at its timeout (a
    removed leaf would be stopped by the manager now); still running a join wait later, it
    joins again, and the overlay is legitimate."""
    net = net_of(kary_tree(2, 3))  # b1 has the subtree b1, b3, b4
    net.run(4.6)
    corrupt(net, 4.6, "b3", "recolor.leaving", True)
    net.engine.set_link_fault("b0", "b1", drop=1.0)
    net.run(8.0)
    net.engine.set_link_fault("b0", "b1", drop=0.0)
    left = [t for t, n, _ in traces(net, "leave") if n == "b3"]
    assert len(left) == 1
    net.run(left[0] + C.join_wait(P) + DELTA_R)
    assert any(t > left[0] for t, n, _ in traces(net, "join") if n == "b3")
    assert net.overlay_legitimacy() == []


# ---- faults: every RAM variable of the coloured overlay --------------------------------------

COLOUR_FAULTS = [
    ("colour.c_old", 2, {}), ("colour.c_cur", 0, {}), ("colour.c_new", 0, {}),
    ("colour.parent", "c", {"colour": 1}), ("colour.children", ["a", "x"], {"colour": 2}),
    ("colour.child.add", "x", {"colour": 0}), ("colour.child.remove", "c", {"colour": 0}),
    ("colour.joining", False, {}), ("recolor.flags", ["x"], {}), ("recolor.leaving", True, {}),
    ("recolor.walk", "x", {}), ("colour.holding", True, {}), ("entry.insert",
                                                             {"dest": "c"}, {"table": 2}),
]


@pytest.mark.parametrize(("target", "value", "args"), COLOUR_FAULTS)
def test_each_colour_fault_takes_effect_and_says_so(target: str, value: Any, args: dict) -> None:
    b = Broker(coloured_rom("b", ("a", "c"), "a"))
    b.step(0.0, Start())
    before = b.snapshot()
    out = b.step(1.0, Corrupt(target, value, args))
    evidence = next(e for e in out if isinstance(e, Trace) and e.kind == "fault").fields
    assert evidence["before"] != evidence["after"]
    assert b.snapshot() != before


@pytest.mark.parametrize(("target", "value", "args", "match"), [
    ("colour.c_new", 3, {}, "0, 1 or 2"),
    ("colour.parent", "x", {"colour": 5}, "args.colour"),
    ("colour.child.remove", "zz", {"colour": 0}, "not a child"),
    ("overlay.parent", "x", {}, "coloured"),
    ("clock", 0.1, {}, "no leasing clock"),
])
def test_bad_colour_faults_are_refused_with_a_message(target: str, value: Any, args: dict,
                                                      match: str) -> None:
    b = Broker(coloured_rom("b", ("a", "c"), "a"))
    with pytest.raises(CorruptionError, match=match):
        b.step(0.0, Corrupt(target, value, args))
    static = Broker(Rom(broker_id="b", neighbors=frozenset({"a"}), root="a", parent="a",
                     algorithm=Algorithm.IDENTITY, params=P))
    with pytest.raises(CorruptionError, match="static"):
        static.step(0.0, Corrupt("colour.c_new", 1))


def test_random_colour_faults_are_type_correct_and_cover_every_kind() -> None:
    rng = random.Random(3)
    seen = set()
    for i in range(400):
        b = Broker(coloured_rom("b", ("a", "c"), "a"))
        b.step(0.0, Start())
        fault = random_layer_fault(b, rng, ["a", "b", "c", "d"]) if i % 2 else \
            random_colour_fault(b, rng, ["a", "b", "c", "d"])
        b.step(1.0, fault)
        seen.add(fault.target)
    assert len(seen) >= 15


def test_overlay_legitimacy_reads_snapshots_and_names_the_problem() -> None:
    net = net_of(kary_tree(2, 2))
    net.run(5.0)
    views = {b: SnapshotView(x.snapshot()) for b, x in net.brokers.items()}
    assert coloured_overlay(views, "b0") == []
    o = net.brokers["b2"].ram.overlay
    o.trees[o.c_cur].parent = "b1"
    o.trees[o.c_cur].sync()
    problems = net.overlay_legitimacy()
    assert any("b2's parent b1 does not have it as a child" in p for p in problems), problems
    net.brokers["b1"].ram.overlay.c_new = 1 - 0
    assert net.overlay_legitimacy() != []


def test_a_join_walk_respects_the_degree_bound() -> None:
    """A15: with b = 2 a full broker points the walk to a child that ACKed its last recolor."""
    net = net_of(kary_tree(2, 3), colours=Colours(xi=XI, height=H, degree=2))
    net.run(4.6)
    o = net.brokers["b3"].ram.overlay
    corrupt(net, 4.6, "b3", "colour.parent", "ghost", colour=o.c_new)
    net.run(14.0)
    (_, _, join), = [x for x in traces(net, "join") if x[1] == "b3"]
    assert join["parent"] in {"b4", "b5", "b6"}  # R, b1 and b2 are full: a leaf takes it
    assert net.overlay_legitimacy() == []
    assert all(len(x.ram.overlay.trees[x.ram.overlay.c_cur].children) <= 2
               for x in net.brokers.values())


def test_a_client_of_a_joining_broker_is_in_every_table_until_its_first_recolor() -> None:
    b = Broker(coloured_rom("b", ("a",), "a"))
    b.step(0.0, Start())
    b.step(0.1, ClientSubscribe("c1", "s1", Filter.parse("class == 1")))
    assert sorted(t for t, e in b.entries()) == [0, 1, 2]
    b.step(0.2, Receive("a", Recolor(0)))  # accepted: colours (1, 2, 0); T^0 reset
    o = b.ram.overlay
    assert (o.c_old, o.c_cur, o.c_new) == (1, 2, 0) and not o.joining
    assert sorted(t for t, e in b.entries()) == [1, 2]


def test_the_colour_records_are_in_the_trace_schema() -> None:
    """Every record a coloured run writes (recolors, rejoins, joins, dropped children, the
    root's reconfiguration phases, faults with their evidence) is a kind of the schema with
    its fields, typed."""
    from tests.trace.test_trace import unknown_fields
    from weeble.trace.reader import validate
    from weeble.trace.schema import VERSION

    net = _exchange_run(Colours(xi=XI, height=H, flag_on_insert=False))  # drops and rejoins
    corrupt(net, 12.0, "b2", "colour.c_new", 1)
    net.run(14.0)
    records = [{"v": VERSION, "t": int(t * 1e9), "node": n, "kind": tr.kind, **tr.fields}
               for t, n, tr in net.traces]
    records.append({"v": VERSION, "t": 0, "node": "b1", "kind": "snapshot", "broker": "b1",
                    "round": 0, **net.brokers["b1"].snapshot()})
    for i, r in enumerate(records):
        validate(r, f"record {i}")
    assert unknown_fields(records) == set()
    assert {r["kind"] for r in records} >= {"recolor", "rejoin", "join", "child_dropped",
                                            "reconfig", "fault"}
