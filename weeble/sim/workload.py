"""The clients of a simulation: the run's workload plan (weeble/model/workload.py), driven in
virtual time.

Each action of the plan becomes a client request at its time; every live subscription is
refreshed every ρ from its planned first refresh (SC-4) until its planned end, when it
unsubscribes or crashes (refreshes stop, no unsubscription: F12). Everything is lazy: the plan is
pulled one action at a time, and each live subscription has exactly one pending heap item (its
next refresh, or its end).

Client-to-broker communication is free and instantaneous (spec ch3 §1.1), so client requests go
straight into `Broker.step` at the current time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Any, Protocol

from weeble.core.events import (
    ClientAdvertise,
    ClientPublish,
    ClientSubscribe,
    ClientUnsubscribe,
)
from weeble.core.filters import Filter
from weeble.core.messages import Notification
from weeble.model.scenario import Scenario
from weeble.model.workload import (
    Action,
    Advertise,
    Publish,
    Subscribe,
    advertisements,
    workload_plan,
)
from weeble.sim.engine import Engine

INF = math.inf


class ClientSub:
    """One client subscription over its life (the client-side truth S_C of spec ch3 §6.2)."""

    __slots__ = (
        "broker", "client", "cls", "crashed", "crashes", "end", "ended_at", "filter",
        "first_refresh", "live", "live_sub", "start", "sub_id", "subscribe",
    )

    def __init__(self, *, sub_id: str, client: str, broker: str, filter: Filter,
                 cls: int | None, start: float, end: float, crashes: bool,
                 first_refresh: float) -> None:
        self.sub_id = sub_id
        self.client = client
        self.broker = broker
        self.filter = filter
        self.cls = cls  # the workload's filter class; None for explicit filters
        self.start = start
        self.end = end  # planned end (unsubscription or crash); inf = never
        self.crashes = crashes  # ends by crashing rather than unsubscribing
        self.first_refresh = first_refresh
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

    def advertised(self, t: float, adv: Advertise) -> None: ...

    def unadvertised(self, t: float, adv: Advertise) -> None: ...


class TraceSink(Protocol):
    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None: ...


class Clients:
    def __init__(self, engine: Engine, scenario: Scenario, listener: Listener,
                 trace: TraceSink | None = None, keep_ended: bool = False) -> None:
        self.engine = engine
        self.listener = listener
        self.trace = trace
        self.rho = scenario.timing.rho
        self._plan: Iterator[Action] = workload_plan(scenario)
        self.advertisements = advertisements(scenario)  # with `routing.adverts` only
        # (client, sub_id) -> live subscription, in start order (ids are unique per client)
        self.live: dict[tuple[str, str], ClientSub] = {}
        self.gone: set[str] = set()  # brokers that left (RemoveLeaf): their clients left too
        # Ended subscriptions in end order, for the legitimacy monitor (which prunes them).
        self.ended: deque[ClientSub] | None = deque() if keep_ended else None
        # counters
        self.subscriptions = 0
        self.refreshes = 0
        self.unsubscriptions = 0
        self.crashes = 0
        self.publications = 0

    # ---- the plan ---------------------------------------------------------------------------

    def start(self) -> None:
        """Carry out the plan's actions due now (the warm start) and schedule the rest."""
        for adv in self.advertisements:  # before the first publication (§3.4.2)
            self.listener.advertised(self.engine.now, adv)
            self._readvertise(self.engine.now, adv, None)
        self._pump(self.engine.now, None, None)

    def _readvertise(self, t: float, adv: Advertise, _b: object) -> None:
        """An advertisement is leased like a subscription: renewed every ρ (SC-4)."""
        if adv.broker in self.gone:
            return
        self.engine.inject(t, adv.broker, ClientAdvertise(adv.publisher, adv.adv_id, adv.filter))
        self.engine.schedule(t + self.rho, self._readvertise, adv)

    def _pump(self, t: float, first: Action | None, _b: object) -> None:
        """Carry out `first` and every further action due by `t`, then schedule the next one
        (one pending heap item for the whole plan)."""
        action = first if first is not None else next(self._plan, None)
        while action is not None and action.t <= t:
            if action.broker in self.gone:
                pass  # its broker left the overlay, and its clients with it
            elif type(action) is Publish:
                self._emit(t, action)
            else:
                self._begin(t, _client_sub(action))  # type: ignore[arg-type]
            action = next(self._plan, None)
        if action is not None:
            self.engine.schedule(action.t, self._pump, action)

    # ---- subscriptions ----------------------------------------------------------------------

    def _begin(self, t: float, sub: ClientSub) -> None:
        sub.live = True
        self.live[sub.client, sub.sub_id] = sub
        self.subscriptions += 1
        self.listener.started(t, sub)
        if self.trace is not None:
            self.trace.write(sub.broker, t, sub.broker, "subscribe",
                             {"client": sub.client, "broker": sub.broker, "sub_id": sub.sub_id,
                              "filter": str(sub.filter)})
        self.engine.inject(t, sub.broker, sub.subscribe)
        self._next(sub.first_refresh, sub)

    def _next(self, refresh_at: float, sub: ClientSub) -> None:
        if refresh_at < sub.end:  # now + ρ but at the warm start: in order
            self.engine.schedule_in_order(refresh_at, self._tick, sub, False)
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
        sub = ClientSub(sub_id=f"{client}/0", client=client, broker=broker, filter=f, cls=None,
                        start=t, end=INF, crashes=False, first_refresh=t + self.rho)
        self._begin(t, sub)
        return sub

    def crash(self, t: float, sub: ClientSub) -> None:
        """A client crash fault: the subscriber goes silent now."""
        if sub.live:
            sub.end = t
            self._finish(t, sub, crash=True)

    def leave(self, t: float, broker: str) -> None:
        """`broker` left the overlay (RemoveLeaf): its subscribers end with it (the broker
        withdraws what they contributed as it leaves) and nothing more is planned there."""
        self.gone.add(broker)
        for adv in self.advertisements:
            if adv.broker == broker:
                self.listener.unadvertised(t, adv)
        for sub in [s for s in self.live.values() if s.broker == broker]:
            sub.end = t
            self._finish(t, sub, crash=False, tell_broker=False)

    def _finish(self, t: float, sub: ClientSub, crash: bool, tell_broker: bool = True) -> None:
        sub.live = False
        sub.crashed = crash
        sub.ended_at = t
        del self.live[sub.client, sub.sub_id]
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
            if tell_broker:
                self.engine.inject(t, sub.broker,
                                   ClientUnsubscribe(sub.client, sub.sub_id, sub.filter))

    # ---- publications -----------------------------------------------------------------------

    def _emit(self, t: float, pub: Publish) -> None:
        n = Notification(pub.publisher, pub.seq, pub.attributes, t)
        self.publications += 1
        self.listener.published(t, n, pub.broker)
        if self.trace is not None:
            self.trace.write(pub.broker, t, pub.broker, "publish",
                             {"client": pub.publisher, "broker": pub.broker, "nid": n.id,
                              "publisher": pub.publisher, "seq": pub.seq,
                              "attributes": pub.attributes, "published_at": t})
        self.engine.inject(t, pub.broker, ClientPublish(pub.publisher, n))


def _client_sub(action: Subscribe) -> ClientSub:
    return ClientSub(sub_id=action.sub_id, client=action.client, broker=action.broker,
                     filter=action.filter, cls=action.cls, start=action.t, end=action.end,
                     crashes=action.crashes, first_refresh=action.first_refresh)
