"""Routing on the coloured overlay (thesis 4.5, "Integration of Self-Stabilizing Routing",
L6398-6482; spec ch4 §5.7).

One routing table per colour: the per-tag table list of the periodic-rebuild wrapper, with
three tags instead of two and one topology per tag (the colour's pointers). So this is the
wrapper's scheme with colours for bits:
- every control message carries its issuer's c_new as its tag, travels along that colour's tree
  and is applied to that colour's table (A3 of the wrapper, per colour);
- every notification carries its publisher broker's c_cur and each hop routes it with that
  colour's table and pointers, so it never takes two paths (no duplicates) and stays routable
  at brokers that have rotated meanwhile (they keep c_old);
- the rotation resets T^{c_new} to the initial (empty) configuration: the second chance of
  chapter 3's leasing, with one table per colour and a recolor period ξ for π (Eq. 4.2:
  ξ > ρ + 2hδmax, the wrapper's Theorem 1). Within one period a repeated subscription is
  dropped (the wrapper's A7), and no π overrun runs.
Ordering (4.5.4), by `Rom.ordering`: FIFO holds notifications that would cross a link new in
their colour (a neighbour in that colour but not in the colour before it) until the colour is
c_old; CAUSAL holds every local publication for one recolor period after a rotation that
activates reconfigurations. E4 (spec ch4 §5.7): a control message coloured with my c_old is early
(its issuer has seen a recolor I have not): it waits for that recolor instead of going into a
table about to be reset.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from weeble.core.events import (
    ClientPublish,
    ClientSubscribe,
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
from weeble.core.filters import Filter
from weeble.core.messages import Notify, Sub, Unsub
from weeble.core.overlay.coloured import COLOURS, ColouredRam, ColourTree, colour
from weeble.core.rom import ConfigError, Ordering, Rom
from weeble.core.routing.layer import RENEW, Routing, RoutingRam
from weeble.core.routing.leasing import ControlRam, withdraw
from weeble.core.routing.plane import Plane
from weeble.core.routing.strategy import Strategy
from weeble.core.table import Entry

EARLY_LIMIT = 10_000  # E4 buffer bound: a flood of bogus early messages cannot grow RAM forever


class ColourRoutingRam:
    """RAM of routing on colours beyond the tables: what waits (E4, 4.5.4)."""

    __slots__ = ("early", "held", "holding", "pubs")

    def __init__(self) -> None:
        self.early: list[tuple[str, Sub | Unsub]] = []  # E4: (source, message) coloured c_old
        self.held: dict[str, deque[Notify]] = {}  # FIFO: per neighbour, what waits for a new link
        self.holding = False  # CAUSAL: local publications wait until the next rotation
        self.pubs: deque[tuple[str, Notify]] = deque()  # CAUSAL: (publisher client, message)


class Colours:
    """The control-plane scheme: one plane per colour, each on its colour's tree."""

    wrapper = True

    def __init__(self, strategy: Strategy, ram: ControlRam, trees: Sequence[ColourTree]) -> None:
        self.strategy = strategy
        self.ram = ram
        self.planes = [Plane(table, c, trees[c]) for c, table in enumerate(ram.tables)]

    def subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        seen = self.ram.seen[tag]
        key = (sub_id, source)
        if key in seen:  # A7: once per period and colour
            return []
        seen.add(key)
        plane = self.planes[tag]
        plane.table.refresh(sub_id, f, source, per_destination=True)
        return self.strategy.on_subscribe(plane, source, sub_id, f)

    def unsubscribe(self, source: str, sub_id: str, f: Filter, remote: bool,
                    tag: int = 0) -> list[Effect]:
        """A remote one applies to its colour's table; a local client's leaves every table
        (its entries are local: no other broker relies on them) and goes out coloured `tag`."""
        planes = [self.planes[tag]] if remote else self.planes
        withdraw(planes, sub_id, f, source, remote)
        for c in range(COLOURS) if not remote else (tag,):
            self.ram.seen[c].discard((sub_id, source))
        return self.strategy.on_unsubscribe([self.planes[tag]], tag, source, sub_id, f, remote)

    def overrun(self) -> list[Entry]:
        return []  # no leases: the rotation does the cleaning

    def reset(self, c: int) -> None:
        """T^c := init (A9.6, A10.6)."""
        self.ram.tables[c].clear()
        self.ram.seen[c].clear()


