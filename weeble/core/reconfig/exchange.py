"""Layer `exchange`: the advanced coordinated link exchange (thesis 4.4.2, spec ch4 §3).

Exchanging r = (Br1, Br2) for a = (B1, Bn) on the cycle ⟨B1 … Br1, Br2 … Bn⟩: the initiator B1
locks the cycle (A2), starts the exchange at both r-endpoints (Begin, A3), which relay their
r-entries out of band to the a-endpoint of their side and send a separator after them; each
side turns gray from its a-endpoint to its r-endpoint (A4); r goes once both sides are gray,
and unlocks spread from the r-endpoints, acknowledged hop by hop (A6). While a broker is
locked, this layer wraps routing: `receive` is A7 (queue in Qnot/Qsub, relay, colour messages
entering the cycle) and `outgoing` is A8 (black messages never over a, gray ones never over r,
the colour cleared when a message leaves the cycle, messages to myself handled at once).

Fixes of the printed pseudo-code (spec ch4 §3.11), all adopted:
- D1: relayed (un)subscriptions are gray.
- D2: the far side's separator may cross r before Begin arrives: End is sent after the relays.
- D3: an unlock from a cycle neighbour I have not sent one to is answered (no stuck broker).
- D4: every coordination message carries the reconfiguration id; another id means "busy".
- D5: a refused lock resets every variable.
- D6 (our choice): coinciding endpoints (B1 = Br1 or Bn = Br2, the "move a subtree" case, and
  every cycle of length 3) are supported: a broker holds both roles, the a-role's "End not yet
  received" and the r-role's relay target are kept apart, and what a broker relays to itself it
  handles at once, in order.
- D10: a refused initiator retries after a random back-off drawn from the request's seed.
- D13 (ours, found by the tree optimizer, whose decisions can be stale): a refused lock hands
  what B1/Bn queued from over a (a link already, in a stale request) to routing, not to the
  reset;
  `tests/core/test_exchange.py::test_d13_a_refused_lock_hands_what_its_queues_hold_to_routing`.
- D14 (ours, found live with several brokers deciding the same exchange at once): a request
  whose a is a link already is stale (the tree cannot hold both a and the path). Locked, B1
  dropped every black message it routed to its neighbour Bn ("black never over a") until the
  refusal came back from further on; B1 and Bn now refuse it before locking ("path").
  `tests/core/test_exchange.py::test_d14_*`.
- D15 (ours; the thesis's note on advertisements, L5595-5603, has no pseudo-code): with
  advertisements, the subscriptions that crossed r towards the far side's advertisements follow
  them along my side of the cycle once the relayed advertisements have passed (`_follow`), and
  the a-endpoints hold Qnot until the whole cycle is gray.
Ours, beyond the thesis (each found by the simulation tests, tests/core/test_exchange.py):
- D12 case, FIFO-producer order: a subscription Br2 forwarded along its side before Begin, and
  its unsubscription relayed out of band after Begin, reach Bn in the wrong order (the relay
  overtakes). The a-endpoint holds relayed client (un)subscriptions (Qrel) until End is in and
  every cycle broker is known gray, then handles them before Qsub (`Options.hold_relays`).
- The routes Begin re-issues, and their withdrawal at the r-endpoints, stay on the cycle
  (`Reroute`): as ordinary (un)subscriptions they reached brokers off the cycle and withdrew
  routes those still needed. SC-1 is per destination (RoutingTable.refresh), so a re-issued
  route never takes the old one away while black traffic still needs it.
- A bounced lock says why (busy: retry; path: give up, the manager must re-plan), and the
  unlock wave carries `flip` so the parent pointers follow the new tree.

Preconditions (thesis L4336-4346, checked at the request): simple, identity or covering routing
(flooding works too: it has no remote entries), peer-to-peer, leasing (not the wrapper).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from weeble.core.events import Effect, Send, SetTimer, StartExchange, Trace, from_neighbour
from weeble.core.messages import (
    CONTROL,
    Adv,
    Begin,
    Bye,
    End,
    Lock,
    Notify,
    Relayed,
    Reroute,
    Separator,
    Sub,
    Unadv,
    Unlock,
)
from weeble.core.overlay import Overlay
from weeble.core.reconfig.membership import Membership
from weeble.core.rom import Ordering, Rom
from weeble.core.routing.layer import Routing

RETRY = "xchg:"  # timer name prefix: xchg:<rid>, the initiator's retry after a back-off
LEFT, RIGHT = "left", "right"
# the cycle pointers of ExchangeRam (the fault target exchange.pointer names one)
POINTERS = ("left", "right", "new", "old", "relay_to", "awaiting_end")


class Request:
    """An exchange this broker initiates (B1): kept until it succeeds or is given up."""

    __slots__ = ("attempts", "path", "remove", "seed")

    def __init__(self, path: tuple[str, ...], remove: tuple[str, str], seed: int) -> None:
        self.path = path
        self.remove = remove
        self.seed = seed
        self.attempts = 0

    def as_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "remove": list(self.remove), "attempts": self.attempts}


class ExchangeRam:
    """The exchange's slice of RAM (Table 4.1 and spec ch4 §3.5). Every field may be corrupted."""

    __slots__ = (
        "awaiting_end", "begin_done", "edge", "flip", "follow", "gray", "gray_set", "left",
        "links",
        "locked", "new", "old", "path", "pending", "qnot", "qrel", "qsub", "queue_set", "relay_to",
        "relaying", "rid", "right", "side", "since", "unlock_sent", "unlock_started",
    )

    def __init__(self) -> None:
        self.pending: dict[str, Request] = {}  # exchanges I initiate, by rid
        self.clear()

    def clear(self) -> None:
        """Not part of any reconfiguration (I6): unlocked, black, pointers ⊥, queues empty."""
        self.locked = False
        self.rid: str | None = None
        self.path: tuple[str, ...] = ()
        self.edge: tuple[str, str] | None = None
        self.left: str | None = None  # Bleft, Bright: ⊥ once an unlock came from there
        self.right: str | None = None
        self.new: str | None = None  # Bnew (a-endpoints): ⊥ once an unlock went over a
        self.old: str | None = None  # Bold (r-endpoints): ⊥ once r is dropped
        self.relay_to: str | None = None  # r-role Brelay: ⊥ once End is sent
        self.awaiting_end: str | None = None  # a-role Brelay: ⊥ once End is received
        self.links: tuple[str, ...] = ()  # my cycle neighbours along my side (not a, not r)
        self.gray_set: set[str] = set()  # Bgray
        self.queue_set: set[str] = set()  # Bqueue
        self.relaying = False
        self.begin_done = False  # fix D2
        self.gray = False  # my colour: black (False) or gray (True)
        self.side: str | None = None
        self.qnot: deque[tuple[str, Notify, float]] = deque()  # (sender, message, since)
        self.qsub: deque[tuple[str, Any]] = deque()
        self.qrel: deque[tuple[str, Any]] = deque()  # relayed client (un)subscriptions held
        self.unlock_started = False
        self.unlock_sent: set[str] = set()
        self.flip = False
        self.since = 0.0
        # advertisements the exchange re-routed to me, (from, adv id) -> filter: once the
        # routes relayed from there have passed, my subscriptions follow them (D15)
        self.follow: dict[tuple[str, str], Any] = {}

    def snapshot(self) -> dict[str, Any]:
        return {
            "locked": self.locked, "rid": self.rid, "path": list(self.path),
            "edge": list(self.edge) if self.edge else None,
            **{p: getattr(self, p) for p in POINTERS},
            "gray": self.gray, "side": self.side, "relaying": self.relaying,
            "gray_set": sorted(self.gray_set), "queue_set": sorted(self.queue_set),
            "qnot": len(self.qnot), "qsub": len(self.qsub), "qrel": len(self.qrel),
            "pending": {rid: r.as_dict() for rid, r in sorted(self.pending.items())},
        }


