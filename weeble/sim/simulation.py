"""The one simulation: a broker tree in virtual time, watched by the reference checker.

`Simulation` builds one `Broker` per topology node, wires them through the `Engine`, and
attaches the observers (observe.py: the trace sink and `weeble.check`, online). Drivers put
client actions and faults into it:

- programmatically (the claim tests): `subscribe` (refreshing every ρ, SC-4), `unsubscribe`,
  `crash_client`, `publish`, `corrupt`, `corrupt_randomly`, `inject_message`; then `run(t)` and
  ask the two questions that matter: is the state legitimate (`legitimacy`), and did every
  notification reach exactly the clients it should (`delivery_errors`), both by the checker's
  rules (R3-R6 and R9 of docs/trace-schema.md);
- from a scenario (`weeble.sim.run.simulate`): the workload's clients and the scenario's
  faults drive the same object, and its summary is the checker's report.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from weeble.check.deliveries import INF, Deliveries
from weeble.check.state import Interval, select
from weeble.core.broker import Broker
from weeble.core.events import (
    ClientAdvertise,
    ClientPublish,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Corrupt,
    Deliver,
    Receive,
    Start,
    Trace,
    network_id,
    valid_client,
)
from weeble.core.filters import Filter, Value
from weeble.core.legitimacy import LiveSub, check
from weeble.core.legitimacy import overlay as overlay_check
from weeble.core.messages import Message, Notification
from weeble.core.reconfig.plan import Tree
from weeble.core.rom import (
    Algorithm,
    AntiEntropy,
    Colours,
    Mode,
    Options,
    Ordering,
    OverlayKind,
    Params,
    Rom,
    run_bound,
)
from weeble.core.routing.faults import random_fault
from weeble.core.table import KeyCache
from weeble.model.topology import Topology
from weeble.sim.engine import Engine, Node
from weeble.sim.observe import Observers
from weeble.trace.header import RunHeader
from weeble.trace.header import Topology as TraceTopology
from weeble.trace.writer import SimSink


@dataclass(slots=True)
class Subscription:
    """Client-side truth about one subscription (S_C of the thesis)."""

    sub_id: str
    filter: Filter
    client: str
    broker: str
    start: float
    end: float | None = None  # unsubscribed or crashed at
    crashed: bool = False

    def live(self) -> LiveSub:
        return LiveSub(self.sub_id, self.filter, self.client, self.broker)


@dataclass(slots=True)
class Publication:
    notification: Notification
    broker: str
    deliveries: list[tuple[float, str]] = field(default_factory=list)  # (time, client)


class Simulation:
    def __init__(
        self,
        topology: Topology,
        *,
        algorithm: Algorithm,
        params: Params,
        hierarchical: bool = False,
        wrapper: bool = False,
        options: Options | None = None,
        root: str | None = None,
        delay: str = "uniform",
        seed: int | str = 0,
        boot: str = "staggered",
        header: RunHeader | None = None,
        sink: SimSink | None = None,
        retention: float = INF,
        keep_history: bool = True,
        on_trace: Any = None,
        on_link: Any = None,
        adverts: bool = False,
        ordering: Ordering = Ordering.FIFO,
        roms: dict[str, Rom] | None = None,
        colours: Colours | None = None,
        anti_entropy: AntiEntropy | None = None,
    ) -> None:
        """`boot`: "staggered" gives each broker its Start at a random time in [0, π), so
        their overrun clocks are out of phase as on real machines (in-phase clocks hide lease
        gaps); "together" starts them all at 0 (the thesis's simulation setup).
        `keep_history`: keep every subscription, publication and delivery for `legitimacy`
        and `delivery_errors` (the checker's online counts need none of it).
        `roms`: the brokers' ROMs when a scenario gives them (`Scenario.roms()`, every knob);
        else they are built from the arguments above.
        `anti_entropy`: run the brokers in the anti-entropy mode (seed 002) with this ROM.
        `colours`: run the 3-colour scheme (thesis 4.5) with these constants."""
        self.topology = topology
        self.params = params
        self.root = root or topology.brokers[0]
        options = options or Options()
        parents = topology.parent_map(self.root)
        self.adverts = adverts
        if roms is None:
            roms = {b: Rom(broker_id=b, neighbors=frozenset(topology.neighbors(b)),
                           root=self.root, parent=parents[b], algorithm=algorithm,
                           params=params, hierarchical=hierarchical, wrapper=wrapper,
                           options=options, adverts=adverts, ordering=ordering,
                           **_overlay(colours), **_mode(anti_entropy))
                    for b in topology.brokers}
        # one index cache for the tables of all the brokers of the run (core/table.py)
        self.keys = KeyCache()
        self.brokers: dict[str, Broker] = {b: Broker(rom, self.keys) for b, rom in roms.items()}
        # the ROM each broker boots with now: its overlay follows the manager's tree
        # (`tree_changed`), so a broker that restarts rejoins the tree as it is
        self.roms: dict[str, Rom] = dict(roms)
        self.header = header or RunHeader(
            scenario="simulation", algorithm=algorithm, hierarchical=hierarchical,
            wrapper=wrapper, params=params, options=options,
            topology=TraceTopology(tuple(topology.brokers), tuple(topology.links), self.root),
            seed=seed if isinstance(seed, int) else 0, backend="sim", clock="virtual",
            mode="leasing" if anti_entropy is None else "anti_entropy",
            anti_entropy=anti_entropy)
        routing = (self.header.anti_entropy.bound(params) if self.header.anti_entropy
                   is not None else params.bound(algorithm, wrapper, adverts))
        self.bound = run_bound(routing, None if colours is None else colours.bound(params))
        self.observers = Observers(self.header, sink, retention=retention)
        self.keep_history = keep_history
        self.rng = random.Random(f"{seed}:clients")
        # by network id (core.events.network_id: unique per (client, sub_id), and the id the
        # brokers' tables hold); a client's id reused after its end replaces the key's entry
        self.subscriptions: dict[str, Subscription] = {}
        self.replaced: list[Subscription] = []  # ended ones whose key was reused since
        self.advertisements: dict[str, Subscription] = {}  # a publisher's (thesis §3.4.2)
        self.publications: dict[str, Publication] = {}
        self.traces: list[tuple[float, str, Trace]] = []
        self._on_trace = on_trace
        self.trace_observers: list[Any] = []  # more observers(now, node, trace), e.g. a driver
        self.deliver_observers: list[Any] = []  # observers(now, broker, client, notification)
        self.retire_observers: list[Any] = []  # observers(now, broker) of a broker that left
        # observers(now, tree) of the manager's tree after each reconfiguration (the fault
        # target: a selector is resolved against the tree as it is when the fault strikes)
        self.tree_observers: list[Any] = []
        self._seq: dict[str, int] = {}
        self._observe_delivery = self.observers.deliver_observer()
        self.engine = Engine(
            dict(self.brokers), topology.links, delta_min=params.delta_min,
            delta_max=params.delta_max, delay=delay, seed=seed,
            on_deliver=self._delivered if keep_history else self._observe_delivery,
            on_trace=self._traced,
            on_link=on_link,
        )
        self._started = boot == "staggered"
        if boot == "staggered":
            boot_rng = random.Random(f"{seed}:boot")
            for b in topology.brokers:
                self.engine.schedule(boot_rng.uniform(0, params.pi), self._boot, b, None)
        elif boot != "together":
            raise ValueError(f"boot: 'staggered' or 'together', got {boot!r}")

    def start(self) -> None:
        """Boot the brokers (with boot="together": all at 0, at the first `start` or `run`)."""
        if not self._started:
            self._started = True
            self.engine.start(0.0)

    def _boot(self, now: float, broker: str, _: Any) -> None:
        self.engine.inject(now, broker, Start())

    # ---- clients ----------------------------------------------------------------------------

    def subscribe(self, t: float, client: str, broker: str, f: Filter | str,
                  sub_id: str | None = None, phase: float | None = None) -> str:
        """Subscribe at time t and refresh every ρ (first refresh after a random phase).
        Returns the subscription's key in `subscriptions`, its network id (the default id,
        `<client>/<k>`, is one already)."""
        f = Filter.parse(f) if isinstance(f, str) else f
        why = valid_client(client)
        if why:
            raise ValueError(why)
        sub_id = sub_id or f"{client}/{len(self.subscriptions) + len(self.replaced)}"
        key = network_id(client, sub_id)
        sub = Subscription(sub_id, f, client, broker, t)
        old = self.subscriptions.get(key)
        if old is not None:  # the id reused: the old one stays judged (intervals, R3-R6)
            self.replaced.append(old)
        self.subscriptions[key] = sub
        self.engine.schedule(t, self._refresh, sub, "first")
        first = phase if phase is not None else self.rng.uniform(0, self.params.rho)
        self.engine.schedule(t + first, self._refresh, sub, "periodic")
        return key

    def subscription(self, sub_id: str, client: str | None = None) -> Subscription:
        """The subscription `sub_id` names: a key `subscribe` returned, or a client's own id
        with its `client` (ids are unique per client only)."""
        if client is not None:
            return self.subscriptions[network_id(client, sub_id)]
        sub = self.subscriptions.get(sub_id)
        if sub is not None:
            return sub
        found = [s for s in self.subscriptions.values() if s.sub_id == sub_id]
        if len(found) == 1:
            return found[0]
        if not found:
            raise KeyError(f"no subscription {sub_id!r}")
        raise ValueError(f"sub_id {sub_id!r} is used by clients "
                         f"{', '.join(sorted(s.client for s in found))}: name the client")

    def _refresh(self, now: float, sub: Subscription, why: str) -> None:
        if sub.end is not None and now >= sub.end:
            return
        if why == "first":
            self.observers.started(now, _Started(sub))
            self.observers.write(sub.broker, now, sub.broker, "subscribe", {
                "client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id,
                "filter": str(sub.filter)})
        else:
            self.observers.write(sub.broker, now, sub.broker, "refresh", {
                "client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})
        self.engine.inject(now, sub.broker, ClientSubscribe(sub.client, sub.sub_id, sub.filter))
        if why == "periodic":
            self.engine.schedule(now + self.params.rho, self._refresh, sub, why)

    def unsubscribe(self, t: float, sub_id: str, client: str | None = None) -> None:
        sub = self.subscription(sub_id, client)
        sub.end = t
        self.engine.schedule(t, self._unsubscribe, sub, None)

    def _unsubscribe(self, now: float, sub: Subscription, _: Any) -> None:
        self.observers.ended(now, _Started(sub))
        self.observers.write(sub.broker, now, sub.broker, "unsubscribe", {
            "client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})
        self.engine.inject(now, sub.broker, ClientUnsubscribe(sub.client, sub.sub_id, sub.filter))

    def crash_client(self, t: float, sub_id: str, client: str | None = None) -> None:
        """F12: the client stops refreshing without unsubscribing."""
        sub = self.subscription(sub_id, client)
        sub.end, sub.crashed = t, True
        self.engine.schedule(t, self._crashed, sub, None)

    def _crashed(self, now: float, sub: Subscription, _: Any) -> None:
        self.observers.ended(now, _Started(sub))
        self.observers.write(sub.broker, now, sub.client, "crash", {
            "client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})

    def advertise(self, t: float, client: str, broker: str, f: Filter | str,
                  adv_id: str | None = None, phase: float | None = None) -> str:
        """A publisher advertises at time t and refreshes every ρ, like a subscription."""
        f = Filter.parse(f) if isinstance(f, str) else f
        adv_id = adv_id or f"{client}/adv{len(self.advertisements)}"
        adv = Subscription(adv_id, f, client, broker, t)
        key = network_id(client, adv_id)  # as `subscribe`
        self.advertisements[key] = adv
        self.engine.schedule(t, self._readvertise, adv, None)
        first = phase if phase is not None else self.rng.uniform(0, self.params.rho)
        self.engine.schedule(t + first, self._readvertise, adv, "periodic")
        return key

    def _readvertise(self, now: float, adv: Subscription, periodic: str | None) -> None:
        if adv.end is not None and now >= adv.end:
            return
        self.engine.inject(now, adv.broker, ClientAdvertise(adv.client, adv.sub_id, adv.filter))
        if periodic:
            self.engine.schedule(now + self.params.rho, self._readvertise, adv, periodic)

    def unadvertise(self, t: float, adv_id: str) -> None:
        adv = self.advertisements[adv_id]
        adv.end = t
        event = ClientUnadvertise(adv.client, adv.sub_id, adv.filter)
        self.engine.schedule(t, lambda now, b, e: self.engine.inject(now, b, e), adv.broker, event)

    def publish(self, t: float, broker: str, attributes: Mapping[str, Value],
                publisher: str | None = None) -> str:
        publisher = publisher or f"p-{broker}"
        seq = self._seq[publisher] = self._seq.get(publisher, 0) + 1
        n = Notification(publisher, seq, dict(attributes), t)
        if self.keep_history:
            self.publications[n.id] = Publication(n, broker)
        self.engine.schedule(t, self._publish, broker, n)
        return n.id

    def _publish(self, now: float, broker: str, n: Notification) -> None:
        self.observers.published(now, n, broker)
        self.observers.write(broker, now, broker, "publish", {
            "client": n.publisher, "broker": broker, "nid": n.id, "publisher": n.publisher,
            "seq": n.seq, "attributes": n.attributes, "published_at": now})
        self.engine.inject(now, broker, ClientPublish(n.publisher, n))

    # ---- faults -----------------------------------------------------------------------------

    def corrupt(self, t: float, broker: str, fault: Corrupt) -> None:
        self.engine.schedule(t, self._inject, self.engine.nodes[broker], fault)

    def corrupt_randomly(self, t: float, broker: str, rng: random.Random,
                         filters: list[Filter]) -> None:
        """A random type-correct state fault, drawn from the broker's state at time t."""
        node = self.engine.nodes[broker]

        def strike(now: float, node: Node, _: Any) -> None:
            self.engine.inject(now, node.id, random_fault(self.brokers[node.id], rng, filters))

        self.engine.schedule(t, strike, node, None)

    def inject_message(self, t: float, src: str, dst: str, message: Message) -> None:
        """F7/F8: a message that nobody sent appears on link src→dst."""
        self.engine.schedule(t, self._inject, self.engine.nodes[dst], Receive(src, message))

    def _inject(self, now: float, node: Node, event: Any) -> None:
        self.engine.inject(now, node.id, event)

    # ---- observation ------------------------------------------------------------------------

    def _delivered(self, now: float, node: Node, effect: Deliver) -> None:
        self._observe_delivery(now, node, effect)
        pub = self.publications.get(effect.notification.id)
        if pub is not None:  # an injected notification has no publication record
            pub.deliveries.append((now, effect.client))
        for observer in self.deliver_observers:
            observer(now, node.id, effect.client, effect.notification)

    def _traced(self, now: float, node: Node, effect: Trace) -> None:
        if self.keep_history:
            self.traces.append((now, node.id, effect))
        if self._on_trace is not None:
            self._on_trace(now, node, effect)
        for observer in self.trace_observers:
            observer(now, node, effect)

    # ---- brokers joining and leaving at run time (AddLeaf, RemoveLeaf) -----------------------

    def add_broker(self, t: float, broker: str, attach: str) -> Broker:
        """A new leaf `broker` of `attach`, with the ROM of the others, booted at t."""
        template = self.brokers[attach].rom
        rom = replace(template, broker_id=broker, neighbors=frozenset({attach}), parent=attach)
        self.roms[broker] = rom
        self.brokers[broker] = Broker(rom, self.keys)
        self.engine.add_node(broker, self.brokers[broker])
        self.engine.schedule(t, self._boot, broker, None)
        return self.brokers[broker]

    def retire_broker(self, t: float, broker: str) -> None:
        """`broker` leaves at t: its clients go with it, and it is no longer part of the system
        whose legitimacy is checked (its node stays to receive what is still in flight, but
        its timers stop: a broker that left and still ran would join again)."""
        self.engine.retire(broker)
        for s in (*self.subscriptions.values(), *self.advertisements.values()):
            if s.broker == broker and (s.end is None or s.end > t):
                s.end = t
                if self.subscriptions.get(network_id(s.client, s.sub_id)) is s:
                    self.engine.schedule(t, self._left, s, None)
        self.brokers.pop(broker, None)
        self.roms.pop(broker, None)
        for observer in self.retire_observers:
            observer(t, broker)

    def tree_changed(self, t: float, tree: Tree) -> None:
        """The manager's tree after a reconfiguration: each broker's boot ROM gets its
        neighbours and parent there (what a restart boots with, weeble/sim/target.py); the
        running brokers learnt the change from the reconfiguration itself."""
        adjacency = tree.adjacency()
        parents = tree.parents(self.root)
        for b, rom in self.roms.items():
            if b in adjacency:
                self.roms[b] = replace(rom, neighbors=frozenset(adjacency[b]),
                                       parent=parents.get(b))
        for observer in self.tree_observers:
            observer(t, tree)

    def _left(self, now: float, sub: Subscription, _: Any) -> None:
        self.observers.ended(now, _Started(sub))
        self.observers.write(sub.broker, now, sub.broker, "unsubscribe", {
            "client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})

    def run(self, until: float) -> None:
        self.start()
        self.engine.run(until)

    @property
    def now(self) -> float:
        return self.engine.now

    def _intervals(self) -> Iterable[Interval]:
        return (_interval(s) for s in (*self.replaced, *self.subscriptions.values()))

    def live(self, now: float, settle: float = 0.0, linger: float = 0.0) -> tuple[
            list[LiveSub], list[LiveSub]]:
        """(required, allowed) subscriptions at `now` (R9, with its settle and linger)."""
        return select(self._intervals(), now, settle, linger)

    def legitimacy(self, settle: float = 0.0, linger: float = 0.0) -> list[str]:
        now = self.now
        required, allowed = self.live(now, settle, linger)
        if not self.adverts:
            return check(self.brokers, required, allowed)
        adverts = select((_interval(a) for a in self.advertisements.values()), now, settle,
                         linger)
        return check(self.brokers, required, allowed, adverts=adverts)

    def overlay_legitimacy(self) -> list[str]:
        """Problems of the overlay itself: a spanning tree, parents towards the root, no lock."""
        return overlay_check(self.brokers, self.root)

    def delivery_errors(self, published_from: float, settle: float,
                        until: float | None = None) -> list[str]:
        """Claim 15: every publication in the window reaches exactly the clients it should.

        The checker's rules R3-R6 with activation `settle` (instead of A): publications too
        recent to have crossed the network yet (d·δmax) are not judged.
        """
        D = self.params.d * self.params.delta_max
        d = Deliveries(activation=settle, deactivation=D, crash_linger=2 * self.params.pi + D,
                       detail=True)
        events: list[tuple[float, int, Any]] = []
        for s in (*self.replaced, *self.subscriptions.values()):
            events.append((s.start, 0, ("sub", s)))
            if s.end is not None:
                events.append((s.end, 1, ("end", s)))
        for pub in self.publications.values():
            events.append((pub.notification.published_at, 2, ("pub", pub)))
            events.extend((t, 3, ("deliver", (pub, c, t))) for t, c in pub.deliveries)
        for _, _, (what, x) in sorted(events, key=lambda e: (e[0], e[1])):
            if what == "sub":
                d.subscribe(x.start, x.client, x.broker, x.sub_id, x.filter)
            elif what == "end":
                d.end(x.end, x.client, x.sub_id, crashed=x.crashed)
            elif what == "pub":
                n = x.notification
                d.publish(n.published_at, n.publisher, n.publisher, n.seq, n.attributes)
            else:
                pub, client, t = x
                n = pub.notification
                d.deliver(t, client, n.publisher, n.seq)
        latest = self.now - D
        until = latest if until is None else min(until, latest)
        d.finish(self.now)
        errors = []
        for (publisher, seq), t, missing, spurious, duplicate in d.errors:
            if t < published_from or t > until:
                continue
            pid = f"{publisher}#{seq}"
            if duplicate:
                errors.append(f"{pid} at {t:.2f}: duplicate delivery to {sorted(duplicate)}")
            if missing:
                errors.append(f"{pid} at {t:.2f}: missing for {sorted(missing)}")
            if spurious:
                errors.append(f"{pid} at {t:.2f}: spurious to {sorted(spurious)}")
        return errors

    def expirations(self, since: float = 0.0) -> Iterable[tuple[float, str, dict[str, Any]]]:
        for t, node, trace in self.traces:
            if t >= since and trace.kind == "expire":
                for entry in trace.fields["entries"]:
                    yield t, node, entry


def _interval(s: Subscription) -> Interval:
    return Interval(s.client, s.sub_id, s.broker, s.filter, s.start,
                    INF if s.end is None else s.end)


class _Started:
    """A Subscription as the observers' client interface sees it."""

    __slots__ = ("broker", "client", "crashed", "filter", "sub_id")

    def __init__(self, s: Subscription) -> None:
        self.client, self.sub_id, self.broker, self.filter = s.client, s.sub_id, s.broker, s.filter
        self.crashed = s.crashed


def _overlay(colours: Colours | None) -> dict[str, Any]:
    if colours is None:
        return {}
    return {"overlay": OverlayKind.COLOURED, "colours": colours}



def _mode(anti_entropy: AntiEntropy | None) -> dict[str, Any]:
    if anti_entropy is None:
        return {}
    return {"mode": Mode.ANTI_ENTROPY, "anti_entropy": anti_entropy}
