"""A broker tree in virtual time, with clients: the simulator's programmatic face.

`SimNetwork` builds one `Broker` per topology node, wires them through the `Engine`, and plays
the clients: subscribers that refresh every ρ (SC-4), unsubscribe or crash, and publishers. It
keeps the client-side truth (which subscriptions are live since when) and the deliveries, so a
test or a scenario run can ask the two questions that matter: is the state legitimate
(`legitimacy`), and was every notification delivered exactly when it should be (`deliveries`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from weeble.broker.core.broker import Broker
from weeble.broker.core.corruption import random_fault
from weeble.broker.core.events import (
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
)
from weeble.broker.core.filters import Filter, Value
from weeble.broker.core.legitimacy import LiveSub, check
from weeble.broker.core.legitimacy import overlay as overlay_check
from weeble.broker.core.messages import Message, Notification
from weeble.broker.core.rom import (
    Algorithm,
    Colours,
    Options,
    Ordering,
    OverlayKind,
    Params,
    Rom,
)
from weeble.broker.sim.engine import Engine, Node
from weeble.model.topology import Topology


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


class SimNetwork:
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
        on_trace: Any = None,
        on_link: Any = None,
        adverts: bool = False,
        ordering: Ordering = Ordering.FIFO,
        colours: Colours | None = None,
    ) -> None:
        """`colours`: run the 3-colour scheme (thesis 4.5) with these constants."""
        self.topology = topology
        self.params = params
        self.root = root or topology.brokers[0]
        parents = topology.parent_map(self.root)
        self.adverts = adverts
        self.brokers: dict[str, Broker] = {
            b: Broker(Rom(b, frozenset(topology.neighbors(b)), self.root, parents[b], algorithm,
                          params, hierarchical, wrapper, options or Options(), adverts=adverts,
                          ordering=ordering, **_overlay(colours)))
            for b in topology.brokers
        }
        self.bound = (params.bound(algorithm, wrapper, adverts) if colours is None
                      else colours.bound(params))
        self.rng = random.Random(f"{seed}:clients")
        self.subscriptions: dict[str, Subscription] = {}
        self.advertisements: dict[str, Subscription] = {}  # a publisher's (thesis §3.4.2)
        self.publications: dict[str, Publication] = {}
        self.traces: list[tuple[float, str, Trace]] = []
        self._on_trace = on_trace
        self.trace_observers: list[Any] = []  # more observers(now, node, trace), e.g. a driver
        self._seq: dict[str, int] = {}
        self.engine = Engine(
            dict(self.brokers), topology.links, delta_min=params.delta_min,
            delta_max=params.delta_max, delay=delay, seed=seed,
            on_deliver=self._delivered, on_trace=self._traced, on_link=on_link,
        )
        # Brokers boot at different moments, so their overrun clocks are out of phase, as on
        # real machines (in-phase clocks hide lease gaps).
        boot_rng = random.Random(f"{seed}:boot")
        for b in topology.brokers:
            self.engine.schedule(boot_rng.uniform(0, params.pi), self._boot, b, None)

    def _boot(self, now: float, broker: str, _: Any) -> None:
        self.engine.inject(now, broker, Start())

    # ---- clients ----------------------------------------------------------------------------

    def subscribe(self, t: float, client: str, broker: str, f: Filter | str,
                  sub_id: str | None = None, phase: float | None = None) -> str:
        """Subscribe at time t and refresh every ρ (first refresh after a random phase)."""
        f = Filter.parse(f) if isinstance(f, str) else f
        sub_id = sub_id or f"{client}/{len(self.subscriptions)}"
        sub = Subscription(sub_id, f, client, broker, t)
        self.subscriptions[sub_id] = sub
        self.engine.schedule(t, self._refresh, sub, None)
        first = phase if phase is not None else self.rng.uniform(0, self.params.rho)
        self.engine.schedule(t + first, self._refresh, sub, "periodic")
        return sub_id

    def _refresh(self, now: float, sub: Subscription, periodic: str | None) -> None:
        if sub.end is not None and now >= sub.end:
            return
        self.engine.inject(now, sub.broker, ClientSubscribe(sub.client, sub.sub_id, sub.filter))
        if periodic:
            self.engine.schedule(now + self.params.rho, self._refresh, sub, periodic)

    def unsubscribe(self, t: float, sub_id: str) -> None:
        sub = self.subscriptions[sub_id]
        sub.end = t
        event = ClientUnsubscribe(sub.client, sub.sub_id, sub.filter)
        self.engine.schedule(t, lambda now, b, e: self.engine.inject(now, b, e), sub.broker, event)

    def crash_client(self, t: float, sub_id: str) -> None:
        """F12: the client stops refreshing without unsubscribing."""
        sub = self.subscriptions[sub_id]
        sub.end, sub.crashed = t, True

    def advertise(self, t: float, client: str, broker: str, f: Filter | str,
                  adv_id: str | None = None, phase: float | None = None) -> str:
        """A publisher advertises at time t and refreshes every ρ, like a subscription."""
        f = Filter.parse(f) if isinstance(f, str) else f
        adv_id = adv_id or f"{client}/adv{len(self.advertisements)}"
        adv = Subscription(adv_id, f, client, broker, t)
        self.advertisements[adv_id] = adv
        self.engine.schedule(t, self._readvertise, adv, None)
        first = phase if phase is not None else self.rng.uniform(0, self.params.rho)
        self.engine.schedule(t + first, self._readvertise, adv, "periodic")
        return adv_id

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
        self.publications[n.id] = Publication(n, broker)
        self.engine.schedule(t, self._publish, broker, n)
        return n.id

    def _publish(self, now: float, broker: str, n: Notification) -> None:
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
        pub = self.publications.get(effect.notification.id)
        if pub is not None:  # an injected notification has no publication record
            pub.deliveries.append((now, effect.client))

    def _traced(self, now: float, node: Node, effect: Trace) -> None:
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
        self.brokers[broker] = Broker(rom)
        self.engine.add_node(broker, self.brokers[broker])
        self.engine.schedule(t, self._boot, broker, None)
        return self.brokers[broker]

    def retire_broker(self, t: float, broker: str) -> None:
        """`broker` leaves at t: its clients go with it, and it is no longer part of the system
        whose legitimacy is checked (its node stays to receive what is still in flight)."""
        for s in (*self.subscriptions.values(), *self.advertisements.values()):
            if s.broker == broker and (s.end is None or s.end > t):
                s.end = t
        self.brokers.pop(broker, None)

    def run(self, until: float) -> None:
        self.engine.run(until)

    @property
    def now(self) -> float:
        return self.engine.now

    def live(self, now: float, settle: float = 0.0, linger: float = 0.0) -> tuple[
            list[LiveSub], list[LiveSub]]:
        """(required, allowed) subscriptions at `now`, for `legitimacy.check`.

        Required: live for at least `settle`; allowed: live now, or ended less than `linger` ago.
        """
        return _live(self.subscriptions.values(), now, settle, linger)

    def legitimacy(self, settle: float = 0.0, linger: float = 0.0) -> list[str]:
        now = self.now
        required, allowed = self.live(now, settle, linger)
        if not self.adverts:
            return check(self.brokers, required, allowed)
        adv_required, adv_allowed = _live(self.advertisements.values(), now, settle, linger)
        return check(self.brokers, required, allowed, adverts=(adv_required, adv_allowed))

    def overlay_legitimacy(self) -> list[str]:
        """Problems of the overlay itself: a spanning tree, parents towards the root, no lock."""
        return overlay_check(self.brokers, self.root)

    def expected_receivers(self, pub: Publication, settle: float) -> set[str]:
        """Clients that must get `pub`: a matching subscription live from settle before it on.

        The publisher itself is never among them (brokers do not echo to the sender).
        """
        n, t = pub.notification, pub.notification.published_at
        return {
            s.client for s in self.subscriptions.values()
            if s.start <= t - settle and (s.end is None or s.end > t + self.params.d
                                          * self.params.delta_max)
            and s.client != n.publisher and s.filter.matches(n.attributes)
        }

    def matching_clients(self, pub: Publication) -> set[str]:
        """Clients that may get `pub`: a matching subscription live at some point around it."""
        n = pub.notification
        return {s.client for s in self.subscriptions.values()
                if s.filter.matches(n.attributes) and s.client != n.publisher}

    def delivery_errors(self, published_from: float, settle: float,
                        until: float | None = None) -> list[str]:
        """Claim 15: every publication in the window reaches exactly the clients it should.

        Publications too recent to have crossed the network yet (d·δ_max) are not judged.
        """
        errors = []
        latest = self.now - self.params.d * self.params.delta_max
        until = latest if until is None else min(until, latest)
        for pid, pub in self.publications.items():
            t = pub.notification.published_at
            if t < published_from or t > until:
                continue
            got = [c for _, c in pub.deliveries]
            dups = {c for c in got if got.count(c) > 1}
            missing = self.expected_receivers(pub, settle) - set(got)
            spurious = set(got) - self.matching_clients(pub)
            if dups:
                errors.append(f"{pid} at {t:.2f}: duplicate delivery to {sorted(dups)}")
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


def _overlay(colours: Colours | None) -> dict[str, Any]:
    if colours is None:
        return {}
    return {"overlay": OverlayKind.COLOURED, "colours": colours}


def _live(subs: Iterable[Subscription], now: float, settle: float, linger: float) -> tuple[
        list[LiveSub], list[LiveSub]]:
    required, allowed = [], []
    for s in subs:
        if s.start > now:
            continue
        ended = s.end is not None and s.end <= now
        if not ended and now - s.start >= settle:
            required.append(s.live())
        if not ended or now - s.end < linger:  # type: ignore[operator]
            allowed.append(s.live())
    return required, allowed
