"""The broker: a pure state machine, `Broker.step(now, event) -> list[effect]`.

A broker is composed of layers, each with its own slice of RAM, its own messages and its own
handlers. `step` runs one pipeline over them (`Broker.pipeline`, composed once from the ROM):
each stage handles the events its layer owns, passes the rest to the stage below and sees what
comes back; the last stage (`Dispatch`) gives an event to the layer that owns its type and, for
a message from a neighbour, its message type. The stages of a static-tree broker, top first:
`optimize` (with an optimizer) or `anti_entropy` (in that mode, without the exchange stage),
`exchange`, `dispatch`; the coloured and skip-ring brokers have the dispatch only. An unlocked
exchange stage only passes events on, so the event skips it while no exchange holds the broker.
The layers:

    overlay      who my neighbours are, and my parent              overlay/
    routing      notifications; subscription and advertisement     routing/
                 tables, kept by leasing or the rebuild wrapper
                 around one strategy per algorithm
    membership   leaf add and remove, link drop and add (4.2)     reconfig/membership.py
    exchange     the coordinated link exchange (4.4.2): while     reconfig/exchange.py
                 locked it wraps routing (A7 on the way in, A8
                 on the way out)
    anti_entropy edge stabilization with Bloom sketches (seed    sketch/layer.py
                 002) when `Rom.mode` is anti_entropy: routing
                 keeps unleased neighbour entries (routing/
                 edges.py) and this layer compares and corrects
                 them edge by edge
    optimize     the tree optimizer (ch. 5: Cost and Interest,    optimize/layer.py
                 l-MST, l-MIT) when `Rom.optimizer` is set: its
                 broadcasts and requests pass beside the exchange
                 (they are not routing messages), and its
                 decisions start link exchanges

With `Rom.overlay = coloured` (the 3-colour scheme of 4.5) the overlay layer keeps a tree per
colour (overlay/coloured.py), routing keeps a table per colour (routing/colours.py), and the
layer `recolor` (reconfig/recolor.py) runs the recolor protocol above them; reconfigurations go
to the root as data (SubmitReconfig), so membership and exchange are not part of such a broker.

Layers only call down (exchange → membership → routing → overlay) and never into the broker.
Faults reach RAM through the fault targets each layer declares (its faults module), composed
here into one registry (`FAULTS`, corruption.py), which finds a target's layer by name; each
layer's legitimacy rule (its legitimacy module) is composed the same way (`LEGITIMACY`,
legitimacy_rules.py; legitimacy.py checks with it). No I/O,
no clock reads, no threads: `now` comes in with each event, timers go out as SetTimer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weeble.core.corruption import Registry
from weeble.core.events import (
    AddNeighbor,
    ClientAdvertise,
    ClientPublish,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Corrupt,
    Deliver,
    Effect,
    Event,
    Handler,
    Leave,
    LinkDown,
    LinkMeasured,
    LinkUp,
    Receive,
    Receiver,
    RemoveNeighbor,
    SetParent,
    Start,
    StartExchange,
    TimerFired,
    Trace,
    from_neighbour,
)
from weeble.core.filters import Filter
from weeble.core.legitimacy_rules import Rules
from weeble.core.messages import Notify
from weeble.core.optimize import faults as optimize_faults
from weeble.core.optimize.layer import BROADCAST, Optimize, OptimizeRam
from weeble.core.optimize.messages import OPTIMIZING
from weeble.core.overlay import Overlay, OverlayRam, coloured_faults, coloured_legitimacy
from weeble.core.overlay import faults as overlay_faults
from weeble.core.overlay import legitimacy as overlay_legitimacy
from weeble.core.overlay.coloured import ColouredOverlay, ColouredRam
from weeble.core.overlay.skipring import faults as skip_ring_faults
from weeble.core.overlay.skipring import legitimacy as skip_ring_legitimacy
from weeble.core.reconfig import faults as exchange_faults
from weeble.core.reconfig import recolor_faults
from weeble.core.reconfig.exchange import RETRY, Exchange, ExchangeRam
from weeble.core.reconfig.membership import Membership
from weeble.core.reconfig.recolor import RECOLOR, RecolorLayer, RecolorRam
from weeble.core.rom import Mode, OverlayKind, Rom
from weeble.core.routing import colour_faults as colour_routing_faults
from weeble.core.routing import faults as routing_faults
from weeble.core.routing import legitimacy as routing_legitimacy
from weeble.core.routing.colours import ColouredRouting, ColourRoutingRam
from weeble.core.routing.layer import OVERRUN, SWITCH, Routing, RoutingRam
from weeble.core.sketch import faults as sketch_faults
from weeble.core.sketch.layer import TIMER as AE_TIMER
from weeble.core.sketch.layer import AntiEntropyLayer, AntiEntropyRam
from weeble.core.table import KeyCache, RoutingTable

__all__ = ["FAULTS", "LEGITIMACY", "OVERRUN", "SWITCH", "TARGETS", "Broker", "Ram"]

# Every fault target of every layer, each layer's in the order it declares them.
FAULTS = Registry((routing_faults.FAULTS, sketch_faults.FAULTS, overlay_faults.FAULTS,
                   exchange_faults.FAULTS, optimize_faults.FAULTS, coloured_faults.FAULTS,
                   recolor_faults.FAULTS, colour_routing_faults.FAULTS,
                   skip_ring_faults.FAULTS))
TARGETS: tuple[str, ...] = FAULTS.names()
# Every layer's legitimacy rule (legitimacy_rules.py): the first that judges a broker judges it, so
# the skip ring and the coloured scheme before the static tree, which judges any broker.
LEGITIMACY = Rules((skip_ring_legitimacy.RULE, routing_legitimacy.COLOURED,
                    routing_legitimacy.STATIC, coloured_legitimacy.COLOURED,
                    overlay_legitimacy.STATIC))


class Ram:
    """Everything a fault may corrupt, one slice per layer. Any type-correct value is a
    possible state. `tables`, `next_timer`, `rebuild_bit` and `seen` read through to the
    routing slice (the notification routing tables and the broker clock)."""

    __slots__ = ("anti_entropy", "colouring", "exchange", "optimize", "overlay", "recolor",
                 "routing")

    def __init__(self, overlay: OverlayRam | ColouredRam, routing: RoutingRam,
                 exchange: ExchangeRam, recolor: RecolorRam | None = None,
                 colouring: ColourRoutingRam | None = None,
                 optimize: OptimizeRam | None = None,
                 anti_entropy: AntiEntropyRam | None = None) -> None:
        self.overlay = overlay
        self.routing = routing
        self.exchange = exchange
        self.recolor = recolor  # the 3-colour scheme only
        self.colouring = colouring  # the 3-colour scheme only: what routing holds back
        self.optimize = optimize  # the tree optimizer only
        self.anti_entropy = anti_entropy  # the anti-entropy mode only (seed 002)

    @property
    def tables(self) -> list[RoutingTable]:
        return self.routing.subs.tables

    @property
    def seen(self) -> list[set[tuple[str, str]]]:
        return self.routing.subs.seen

    @property
    def next_timer(self) -> float:
        return self.routing.next_timer

    @next_timer.setter
    def next_timer(self, value: float) -> None:
        self.routing.next_timer = value

    @property
    def rebuild_bit(self) -> int:
        return self.routing.rebuild_bit

    @rebuild_bit.setter
    def rebuild_bit(self, value: int) -> None:
        self.routing.rebuild_bit = value


def _nothing(now: float, event: Any) -> list[Effect]:
    """An event only another layer acts on (a link failure, for the anti-entropy layer)."""
    return []


# ---- the step pipeline ----------------------------------------------------------------------
#
# A broker is an ordered list of stages, composed once from its ROM (`Broker.pipeline`, top
# first). Each stage handles the events its layer owns and passes the rest to the stage below,
# seeing what comes back (its outgoing hook); the last stage, `Dispatch`, hands every event to
# the layer that owns its type. `Broker.step` runs the first stage, and that is all it does.


class Stage:
    """One layer's place in the step pipeline: `step(now, event) -> effects`."""

    name = "stage"

    def step(self, now: float, event: Event) -> list[Effect]:
        raise NotImplementedError(f"{type(self).__name__}.step")