def supported(rom: Rom) -> str | None:
    """Why this configuration cannot run the coordinated exchange, or None if it can."""
    if rom.algorithm.merging:
        return ("merging-based routing does not keep the cycle's tables exact under relaying "
                "(thesis L4336-4346); use simple, identity or covering routing")
    if rom.hierarchical:
        return "the coordinated exchange routes subscriptions peer-to-peer; hierarchical is not"
    if rom.wrapper:
        return "the coordinated exchange runs on leased tables, not under the rebuild wrapper"
    return None


class Exchange:
    name = "exchange"

    def __init__(self, rom: Rom, overlay: Overlay, routing: Routing, membership: Membership,
                 ram: ExchangeRam) -> None:
        self.rom = rom
        self.me = rom.broker_id
        self.overlay = overlay
        self.routing = routing
        self.membership = membership
        self.ram = ram
        self.ordering = rom.ordering
        self.options = rom.options
        params = rom.params
        self.backoff = rom.options.backoff
        if self.backoff is None:
            self.backoff = max(4 * params.d * params.delta_max, params.delta_max)
        self.coordination: dict[type, Callable[[float, str, Any], list[Effect]]] = {
            Lock: self.on_lock,
            Begin: self.on_begin,
            Relayed: self.on_relayed,
            Reroute: self.on_reroute,
            Separator: self.on_separator,
            End: self.on_end,
            Unlock: self.on_unlock,
            Bye: self.membership.on_bye,
        }
        self._local: deque[Any] = deque()  # what I relayed to myself, in order (fix D6)

    # ---- entry points -----------------------------------------------------------------------

    def on_start_exchange(self, now: float, event: StartExchange) -> list[Effect]:
        why = supported(self.rom) or _invalid(self.me, event.path, event.remove)
        if why is not None or event.rid in self.ram.pending:
            why = why or f"reconfiguration {event.rid!r} is already under way here"
            return [_trace(event.rid, "refused", why=why)]
        path, remove = tuple(event.path), tuple(event.remove)
        if path.index(remove[0]) > path.index(remove[1]):
            remove = (remove[1], remove[0])  # (Br1, Br2) in path order
        self.ram.pending[event.rid] = Request(path, remove, event.seed)  # type: ignore[arg-type]
        effects: list[Effect] = [_trace(event.rid, "request", path=list(path),
                                        remove=list(remove))]
        effects.extend(self._try(now, event.rid))
        return self._settle(now, effects)

    def on_timer(self, now: float, timer: str) -> list[Effect]:
        rid = timer[len(RETRY):]
        if rid not in self.ram.pending:
            return []
        return self._settle(now, self._try(now, rid))

    def receive(self, now: float, sender: str, msg: Any) -> list[Effect]:
        """A7 at a locked broker (the broker calls it for every message while locked)."""
        return self._settle(now, self._receive(now, sender, msg))

    def coordinate(self, now: float, sender: str, msg: Any) -> list[Effect]:
        """A coordination message at an unlocked broker."""
        return self._settle(now, self.coordination[type(msg)](now, sender, msg))

    def outgoing(self, now: float, effects: list[Effect]) -> list[Effect]:
        """A8 for what a client request, a timer or a manager's request at a locked broker
        produced: messages born here take my colour."""
        return self._settle(now, self._colour(effects, self.ram.gray, None))

    # ---- A7: receiveMsg ---------------------------------------------------------------------

    def _receive(self, now: float, sender: str, msg: Any) -> list[Effect]:
        kind = type(msg)
        handler = self.coordination.get(kind)
        if handler is not None:
            return handler(now, sender, msg)
        if kind not in self.routing.receivers:
            return [Trace("garbage", {"from": sender, "why": f"unexpected {kind.__name__}"})]
        return from_neighbour(self.overlay.ram.neighbors, self._from_neighbour, now, sender, msg)

    def _from_neighbour(self, now: float, sender: str, msg: Any) -> list[Effect]:
        """A7.3-17: a routing message from a neighbour."""
        kind = type(msg)
        x = self.ram
        control = kind in CONTROL
        if sender == x.new and sender is not None:
            if kind is Notify and x.queue_set and self.options.qnot:
                x.qnot.append((sender, msg, now))  # A7.3-4 (R6/R7)
                return []
            if control and not _released(x) and self.options.qsub:
                x.qsub.append((sender, msg))  # A7.5-6 (R5)
                return []
        if control and sender == x.old and sender is not None and x.relaying:
            # A7.7-9 with fix D1: what arrives over r while relaying goes out of band, gray
            assert x.relay_to is not None and x.rid is not None
            return [Send(x.relay_to, Relayed(x.rid, _coloured(msg, True)))]
        # A7.10-17: a message entering the cycle here takes my colour; one from a cycle
        # neighbour keeps its own
        gray = x.gray if sender != x.left and sender != x.right else msg.gray
        return self._routed(now, sender, msg, gray)

    def _routed(self, now: float, sender: str, msg: Any, gray: bool) -> list[Effect]:
        """handleMsg: the routing layer handles it; what it sends inherits the colour."""
        effects = self.routing.receivers_locked[type(msg)](now, sender, msg)
        return self._colour(effects, gray, msg)

    # ---- A8: sendMsg ------------------------------------------------------------------------

    def _colour(self, effects: list[Effect], gray: bool, handled: Any) -> list[Effect]:
        """Colour and filter routing messages on their way out (A8.3-6).

        A forwarded copy of the handled message inherits its colour; what the routing
        algorithm generates on its own account (an uncovered subscription re-forwarded, an
        heir's refresh) is born here and takes my colour.
        """
        x = self.ram
        if not x.locked:
            return effects
        cycle = (self.me, x.left, x.right, x.new, x.old, x.relay_to, x.awaiting_end)
        out: list[Effect] = []
        for e in effects:
            if type(e) is not Send:
                out.append(e)
                continue
            m: Any = e.message  # Notify or a CONTROL message: both carry gray
            kind = type(m)
            if kind is not Notify and kind not in CONTROL:
                out.append(e)  # switch, coordination: exempt
                continue
            c = gray if _same(m, handled) else x.gray
            to = e.neighbor
            if (to == x.new and not c) or (to == x.old and c):
                continue  # R1/R4: black never over a, gray never over r
            if to not in cycle:
                c = False  # leaving the cycle
            if m.gray != c:
                e = Send(to, _coloured(m, c))
            out.append(e)
        return out

    def _settle(self, now: float, effects: list[Effect]) -> list[Effect]:
        """Messages to myself (a broker in both roles, fix D6) are handled at once, in order."""
        if not any(type(e) is Send and e.neighbor == self.me for e in effects):
            return effects
        out: list[Effect] = []
        local = self._local
        for e in effects:
            if type(e) is Send and e.neighbor == self.me:
                local.append(e.message)
            else:
                out.append(e)
        while local:
            out.extend(self._unsettled(now, local.popleft()))
        return out

    def _unsettled(self, now: float, msg: Any) -> list[Effect]:
        effects = self._receive(now, self.me, msg)
        out: list[Effect] = []
        for e in effects:
            if type(e) is Send and e.neighbor == self.me:
                self._local.append(e.message)
            else:
                out.append(e)
        return out

    # ---- A2: lock ---------------------------------------------------------------------------

    def _try(self, now: float, rid: str) -> list[Effect]:
        req = self.ram.pending[rid]
        req.attempts += 1
        return self.on_lock(now, self.me, Lock(rid, req.path, req.remove))

    def on_lock(self, now: float, sender: str, ml: Lock) -> list[Effect]:
        x, me = self.ram, self.me
        path = ml.path
        if not x.locked:
            if me not in path or ml.edge[0] not in path or ml.edge[1] not in path:
                return [Trace("garbage", {"from": sender, "why": "lock for a cycle without me"})]
            if sender != me and sender not in path:
                return [Trace("garbage", {"from": sender, "why": "lock from outside the cycle"})]
            i, n = path.index(me), len(path)
            right = path[i + 1] if i < n - 1 else path[0]
            if (i == 0 or i == n - 1) and (path[-1] if i == 0 else path[0]) in (
                    self.overlay.ram.neighbors):
                # D14 (ours): a is a link already, so the path is no tree path any more (the
                # tree cannot hold both): a stale request. Locked, B1 would drop black
                # messages for its neighbour Bn as "black never over a" until the refusal came
                # back from further on: refuse before locking.
                return self._refuse(now, sender, ml, "path", stale=True)
            if i == n - 1:
                self.overlay.add(path[0])  # A2.6: a becomes usable at Bn
                self.routing.adopt(path[0])
            if right not in self.overlay.ram.neighbors:  # A2.23-25: the path changed meanwhile
                return self._refuse(now, sender, ml, "path")
            self._lock(now, ml, i)
            return [Send(right, ml), _trace(ml.rid, "lock")]
        if ml.rid != x.rid:  # A2.38-39 with fix D4: another reconfiguration holds me
            return self._refuse(now, sender, ml, "busy")
        if sender == x.left and me == path[0]:  # A2.28-32: the lock came round over a
            assert x.new is not None and x.edge is not None
            self.overlay.add(x.new)  # A2.29: from now on r and a are both links
            self.routing.adopt(x.new)
            return [Send(x.edge[0], Begin(x.rid)), Send(x.edge[1], Begin(x.rid)),
                    _trace(ml.rid, "locked", path=list(path))]
        if sender == x.right:  # A2.33-37 with fix D5: refused further on; pass it back, reset
            why = ml.refused or "busy"
            effects: list[Effect] = [] if me == path[0] else [Send(x.left, ml)]  # type: ignore[arg-type]
            # Ours (D13): while locked, B1 and Bn queue what comes over a; a is a link already
            # when a stale request adds one that exists (the tree changed since it was planned).
            # The exchange never began, so the queued messages are ordinary ones: handle them
            # (routing updates first) instead of dropping them with the reset.
            queued = [*x.qsub, *x.qrel, *((s, m) for s, m, _ in x.qnot)]
            x.clear()
            for s, m in queued:
                effects.extend(self.routing.receivers[type(m)](now, s, m))
            effects.append(_trace(ml.rid, "lock_released", why=why))
            if me == path[0]:
                effects.extend(self._failed(now, ml.rid, why))
            return effects
        return [Trace("garbage", {"from": sender, "why": f"lock {ml.rid!r} from off my cycle"})]

    def _refuse(self, now: float, sender: str, ml: Lock, why: str, stale: bool = False
                ) -> list[Effect]:
        if sender == self.me:  # my own request: nobody to bounce it to
            return self._failed(now, ml.rid, why, stale=stale)
        return [Send(sender, Lock(ml.rid, ml.path, ml.edge, refused=why)),
                _trace(ml.rid, "lock_refused", why=why)]

    def _failed(self, now: float, rid: str, why: str, stale: bool = False) -> list[Effect]:
        """The initiator's lock was refused: retry after a random back-off (D10), unless the
        path is no longer the tree path (the manager must plan again)."""
        req = self.ram.pending.get(rid)
        if req is None:
            return []
        if why == "path":
            del self.ram.pending[rid]
            text = ("the new link is a link already (the tree changed since the request)"
                    if stale else "the cycle path is no longer a tree path")
            return [_trace(rid, "failed", why=text)]
        rng = random.Random(f"{req.seed}:{rid}:{req.attempts}")
        at = now + rng.uniform(0, self.backoff)  # type: ignore[arg-type]
        return [SetTimer(RETRY + rid, at), _trace(rid, "retry", attempt=req.attempts, at=at)]

    def _lock(self, now: float, ml: Lock, i: int) -> None:
        """A2.3-22: accept the lock; set the role pointers of Table 4.1."""
        x, me, path = self.ram, self.me, ml.path
        n = len(path)
        r1, r2 = ml.edge
        k = path.index(r1)
        x.clear()
        x.locked, x.rid, x.path, x.edge, x.since = True, ml.rid, path, (r1, r2), now
        x.left = path[i - 1] if i > 0 else path[-1]
        x.right = path[i + 1] if i < n - 1 else path[0]
        if i == 0:  # B1
            x.new, x.awaiting_end = path[-1], r1
        elif i == n - 1:  # Bn
            x.new, x.awaiting_end = path[0], r2
        if me == r1:
            x.old, x.relay_to = r2, path[0]
        elif me == r2:
            x.old, x.relay_to = r1, path[-1]
        x.links = tuple(b for b in (x.left, x.right) if b != x.new and b != x.old)
        x.side = LEFT if i <= k else RIGHT
        if x.new is not None:
            if self.routing.adverts is not None:  # D15: the routes my side follows with
                x.queue_set = set(path)
            elif self.ordering is Ordering.FIFO:
                x.queue_set = set(path[k + 1:]) if i == 0 else set(path[:k + 1])
            elif self.ordering is Ordering.CAUSAL:
                x.queue_set = set(path)

    # ---- A3: begin --------------------------------------------------------------------------

    def on_begin(self, now: float, sender: str, mb: Begin) -> list[Effect]:
        x = self.ram
        if not x.locked or mb.rid != x.rid or x.old is None or x.begin_done:
            return [Trace("garbage", {"from": sender, "why": f"begin {mb.rid!r} not for me"})]
        assert x.relay_to is not None
        x.relaying = True
        effects: list[Effect] = []
        # a snapshot of the routes across r, advertisements first (spec ch4 §3.10)
        for scheme in self.routing.schemes():
            for table in scheme.ram.tables:
                for e in list(table):
                    if e.dest == x.old:
                        cls = Adv if scheme is self.routing.adverts else Sub
                        msg = cls(e.sub_id, e.filter, 0, True)
                        lease = self.routing.lease(now, e)  # the copy keeps it (ours)
                        effects.append(Send(x.relay_to, Relayed(mb.rid, msg, reroute=True,
                                                                lease=lease)))
        relayed = len(effects)
        effects.append(Send(x.relay_to, Separator(mb.rid, frozenset(), relayed=True)))
        x.begin_done = True
        effects.append(_trace(mb.rid, "begin", relayed=relayed))
        if x.old in x.gray_set:  # A3.14-18: the far side finished first (fix D2)
            effects.extend(self._end(x))
        return effects

    def _end(self, x: ExchangeRam) -> list[Effect]:
        assert x.relay_to is not None and x.rid is not None
        to = x.relay_to
        x.relay_to = None
        x.relaying = False
        return [Send(to, End(x.rid))]

    def on_relayed(self, now: float, sender: str, mr: Relayed) -> list[Effect]:
        """A7 step 4: a relayed (un)subscription is handled as if it came over a."""
        x = self.ram
        if not x.locked or mr.rid != x.rid or x.new is None or sender != x.awaiting_end:
            return [Trace("garbage", {"from": sender, "why": f"relay {mr.rid!r} not for me"})]
        if mr.reroute:
            effects = self._rerouted(now, x.new, mr.message, True)
            if mr.lease is not None:
                self.routing.keep_lease(now, x.new, mr.message, mr.lease)
            return effects
        if self.options.hold_relays and not _released(x):
            x.qrel.append((x.new, mr.message))
            return []
        return self._routed(now, x.new, mr.message, True)

    def _release(self, now: float) -> list[Effect]:
        """An a-endpoint handles what it held back, relayed first, then what came over a, once
        End is in (nothing more will be relayed) and every cycle broker is known gray (the old
        (un)subscriptions Br sent along my side before Begin, and Br's withdrawal of the routes
        across r, have arrived before the separators that told me so)."""
        x = self.ram
        if x.new is None or not _released(x):
            return []
        return self._drain(now, x.qrel) + self._drain(now, x.qsub)

    def on_reroute(self, now: float, sender: str, mr: Reroute) -> list[Effect]:
        x = self.ram
        if not x.locked or mr.rid != x.rid or sender not in (x.left, x.right):
            return [Trace("garbage", {"from": sender, "why": f"reroute {mr.rid!r} not for me"})]
        return self._rerouted(now, sender, mr.message, mr.message.gray)

    def _rerouted(self, now: float, sender: str, msg: Any, gray: bool) -> list[Effect]:
        """Handle a routing update of the exchange; what it sets off stays on the cycle."""
        effects = self.routing.receivers_locked[type(msg)](now, sender, msg)
        if type(msg) is Adv:
            self.ram.follow[sender, msg.adv_id] = msg.filter
            if self.ram.gray:
                effects.extend(self._follow(sender))
        return self._confine(effects, gray)

    def _follow(self, source: str) -> list[Effect]:
        """D15 (ours; the thesis's note on advertisements, L5595-5603, has no pseudo-code):
        subscriptions that went over r towards the far side's advertisements must now reach
        them through a, along my side of the cycle, where they never went. When my own
        separator arrives from the a side, every advertisement and route relayed from there has
        passed (FIFO): send that way what I hold for other destinations overlapping those
        advertisements — not the far side's own subscriptions (re-issued from there already,
        or old routes across r), gray, on the cycle only. They pass on to the a-endpoint ahead
        of the separator bouncing back, which is why an a-endpoint holds Qnot until its own side
        is gray too when advertisements route."""
        x = self.ram
        held = {e.sub_id for plane in self.routing.subs.planes for e in plane.table
                if e.dest == source or e.dest == x.old}
        exclude = frozenset(held)
        effects: list[Effect] = []
        for (frm, _), f in sorted(x.follow.items(), key=lambda kv: kv[0]):
            if frm == source:
                effects.extend(self.routing.follow(source, f, exclude))
        return effects

    def _confine(self, effects: list[Effect], gray: bool) -> list[Effect]:
        """Routing messages go on along my side of the cycle as Reroute, in this colour, and
        nowhere else: these updates are about the new tree, so never over r (a covered
        subscription a withdrawal uncovers included), and black ones never over a."""
        x = self.ram
        assert x.rid is not None
        out: list[Effect] = []
        for e in effects:
            if type(e) is not Send or type(e.message) not in CONTROL:
                out.append(e)
                continue
            to = e.neighbor
            if to not in (x.left, x.right) or to == x.old or (to == x.new and not gray):
                continue
            out.append(Send(to, Reroute(x.rid, _coloured(e.message, gray))))
        return out

    # ---- A4: separator ----------------------------------------------------------------------

    def on_separator(self, now: float, sender: str, ms: Separator) -> list[Effect]:
        x, me = self.ram, self.me
        if not x.locked or ms.rid != x.rid:
            return [Trace("garbage", {"from": sender, "why": f"separator {ms.rid!r} not for me"})]
        if ms.relayed:
            if sender != x.awaiting_end or x.new is None:
                return [Trace("garbage", {"from": sender, "why": "relayed separator not for me"})]
            sender = x.new  # A7 step 4: it "arrived over a"
        rid = ms.rid
        onward = x.left if sender == x.right else x.right  # A4.4: keep going the way it came
        own = (sender == x.new and ms.relayed) or (sender == x.left and x.side == LEFT) or (
            sender == x.right and x.side == RIGHT)
        brokers = ms.brokers
        effects: list[Effect] = []
        out: list[tuple[str | None, frozenset[str]]] = []
        if own:
            if not x.gray:
                x.gray = True  # A4.8
                effects.append(_trace(rid, "gray"))
                if x.follow:
                    effects.extend(self._confine(self._follow(sender), True))
            brokers = brokers | {me}
        out.append((onward, brokers))
        if own and x.old is not None and sender != x.old:
            out.append((sender, brokers))  # A4.9-11: a bounce copy back along my side
        x.gray_set |= brokers  # A4.14
        x.queue_set -= brokers
        if x.new is not None and not x.queue_set and x.qnot:  # A4.15-19
            effects.extend(self._release_qnot(now))
        effects.extend(self._release(now))
        if x.old is not None:  # A4.20
            if sender == x.old:  # the far side's separator crossed r (fix D2)
                if x.begin_done and x.relay_to is not None:
                    effects.extend(self._end(x))
            elif own:  # A4.24-30: withdraw the routes across r
                effects.extend(self._withdraw_old(now))
            if me in x.gray_set and x.old in x.gray_set:  # A4.32-40: both sides all gray
                effects.extend(self._separators(rid, out))
                out = []
                effects.extend(self._unlock(now, x.old, Unlock(rid), trigger=True))
                old = x.old
                x.old = None
                self.overlay.remove(old)  # r is gone (A4.38)
                effects.append(_trace(rid, "r_removed", link=[me, old]))
        effects.extend(self._separators(rid, out))
        return effects

    def _separators(self, rid: str, out: list[tuple[str | None, frozenset[str]]]) -> list[Effect]:
        x = self.ram
        # A4.5: never over a (the a-endpoint was the first to see this separator)
        return [Send(to, Separator(rid, brokers)) for to, brokers in out
                if to is not None and to != x.new]

    def _withdraw_old(self, now: float) -> list[Effect]:
        """handleMsg(Bold, unsubscription) for every route across r: black, off a, on the cycle
        only (A4.24-30); subscriptions before advertisements, so that the unsubscriptions still
        find their way."""
        x = self.ram
        old = x.old
        effects: list[Effect] = []
        for scheme in reversed(self.routing.schemes()):  # subs first, then adverts
            held = sorted({(e.sub_id, e.filter) for t in scheme.ram.tables for e in t
                           if e.dest == old}, key=lambda p: (p[0], str(p[1])))
            for sub_id, f in held:
                raw = scheme.unsubscribe(old, sub_id, f, remote=True)  # type: ignore[arg-type]
                effects.extend(self._confine(raw, False))
        return effects

    def _release_qnot(self, now: float) -> list[Effect]:
        """Qnot drains in FIFO order; the trace says how long its notifications waited (the
        delay ordering costs, thesis Fig. 4.16)."""
        x = self.ram
        waited = sum(now - since for _, _, since in x.qnot)
        count = len(x.qnot)
        effects = self._drain(now, deque((sender, msg) for sender, msg, _ in x.qnot))
        x.qnot.clear()
        if x.rid is not None:
            effects.append(_trace(x.rid, "released", count=count, waited=waited))
        return effects

    def _drain(self, now: float, queue: deque[tuple[str, Any]]) -> list[Effect]:
        effects: list[Effect] = []
        while queue:
            sender, msg = queue.popleft()
            effects.extend(self._routed(now, sender, msg, msg.gray))
        return effects

    # ---- A5: end ----------------------------------------------------------------------------

    def on_end(self, now: float, sender: str, me_: End) -> list[Effect]:
        x = self.ram
        if not x.locked or me_.rid != x.rid or sender != x.awaiting_end:
            return [Trace("garbage", {"from": sender, "why": f"end {me_.rid!r} not for me"})]
        x.awaiting_end = None  # A5.3
        effects = self._release(now)  # A5.4-7: R5
        effects.append(_trace(me_.rid, "end"))
        if x.unlock_started:  # A5.8-11: my side already released, a was waiting for End
            effects.extend(self._unlock_sends(me_.rid))
            effects.extend(self._maybe_done(now))
        return effects

    # ---- A6: unlock -------------------------------------------------------------------------

    def on_unlock(self, now: float, sender: str, mk: Unlock) -> list[Effect]:
        x = self.ram
        if not x.locked or mk.rid != x.rid:
            return [Trace("garbage", {"from": sender, "why": f"unlock {mk.rid!r} not for me"})]
        return self._unlock(now, sender, mk, trigger=False)

    def _unlock(self, now: float, sender: str, mk: Unlock, trigger: bool) -> list[Effect]:
        x = self.ram
        assert x.rid is not None
        if (trigger or sender in x.links) and not x.unlock_started:
            x.unlock_started = True
            x.flip = (self.overlay.ram.parent == sender) if trigger else mk.flip
            if x.flip:  # my side now reaches the root through a: parent towards a
                towards_a = [b for b in x.links if b != sender]
                self.overlay.set_parent(towards_a[0] if towards_a else x.new)
        if sender == x.left:  # A6.12-13
            x.left = None
        if sender == x.right:
            x.right = None
        effects = self._unlock_sends(x.rid) if x.unlock_started else []
        effects.extend(self._maybe_done(now))
        return effects

    def _unlock_sends(self, rid: str) -> list[Effect]:
        """Forward along my side and answer back (fix D3); over a only after End (A6.11)."""
        x = self.ram
        effects: list[Effect] = []
        for b in x.links:
            if b not in x.unlock_sent:
                x.unlock_sent.add(b)
                effects.append(Send(b, Unlock(rid, x.flip)))
        if x.new is not None and x.awaiting_end is None:
            effects.append(Send(x.new, Unlock(rid, x.flip)))
            effects.append(_trace(rid, "a_released", link=[self.me, x.new]))
            x.new = None  # A6.14
        if x.new is None:
            x.gray = False  # A6.15
        return effects

    def _maybe_done(self, now: float) -> list[Effect]:
        x = self.ram
        if not x.locked or x.left is not None or x.right is not None or x.new is not None:
            return []
        if not x.unlock_started:
            return []
        rid = x.rid
        assert rid is not None
        leftovers: list[Effect] = []
        if x.qnot or x.qsub or x.qrel:  # not fault-free (I6); a corrupted queue is not lost
            leftovers = self._drain(now, x.qrel) + self._drain(now, x.qsub) + self._release_qnot(
                now)
        initiator = x.path[0] == self.me
        x.clear()  # A6.16-19
        effects = [*leftovers, _trace(rid, "unlocked")]
        if initiator and self.ram.pending.pop(rid, None) is not None:
            effects.append(_trace(rid, "done"))
        return effects

    # ---- introspection ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return self.ram.snapshot()


