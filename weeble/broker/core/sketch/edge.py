"""Edge stabilization (seed 002 §3.2, §4) as a pure per-edge state machine, and the node that runs
it over the simple-routing tables of routing.py.

For each directed edge (a, b) a's timer starts a round: a freezes S(a) (what it should have told
b), sends Observe; b answers with a sketch of F_{b→a} (what it holds for a) and its cardinality;
a compares. Equal: nothing more (a legal edge costs exactly these two messages). Different: a sends
the corrections, which b processes as subscriptions and unsubscriptions from a, forwarding them as
usual; disturbances travel along simple paths and die at the leaves (Theorem 2).

Choices (spec B.3, D.2; the paper is silent on them):
- A fresh hash seed per round and edge (`bloom.round_seed`): a difference hidden in one round is
  found in a later one with probability 1; `full_every` K forces an exact exchange every K rounds
  (a deterministic bound of K rounds).
- On a sketch mismatch a sends C1 = {s ∈ S(a) : s ∉ B(F_{b→a})} (certainly missing at b) and
  its own filter; b unsubscribes {f ∈ F_{b→a} : f ∉ B(S(a))} (certainly excess). What both
  membership tests miss waits for the next round. `on_mismatch="full"` instead runs an exact
  round at once, the paper's "a full comparison follows".
- The race between the t₁ snapshot and the corrections: both ends remember the items that crossed
  the edge since the Observe (FIFO puts them after it) and leave them out of the corrections.
- A round that gets no reply (link down, lost) is abandoned after `reply_timeout` periods.
- Timers (§5): `static` keeps its period; `strawman` starts a round on every remaining edge the
  moment a link fails; `adaptive` suspends them on a failure until `threshold` unwanted events
  (an event that arrives here and goes nowhere, impossible in a legal state) have arrived, or the
  link comes back, then starts them at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from weeble.broker.core.events import Send, SetTimer
from weeble.broker.core.sketch.bloom import BloomFilter, SketchParams, round_seed
from weeble.broker.core.sketch.routing import Item, SimpleRouter

Encode = Callable[[Item], bytes]


def encode_str(item: Item) -> bytes:
    return str(item).encode()


# ---- messages -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    item: Item

    def size(self) -> int:
        return 8 + len(str(self.item))


@dataclass(frozen=True, slots=True)
class Unsubscription:
    item: Item

    def size(self) -> int:
        return 8 + len(str(self.item))


@dataclass(frozen=True, slots=True)
class Event:
    item: Item
    eid: int = 0  # the publication's id, so a driver can follow one event's hops

    def size(self) -> int:
        return 8 + len(str(self.item))


@dataclass(frozen=True, slots=True)
class Observe:
    """Round `round_no` of the sender's edge: reply with a sketch built with (m, k, seed), or the
    whole table when `full`."""

    round_no: int
    full: bool
    m: int
    k: int
    seed: int

    def size(self) -> int:
        return 24


@dataclass(frozen=True, slots=True)
class ObserveReply:
    round_no: int
    cardinality: int
    bits: int | None = None
    items: frozenset[Item] | None = None
    m: int = 0

    def size(self) -> int:
        if self.items is not None:
            return 16 + sum(2 + len(str(s)) for s in self.items)
        return 16 + (self.m + 7) // 8


@dataclass(frozen=True, slots=True)
class Correct:
    """C1 (subscribe) and C2 (unsubscribe) for the receiver, as if from the sender; with `probe`
    the receiver itself finds its excess: what it holds for us that the probe filter lacks."""

    round_no: int
    subscribe: tuple[Item, ...]
    unsubscribe: tuple[Item, ...]
    probe: BloomFilter | None = None

    def size(self) -> int:
        probe = 0 if self.probe is None else self.probe.size_bytes + 12
        return 16 + sum(2 + len(str(s)) for s in (*self.subscribe, *self.unsubscribe)) + probe


EdgeMessage = Observe | ObserveReply | Correct
RoutingMessage = Subscription | Unsubscription | Event


# ---- parameters -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimerPolicy:
    kind: Literal["static", "strawman", "adaptive"] = "static"
    period: float = 3.0
    threshold: int = 5  # adaptive: unwanted events before the suspended rounds start

    def __post_init__(self) -> None:
        if self.kind not in ("static", "strawman", "adaptive"):
            raise ValueError(f"unknown timer policy {self.kind!r}: static, strawman or adaptive")
        if self.period <= 0 or self.threshold < 1:
            raise ValueError(f"invalid timer policy {self}")


@dataclass(frozen=True, slots=True)
class AntiEntropyParams:
    sketch: Literal["bloom", "full"] = "bloom"
    bloom: SketchParams = field(default_factory=SketchParams)
    full_every: int = 16  # K: an exact round every K rounds (0 = never)
    on_mismatch: Literal["localise", "full"] = "localise"
    timer: TimerPolicy = field(default_factory=TimerPolicy)
    reply_timeout: float = 2.0  # in periods

    def __post_init__(self) -> None:
        if self.sketch not in ("bloom", "full") or self.on_mismatch not in ("localise", "full"):
            raise ValueError(f"invalid anti-entropy parameters {self}")
        if self.full_every < 0:
            raise ValueError("full_every must be >= 0")


@dataclass(slots=True)
class _Round:
    round_no: int
    started: float
    snapshot: frozenset[Item]
    full: bool
    filter: BloomFilter | None
    touched: set[Item] = field(default_factory=set)


@dataclass(slots=True)
class _Edge:
    rounds: int = 0
    pending: _Round | None = None
    suspended: bool = False
    observed: int = -1  # b side: the last round the neighbour observed us in
    touched_in: set[Item] = field(default_factory=set)


@dataclass(slots=True)
class Stats:
    """Counters a driver reads (messages are counted by the driver itself)."""

    rounds: int = 0
    equal: int = 0
    corrections: int = 0
    corrected_items: int = 0
    unwanted: int = 0


@dataclass(frozen=True, slots=True)
class Delivered:
    """Effect: an event reached a local subscriber."""

    item: Item
    eid: int = 0


Effect = Send | SetTimer | Delivered


def timer_name(neighbour: str) -> str:
    return f"edge/{neighbour}"


class AntiEntropyNode:
    """A broker of seed 002's model: simple routing plus per-edge stabilization."""

    def __init__(self, me: str, neighbours: Iterable[str], *, params: AntiEntropyParams,
                 seed: int = 0, encode: Encode = encode_str) -> None:
        self.me = me
        self.params = params
        self.encode = encode
        self.router = SimpleRouter(me, neighbours)
        self.edges: dict[str, _Edge] = {n: _Edge() for n in self.router.neighbours}
        self.rng = random.Random(f"{seed}|{me}")
        self.stats = Stats()
        self._unwanted_since_failure = 0

    # ---- helpers -------------------------------------------------------------------------------

    def _forward(self, pairs: list[tuple[str, Item]], *, unsub: bool, out: list[Effect]) -> None:
        for y, s in pairs:
            out.append(Send(y, Unsubscription(s) if unsub else Subscription(s)))  # type: ignore[arg-type]
            e = self.edges.get(y)
            if e is not None and e.pending is not None:
                e.pending.touched.add(s)

    def _arm(self, n: str, at: float, out: list[Effect]) -> None:
        out.append(SetTimer(timer_name(n), at))

    def _period(self) -> float:
        return self.params.timer.period

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self, now: float) -> list[Effect]:
        """Arm every edge's timer at a random phase (edges are not synchronised)."""
        out: list[Effect] = []
        for n in sorted(self.edges):
            self._arm(n, now + self.rng.uniform(0, self._period()), out)
        return out

    def subscribe(self, item: Item) -> list[Effect]:
        out: list[Effect] = []
        self._forward(self.router.local_sub(item), unsub=False, out=out)
        return out

    def unsubscribe(self, item: Item) -> list[Effect]:
        out: list[Effect] = []
        self._forward(self.router.local_unsub(item), unsub=True, out=out)
        return out

    def publish(self, now: float, item: Item, eid: int = 0) -> list[Effect]:
        return self._route(now, item, None, eid)

    def _route(self, now: float, item: Item, frm: str | None, eid: int = 0) -> list[Effect]:
        local, targets = self.router.route(item, frm)
        out: list[Effect] = [Delivered(item, eid)] if local else []
        out.extend(Send(y, Event(item, eid)) for y in targets)  # type: ignore[arg-type]
        if frm is not None and not local and not targets:
            self.stats.unwanted += 1
            self._unwanted_since_failure += 1
            self._maybe_resume(now, out)
        return out

    # ---- link changes (the timer policies of §5) -----------------------------------------------

    def link_down(self, now: float, b: str) -> list[Effect]:
        out: list[Effect] = []
        self.router.link_down(b)
        self.edges.pop(b, None)
        kind = self.params.timer.kind
        if kind == "strawman":
            for n in sorted(self.edges):
                out.extend(self._start_round(now, n))
        elif kind == "adaptive":
            self._unwanted_since_failure = 0
            for n in sorted(self.edges):
                self.edges[n].suspended = True
                self.edges[n].pending = None
        return out

    def link_up(self, now: float, b: str) -> list[Effect]:
        out: list[Effect] = []
        self.router.link_up(b)
        self.edges[b] = _Edge()
        kind = self.params.timer.kind
        if kind == "static":
            self._arm(b, now + self._period(), out)
        else:
            out.extend(self._start_round(now, b))
            if kind == "adaptive":
                self._resume(now, out)
        return out

    def _maybe_resume(self, now: float, out: list[Effect]) -> None:
        if (self.params.timer.kind == "adaptive"
                and self._unwanted_since_failure >= self.params.timer.threshold
                and any(e.suspended for e in self.edges.values())):
            self._resume(now, out)

    def _resume(self, now: float, out: list[Effect]) -> None:
        for n in sorted(self.edges):
            e = self.edges[n]
            if e.suspended:
                e.suspended = False
                self._arm(n, now, out)

    # ---- the round -----------------------------------------------------------------------------

    def timer(self, now: float, name: str) -> list[Effect]:
        n = name.removeprefix("edge/")
        e = self.edges.get(n)
        if e is None or e.suspended:
            return []
        return self._start_round(now, n)

    def _start_round(self, now: float, n: str) -> list[Effect]:
        e = self.edges.get(n)
        out: list[Effect] = []
        if e is None:
            return out
        self._arm(n, now + self._period(), out)
        p = self.params
        if e.pending is not None and now - e.pending.started < p.reply_timeout * self._period():
            return out  # the previous round is still in flight
        e.rounds += 1
        self.stats.rounds += 1
        snapshot = frozenset(self.router.advertisement(n))
        full = p.sketch == "full" or (p.full_every > 0 and e.rounds % p.full_every == 0)
        if full:
            filt = None
            obs = Observe(round_no=e.rounds, full=True, m=0, k=0, seed=0)
        else:
            m = p.bloom.bits_for(len(snapshot))
            seed = round_seed(f"{self.me}>{n}", e.rounds)
            filt = BloomFilter.of((self.encode(s) for s in snapshot), m=m, k=p.bloom.hashes,
                                  seed=seed)
            obs = Observe(round_no=e.rounds, full=False, m=m, k=p.bloom.hashes, seed=seed)
        e.pending = _Round(round_no=e.rounds, started=now, snapshot=snapshot, full=full,
                           filter=filt)
        out.append(Send(n, obs))  # type: ignore[arg-type]
        return out

    def receive(self, now: float, frm: str, msg: object) -> list[Effect]:
        out: list[Effect] = []
        if frm not in self.router.neighbours:
            return out  # a message over a link that is no longer part of the tree
        match msg:
            case Subscription(item=s):
                self._note_in(frm, s)
                self._forward(self.router.on_sub(frm, s), unsub=False, out=out)
            case Unsubscription(item=s):
                self._note_in(frm, s)
                self._forward(self.router.on_unsub(frm, s), unsub=True, out=out)
            case Event(item=s, eid=eid):
                out.extend(self._route(now, s, frm, eid))
            case Observe():
                out.extend(self._on_observe(frm, msg))
            case ObserveReply():
                out.extend(self._on_reply(now, frm, msg))
            case Correct():
                out.extend(self._on_correct(frm, msg))
            case _:
                raise ValueError(f"not an anti-entropy message: {type(msg).__name__}")
        return out

    def _note_in(self, frm: str, s: Item) -> None:
        e = self.edges.get(frm)
        if e is not None:
            e.touched_in.add(s)

    def _on_observe(self, frm: str, msg: Observe) -> list[Effect]:
        e = self.edges[frm]
        e.observed = msg.round_no
        e.touched_in = set()
        held = self.router.held.get(frm, set())
        if msg.full:
            reply = ObserveReply(round_no=msg.round_no, cardinality=len(held),
                                 items=frozenset(held))
        else:
            if msg.m < 1 or msg.k < 1:
                raise ValueError(f"an Observe needs m >= 1 and k >= 1, got m={msg.m}, k={msg.k}")
            f = BloomFilter.of((self.encode(s) for s in held), m=msg.m, k=msg.k, seed=msg.seed)
            reply = ObserveReply(round_no=msg.round_no, cardinality=len(held), bits=f.bits,
                                 m=msg.m)
        return [Send(frm, reply)]  # type: ignore[list-item]

    def _on_reply(self, now: float, frm: str, msg: ObserveReply) -> list[Effect]:
        e = self.edges[frm]
        r = e.pending
        if r is None or r.round_no != msg.round_no:
            return []  # a stale or junk reply
        e.pending = None
        if r.full:
            if msg.items is None:
                raise ValueError("a full round needs the table in the reply")
            theirs = set(msg.items)
            c1 = r.snapshot - theirs - r.touched
            c2 = theirs - r.snapshot - r.touched
            return self._correct(frm, r, c1, c2, None)
        assert r.filter is not None
        if msg.bits == r.filter.bits and msg.cardinality == len(r.snapshot):
            self.stats.equal += 1
            return []
        if self.params.on_mismatch == "full":
            return self._start_round_full(now, frm)
        theirs_f = BloomFilter(m=r.filter.m, k=r.filter.k, seed=r.filter.seed,
                               bits=msg.bits or 0)
        c1 = {s for s in r.snapshot - r.touched if not theirs_f.might_contain(self.encode(s))}
        return self._correct(frm, r, c1, set(), r.filter)

    def _start_round_full(self, now: float, n: str) -> list[Effect]:
        e = self.edges[n]
        e.rounds += 1
        self.stats.rounds += 1
        snapshot = frozenset(self.router.advertisement(n))
        e.pending = _Round(round_no=e.rounds, started=now, snapshot=snapshot, full=True,
                           filter=None)
        return [Send(n, Observe(round_no=e.rounds, full=True, m=0, k=0, seed=0))]  # type: ignore[list-item]

    def _correct(self, frm: str, r: _Round, c1: set[Item], c2: set[Item],
                 probe: BloomFilter | None) -> list[Effect]:
        if not c1 and not c2 and probe is None:
            self.stats.equal += 1
            return []
        self.stats.corrections += 1
        self.stats.corrected_items += len(c1) + len(c2)
        return [Send(frm, Correct(round_no=r.round_no,  # type: ignore[list-item]
                                  subscribe=tuple(sorted(c1, key=str)),
                                  unsubscribe=tuple(sorted(c2, key=str)), probe=probe))]

    def _on_correct(self, frm: str, msg: Correct) -> list[Effect]:
        e = self.edges[frm]
        if msg.round_no != e.observed:
            return []  # corrections of an older round: the newer Observe reset our journal
        out: list[Effect] = []
        for s in msg.subscribe:
            if s not in e.touched_in:
                self._forward(self.router.on_sub(frm, s), unsub=False, out=out)
        excess = list(msg.unsubscribe)
        if msg.probe is not None:
            held = self.router.held.get(frm, set())
            excess.extend(s for s in sorted(held, key=str)
                          if s not in e.touched_in and not msg.probe.might_contain(self.encode(s)))
        for s in excess:
            if s not in e.touched_in:
                self._forward(self.router.on_unsub(frm, s), unsub=True, out=out)
        return out
