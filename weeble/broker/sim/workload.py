"""The clients of a simulation: the randomized workload of spec §4.1 plus explicit clients.

Workload (the thesis's "seed 000" setup):
- subscriptions arrive as a Poisson process with global rate λ = N_s / mean_lifetime and live an
  exponential time with that mean, so N_s = λ/µ is the equilibrium count;
- warm start: N_s subscriptions at t = 0, each with a fresh exponential lifetime. The exponential
  is memoryless, so this *is* the equilibrium and no warm-up is needed;
- filter class uniform in [0, z); subscriber at a uniformly random leaf (or any broker);
- every subscription is refreshed every ρ (SC-4). Arrivals are at random times, so their refresh
  phases are random; warm-start subscriptions get a uniformly random first refresh in (0, ρ]
  instead of all refreshing in lockstep at multiples of ρ;
- publications: Poisson with global rate ω at a uniformly random leaf (or any broker, or the root),
  uniform class. Publisher `p<broker>` numbers its notifications 1, 2, ...;
- each subscription is its own client `c<n>`, subscription id `c<n>/0`. A fraction
  `subscribers_crash` of them end by crashing (refreshes stop, no unsubscription: F12).

Everything is generated lazily: each live subscription has exactly one pending heap item (its next
refresh, or its end), and each Poisson process one (its next arrival).

Client-to-broker communication is free and instantaneous (spec §1.1), so client requests go
straight into `Broker.step` at the current time.
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Any, Protocol

from weeble.broker.core.events import ClientPublish, ClientSubscribe, ClientUnsubscribe
from weeble.broker.core.filters import Filter, Value
from weeble.broker.core.messages import Notification
from weeble.broker.sim.engine import Engine
from weeble.model.scenario import Scenario

INF = math.inf


class ClientSub:
    """One client subscription over its life (the client-side truth S_C of spec §6.2)."""

    __slots__ = (
        "broker", "client", "cls", "crashed", "crashes", "end", "ended_at", "filter", "live",
        "live_sub", "start", "sub_id", "subscribe",
    )

    def __init__(self, sub_id: str, client: str, broker: str, filter: Filter, cls: int | None,
                 start: float, end: float, crashes: bool) -> None:
        self.sub_id = sub_id
        self.client = client
        self.broker = broker
        self.filter = filter
        self.cls = cls  # the workload's filter class; None for explicit filters
        self.start = start
        self.end = end  # planned end (unsubscription or crash); inf = never
        self.crashes = crashes  # ends by crashing rather than unsubscribing
        self.subscribe = ClientSubscribe(client, sub_id, filter)  # reused by every refresh
        self.live = False
        self.crashed = False
        self.ended_at: float | None = None
        self.live_sub: Any = None  # cached legitimacy.LiveSub


class Listener(Protocol):
    """Told about the client side as it happens (the run's oracle)."""

    def started(self, t: float, sub: ClientSub) -> None: ...

    def ended(self, t: float, sub: ClientSub) -> None: ...

    def published(self, t: float, n: Notification, broker: str) -> None: ...


class TraceSink(Protocol):
    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None: ...


class Clients:
    def __init__(self, engine: Engine, scenario: Scenario, listener: Listener,
                 trace: TraceSink | None = None, keep_ended: bool = False) -> None:
        self.engine = engine
        self.listener = listener
        self.trace = trace
        self.rho = scenario.timing.rho
        self.scenario = scenario
        topology = scenario.build_topology()
        root = scenario.root_broker
        leaves = topology.leaves(root)
        w = scenario.workload
        self.workload = w
        # Separate streams, so e.g. changing ω leaves the subscription history unchanged.
        self._sub_rng = random.Random(f"{scenario.seed}:subscriptions")
        self._pub_rng = random.Random(f"{scenario.seed}:publications")
        self._sub_brokers = list(topology.brokers)
        self._pub_brokers = list(topology.brokers)
        if w is not None:
            if w.subscriber_placement == "leaves":
                self._sub_brokers = leaves
            self._pub_brokers = {"leaves": leaves, "all": list(topology.brokers),
                                 "root": [root]}[w.publisher_placement]
        self._publisher = {b: f"p{b}" for b in topology.brokers}
        self._seqs: dict[str, int] = {}
        self._filters: dict[int, Filter] = {}
        # One attribute dict per class, shared by its notifications (they treat it as read-only).
        self._attrs: dict[int, dict[str, Value]] = {}
        self._next_client = 0
        self._client_subs: dict[str, int] = {}  # explicit client -> subscriptions made
        self.live: dict[str, ClientSub] = {}  # sub_id -> live subscription, in start order
        # Ended subscriptions in end order, for the legitimacy monitor (which prunes them).
        self.ended: deque[ClientSub] | None = deque() if keep_ended else None
        # counters
        self.subscriptions = 0
        self.refreshes = 0
        self.unsubscriptions = 0
        self.crashes = 0
        self.publications = 0

    # ---- setup ------------------------------------------------------------------------------

    def start(self) -> None:
        """Warm start, explicit clients, and the first arrival of each Poisson process."""
        s, w, engine = self.scenario, self.workload, self.engine
        for spec in s.subscriptions:
            k = self._client_subs.get(spec.client, 0)
            self._client_subs[spec.client] = k + 1
            sub = ClientSub(f"{spec.client}/{k}", spec.client, spec.broker,
                            Filter.parse(spec.filter), None, spec.start,
                            INF if spec.end is None else spec.end, False)
            engine.schedule(spec.start, self._begin, sub, False)
        for pub in s.publications:
            engine.schedule(pub.at, self._publish_explicit, pub, None)
        if w is None:
            return
        rng = self._sub_rng
        for _ in range(w.subscriptions):
            sub = self._new_workload_sub(0.0)
            self._begin(0.0, sub, True)
        if w.subscriptions > 0:
            engine.schedule(rng.expovariate(w.subscriptions / w.mean_lifetime), self._arrival)
        if w.publish_rate > 0:
            engine.schedule(self._pub_rng.expovariate(w.publish_rate), self._publish)

    # ---- subscriptions ----------------------------------------------------------------------

    def _new_workload_sub(self, t: float) -> ClientSub:
        w, rng = self.workload, self._sub_rng
        assert w is not None
        n = self._next_client
        self._next_client += 1
        cls = rng.randrange(w.filter_classes)
        f = self._filters.get(cls)
        if f is None:
            f = self._filters[cls] = Filter.equals("class", cls)
        broker = self._sub_brokers[rng.randrange(len(self._sub_brokers))]
        end = t + rng.expovariate(1.0 / w.mean_lifetime)
        crashes = w.subscribers_crash > 0 and rng.random() < w.subscribers_crash
        return ClientSub(f"c{n}/0", f"c{n}", broker, f, cls, t, end, crashes)

    def _arrival(self, t: float, _a: object, _b: object) -> None:
        w = self.workload
        assert w is not None
        self._begin(t, self._new_workload_sub(t), False)
        self.engine.schedule(t + self._sub_rng.expovariate(w.subscriptions / w.mean_lifetime),
                             self._arrival)

    def _begin(self, t: float, sub: ClientSub, warm: bool) -> None:
        sub.live = True
        self.live[sub.sub_id] = sub
        self.subscriptions += 1
        self.listener.started(t, sub)
        if self.trace is not None:
            self.trace.write(sub.broker, t, sub.broker, "subscribe",
                             {"client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id,
                              "filter": str(sub.filter)})
        self.engine.inject(t, sub.broker, sub.subscribe)
        # A warm-start subscription has been live for a while: its refresh phase is random.
        first = t + (self._sub_rng.uniform(0.0, self.rho) if warm else self.rho)
        self._next(first, sub)

    def _next(self, refresh_at: float, sub: ClientSub) -> None:
        if refresh_at < sub.end:
            self.engine.schedule(refresh_at, self._tick, sub, False)
        elif sub.end < INF:
            self.engine.schedule(sub.end, self._tick, sub, True)

    def _tick(self, t: float, sub: ClientSub, is_end: bool) -> None:
        if not sub.live:
            return  # crashed by a fault in the meantime
        if is_end:
            self._finish(t, sub, crash=sub.crashes)
            return
        self.refreshes += 1
        if self.trace is not None:
            self.trace.write(sub.broker, t, sub.broker, "refresh",
                             {"client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})
        self.engine.inject(t, sub.broker, sub.subscribe)  # SC-4: same id, same filter
        self._next(t + self.rho, sub)

    def subscribe(self, t: float, client: str, broker: str, f: Filter) -> ClientSub:
        """One more subscriber from t on, refreshing until it crashes or the run ends (the
        chaos module's client_crash fault)."""
        sub = ClientSub(f"{client}/0", client, broker, f, None, t, INF, False)
        self._begin(t, sub, False)
        return sub

    def crash(self, t: float, sub: ClientSub) -> None:
        """A client crash fault: the subscriber goes silent now."""
        if sub.live:
            sub.end = t
            self._finish(t, sub, crash=True)

    def _finish(self, t: float, sub: ClientSub, crash: bool) -> None:
        sub.live = False
        sub.crashed = crash
        sub.ended_at = t
        del self.live[sub.sub_id]
        if self.ended is not None:
            self.ended.append(sub)
        self.listener.ended(t, sub)
        if self.trace is not None:
            # A crash is the client's own doing (the broker cannot see it); an unsubscription
            # is a request the broker receives.
            self.trace.write(sub.broker, t, sub.client if crash else sub.broker,
                             "crash" if crash else "unsubscribe",
                             {"client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id})
        if crash:
            self.crashes += 1
        else:
            self.unsubscriptions += 1
            self.engine.inject(t, sub.broker, ClientUnsubscribe(sub.client, sub.sub_id, sub.filter))

    # ---- publications -----------------------------------------------------------------------

    def _publish(self, t: float, _a: object, _b: object) -> None:
        w, rng = self.workload, self._pub_rng
        assert w is not None
        broker = self._pub_brokers[rng.randrange(len(self._pub_brokers))]
        cls = rng.randrange(w.filter_classes)
        attrs = self._attrs.get(cls)
        if attrs is None:
            attrs = self._attrs[cls] = {"class": cls}
        self._emit(t, broker, self._publisher[broker], attrs, cls)
        self.engine.schedule(t + rng.expovariate(w.publish_rate), self._publish)

    def _publish_explicit(self, t: float, pub: Any, _b: object) -> None:
        publisher = pub.client or self._publisher[pub.broker]
        attrs: dict[str, Value] = dict(pub.attributes)
        cls = pub.attributes.get("class")
        self._emit(t, pub.broker, publisher, attrs, cls if type(cls) is int else None)

    def _emit(self, t: float, broker: str, publisher: str,
              attrs: dict[str, Value], cls: int | None) -> None:
        seq = self._seqs.get(publisher, 0) + 1
        self._seqs[publisher] = seq
        n = Notification(publisher, seq, attrs, t)
        self.publications += 1
        self.listener.published(t, n, broker)
        if self.trace is not None:
            self.trace.write(broker, t, broker, "publish",
                             {"client": publisher, "broker": broker, "nid": n.id,
                              "publisher": publisher, "seq": seq, "attributes": attrs,
                              "published_at": t})
        self.engine.inject(t, broker, ClientPublish(publisher, n))
