"""Layer `anti_entropy`: edge stabilization with Bloom-filter sketches (seed 002 §3.2, §4), the
mode `anti_entropy` of the broker (spec seed23 §B.3, §B.4, §D.2).

For each directed tree edge (a, b) a's timer starts a round: a freezes S(a→b) (what it should
have told b, routing/edges.py), sends AeObserve; b answers with a Bloom filter of F_{b→a} (what
it holds for a) built with the observer's (m, k, seed), and |F_{b→a}| beside; a compares. Equal:
nothing more (a legal edge costs exactly these two messages per period). Different: a sends the
corrections, which b processes as subscriptions and unsubscriptions from a (routing forwards them
onward as usual); disturbances travel along simple paths and die at the leaves (Theorem 2).

Choices (spec seed23 §B.3, D.2; the paper is silent on them):
- A fresh hash seed per round and edge (`bloom.round_seed`): a difference hidden in one round is
  found in a later one with probability 1; `full_every` K forces an exact exchange every K rounds
  (a deterministic bound of K rounds).
- On a sketch mismatch a sends C1 = {s ∈ S(a) : s ∉ B(F_{b→a})} (certainly missing at b) and its
  own filter; b drops {f ∈ F_{b→a} : f ∉ B(S(a))} (certainly in excess). What both membership
  tests miss waits for the next round. `on_mismatch: full` runs an exact round at once instead
  (the paper's "a full comparison follows").
- The race between the t₁ snapshot and the corrections: both ends remember the items that crossed
  the edge since the Observe (FIFO puts them after it) and leave them out of the corrections.
- A round without a reply (link down, lost) is abandoned after `reply_timeout` periods.
- Timers (§5): `static` keeps its period; `strawman` starts a round on every remaining edge the
  moment a link fails; `adaptive` suspends them on a failure until `threshold` unwanted events
  (an event that arrives here and goes nowhere, impossible in a legal state) have arrived, or the
  link comes back. A suspension lasts at most `MAX_SUSPEND` periods, so a corrupted suspension
  cannot stop the rounds for good (self-stabilization of the timers themselves).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mmh3

from weeble.core.events import Effect, LinkDown, LinkUp, Receiver, Send, SetTimer, Trace
from weeble.core.messages import Notify, Sub, Unsub
from weeble.core.overlay import Topology
from weeble.core.rom import AntiEntropy, Rom
from weeble.core.routing.edges import Edges, Key, encode
from weeble.core.routing.layer import Routing
from weeble.core.sketch.bloom import MAX_BITS, MAX_HASHES, BloomFilter, round_seed
from weeble.core.sketch.messages import AeCorrect, AeObserve, AeReply, Item

TIMER = "ae/"  # + neighbour: the round timer of one directed edge
MAX_SUSPEND = 10  # periods an adaptive suspension lasts at most


@dataclass(slots=True)
class Round:
    """A round in flight at the observer: what it froze at t₁ and what it sent since."""

    round_no: int
    started: float
    snapshot: frozenset[Key]
    full: bool
    filter: BloomFilter | None
    touched: set[Key] = field(default_factory=set)


@dataclass(slots=True)
class EdgeState:
    rounds: int = 0  # rounds started on this edge (the observer side)
    pending: Round | None = None
    suspended: float | None = None  # adaptive: suspended since
    observed: int = -1  # the observed side: the last round the neighbour observed us in
    touched_in: set[Key] = field(default_factory=set)  # keys received since that Observe


class AntiEntropyRam:
    """The layer's slice of RAM: per directed edge out of this broker, and counters."""

    __slots__ = ("edges", "poison", "stats", "unwanted_since_failure")

    def __init__(self) -> None:
        self.edges: dict[str, EdgeState] = {}
        self.unwanted_since_failure = 0
        # bits to flip in the next sketch this broker builds (a fault: sketch.bits)
        self.poison = 0
        self.stats: dict[str, int] = dict.fromkeys(
            ("rounds", "equal", "corrections", "corrected_items", "unwanted"), 0)