class Dispatch(Stage):
    """The bottom of the pipeline: an event goes to the layer that owns its type, a message from
    a neighbour to the layer that owns its message type. Routing messages are accepted from
    neighbours only; coordination messages decide for themselves (a link exchange talks to
    brokers that are not neighbours yet)."""

    name = "dispatch"

    def __init__(self, ram: Ram, *, handlers: dict[type, Handler],
                 routing: dict[type, Receiver], coordination: dict[type, Receiver],
                 notify: Routing | None) -> None:
        self.ram = ram
        self.handlers = handlers
        self.routing = routing
        self.coordination = coordination
        # A shortcut for the commonest message (compiled, a direct call is native; through the
        # table it is a call of a bound method): a Notify from a neighbour to `on_notify` (the
        # table says the same, except with the colour scheme, where it is None).
        self.notify = notify
        # A Receive goes to `receive` unless the table has a receiver of its own (skip ring).
        self.direct = Receive not in handlers

    def step(self, now: float, event: Event) -> list[Effect]:
        # The Receive path written out here rather than in a method of its own: compiled, a
        # call less for every message (the commonest event).
        if type(event) is not Receive or not self.direct:
            return self.handlers[type(event)](now, event)
        source, msg = event.neighbor, event.message
        notify = self.notify
        neighbors = self.ram.overlay.neighbors
        if type(msg) is Notify and notify is not None and source in neighbors:
            return notify.on_notify(now, source, msg)  # else refused below, as any other
        kind = type(msg)
        handler = self.routing.get(kind)
        if handler is not None:
            return from_neighbour(neighbors, handler, now, source, msg)
        handler = self.coordination.get(kind)
        if handler is not None:
            return handler(now, source, msg)
        return [Trace("garbage", {"from": source, "why": f"unexpected {kind.__name__}"})]


