"""Layer `recolor`: the recolor protocol of the 3-colour scheme (thesis 4.5, Algorithms 9-15,
L6104-6313; seed 001; spec ch4 §5.4-5.8).

The root R recolors the tree every ξ (A9): it rotates its colours, prepares C^{c_new} from
C^{c_cur} with P^{c_new} = null and T^{c_new} = init, writes the pending reconfigurations into its
c_new pointers and sends RECmsg(c_new, reconfigurations) to the children of its c_cur tree that
acknowledged the previous one (A12); the others are dropped. A broker accepts a recolor only from
P^{c_new} (A10), and, as in the paper (L137-141), only if m.c differs from its c_new; it ACKs,
rotates, copies its c_cur pointers into c_new (T^{c_new} = init), applies the parts of the
reconfigurations that concern it to its c_new pointers and forwards the recolor over its c_cur
tree (the previous round's c_new: a reconfiguration is written in one round and used after the
next). A broker that hears no accepted recolor for ξ′ (A13) has lost its tree (partition, a
corrupted parent, a cycle): it walks from R down the c_new tree (A14/A15: askForPlaceOrPointer
with the degree bound b) and asks R to attach it where the walk ends, as a reconfiguration.

Choices (spec ch4 §5.4, §5.12, E1-E4; each a `Colours` switch for its ablation test):
- ξ′ = ξ + h·δmax (the paper's, L150; the thesis's Eq. 4.1 is ξ + h(δmax − δmin)): the thesis
  bound is the largest gap between two recolors at one broker only once both are under way;
  a broker that booted (or joined) after R's round started meets a longer first gap, and the
  thesis's own stabilization analysis (L6595) uses ξ + h·δmax. With δmin = 0 the two agree.
- Recolor acceptance: sender = P^{c_new} and m.c ≠ c_new (the paper's second check): without
  it a bogus recolor circles a consistent pointer cycle for ever and its brokers never time out.
- E1: a child inserted by a reconfiguration or a join is flagged (else A12 drops it at once);
  the children a broker boots with are flagged too.
- E2: a child that did not ACK leaves every colour's child set, not only C^{c_cur}.
- E3: a broker whose join request is on its way waits 2ξ + ξ′ (until the join can be active)
  before it tries again, and R keeps only the latest pending join of a broker.
- E4: control messages coloured with the receiver's c_old wait for its next recolor
  (routing/colours.py).
- "Connect to tryParent" (A14.22, unspecified): the joiner points all its colours' parent
  pointers at tryParent and sends R the reconfiguration (joiner, tryParent); it is active two
  recolors later like any other. A joining broker (also every broker but R at boot) accepts
  its first recolor from P^{c_new} whatever its colour and takes its colours from it.
- Parallel requests (4.5.5): R bundles requests that touch disjoint brokers into one recolor and
  serialises the rest (a later round); a request that moves R is refused.
- A leaf removed by a reconfiguration leaves when its timer runs out (a `leave` record: the
  manager stops it) instead of rejoining at once. `leaving` is RAM (the thesis has no such flag:
  its RemoveLeaf is the administrator's), so it must not stop a broker for good: an accepted
  recolor clears it (a broker whose removal was disseminated has P^{c_new} = null and accepts no
  later recolor, so an accepted one without its removal proves the flag corrupt), and a broker
  that left but still runs a linger E3's join wait later joins again. Found: with the flag
  corrupted at a broker that a later fault cut off, it left and never came back (the colour
  property example seed 1659 under one event order).
"""

from __future__ import annotations

import random
from typing import Any

from weeble.core.events import (
    Effect,
    Handler,
    Receiver,
    Send,
    SetTimer,
    SubmitReconfig,
    Trace,
)
from weeble.core.messages import (
    AskPlace,
    Move,
    Place,
    Recolor,
    RecolorAck,
    Reconfigure,
)
from weeble.core.overlay.coloured import COLOURS, ColouredOverlay, colour
from weeble.core.rom import Rom
from weeble.core.routing.colours import ColouredRouting

RECOLOR = "recolor"  # the one timer of A9: R's period ξ, everyone else's timeout ξ′


class Request:
    __slots__ = ("moves", "rid")

    def __init__(self, rid: str, moves: tuple[Move, ...]) -> None:
        self.rid = rid
        self.moves = moves


