"""Layer `routing`: content-based routing of notifications, and the control planes that build
its tables (thesis Ch. 3).

The layer owns up to two control planes, each a scheme (leasing or the rebuild wrapper) around
a strategy (one routing algorithm):
- subscriptions build the notification routing tables;
- advertisements (thesis §3.4.2, `Rom.adverts`) build the subscription routing tables, and the
  subscription strategy then forwards only towards neighbours with an overlapping advertisement.
Both planes share the broker clock (one overrun every π) and, under the wrapper, one rebuild
bit and one switch: a switch resets both planes' tables (fair composition, Δ_a = 2·Δ).
"""

from __future__ import annotations

from typing import Any

from weeble.core.events import (
    ClientAdvertise,
    ClientPublish,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Deliver,
    Effect,
    Handler,
    Receiver,
    Send,
    SetTimer,
    Trace,
    network_id,
    valid_client,
)
from weeble.core.filters import Filter, notification_index_keys
from weeble.core.messages import Adv, Control, Notify, Sub, Switch, Unadv, Unsub
from weeble.core.overlay import Topology
from weeble.core.rom import Algorithm, ConfigError, Mode, Rom
from weeble.core.routing.edges import Edges
from weeble.core.routing.leasing import ControlRam, Leasing
from weeble.core.routing.merging import Merging, loans
from weeble.core.routing.rebuild import Rebuild
from weeble.core.routing.strategy import Covering, Flooding, Identity, Simple, Strategy
from weeble.core.table import Entry, KeyCache, RoutingTable

OVERRUN = "overrun"  # SC-2 clock overrun, every π at every broker (leased algorithms)
SWITCH = "switch"  # A5 rebuild switch, every π at the root (wrapper)
RENEW = "renew"  # merging: every ρ each broker renews its mergers, as a client its subscriptions
NO_ADVERTS = "advertisements are not in use"

STRATEGIES: dict[Algorithm, type[Strategy]] = {
    Algorithm.FLOODING: Flooding,
    Algorithm.SIMPLE: Simple,
    Algorithm.IDENTITY: Identity,
    Algorithm.COVERING1: Covering,
    Algorithm.COVERING2: Covering,
    Algorithm.MERGING1: Merging,
    Algorithm.MERGING2: Merging,
}


class RoutingRam:
    """The routing layer's slice of RAM."""

    __slots__ = ("adverts", "detached", "keys", "next_timer", "rebuild_bit", "subs")

    def __init__(self, n_tables: int, adverts: bool, keys: KeyCache | None = None) -> None:
        # not state: the index cache the tables share (table.py), this broker's own if none
        self.keys = keys if keys is not None else KeyCache()
        self.subs = ControlRam(n_tables, self.keys)  # the notification routing tables
        # subscription routing tables
        self.adverts = ControlRam(n_tables, self.keys) if adverts else None
        # The broker clock, as the time of its next overrun: clock(now) = π − (next_timer − now).
        # Under the wrapper it is the root's modulo clock that paces the switches.
        self.next_timer: float = 0.0
        self.rebuild_bit: int = 0  # a_B: the table being rebuilt (wrapper only)
        # anti-entropy mode: neighbours this broker believes failed (seed 002 §5), whose
        # entries it keeps but advertises to nobody until the link comes back
        self.detached: set[str] = set()


Scheme = Leasing | Rebuild | Edges