class Exchanging(Stage):
    """Layer `exchange` while a link exchange holds this broker (4.4.2): it sees every message
    first (A7) and colours what leaves (A8); unlocked, it passes everything on, so the stage
    above it (or `Broker.step`) then goes to the stage below it directly."""

    name = "exchange"

    def __init__(self, exchange: Exchange, ram: ExchangeRam, below: Stage) -> None:
        self.exchange = exchange
        self.ram = ram
        self.below = below

    def step(self, now: float, event: Event) -> list[Effect]:
        if not self.ram.locked:
            return self.below.step(now, event)
        if type(event) is Receive:
            return self.exchange.receive(now, event.neighbor, event.message)
        return self.exchange.outgoing(now, self.below.step(now, event))


class Optimizing(Stage):
    """Layer `optimize` (ch. 5): its messages, its broadcast timer and the measured round trips
    pass beside the exchange (they are not routing messages, A7/A8 do not apply); what is
    published or delivered here goes to its cache, and it starts with the broker."""

    name = "optimize"

    def __init__(self, optimize: Optimize, below: Exchanging) -> None:
        self.optimize = optimize
        self.below = below
        self.exchange_ram = below.ram
        self.past = below.below  # the stage below an idle exchange stage

    def step(self, now: float, event: Event) -> list[Effect]:
        optimize = self.optimize
        if type(event) is Receive and type(event.message) in OPTIMIZING:
            return optimize.receivers[type(event.message)](now, event.neighbor, event.message)
        if type(event) is TimerFired and event.timer == BROADCAST:
            return optimize.on_timer(now)
        if type(event) is LinkMeasured:
            return optimize.on_measured(now, event)
        if type(event) is ClientPublish:
            optimize.consumed(event.notification.id)
        if self.exchange_ram.locked:
            effects = self.below.step(now, event)
        else:  # the exchange stage would only pass it on
            effects = self.past.step(now, event)
        for e in effects:
            if type(e) is Deliver:
                optimize.consumed(e.notification.id)
        if type(event) is Start:
            effects.extend(optimize.on_start(now))
        return effects


class AntiEntropy(Stage):
    """Layer `anti_entropy` (seed 002): its messages (from neighbours only), its round timers
    and the link failures go to it; it sees what crosses every edge (the race rule) and every
    event that goes nowhere (the adaptive timer); its corrections are routing's own
    subscriptions."""

    name = "anti_entropy"

    def __init__(self, ae: AntiEntropyLayer, ram: Ram, below: Stage) -> None:
        self.ae = ae
        self.ram = ram
        self.below = below

    def step(self, now: float, event: Event) -> list[Effect]:
        ae = self.ae
        if type(event) is Receive:
            msg = event.message
            source = event.neighbor
            if type(msg) in ae.receivers:
                effects = from_neighbour(self.ram.overlay.neighbors, self._receive, now, source,
                                         msg)
            else:
                effects = self.below.step(now, event)
                ae.incoming(now, source, msg, effects)
        elif type(event) is TimerFired and event.timer.startswith(AE_TIMER):
            effects = ae.on_timer(now, event.timer)
        elif type(event) is LinkDown:
            effects = ae.on_link_down(now, event)
        elif type(event) is LinkUp:
            effects = ae.on_link_up(now, event)
        else:
            effects = self.below.step(now, event)
            if type(event) is Start:
                effects.extend(ae.on_start(now))
        ae.outgoing(effects)
        return effects

    def _receive(self, now: float, source: str, msg: Any) -> list[Effect]:
        """An anti-entropy message from a neighbour."""
        effects: list[Effect] = []
        if source in self.ram.routing.detached:  # it talks to us: the link works
            effects.extend(self.ae.on_link_up(now, LinkUp(source)))
        effects.extend(self.ae.receivers[type(msg)](now, source, msg))
        return effects