class RecolorRam:
    """The recolor layer's slice of RAM (the colours and pointers are the overlay's)."""

    __slots__ = ("carried", "flags", "joins", "leaving", "pending", "round", "walk")

    def __init__(self, children: set[str]) -> None:
        self.flags: set[str] = set(children)  # A11: children that ACKed the last recolor (E1)
        self.pending: list[Request] = []  # R: the set R of requests for the next recolor
        self.carried: tuple[str, ...] = ()  # R: request ids the last recolor carried
        self.round = 0  # R: recolors sent (trace only)
        self.walk: str | None = None  # joinTree: the broker asked last (tryParent)
        self.joins = 0  # joinTree: walks made (request ids, the walk's random choices)
        self.leaving = False  # removed by a reconfiguration: stop instead of rejoining


class RecolorLayer:
    name = "recolor"

    def __init__(self, rom: Rom, overlay: ColouredOverlay, routing: ColouredRouting,
                 ram: RecolorRam) -> None:
        self.rom = rom
        self.me = rom.broker_id
        self.overlay = overlay
        self.oram = overlay.ram
        self.routing = routing
        self.ram = ram
        cp = rom.colours
        self.cp = cp
        self.xi = cp.xi
        self.xi_prime = cp.timeout_of(rom.params)
        self.join_wait = cp.join_wait(rom.params)
        self.receivers: dict[type, Receiver] = {Recolor: self.on_recolor, RecolorAck: self.on_ack,
                          AskPlace: self.on_ask, Place: self.on_place,
                          Reconfigure: self.on_reconfigure}
        self.events: dict[type, Handler] = {SubmitReconfig: self.on_submit}

    # ---- timers: A9 and A13 -----------------------------------------------------------------

    def on_start(self, now: float) -> list[Effect]:
        if self.rom.is_root:
            return [SetTimer(RECOLOR, now + self.xi)]
        wait = self.join_wait if self.oram.joining else self.xi_prime
        return [SetTimer(RECOLOR, now + wait)]

    def on_timer(self, now: float) -> list[Effect]:
        """A9 onTimeout()."""
        if self.rom.is_root:
            return self._new_round(now)
        if self.ram.leaving:
            return self._leave(now)
        return self._join_tree(now)

    def _leave(self, now: float) -> list[Effect]:
        """Out of the tree (a removal, or a corrupted flag): the manager stops a leaf it
        removed; one that is still running after the join wait joins again."""
        o = self.oram
        self.ram.leaving = False
        o.joining = True  # not in the tree: accept the first recolor from P^{c_new}
        for c in range(COLOURS):
            self.overlay.set_parent(c, None)
            self.overlay.set_children(c, ())
        self.ram.flags.clear()
        return [Trace("leave", {}), SetTimer(RECOLOR, now + self.join_wait)]

    def _new_round(self, now: float) -> list[Effect]:
        """A9.3-10 at R."""
        o, ram = self.oram, self.ram
        o.c_old, o.c_cur = o.c_cur, o.c_new
        o.c_new = (o.c_cur + 1) % COLOURS
        self.overlay.copy(o.c_cur, o.c_new)
        self.overlay.set_parent(o.c_new, None)
        o.joining = False
        requests = self._bundle()
        moves = tuple(m for r in requests for m in r.moves)
        rids = tuple(r.rid for r in requests)
        ram.round += 1
        activating = bool(ram.carried)
        effects: list[Effect] = [SetTimer(RECOLOR, now + self.xi)]
        effects.extend(Trace("reconfig", {"rid": rid, "phase": "activated",
                                          "recolor_round": ram.round})
                       for rid in ram.carried)
        effects.extend(Trace("reconfig", {"rid": rid, "phase": "disseminated",
                                          "recolor_round": ram.round}) for rid in rids)
        ram.carried = rids
        message = Recolor(o.c_new, moves, rids, ram.round, activating)
        self._apply(moves)
        effects.append(self._trace(message, "root"))
        effects.extend(self._send_to_children(message))
        effects.extend(self.routing.rotated(activating))
        return effects

    def _bundle(self) -> list[Request]:
        """4.5.5: independent requests go together; the rest wait for a later round. Two
        requests interfere when one moves a broker the other moves or attaches to (joins at
        one parent do not interfere)."""
        taken: list[Request] = []
        moved: set[str] = set()
        used: set[str] = set()
        later: list[Request] = []
        for r in self.ram.pending:
            mine = {b for b, _ in r.moves}
            parents = {p for _, p in r.moves if p is not None}
            if mine & (moved | used) or parents & moved:
                later.append(r)
            else:
                moved |= mine
                used |= parents
                taken.append(r)
        self.ram.pending = later
        return taken

    # ---- A10-A12 ----------------------------------------------------------------------------

    def on_recolor(self, now: float, source: str, m: Recolor) -> list[Effect]:
        """A10 onReceiveRec(m)."""
        o = self.oram
        c = colour(m.color)
        if self.rom.is_root or c is None:
            return [Trace("garbage", {"from": source, "why": "recolor at the root or with colour "
                                                             f"{m.color!r}"})]
        if source != o.trees[o.c_new].parent:
            return [Trace("garbage", {"from": source, "why": "recolor not from P^c_new"})]
        if self.cp.colour_check and c == o.c_new and not o.joining:
            return [Trace("garbage", {"from": source, "why": "recolor with my c_new colour"})]
        effects: list[Effect] = [SetTimer(RECOLOR, now + self.xi_prime),
                                 Send(source, RecolorAck(c))]
        # An accepted recolor proves this broker is in the tree (see the module doc); _apply
        # sets the flag again when this recolor carries its removal.
        self.ram.leaving = False
        if o.joining:
            # The slots are alike (see ColouredRam.joining): take the sender's colours.
            o.c_old, o.c_cur, o.c_new = (c - 2) % COLOURS, (c - 1) % COLOURS, c
            o.joining = False
            self.ram.walk = None
        else:
            o.c_old, o.c_cur, o.c_new = o.c_cur, o.c_new, c
        self.overlay.copy(o.c_cur, o.c_new)  # A10.6 (P^{c_new} := P^{c_cur} included)
        self._apply(m.moves)
        effects.append(self._trace(m, source))
        effects.extend(self._send_to_children(m))
        effects.extend(self.routing.rotated(m.activating))
        return effects

    def _apply(self, moves: tuple[Move, ...]) -> None:
        """applyReconfig (A9.8, A10.7): the parts that concern me, into my c_new pointers."""
        me, overlay, c = self.me, self.overlay, self.oram.c_new
        for b, p in moves:
            if b == me:
                if p is None:
                    self.ram.leaving = True
                overlay.set_parent(c, p)
            elif p == me:
                overlay.add_child(c, b)
                if self.cp.flag_on_insert:  # E1, also for a child that was one already (a
                    self.ram.flags.add(b)  # rejoin at the same parent: it missed an ACK)
            else:
                overlay.remove_child(c, b)

    def _send_to_children(self, m: Recolor) -> list[Effect]:
        """A12 sendToChildren(m), over C^{c_cur}: flagged children get m, the others go."""
        o, ram = self.oram, self.ram
        effects: list[Effect] = []
        for x in sorted(o.trees[o.c_cur].children):
            if x in ram.flags:
                effects.append(Send(x, m))
                ram.flags.discard(x)
            else:
                for c in range(COLOURS) if self.cp.prune_all else (o.c_cur,):  # E2
                    self.overlay.remove_child(c, x)
                effects.append(Trace("child_dropped", {"peer": x}))
        return effects

    def on_ack(self, now: float, source: str, m: RecolorAck) -> list[Effect]:
        """A11 onReceiveAck()."""
        o = self.oram
        if source in o.trees[o.c_cur].children:
            self.ram.flags.add(source)
            return []
        return [Trace("garbage", {"from": source, "why": "ack from no child of c_cur"})]

    # ---- A14/A15: joinTree and askForPlaceOrPointer -----------------------------------------

    def _join_tree(self, now: float) -> list[Effect]:
        """A14: the walk starts at R; the timer stays armed in case it stalls."""
        self.oram.joining = True
        self.ram.walk = self.rom.root
        return [Trace("rejoin", {"timeout": self.xi_prime}),
                SetTimer(RECOLOR, now + self.xi_prime),
                Send(self.rom.root, AskPlace())]

    def on_ask(self, now: float, source: str, m: AskPlace) -> list[Effect]:
        """A15 with the degree bound b: a place here, or a pointer to one of my c_new children
        (ours: one that ACKed my last recolor, when there is one: a child that did not may be
        cut off with the asker). A broker that is not in the tree itself (joining, leaving)
        sends the walk back to R."""
        o, ram = self.oram, self.ram
        if o.joining or ram.leaving:
            return [Send(source, Place(self.rom.root))]
        children = sorted(o.trees[o.c_new].children)
        b = self.cp.degree
        if b == 0 or len(children) < b or not children:
            return [Send(source, Place(self.me))]
        alive = [x for x in children if x in ram.flags and x != source]
        ram.joins += 1
        rng = random.Random(f"{self.me}:{source}:{ram.joins}")
        return [Send(source, Place(rng.choice(alive or children)))]

    def on_place(self, now: float, source: str, m: Place) -> list[Effect]:
        ram = self.ram
        if ram.walk is None or source != ram.walk:
            return [Trace("garbage", {"from": source, "why": "place not asked for"})]
        pointer = m.pointer
        if pointer == self.rom.root and source != pointer:
            ram.walk = pointer  # sent back: start again at R
            return [Send(pointer, AskPlace())]
        if pointer != source and pointer != self.me:
            ram.walk = pointer
            return [Send(pointer, AskPlace())]
        return self._connect(now, source)

    def _connect(self, now: float, parent: str) -> list[Effect]:
        """A14.22 "Connect to tryParent": as a reconfiguration for R (see the module doc).
        The joiner keeps no children: every broker below it lost the same recolors and times
        out before the join can be active, so each rejoins on its own (ours: stale child
        pointers would only wait for A12 to drop them)."""
        ram = self.ram
        for c in range(COLOURS):
            self.overlay.set_parent(c, parent)
            self.overlay.set_children(c, ())
        ram.flags.clear()
        ram.walk = None
        ram.joins += 1
        rid = f"join:{self.me}:{ram.joins}"
        request = Reconfigure(rid, ((self.me, parent),))
        return [Trace("join", {"parent": parent, "rid": rid}),
                SetTimer(RECOLOR, now + self.join_wait),
                Send(self.rom.root, request)]

    # ---- requests for R ---------------------------------------------------------------------

    def on_reconfigure(self, now: float, source: str, m: Reconfigure) -> list[Effect]:
        if not self.rom.is_root:
            return [Trace("garbage", {"from": source, "why": "reconfiguration request for the "
                                                             "root sent elsewhere"})]
        return self._submit(m.rid, m.moves)

    def on_submit(self, now: float, event: SubmitReconfig) -> list[Effect]:
        if not self.rom.is_root:
            return [Send(self.rom.root, Reconfigure(event.rid, tuple(event.moves)))]
        return self._submit(event.rid, tuple(event.moves))

    def _submit(self, rid: str, moves: tuple[Move, ...]) -> list[Effect]:
        root = self.rom.root
        for b, p in moves:
            if not isinstance(b, str) or not (p is None or isinstance(p, str)) or b in (root, p):
                return [Trace("reconfig", {"rid": rid, "phase": "refused",
                                           "why": f"move ({b!r}, {p!r}) is not a valid parent "
                                                  "pointer of a non-root broker"})]
        pending = self.ram.pending
        pending[:] = [r for r in pending if r.rid != rid]  # a request sent again (the manager)
        if rid.startswith("join:") and len(moves) == 1:  # E3: the latest join of a broker
            joiner = moves[0][0]
            pending[:] = [r for r in pending if not (r.rid.startswith("join:") and
                                                     r.moves[0][0] == joiner)]
        pending.append(Request(rid, moves))
        return [Trace("reconfig", {"rid": rid, "phase": "submitted", "count": len(moves)})]

    # ---- trace and snapshot -----------------------------------------------------------------

    def _trace(self, m: Recolor, source: str) -> Trace:
        o = self.oram
        return Trace("recolor", {"from": source, "recolor_round": m.round, "color": m.color,
                                 "c_old": o.c_old, "c_cur": o.c_cur, "c_new": o.c_new,
                                 "moves": len(m.moves)})

    def snapshot(self) -> dict[str, Any]:
        ram = self.ram
        return {"flags": sorted(ram.flags), "pending": [r.rid for r in ram.pending],
                "round": ram.round, "walk": ram.walk, "leaving": ram.leaving}