# ---- helpers --------------------------------------------------------------------------------

def _released(x: ExchangeRam) -> bool:
    """Qsub and Qrel may drain: End is in and every broker of the cycle is known gray."""
    return x.awaiting_end is None and x.gray_set.issuperset(x.path)


def _same(m: Any, handled: Any) -> bool:
    """Is `m` a forwarded copy of the message being handled (not one generated here)?"""
    if handled is None:
        return False
    if type(m) is Notify:
        return type(handled) is Notify and m.notification is handled.notification
    if type(m) is not type(handled):
        return False
    ident = m.adv_id if type(m) in (Adv, Unadv) else m.sub_id
    other = handled.adv_id if type(handled) in (Adv, Unadv) else handled.sub_id
    return ident == other and m.filter == handled.filter


def _coloured(m: Any, gray: bool) -> Any:
    if type(m) is Notify:
        return Notify(m.notification, gray)
    return type(m)(getattr(m, "adv_id" if type(m) in (Adv, Unadv) else "sub_id"), m.filter,
                   m.tag, gray)


def _invalid(me: str, path: tuple[str, ...], remove: tuple[str, str]) -> str | None:
    path = tuple(path)
    if len(path) < 3:
        return f"path: a cycle needs at least 3 brokers, got {list(path)}"
    if len(set(path)) != len(path):
        return f"path: brokers repeat in {list(path)}"
    if path[0] != me:
        return f"path: must start at the initiator {me!r}, got {list(path)}"
    if len(remove) != 2 or remove[0] not in path or remove[1] not in path:
        return f"remove: {list(remove)} is not a link of the path {list(path)}"
    if abs(path.index(remove[0]) - path.index(remove[1])) != 1:
        return f"remove: {list(remove)} is not a link of the path {list(path)}"
    return None


def _trace(rid: str, phase: str, **fields: Any) -> Trace:
    return Trace("reconfig", {"rid": rid, "phase": phase, **fields})