class Broker:
    # the static tree's overlay, or the 3-colour scheme's (a tree per colour)
    overlay: Overlay | ColouredOverlay
    routing: Routing
    pipeline: list[Stage]  # top first; `step` runs the first, each passes on to the next
    # `step` skips an idle exchange stage at the top (unlocked, it would only pass the event
    # on): the stage below it while `_exchange_ram` is unlocked, else the top. The same one
    # pipeline, a call less per event compiled (the static tree without optimizer or
    # anti-entropy layer; for the other brokers both are the top).
    _top: Stage
    _unlocked_top: Stage
    _exchange_ram: ExchangeRam

    def __init__(self, rom: Rom, keys: KeyCache | None = None) -> None:
        """`keys`: the index cache its routing tables share with those of other brokers (the
        simulator gives one to all the brokers of a run, table.py); its own if None."""
        self.rom = rom
        self.keys = keys if keys is not None else KeyCache()
        self.optimize: Optimize | None = None
        self.anti_entropy: AntiEntropyLayer | None = None
        if rom.mode is Mode.SKIP_RING:
            self.pipeline = [self._skip_ring(rom)]
        elif rom.overlay is OverlayKind.COLOURED:
            self.pipeline = [self._coloured(rom)]
        else:
            self.pipeline = self._tree(rom)
        self._top = self._unlocked_top = self.pipeline[0]
        self._exchange_ram = self.ram.exchange
        if isinstance(self._top, Exchanging):
            self._unlocked_top = self._top.below

    def _tree(self, rom: Rom) -> list[Stage]:
        """The static tree (ch. 3-4): overlay, routing, membership, exchange, and the optimizer
        (`Rom.optimizer`) or the anti-entropy layer (`Rom.mode`) when configured."""
        oram = OverlayRam(rom.neighbors, rom.parent)
        self.ram = Ram(
            oram,
            RoutingRam(2 if rom.wrapper else 1, rom.adverts, self.keys),
            ExchangeRam(),
            optimize=OptimizeRam(rom.optimizer) if rom.optimizer is not None else None,
            anti_entropy=AntiEntropyRam() if rom.mode is Mode.ANTI_ENTROPY else None,
        )
        overlay = self.overlay = Overlay(rom.broker_id, oram)
        self.routing = Routing(rom, oram, self.ram.routing)
        self.membership = Membership(overlay, self.routing)
        self.exchange = Exchange(rom, overlay, self.routing, self.membership,
                                 self.ram.exchange)
        self.layers: dict[str, Any] = {
            layer.name: layer
            for layer in (self.overlay, self.routing, self.membership, self.exchange)
        }
        if self.ram.optimize is not None:
            xram = self.ram.exchange
            self.optimize = Optimize(rom, overlay, self.exchange.on_start_exchange,
                                     lambda: xram.locked or bool(xram.pending),
                                     self.ram.optimize)
            self.layers[self.optimize.name] = self.optimize
        if self.ram.anti_entropy is not None:
            self.anti_entropy = AntiEntropyLayer(rom, oram, self.routing,
                                                 self.ram.anti_entropy)
            self.layers[self.anti_entropy.name] = self.anti_entropy
        routing, exchange = self.routing, self.exchange

        def on_timer(now: float, event: TimerFired) -> list[Effect]:
            if event.timer.startswith(RETRY):
                return exchange.on_timer(now, event.timer)
            return routing.on_timer(now, event.timer)

        dispatch = Dispatch(self.ram, handlers={
            TimerFired: on_timer,
            Start: lambda now, e: routing.on_start(now),
            Corrupt: self._on_corrupt,
            StartExchange: self.exchange.on_start_exchange,
            LinkMeasured: _nothing,  # a round trip is only the optimizer's business
            LinkDown: _nothing,  # a link failure is only the anti-entropy layer's business
            LinkUp: _nothing,
            **self.routing.clients,
            **self.membership.events,
        }, routing=dict(self.routing.receivers),
            coordination=dict.fromkeys(self.exchange.coordination, self.exchange.coordinate),
            notify=self.routing)
        exchanging = Exchanging(self.exchange, self.ram.exchange, dispatch)
        if self.optimize is not None:
            return [Optimizing(self.optimize, exchanging), exchanging, dispatch]
        if self.anti_entropy is not None:
            # As the anti-entropy mode always ran: no exchange stage (its corrections are
            # routing's own subscriptions, and no exchange is known to lock such a broker).
            return [AntiEntropy(self.anti_entropy, self.ram, dispatch), dispatch]
        return [exchanging, dispatch]

    def _coloured(self, rom: Rom) -> Dispatch:
        """The 3-colour scheme: overlay (a tree per colour), routing (a table per colour),
        recolor on top. Routing messages decide by their colour who may send them."""
        oram = ColouredRam(rom.neighbors, rom.parent, rom.is_root)
        self.ram = Ram(oram, RoutingRam(3, False, self.keys), ExchangeRam(), RecolorRam(
            set(oram.trees[0].children)), ColourRoutingRam())
        overlay = ColouredOverlay(rom.broker_id, oram)
        self.overlay = overlay
        assert self.ram.colouring is not None and self.ram.recolor is not None
        routing = self.routing = ColouredRouting(rom, oram, self.ram.routing,
                                                 self.ram.colouring)
        recolor = self.recolor = RecolorLayer(rom, overlay, routing, self.ram.recolor)
        self.layers = {layer.name: layer for layer in (self.overlay, self.routing, self.recolor)}

        def on_timer(now: float, event: TimerFired) -> list[Effect]:
            if event.timer == RECOLOR:
                return recolor.on_timer(now)
            return routing.on_timer(now, event.timer)

        return Dispatch(self.ram, handlers={
            TimerFired: on_timer,
            Start: lambda now, e: [*routing.on_start(now), *recolor.on_start(now)],
            Corrupt: self._on_corrupt,
            LinkMeasured: _nothing,
            LinkDown: _nothing,
            LinkUp: _nothing,
            **self.routing.clients,
            **self.recolor.events,
            **dict.fromkeys((StartExchange, AddNeighbor, RemoveNeighbor, Leave, SetParent),
                            self._not_on_colours),
        }, routing={}, coordination={**self.routing.receivers, **self.recolor.receivers},
            notify=None)

    def _skip_ring(self, rom: Rom) -> Dispatch:
        """Mode skip_ring (seed 003): the topic overlay with its supervisor and publication
        layer instead of the routing tree; the tree's overlay stays for the links only."""
        from weeble.core.overlay.skipring.node import SkipRingNode

        oram = OverlayRam(rom.neighbors, rom.parent)
        self.ram = Ram(oram, RoutingRam(1, False, self.keys), ExchangeRam())
        self.overlay = Overlay(rom.broker_id, oram)
        node = self.skip_ring_node = SkipRingNode(rom)
        self.layers = {"overlay": self.overlay, node.name: node}
        refuse = self._not_on_skip_ring
        return Dispatch(self.ram, handlers={
            Receive: lambda now, e: node.on_receive(now, e.neighbor, e.message),
            TimerFired: lambda now, e: node.on_timer(now, e.timer),
            Start: lambda now, e: node.on_start(now),
            Corrupt: self._on_corrupt,
            ClientSubscribe: node.on_subscribe,
            ClientUnsubscribe: node.on_unsubscribe,
            ClientPublish: node.on_publish,
            LinkDown: _nothing,  # the ring's edges are not the tree's links
            LinkUp: _nothing,
            **dict.fromkeys((ClientAdvertise, ClientUnadvertise, StartExchange, AddNeighbor,
                             RemoveNeighbor, Leave, SetParent), refuse),
        }, routing={}, coordination={}, notify=None)

    def _not_on_skip_ring(self, now: float, event: Any) -> list[Effect]:
        return [Trace("garbage", {"why": f"{type(event).__name__}: not part of the skip_ring "
                                         "mode (topics on a supervised skip ring)"})]

    @property
    def skip_ring(self) -> dict[str, Any] | None:
        """The skip-ring state (mode skip_ring), as in the snapshot; None in the other modes."""
        node = getattr(self, "skip_ring_node", None)
        return None if node is None else node.snapshot()

    def _not_on_colours(self, now: float, event: Any) -> list[Effect]:
        return [Trace("garbage", {"why": f"{type(event).__name__}: the coloured overlay "
                                          "reconfigures through the root (SubmitReconfig)"})]

    # ---- the one entry point ----------------------------------------------------------------

    def step(self, now: float, event: Event) -> list[Effect]:
        if self._exchange_ram.locked:
            return self._top.step(now, event)
        return self._unlocked_top.step(now, event)

    def step_many(self, now: float, events: list[Event],
                  out: list[list[Effect]]) -> list[list[Effect]]:
        """`step` for each event in order at one time `now` (events that arrived together: the
        publications of one request, the notifications of one link batch), each one's effects
        appended to `out` (returned): the same effects, in the same order, as stepping them one
        by one. A run of notifications (ClientPublish, a Notify from a neighbour) that reaches
        routing directly (the static tree without optimizer or anti-entropy layer, no exchange
        locking the broker) goes to `Routing.on_notifies` in one call, without the call chain
        of a step per notification; anything else is stepped. If an event raises, `out` holds
        the effects of the events before it: the one that raised is events[len(out)]."""
        dispatch = self._unlocked_top
        if type(dispatch) is not Dispatch or dispatch.notify is None or not dispatch.direct:
            for event in events:
                out.append(self.step(now, event))
            return out
        routing = dispatch.notify
        xram = self._exchange_ram
        oram = self.ram.overlay
        run: list[tuple[str, Notify]] = []  # notifications for routing, not stepped yet
        for event in events:
            kind = type(event)
            if not xram.locked:
                if kind is Receive:
                    msg = event.message  # type: ignore[union-attr]
                    source = event.neighbor  # type: ignore[union-attr]
                    if type(msg) is Notify and source in oram.neighbors:
                        run.append((source, msg))
                        continue
                elif kind is ClientPublish:
                    run.append((event.client,  # type: ignore[union-attr]
                                Notify(event.notification)))  # type: ignore[union-attr]
                    continue
            if run:
                routing.on_notifies(now, run, out)
                run = []
            out.append(self.step(now, event))
            oram = self.ram.overlay  # a fault may have replaced the slice
        if run:
            routing.on_notifies(now, run, out)
        return out

    def _on_corrupt(self, now: float, event: Corrupt) -> list[Effect]:
        return FAULTS.apply(self, now, event)

    # ---- introspection ----------------------------------------------------------------------

    @property
    def neighbors(self) -> frozenset[str]:
        """The current overlay neighbours (RAM)."""
        return frozenset(self.ram.overlay.neighbors)

    @property
    def parent(self) -> str | None:
        return self.ram.overlay.parent

    @property
    def locked(self) -> bool:
        """Inside a reconfiguration (layer `exchange`)."""
        return self.ram.exchange.locked

    def clock(self, now: float) -> float:
        """The broker's modulo-π clock at `now` (thesis §3.3.1)."""
        pi = self.rom.params.pi
        return min(max(pi - (self.ram.next_timer - now), 0.0), pi)

    def snapshot(self) -> dict[str, Any]:
        """JSON-able view of ROM and RAM, for admin snapshots and legitimacy checks."""
        rom = self.rom
        out: dict[str, Any] = {
            "broker": rom.broker_id,
            "algorithm": rom.algorithm.value,
            "hierarchical": rom.hierarchical,
            "wrapper": rom.wrapper,
            "adverts": rom.adverts,
            "root": rom.root,
        }
        out.update(self.overlay.snapshot())
        if getattr(self, "skip_ring_node", None) is not None:
            out["tables"] = []
            out["mode"] = "skip_ring"
            out["skip_ring"] = self.skip_ring_node.snapshot()
            return out
        out.update(self.routing.snapshot())
        if self.ram.recolor is not None:
            out["overlay"] = self.rom.overlay.value
            out["recolor"] = self.recolor.snapshot()
        else:
            out["exchange"] = self.exchange.snapshot()
        if self.optimize is not None:
            out["optimize"] = self.optimize.snapshot()
        if self.anti_entropy is not None:
            out["mode"] = self.rom.mode.value
            out["anti_entropy"] = self.anti_entropy.snapshot()
        return out

    def pairs(self) -> set[tuple[Filter, str]]:
        """Union over tables of the (filter, destination) pairs."""
        out: set[tuple[Filter, str]] = set()
        for table in self.ram.tables:
            out |= table.pairs()
        return out

    def entries(self) -> Iterable[tuple[int, Any]]:
        for tag, table in enumerate(self.ram.tables):
            for e in table:
                yield tag, e

    def adv_entries(self) -> Iterable[tuple[int, Any]]:
        adverts = self.ram.routing.adverts
        for tag, table in enumerate(adverts.tables if adverts is not None else ()):
            for e in table:
                yield tag, e