class Routing:
    name = "routing"

    def __init__(self, rom: Rom, topo: Topology, ram: RoutingRam) -> None:
        if rom.adverts and (rom.algorithm is Algorithm.FLOODING or rom.hierarchical):
            raise ConfigError(
                "adverts: advertisements route subscriptions peer-to-peer towards publishers "
                "(thesis §3.4.2); they need a filtering algorithm and peer-to-peer routing, got "
                f"{rom.algorithm.value}{' hierarchical' if rom.hierarchical else ''}"
            )
        self.rom = rom
        self.topo = topo
        self.ram = ram
        self.subs = self._scheme(rom, Sub, Unsub, ram.subs)
        self.adverts = None if ram.adverts is None else self._scheme(rom, Adv, Unadv, ram.adverts)
        if self.adverts is not None:
            self.subs.strategy.advertised = self.advertised
        self._tables = ram.subs.tables  # a stable list: clearing a table never replaces it
        self._keys = ram.keys
        self._flooding = rom.algorithm is Algorithm.FLOODING
        self._hierarchical = rom.hierarchical
        # routing messages from neighbours, by type (the broker checks the sender is a neighbour)
        self.receivers: dict[type, Receiver] = {
            Notify: self.on_notify,
            Sub: self.on_sub,
            Unsub: self.on_unsub,
            Adv: self.on_adv,
            Unadv: self.on_unadv,
            Switch: self.on_switch,
        }
        # The same, for a broker inside a link exchange: a new advertisement does not pull the
        # subscriptions held for other destinations towards it at once (some of those are the
        # old routes across r); they follow it at their next refresh instead.
        self.receivers_locked: dict[type, Receiver] = {**self.receivers, Adv: self.on_adv_locked}
        self.clients: dict[type, Handler] = {
            ClientPublish: self.on_client_publish,
            ClientSubscribe: self.on_client_subscribe,
            ClientUnsubscribe: self.on_client_unsubscribe,
            ClientAdvertise: self.on_client_advertise,
            ClientUnadvertise: self.on_client_unadvertise,
        }

    def _strategy(self, rom: Rom, sub: Any, unsub: Any, wrapper: bool) -> Strategy:
        return STRATEGIES[rom.algorithm](
            broker_id=rom.broker_id, algorithm=rom.algorithm, hierarchical=rom.hierarchical,
            options=rom.options, wrapper=wrapper, sub_cls=sub, unsub_cls=unsub,
        )

    def _scheme(self, rom: Rom, sub: Any, unsub: Any, ram: ControlRam) -> Any:
        # Any, not Scheme: the coloured routing's scheme is its own (routing/colours.py), and
        # compiled (scripts/compile.py) a narrower return type is checked at run time
        strategy = self._strategy(rom, sub, unsub, rom.wrapper)
        if rom.wrapper:
            return Rebuild(strategy, ram, self.topo, lambda: self.ram.rebuild_bit)
        if rom.mode is Mode.ANTI_ENTROPY:
            return Edges(strategy, ram, self.topo, self.ram.detached)
        return Leasing(strategy, ram, self.topo, rom.options.second_chance)

    def schemes(self) -> list[Scheme]:
        return [self.subs] if self.adverts is None else [self.adverts, self.subs]

    # ---- timers -----------------------------------------------------------------------------

    def on_start(self, now: float) -> list[Effect]:
        rom = self.rom
        effects: list[Effect] = []
        if rom.algorithm.merging:
            effects.append(SetTimer(RENEW, now + rom.params.rho))
        if rom.wrapper and not rom.is_root:
            return effects  # only the root paces rebuilds
        self.ram.next_timer = now + rom.params.pi
        effects.append(SetTimer(SWITCH if rom.wrapper else OVERRUN, self.ram.next_timer))
        return effects

    def on_timer(self, now: float, timer: str) -> list[Effect]:
        ram, rom = self.ram, self.rom
        if timer == RENEW:
            effects = [e for scheme in self.schemes() for plane in scheme.planes
                       for e in scheme.strategy.renew(plane)]
            effects.append(SetTimer(RENEW, now + rom.params.rho))
            return effects
        if now < ram.next_timer - 1e-9:
            return []  # superseded (the clock was changed since this timer was set)
        ram.next_timer = now + rom.params.pi
        if timer == OVERRUN and not rom.wrapper:
            effects = self.overrun()
        elif timer == SWITCH and rom.wrapper and rom.is_root:
            effects = self.rebuild(1 - ram.rebuild_bit, exclude=None)  # A5
        else:
            return []
        effects.append(SetTimer(timer, ram.next_timer))
        return effects

    def overrun(self) -> list[Effect]:
        effects: list[Effect] = []
        for scheme in self.schemes():
            expired, caused = scheme.overrun()
            effects.extend(caused)
            if expired:
                kind = "expire" if scheme is self.subs else "adv_expire"
                effects.append(Trace(kind, {"count": len(expired),
                                            "entries": [e.as_dict() for e in expired]}))
        return effects

    def rebuild(self, bit: int, exclude: str | None) -> list[Effect]:
        """A5/A6: start rebuilding table `bit` (of every control plane) from scratch."""
        self.ram.rebuild_bit = bit
        for scheme in self.schemes():
            scheme.reset(bit)
        effects: list[Effect] = [Send(n, Switch(bit)) for n in self.topo.ordered if n != exclude]
        effects.append(Trace("switch", {"tag": bit}))
        return effects

    # ---- notifications ----------------------------------------------------------------------

    def on_client_publish(self, now: float, event: ClientPublish) -> list[Effect]:
        return self.on_notify(now, event.client, Notify(event.notification))

    def on_notify(self, now: float, source: str, message: Notify) -> list[Effect]:
        """Forward a notification; the incoming message object is passed on (the hot path:
        one call per hop, so the simulator's brokers spend little beyond the matching)."""
        if message.gray:  # a colour means something on a reconfiguration cycle only
            message = Notify(message.notification)
        n = message.notification
        attrs = n.attributes
        keys = n.index_keys
        if keys is None:  # the first broker: the keys' canonical objects travel on
            keys = n.index_keys = self._keys.canonical(notification_index_keys(attrs))
        topo = self.topo
        tables = self._tables
        if len(tables) == 1 and not self._flooding:
            # The common case (one table, exact buckets): the table's cached destinations of
            # each key, with no set to build; the same effects in the same order as below.
            found = tables[0].match_keys(keys)
            if found is not None:
                neighbors = topo.neighbors
                out: list[Effect] = [Send(d, message) if d in neighbors else Deliver(d, n)
                                     for d in found if d != source]
                if self._hierarchical:
                    parent = topo.parent
                    if parent is not None and source != parent and parent not in found:
                        out.append(Send(parent, message) if parent in neighbors
                                   else Deliver(parent, n))
                return out
        dests: dict[str, None] = {}
        for table in tables:  # A1: the union of both tables under the wrapper
            table.match(attrs, dests, keys)
        neighbors = topo.neighbors
        if self._flooding:
            effects: list[Effect] = [Send(b, message) for b in topo.ordered if b != source]
            # only local entries are legitimate; one that names a neighbour would duplicate
            effects.extend(Deliver(c, n) for c in dests if c not in neighbors and c != source)
            return effects
        if self._hierarchical:
            parent = topo.parent
            if parent is not None and source != parent:
                dests[parent] = None  # every notification climbs to the root
        return [Send(d, message) if d in neighbors else Deliver(d, n)
                for d in dests if d != source]

    def on_notifies(self, now: float, batch: list[tuple[str, Notify]],
                    out: list[list[Effect]]) -> None:
        """`on_notify` for each (source, message) of `batch` in order (notifications that
        arrived together), appending each one's effects to `out`: the same effects, in the same
        order, as one call each. The common case (one table, exact buckets) is the loop of
        `on_notify` with what every notification looks up hoisted out of it; a notification
        the index alone cannot answer takes `on_notify`. If one raises, `out` holds the effects
        of those before it."""
        tables = self._tables
        if len(tables) != 1 or self._flooding:
            for source, message in batch:
                out.append(self.on_notify(now, source, message))
            return
        match_keys = tables[0].match_keys
        canonical = self._keys.canonical
        topo = self.topo
        neighbors = topo.neighbors
        parent = topo.parent if self._hierarchical else None
        for source, message in batch:
            if message.gray:
                out.append(self.on_notify(now, source, message))
                continue
            n = message.notification
            keys = n.index_keys
            if keys is None:
                keys = n.index_keys = canonical(notification_index_keys(n.attributes))
            found = match_keys(keys)
            if found is None:
                out.append(self.on_notify(now, source, message))
                continue
            effects: list[Effect] = [Send(d, message) if d in neighbors else Deliver(d, n)
                                     for d in found if d != source]
            if parent is not None and source != parent and parent not in found:
                effects.append(Send(parent, message) if parent in neighbors
                               else Deliver(parent, n))
            out.append(effects)

    # ---- control messages from neighbours ---------------------------------------------------

    def on_sub(self, now: float, source: str, msg: Sub) -> list[Effect]:
        subs = self.subs
        if subs.strategy.unexpected(self.topo, source):
            return [Trace("garbage", {"from": source, "why": "subscription not expected"})]
        return subs.subscribe(self._tag(msg.tag), source, msg.sub_id, msg.filter)

    def on_unsub(self, now: float, source: str, msg: Unsub) -> list[Effect]:
        subs = self.subs
        if subs.strategy.unexpected(self.topo, source):
            return [Trace("garbage", {"from": source, "why": "unsubscription not expected"})]
        return subs.unsubscribe(source, msg.sub_id, msg.filter, remote=True)

    def on_adv(self, now: float, source: str, msg: Adv, follow: bool = True) -> list[Effect]:
        adverts = self.adverts
        if adverts is None:
            return [Trace("garbage", {"from": source, "why": NO_ADVERTS})]
        new = follow and not self._advertised_by(source, msg.filter)
        effects = adverts.subscribe(self._tag(msg.tag), source, msg.adv_id, msg.filter)
        if new:  # subscriptions held before this advertisement must now go its way too
            effects.extend(self.follow(source, msg.filter))
        return effects

    def follow(self, source: str, within: Filter, exclude: frozenset[str] = frozenset()
               ) -> list[Effect]:
        """Send `source` the subscriptions held for other destinations that overlap an
        advertisement it sent (`within`), but those `exclude` names. Under leasing each goes
        on loan: one whose entry here expires unrefreshed (a crashed client's) is withdrawn
        from `source` then, which the re-send gave a fresh lease (issue 23)."""
        effects: list[Effect] = []
        lend = isinstance(self.subs, Leasing)
        for plane in self.subs.planes:
            effects.extend(self.subs.strategy.bootstrap(plane, source, within=within,
                                                        exclude=exclude, lend=lend))
        return effects

    def on_adv_locked(self, now: float, source: str, msg: Adv) -> list[Effect]:
        return self.on_adv(now, source, msg, follow=False)

    def on_unadv(self, now: float, source: str, msg: Unadv) -> list[Effect]:
        adverts = self.adverts
        if adverts is None:
            return [Trace("garbage", {"from": source, "why": NO_ADVERTS})]
        return adverts.unsubscribe(source, msg.adv_id, msg.filter, remote=True)

    def on_switch(self, now: float, source: str, msg: Switch) -> list[Effect]:
        if not self.rom.wrapper:
            return [Trace("garbage", {"from": source, "why": "unexpected Switch"})]
        if msg.tag not in (0, 1):
            return [Trace("garbage", {"from": source, "why": f"switch tag {msg.tag}"})]
        return self.rebuild(msg.tag, exclude=source)  # A6

    def _tag(self, tag: int) -> int:
        """A3: the table a tagged control message belongs to (always T^0 without the wrapper)."""
        return tag & 1 if self.rom.wrapper else 0

    def _advertised_by(self, source: str, f: Filter) -> bool:
        """Does `source` already advertise f here (an entry from it covers f)? Then every
        subscription overlapping f went its way already. Judged by filter, not by id:
        identity and covering routing hand an advertisement's route over between the ids of
        identical advertisements, so an id from `source` comes and goes while its filter
        stays; judged by id, each return re-sent `source` every overlapping subscription held
        here, the stale copy of a crashed client's too, with a fresh lease (issue 23)."""
        assert self.adverts is not None
        for table in self.adverts.ram.tables:
            for g in table.filters():
                if g.covers(f) and any(e.dest == source for e in table.identical(g)):
                    return True
        return False

    # ---- client requests --------------------------------------------------------------------

    # A client's ids are unique among its own only: the tables and messages carry them
    # qualified with the client (`network_id`), so two clients' same-named subscriptions stay
    # two entries at every broker, and one's unsubscription leaves the other's alone.

    def on_client_subscribe(self, now: float, event: ClientSubscribe) -> list[Effect]:
        bad = self._bad_client(event.client)
        if bad:
            return bad
        # A2: run R on the table being rebuilt
        return self.subs.subscribe(self.ram.rebuild_bit, event.client,
                                   network_id(event.client, event.sub_id), event.filter)

    def on_client_unsubscribe(self, now: float, event: ClientUnsubscribe) -> list[Effect]:
        bad = self._bad_client(event.client)
        if bad:
            return bad
        return self.subs.unsubscribe(event.client, network_id(event.client, event.sub_id),
                                     event.filter, remote=False)

    def on_client_advertise(self, now: float, event: ClientAdvertise) -> list[Effect]:
        if self.adverts is None:
            return [Trace("garbage", {"from": event.client, "why": NO_ADVERTS})]
        bad = self._bad_client(event.client)
        if bad:
            return bad
        return self.adverts.subscribe(self.ram.rebuild_bit, event.client,
                                      network_id(event.client, event.adv_id), event.filter)

    def on_client_unadvertise(self, now: float, event: ClientUnadvertise) -> list[Effect]:
        if self.adverts is None:
            return [Trace("garbage", {"from": event.client, "why": NO_ADVERTS})]
        bad = self._bad_client(event.client)
        if bad:
            return bad
        return self.adverts.unsubscribe(event.client, network_id(event.client, event.adv_id),
                                        event.filter, remote=False)

    def _bad_client(self, client: str) -> list[Effect]:
        if client in self.topo.neighbors:
            return [Trace("garbage", {"from": client, "why": "client id is a neighbour"})]
        why = valid_client(client)
        return [Trace("garbage", {"from": client, "why": why})] if why else []

    # ---- advertisements ---------------------------------------------------------------------

    def advertised(self, f: Filter) -> set[str]:
        """Neighbours with an advertisement overlapping f: where subscriptions for f may go."""
        assert self.adverts is not None
        neighbors = self.topo.neighbors
        out: set[str] = set()
        for table in self.adverts.ram.tables:  # the union of both tables under the wrapper
            for g in table.filters():
                if (f & g).satisfiable:
                    out.update(e.dest for e in table.identical(g) if e.dest in neighbors)
        return out

    # ---- what other layers and the broker read ----------------------------------------------

    def tables(self) -> list[RoutingTable]:
        return self._tables

    def bootstrap(self, neighbor: str) -> list[Effect]:
        """A new link: send the neighbour what it needs of our tables (advertisements first)."""
        effects: list[Effect] = []
        for scheme in self.schemes():
            for plane in scheme.planes:
                effects.extend(scheme.strategy.bootstrap(plane, neighbor))
        return effects

    def adopt(self, neighbor: str) -> None:
        """A link the coordinated exchange added: renew over it what the relays transferred,
        and under leasing lend it (`Strategy.lend`): a route here that expires unrefreshed is
        withdrawn from the far side, which the relays gave a fresh lease."""
        for scheme in self.schemes():
            for plane in scheme.planes:
                scheme.strategy.adopt(plane, neighbor)
        if isinstance(self.subs, Leasing):
            for plane in self.subs.planes:
                self.subs.strategy.lend(plane, neighbor)

    def lease(self, now: float, entry: Entry) -> float | None:
        """What a relay of `entry` tells the a-endpoint (`Relayed.lease`): the time to my next
        overrun, which removes it, when the entry has missed its refresh: flag 0, and longer
        since my last overrun than a live subscription goes between two refreshes here (ρ +
        d·(δmax − δmin), which π exceeds). None otherwise: a route that may be live gets a
        fresh lease over a, as in the thesis, since the exchange may drop its next refresh (a
        black one routed towards a; sweep seed 127 with exchanges drawn often: a live route
        kept at flag 0 lost a notification)."""
        params = self.rom.params
        if (not isinstance(self.subs, Leasing) or entry.flag
                or not self.rom.options.second_chance):
            return None
        left = self.ram.next_timer - now
        gap = params.rho + params.d * (params.delta_max - params.delta_min)
        return left if params.pi - left > gap else None

    def keep_lease(self, now: float, source: str, msg: Control, lease: float) -> None:
        """A route the link exchange re-issued from an entry that had missed its refresh
        (`Relayed.lease`: the time that entry had left at the r-endpoint) has just been
        installed towards `source` with a fresh lease (flag 1): it keeps flag 0 when my next
        overrun comes no earlier than the entry's removal there, so it goes when the entry
        would have, or up to π later, not up to 2π (found by the issue-28 sweep, covering1
        peer-to-peer seed 45: an unsubscribed client's route, left to its lease at b2, relayed
        by b2 to itself with a fresh lease, lived 7.1 s after the client ended, L = 6.1 s).
        Flag 1 otherwise. Exact when I am that r-endpoint."""
        if not isinstance(self.subs, Leasing) or self.ram.next_timer < now + lease - 1e-9:
            return
        if isinstance(msg, Sub):
            ram, sub_id = self.ram.subs, msg.sub_id
        elif isinstance(msg, Adv) and self.ram.adverts is not None:
            ram, sub_id = self.ram.adverts, msg.adv_id
        else:
            return
        for table in ram.tables:
            for e in table.with_id(sub_id):
                if e.dest == source and e.filter == msg.filter:
                    e.flag = 0

    def withdraw_neighbor(self, neighbor: str) -> list[Effect]:
        """Act as if `neighbor` had withdrawn every (un)subscription and advertisement it made
        (unadvertisements first: the subscriptions then stop where they are no longer needed)."""
        effects: list[Effect] = []
        for scheme in self.schemes():
            held = {(e.sub_id, e.filter) for t in scheme.ram.tables for e in t
                    if e.dest == neighbor}
            for sub_id, f in sorted(held, key=lambda p: (p[0], str(p[1]))):
                effects.extend(scheme.unsubscribe(neighbor, sub_id, f, remote=True))
        return effects

    def snapshot(self) -> dict[str, Any]:
        ram = self.ram
        out: dict[str, Any] = {
            "next_timer": ram.next_timer,
            "rebuild_bit": ram.rebuild_bit,
            "tables": [[e.as_dict() for e in t] for t in ram.subs.tables],
            "mergers": [[m.as_dict() for m in t.mergers.values()] for t in ram.subs.tables],
        }
        if any(t.loaned for t in ram.subs.tables):  # rare (merging, adverts): left out if none
            out["loaned"] = [loans(t) for t in ram.subs.tables]
        if ram.detached:
            out["detached"] = sorted(ram.detached)
        if ram.adverts is not None:
            out["adv_tables"] = [[e.as_dict() for e in t] for t in ram.adverts.tables]
        return out