class ColouredRouting(Routing):
    """The routing layer on a coloured overlay: the same strategies, per-colour handlers."""

    def __init__(self, rom: Rom, overlay: ColouredRam, ram: RoutingRam,
                 colours: ColourRoutingRam) -> None:
        if rom.adverts:
            raise ConfigError("adverts: the 3-colour scheme does not support advertisements "
                              "(thesis 4.5.5, L6652-6659)")
        if rom.wrapper:
            raise ConfigError("wrapper: the 3-colour scheme rebuilds the tables by its own "
                              "rotation; the periodic-rebuild wrapper does not apply")
        self.overlay = overlay
        self.cram = colours
        super().__init__(rom, overlay, ram)
        self.scheme: Colours = self.subs  # type: ignore[assignment]
        self._fifo = rom.ordering is Ordering.FIFO
        self._causal = rom.ordering is Ordering.CAUSAL
        self._early = rom.colours.early_control
        self._control_cur = rom.colours.control_colour == "c_cur"  # Fig. 4.20 ablation
        self.receivers: dict[type, Receiver] = {
            Notify: self.on_colour_notify, Sub: self.on_colour_sub, Unsub: self.on_colour_unsub}
        self.clients: dict[type, Handler] = {ClientPublish: self.on_colour_publish,
                        ClientSubscribe: self.on_colour_subscribe,
                        ClientUnsubscribe: self.on_colour_unsubscribe}

    def _scheme(self, rom: Rom, sub: Any, unsub: Any, ram: ControlRam) -> Any:
        strategy = self._strategy(rom, sub, unsub, wrapper=True)
        return Colours(strategy, ram, self.overlay.trees)

    def on_start(self, now: float) -> list[Effect]:
        # no overrun and no switch: the recolor layer's rotation resets the tables
        return [SetTimer(RENEW, now + self.rom.params.rho)] if self.rom.algorithm.merging else []

    def on_timer(self, now: float, timer: str) -> list[Effect]:
        """Merging renews its mergers every ρ like a client its subscriptions: in c_new only
        (control messages carry the issuer's c_new; renewing an older colour's mergers would
        send old colours that E4 then files into the receivers' fresh c_new tables)."""
        if timer != RENEW:
            return []
        scheme = self.scheme
        effects = scheme.strategy.renew(scheme.planes[self.overlay.c_new])
        effects.append(SetTimer(RENEW, now + self.rom.params.rho))
        return effects

    # ---- notifications ----------------------------------------------------------------------

    def on_colour_publish(self, now: float, event: ClientPublish) -> list[Effect]:
        message = Notify(event.notification, color=self.overlay.c_cur)
        if self.cram.holding:  # causal extension: wait one period after an activation
            self.cram.pubs.append((event.client, message))
            return []
        return self.route_colour(message, event.client)

    def on_colour_notify(self, now: float, source: str, message: Notify) -> list[Effect]:
        c = colour(message.color)
        if c is None:
            return [Trace("garbage", {"from": source, "why": f"notification colour "
                                                             f"{message.color!r}"})]
        if source not in self.overlay.trees[c].neighbors:
            return [Trace("garbage", {"from": source, "why": f"not a neighbour in colour {c}"})]
        return self.route_colour(message, source)

    def route_colour(self, message: Notify, source: str) -> list[Effect]:
        """Route with the message's colour: its table and its tree."""
        c = message.color
        tree = self.overlay.trees[c]
        n = message.notification
        dests: dict[str, None] = {}
        self._tables[c].match(n.attributes, dests)
        neighbors = tree.neighbors
        effects: list[Effect] = []
        if self._flooding:
            for b in tree.ordered:
                if b != source:
                    self._send(effects, b, message)
            effects.extend(Deliver(d, n) for d in dests if d not in neighbors and d != source)
            return effects
        if self._hierarchical and tree.parent is not None and source != tree.parent:
            dests[tree.parent] = None
        for d in dests:
            if d == source:
                continue
            if d in neighbors:
                self._send(effects, d, message)
            else:
                effects.append(Deliver(d, n))
        return effects

    def _send(self, effects: list[Effect], d: str, message: Notify) -> None:
        if self._fifo:
            queue = self.cram.held.get(d)
            if queue or self._new_link(message.color, d):
                self.cram.held.setdefault(d, deque()).append(message)
                return
        effects.append(Send(d, message))

    def _new_link(self, c: int, d: str) -> bool:
        """4.5.4 FIFO: d is a neighbour in colour c but not in the colour before it (c_cur vs
        c_old, or c_new vs c_cur); for c_old the colour before it is gone: never new."""
        ram = self.overlay
        if c == ram.c_old:
            return False
        return d not in ram.trees[(c - 1) % COLOURS].neighbors

    # ---- control messages -------------------------------------------------------------------

    def on_colour_sub(self, now: float, source: str, msg: Sub) -> list[Effect]:
        return self._control(source, msg)

    def on_colour_unsub(self, now: float, source: str, msg: Unsub) -> list[Effect]:
        return self._control(source, msg)

    def _control(self, source: str, msg: Sub | Unsub) -> list[Effect]:
        c = colour(msg.tag)
        if c is None:
            return [Trace("garbage", {"from": source, "why": f"control colour {msg.tag!r}"})]
        if self._early and c == self.overlay.c_old:
            early = self.cram.early
            if len(early) >= EARLY_LIMIT:
                return [Trace("garbage", {"from": source, "why": "early buffer full"})]
            early.append((source, msg))  # E4: applied after my next accepted recolor
            return []
        return self._apply(source, msg, c)

    def _apply(self, source: str, msg: Sub | Unsub, c: int) -> list[Effect]:
        tree = self.overlay.trees[c]
        if source not in tree.neighbors:
            return [Trace("garbage", {"from": source, "why": f"not a neighbour in colour {c}"})]
        scheme = self.scheme
        if scheme.strategy.unexpected(tree, source):
            return [Trace("garbage", {"from": source, "why": "control message not expected"})]
        if type(msg) is Sub:
            return scheme.subscribe(c, source, msg.sub_id, msg.filter)
        return scheme.unsubscribe(source, msg.sub_id, msg.filter, remote=True, tag=c)

    def on_colour_subscribe(self, now: float, event: ClientSubscribe) -> list[Effect]:
        ram = self.overlay
        if any(event.client in t.neighbors for t in ram.trees):
            return [Trace("garbage", {"from": event.client, "why": "client id is a neighbour"})]
        why = valid_client(event.client)
        if why:
            return [Trace("garbage", {"from": event.client, "why": why})]
        sub_id = network_id(event.client, event.sub_id)  # as Routing.on_client_subscribe
        if ram.joining:
            # A broker that is not (yet) in the tree has no colours of its own: its first
            # accepted recolor sets them, so its clients' entries go into every table now.
            for c in range(COLOURS):
                if c != ram.c_new:
                    self._tables[c].refresh(sub_id, event.filter, event.client,
                                            per_destination=True)
        tag = ram.c_cur if self._control_cur else ram.c_new
        return self.scheme.subscribe(tag, event.client, sub_id, event.filter)

    def on_colour_unsubscribe(self, now: float, event: ClientUnsubscribe) -> list[Effect]:
        if any(event.client in t.neighbors for t in self.overlay.trees):
            return [Trace("garbage", {"from": event.client, "why": "client id is a neighbour"})]
        why = valid_client(event.client)
        if why:
            return [Trace("garbage", {"from": event.client, "why": why})]
        ram = self.overlay
        return self.scheme.unsubscribe(event.client, network_id(event.client, event.sub_id),
                                       event.filter, remote=False,
                                       tag=ram.c_cur if self._control_cur else ram.c_new)

    # ---- the recolor layer calls this after every rotation ----------------------------------

    def rotated(self, activating: bool) -> list[Effect]:
        """T^{c_new} := init, then what waited for this rotation: early control messages now
        coloured c_new (E4), notifications held at a link that is no longer new (FIFO), and
        the publications of the last period (CAUSAL)."""
        ram, cram = self.overlay, self.cram
        self.scheme.reset(ram.c_new)
        effects: list[Effect] = []
        if cram.early:
            early, cram.early = cram.early, []
            for source, msg in early:
                if msg.tag == ram.c_new:
                    effects.extend(self._apply(source, msg, ram.c_new))
                else:
                    effects.append(Trace("garbage", {"from": source,
                                                     "why": "early control message too old"}))
        for d in sorted(cram.held):
            queue = cram.held[d]
            while queue and not self._new_link(queue[0].color, d):
                effects.append(Send(d, queue.popleft()))
            if not queue:
                del cram.held[d]
        if cram.pubs:
            pubs, cram.pubs = cram.pubs, deque()
            for client, message in pubs:
                effects.extend(self.route_colour(message, client))
        cram.holding = self._causal and activating
        return effects

    def snapshot(self) -> dict[str, Any]:
        out = super().snapshot()
        cram = self.cram
        out["colour_routing"] = {"early": len(cram.early), "holding": cram.holding,
                                 "held": {d: len(q) for d, q in sorted(cram.held.items())},
                                 "pubs": len(cram.pubs)}
        return out