class AntiEntropyLayer:
    name = "anti_entropy"

    def __init__(self, rom: Rom, topo: Topology, routing: Routing, ram: AntiEntropyRam) -> None:
        self.me = rom.broker_id
        self.params: AntiEntropy = rom.anti_entropy
        self.topo = topo
        self.routing = routing
        scheme = routing.subs
        assert isinstance(scheme, Edges), "the anti-entropy mode needs the Edges scheme"
        self.scheme = scheme
        self.ram = ram
        self.receivers: dict[type, Receiver] = {AeObserve: self.on_observe, AeReply: self.on_reply,
                          AeCorrect: self.on_correct}

    # ---- helpers ----------------------------------------------------------------------------

    def _edge(self, n: str) -> EdgeState:
        e = self.ram.edges.get(n)
        if e is None:
            e = self.ram.edges[n] = EdgeState()
        return e

    def _period(self) -> float:
        return self.params.period

    def _phase(self, n: str) -> float:
        """A fixed phase per directed edge in [0, period): edges are not synchronised."""
        return mmh3.hash(f"{self.me}>{n}", 0xAE, signed=False) / 2**32 * self._period()

    def _live(self) -> list[str]:
        detached = self.routing.ram.detached
        return [n for n in self.topo.ordered if n not in detached]

    def _sketch(self, items: Iterable[Key], *, m: int, k: int, seed: int) -> BloomFilter:
        """The Bloom filter of `items`, recomputed from the table every time (spec seed23 §D.2: a
        corrupted filter cannot outlive its round); a `sketch.bits` fault flips bits of it."""
        f = BloomFilter.of((encode(s) for s in items), m=m, k=k, seed=seed)
        if self.ram.poison > 0:
            for i in range(self.ram.poison):
                f.bits ^= 1 << (mmh3.hash(f"poison/{seed}/{i}", signed=False) % m)
            self.ram.poison = 0
        return f

    # ---- what passes the broker (called for every step in this mode) ------------------------

    def incoming(self, now: float, frm: str, msg: object, effects: list[Effect]) -> None:
        """Note what crossed an edge since its Observe; count unwanted events (§5)."""
        t = type(msg)
        if t is Sub or t is Unsub:
            e = self.ram.edges.get(frm)
            if e is not None:
                e.touched_in.add(self.scheme.key(msg.sub_id, msg.filter))  # type: ignore[union-attr]
        elif t is Notify and frm in self.topo.neighbors and self._nowhere(effects):
            effects.append(Trace("unwanted", {"from": frm,
                                              "nid": msg.notification.id}))  # type: ignore[union-attr]
            self.ram.stats["unwanted"] += 1
            self.ram.unwanted_since_failure += 1
            if (self.params.timer == "adaptive"
                    and self.ram.unwanted_since_failure >= self.params.threshold):
                effects.extend(self._resume(now))

    def _nowhere(self, effects: list[Effect]) -> bool:
        """An event went nowhere: no local delivery and no send over a link that works."""
        detached = self.routing.ram.detached
        return all(type(e) is Send and e.neighbor in detached for e in effects)

    def outgoing(self, effects: list[Effect]) -> None:
        """Items sent towards a neighbour with a round in flight: not to be corrected."""
        edges = self.ram.edges
        for eff in effects:
            if type(eff) is Send:
                msg = eff.message
                t = type(msg)
                if t is Sub or t is Unsub:
                    e = edges.get(eff.neighbor)
                    if e is not None and e.pending is not None:
                        e.pending.touched.add(
                            self.scheme.key(msg.sub_id, msg.filter))  # type: ignore[union-attr]

    # ---- timers -----------------------------------------------------------------------------

    def on_start(self, now: float) -> list[Effect]:
        self.ram.edges = {n: EdgeState() for n in self.topo.ordered}
        return [SetTimer(TIMER + n, now + self._phase(n)) for n in self.topo.ordered]

    def on_timer(self, now: float, timer: str) -> list[Effect]:
        n = timer.removeprefix(TIMER)
        if n not in self.topo.neighbors:
            return []  # an edge that is no longer part of the tree
        e = self._edge(n)
        if e.suspended is not None:
            if now - e.suspended < MAX_SUSPEND * self._period():
                return [SetTimer(timer, now + self._period())]
            e.suspended = None
        if n in self.routing.ram.detached:
            return [SetTimer(timer, now + self._period())]
        return self._start_round(now, n)

    def _start_round(self, now: float, n: str, *, full: bool = False) -> list[Effect]:
        e = self._edge(n)
        p = self.params
        out: list[Effect] = [SetTimer(TIMER + n, now + self._period())]
        if (not full and e.pending is not None
                and now - e.pending.started < p.reply_timeout * self._period()):
            return out  # the previous round is still in flight
        e.rounds += 1
        self.ram.stats["rounds"] += 1
        snapshot = frozenset(self.scheme.advertisement(n))
        full = full or p.sketch == "full" or (p.full_every > 0 and e.rounds % p.full_every == 0)
        if full:
            filt = None
            obs = AeObserve(e.rounds, True)
        else:
            m = p.bits_for(len(snapshot))
            seed = round_seed(f"{self.me}>{n}", e.rounds)
            filt = self._sketch(snapshot, m=m, k=p.hashes, seed=seed)
            obs = AeObserve(e.rounds, False, m, p.hashes, seed)
        e.pending = Round(round_no=e.rounds, started=now, snapshot=snapshot, full=full,
                          filter=filt)
        out.append(Send(n, obs))
        return out

    # ---- link failures (the timer strategies of §5) -----------------------------------------

    def on_link_down(self, now: float, event: LinkDown) -> list[Effect]:
        b = event.neighbor
        detached = self.routing.ram.detached
        if b not in self.topo.neighbors or b in detached:
            return []
        detached.add(b)
        e = self._edge(b)
        e.pending = None
        kind = self.params.timer
        out: list[Effect] = [Trace("ae_link", {"neighbor": b, "up": False, "timer": kind})]
        if kind == "strawman":
            for n in self._live():
                out.extend(self._start_round(now, n))
        elif kind == "adaptive":
            self.ram.unwanted_since_failure = 0
            for n in self._live():
                s = self._edge(n)
                s.suspended = now
                s.pending = None
        return out

    def on_link_up(self, now: float, event: LinkUp) -> list[Effect]:
        b = event.neighbor
        detached = self.routing.ram.detached
        if b not in detached:
            return []
        detached.discard(b)
        self.ram.edges[b] = EdgeState()
        kind = self.params.timer
        out: list[Effect] = [Trace("ae_link", {"neighbor": b, "up": True, "timer": kind})]
        if kind == "static":
            out.append(SetTimer(TIMER + b, now + self._period()))
            return out
        out.extend(self._resume(now))
        if kind == "strawman":
            for n in self._live():
                out.extend(self._start_round(now, n))
        else:
            out.extend(self._start_round(now, b))
        return out

    def _resume(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for n in self._live():
            e = self._edge(n)
            if e.suspended is not None:
                e.suspended = None
                out.extend(self._start_round(now, n))
        return out

    # ---- the round --------------------------------------------------------------------------

    def on_observe(self, now: float, frm: str, msg: AeObserve) -> list[Effect]:
        e = self._edge(frm)
        e.observed = msg.round_no
        e.touched_in = set()
        held = self.scheme.held(frm)
        if msg.full:
            items = tuple(sorted(map(self.scheme.wire, held), key=_order))
            return [Send(frm, AeReply(msg.round_no, len(held), None, items))]
        if not 1 <= msg.m <= MAX_BITS or not 1 <= msg.k <= MAX_HASHES:
            return [Trace("garbage", {"from": frm, "why": f"AeObserve with m={msg.m}, "
                                                          f"k={msg.k}"})]
        f = self._sketch(held, m=msg.m, k=msg.k, seed=msg.seed)
        return [Send(frm, AeReply(msg.round_no, len(held), f))]

    def on_reply(self, now: float, frm: str, msg: AeReply) -> list[Effect]:
        e = self._edge(frm)
        r = e.pending
        if r is None or r.round_no != msg.round_no:
            return []  # a stale or junk reply
        e.pending = None
        if r.full:
            theirs = {self.scheme.key(*i) for i in msg.items}
            c1 = r.snapshot - theirs - r.touched
            c2 = theirs - r.snapshot - r.touched
            return self._correct(frm, r, c1, c2, None)
        f = r.filter
        assert f is not None
        s = msg.sketch
        if (s is not None and s.compatible(f) and s.bits == f.bits
                and msg.cardinality == len(r.snapshot)):
            self.ram.stats["equal"] += 1
            return []
        if self.params.on_mismatch == "full" or s is None or not s.compatible(f):
            return self._start_round(now, frm, full=True)
        c1 = {i for i in r.snapshot - r.touched if not s.might_contain(encode(i))}
        return self._correct(frm, r, c1, set(), f)

    def _correct(self, to: str, r: Round, c1: set[Key], c2: set[Key],
                 probe: BloomFilter | None) -> list[Effect]:
        if not c1 and not c2 and probe is None:
            self.ram.stats["equal"] += 1
            return []
        stats = self.ram.stats
        stats["corrections"] += 1
        stats["corrected_items"] += len(c1) + len(c2)
        scheme = self.scheme
        return [Send(to, AeCorrect(r.round_no,
                                   tuple(sorted((scheme.item(k, to) for k in c1), key=_order)),
                                   tuple(sorted(map(scheme.wire, c2), key=_order)), probe)),
                Trace("ae_correct", {"to": to, "ae_round": r.round_no, "subscribe": len(c1),
                                     "unsubscribe": len(c2), "probe": probe is not None,
                                     "full": r.full})]

    def on_correct(self, now: float, frm: str, msg: AeCorrect) -> list[Effect]:
        e = self._edge(frm)
        if msg.round_no != e.observed:
            return []  # corrections of an older round: the newer Observe reset our journal
        out: list[Effect] = []
        touched = e.touched_in
        scheme = self.scheme
        for sub_id, f in msg.subscribe:
            if scheme.key(sub_id, f) not in touched:
                out.extend(scheme.subscribe(0, frm, sub_id, f))
        excess = [scheme.key(*i) for i in msg.unsubscribe]
        if msg.probe is not None:
            probe = msg.probe
            excess.extend(k for k in sorted(scheme.held(frm), key=str)
                          if not probe.might_contain(encode(k)))
        for k in excess:
            if k not in touched:
                sub_id, f = scheme.wire(k)
                out.extend(scheme.unsubscribe(frm, sub_id, f, remote=True))
        return out

    # ---- introspection ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        ram = self.ram
        return {"edges": {n: {"rounds": e.rounds, "pending": None if e.pending is None else
                              e.pending.round_no, "suspended": e.suspended is not None,
                              "observed": e.observed}
                          for n, e in sorted(ram.edges.items())},
                "stats": dict(ram.stats), "poison": ram.poison,
                "detached": sorted(self.routing.ram.detached)}


def _order(item: Item) -> tuple[str, str]:
    return item[0], str(item[1])
