"""Discrete-event engine: drives many pure brokers in one process, in virtual time.

One heap of `(time, seq, handler, a, b)` items; `seq` comes from a monotonic counter, so items at
the same time run in the order they were scheduled and a run is a pure function of its inputs
(and never compares handlers). Handlers are plain callables `handler(time, a, b)`: dispatch costs
one call, with no type switch. Most items are arrivals over constant-delay links, which are born
in (time, seq) order: they go to a FIFO of `_Arrival` records instead (one per hop: no tuple, no
boxed time or seq, no bound method), which `run` merges with the heap in the same order.

Links are FIFO, as the thesis assumes (spec ch3 §1.2): a message arrives at
max(now + delay, last arrival on that directed link), so a fast message queues behind a slow one
instead of overtaking it. Legal delays lie in [δ_min, δ_max] and come from a delay model:

- constant: δ_max on every hop, the setup of spec ch3 §4.1.
- uniform: independently uniform in [δ_min, δ_max].
- adversarial: the within-bounds choice that stresses leasing most (spec Fig. 3.1). Copies of a
  subscription alternate per link: the first (and every odd) copy crosses in δ_min, the next one
  (a refresh) in δ_max, so every other pair of consecutive renewals reaches a broker d hops away
  ρ + d·(δ_max − δ_min) apart — exactly the gap that condition (3.3) on π must cover, and again
  every 2ρ rather than once. Unsubscriptions and switches take δ_min (an old-tagged message
  lingers longest behind a fast switch: Lemma 1), notifications δ_max.

Link faults (drop, duplicate, a delay outside the bounds) switch a link to a slower send path for
their window; the fault-free path pays one attribute test. The hot path is `_step`: keep it lean.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from heapq import heappop, heappush
from typing import Any, Protocol

from weeble.core.broker import Broker
from weeble.core.events import (
    Deliver,
    Effect,
    Event,
    LinkDown,
    LinkUp,
    Receive,
    Send,
    SetTimer,
    Start,
    TimerFired,
    Trace,
)
from weeble.core.messages import Message, Notify, Sub, Switch, Unsub

MESSAGE_KINDS: dict[type, str] = {Sub: "sub", Unsub: "unsub", Notify: "notify", Switch: "switch"}
DELAY_MODELS = ("constant", "uniform", "adversarial")


class BrokerLike(Protocol):
    def step(self, now: float, event: Any) -> list[Effect]: ...


# Called as observer(time, node, effect) for Deliver and Trace effects (node.id is the broker).
Observer = Callable[[float, "Node", Any], None]
# A queue item's handler, called as handler(time, a, b); what it returns is not used.
Handler = Callable[[float, Any, Any], object]
# (time, seq, handler, a, b): ordered by (time, seq); seq is unique, so handlers never compare
Item = tuple[float, int, Handler, Any, Any]
# Called as observer(time, kind, src, dst, message) for sends, receives and link-fault losses.
LinkObserver = Callable[[float, str, str, str, Message], None]


class Link:
    """One direction of a broker-to-broker link: FIFO state and any active fault."""

    __slots__ = ("drop", "dst", "duplicate", "fault_delay", "faulty", "hold_until", "last",
                 "seen", "src")

    def __init__(self, src: str, dst: Node) -> None:
        self.src = src
        self.dst = dst
        self.last = 0.0  # latest arrival time scheduled on this link (FIFO)
        self.faulty = False  # any of the three fault settings below is active
        self.drop = 0.0
        self.duplicate = 0.0
        self.fault_delay: float | None = None
        self.hold_until: float | None = None  # a paused receiver: nothing arrives before
        self.seen: set[str] = set()  # adversarial model: sub_ids that crossed once already


class Node:
    """A broker in the simulation: the machine, its outgoing links and its timers."""

    __slots__ = ("_step_fn", "broker", "id", "links", "native", "timers")

    def __init__(self, broker_id: str, broker: BrokerLike) -> None:
        self.id = broker_id
        self.broker = broker
        # bound once: the hot path calls it for every event
        self._step_fn: Callable[[float, Any], list[Effect]] = broker.step
        # The core's Broker itself while `step` is its own: compiled, the hot path then calls
        # Broker.step natively (no bound method, no argument parsing). Setting `step` (a
        # crash, a restart, `Engine.retire`) clears it, so the new step is what runs.
        self.native: Broker | None = broker if type(broker) is Broker else None
        self.links: dict[str, Link] = {}
        self.timers: dict[str, _Timer] = {}

    @property
    def step(self) -> Callable[[float, Any], list[Effect]]:
        return self._step_fn

    @step.setter
    def step(self, step: Callable[[float, Any], list[Effect]]) -> None:
        self._step_fn = step
        self.native = None


class _Arrival:
    """A constant-delay arrival on the FIFO: `event` (one Receive) for `node` at time `t`, and
    for the nodes of `more` in order after it (same-time batching, see `Engine._step`). A native
    record with unboxed fields, not a tuple: the hot path makes one per hop and compares them."""

    __slots__ = ("event", "more", "node", "seq", "t")

    def __init__(self, t: float, seq: int, node: Node, event: Receive) -> None:
        self.t = t
        self.seq = seq
        self.node = node
        self.event = event
        self.more: list[Node] | None = None


class _Timer:
    """A named timer of one broker. Setting it bumps `gen`; heap items of older gens are stale."""

    __slots__ = ("event", "gen", "node")

    def __init__(self, node: Node, name: str) -> None:
        self.node = node
        self.event = TimerFired(name)  # immutable: one instance serves every firing
        self.gen = 0


class Engine:
    def __init__(
        self,
        brokers: Mapping[str, BrokerLike],
        links: Iterable[tuple[str, str]],
        *,
        delta_min: float,
        delta_max: float,
        delay: str = "constant",
        seed: int | str = 0,
        on_deliver: Observer | None = None,
        on_trace: Observer | None = None,
        on_link: LinkObserver | None = None,
    ) -> None:
        if delay not in DELAY_MODELS:
            raise ValueError(f"delay model must be one of {DELAY_MODELS}, got {delay!r}")
        self.nodes: dict[str, Node] = {b: Node(b, broker) for b, broker in brokers.items()}
        for a, b in links:
            self.nodes[a].links[b] = Link(a, self.nodes[b])
            self.nodes[b].links[a] = Link(b, self.nodes[a])
        self.delta_min, self.delta_max = delta_min, delta_max
        # Separate streams: a link fault's coin flips must not shift the delay sequence.
        self._delay_rng = random.Random(f"{seed}:delays")
        self._fault_rng = random.Random(f"{seed}:link-faults")
        self._constant = delta_max if delay == "constant" else None
        self._delay: Callable[[Link, Message], float] = {
            "constant": lambda link, msg: delta_max,
            "uniform": self._uniform_delay(),
            "adversarial": self._adversarial_delay,
        }[delay]
        # The constant-delay arrivals, born in (time, seq) order: a list read from `_head` on
        # (popping from the front is an index bump; `run` drops the consumed prefix now and then)
        self._fifo: list[_Arrival] = []
        self._head = 0
        self._heap: list[Item] = []
        # Items scheduled with `schedule_in_order` whose times came in order (a client's
        # refreshes every ρ): a sorted list read from `_lane_head` on, of which only the first
        # is on the heap (as a `_lane_fire` item with its time and seq), so the heap stays small
        self._lane: list[Item] = []
        self._lane_head = 0
        # the next item's sequence number (an int, not itertools.count: `_step` reads it to
        # know whether anything was scheduled since its last batch)
        self._seq = 0
        self.now = 0.0
        # counters (plain ints: the summary reads them)
        self.steps = 0  # events handed to Broker.step
        # per message type; a defaultdict so that a future message kind cannot crash a run
        self._sent: defaultdict[type, int] = defaultdict(int, dict.fromkeys(MESSAGE_KINDS, 0))
        self._notifies = 0  # Notify sends, counted apart: one int add on the hot path
        self.dropped = 0
        self.duplicated = 0
        self.stray = 0  # sends to no broker of the simulation (a corrupted destination), discarded
        self._on_link = on_link
        # Tracing receives needs its own arrival handler; without it, arrivals step directly.
        self._traced = on_link is not None
        self._arrive: Handler = self._step if on_link is None else self._traced_arrival
        # The observers are called directly from the hot path: no wrapper per Deliver.
        self._on_deliver: Callable[[float, Node, Any], None] = on_deliver or _ignore
        self._effects: dict[type, Callable[[float, Node, Any], None]] = {
            Deliver: self._on_deliver,
            SetTimer: self._set_timer,
            Trace: on_trace or _ignore,
        }

    # ---- scheduling and running -------------------------------------------------------------

    def schedule(self, t: float, handler: Handler, a: Any = None, b: Any = None) -> None:
        """Run handler(t, a, b) at virtual time t (not before now)."""
        seq = self._seq
        self._seq = seq + 1
        item: Item = (max(t, self.now), seq, handler, a, b)
        heappush(self._heap, item)

    def schedule_in_order(self, t: float, handler: Handler, a: Any = None, b: Any = None
                          ) -> None:
        """`schedule`, for a driver whose times mostly come in order (each at least the
        previous one's: now + ρ for every refresh). Those wait in a sorted lane, of which only
        the first is on the heap; one that comes out of order goes on the heap itself. Every
        item keeps its (time, seq), so the order of events is the one `schedule` gives."""
        seq = self._seq
        self._seq = seq + 1
        item: Item = (max(t, self.now), seq, handler, a, b)
        lane = self._lane
        if self._lane_head < len(lane):  # the lane's first item is on the heap already
            if item[0] < lane[-1][0]:
                heappush(self._heap, item)
            else:
                lane.append(item)
            return
        lane.append(item)
        token: Item = (item[0], seq, self._lane_fire, None, None)
        heappush(self._heap, token)

    def _lane_fire(self, now: float, _a: Any, _b: Any) -> None:
        """The lane's first item is due: put the next one on the heap, then run this one."""
        lane = self._lane
        i = self._lane_head
        item = lane[i]
        i += 1
        if i >= 4096 and i + i >= len(lane):
            del lane[:i]  # the consumed prefix; amortized O(1) per item
            i = 0
        self._lane_head = i
        if i < len(lane):
            after = lane[i]
            token: Item = (after[0], after[1], self._lane_fire, None, None)
            heappush(self._heap, token)
        item[2](now, item[3], item[4])

    def start(self, t: float = 0.0) -> None:
        """Give every broker its Start event (arms the overrun/switch timers)."""
        event = Start()
        for node in self.nodes.values():
            self._step(t, node, event)

    @property
    def sent(self) -> defaultdict[type, int]:
        """Messages sent per message type (a copy)."""
        sent = defaultdict(int, self._sent)
        sent[Notify] += self._notifies
        return sent

    def run(self, until: float) -> None:
        """Process every item due at or before `until`; afterwards the clock reads `until`.

        Items come from the heap and from the constant-delay FIFO, in (time, seq) order: the
        same order a single heap would give, so runs stay a pure function of their inputs.
        """
        heap, fifo = self._heap, self._fifo
        traced = self._traced
        # The heap's head (time, seq), read again only when the heap changed: handlers only
        # push (a changed length), and only this loop pops.
        known = -1
        head_t = 0.0
        head_seq = 0
        while True:
            size = len(heap)
            if size != known:
                known = size
                if size:
                    first = heap[0]
                    head_t, head_seq = first[0], first[1]
            i = self._head
            if i < len(fifo):
                a = fifo[i]
                t = a.t
                if not size or t < head_t or (t == head_t and a.seq < head_seq):
                    if t > until:
                        break
                    i += 1
                    if i >= 4096 and i + i >= len(fifo):
                        del fifo[:i]  # the consumed prefix; amortized O(1) per item
                        i = 0
                    self._head = i
                    self.now = t
                    event = a.event
                    if traced:
                        self._traced_arrival(t, a.node, event)
                    else:
                        self._step(t, a.node, event)
                    more = a.more
                    if more is not None:  # the rest of a batch, in send order
                        for node in more:
                            if traced:
                                self._traced_arrival(t, node, event)
                            else:
                                self._step(t, node, event)
                    continue
            if not size or head_t > until:
                break
            item = heappop(heap)
            known = -1
            t = item[0]
            self.now = t
            item[2](t, item[3], item[4])
        self.now = max(self.now, until)

    def pending(self) -> int:
        lane = len(self._lane) - self._lane_head  # its first is on the heap as a token
        return len(self._heap) + len(self._fifo) - self._head + max(lane - 1, 0)

    def add_node(self, broker_id: str, broker: BrokerLike) -> None:
        """A broker that joins at run time (AddLeaf); its channels open at first use."""
        if broker_id in self.nodes:
            raise ValueError(f"add_node: {broker_id!r} is already a node of the simulation")
        self.nodes[broker_id] = Node(broker_id, broker)

    def retire(self, broker: str) -> None:
        """A broker that left the system (RemoveLeaf) stops as its process would: its timers
        never fire again and it sets no new ones; what is still in flight reaches it."""
        node = self.nodes.get(broker)
        if node is None:
            return
        for timer in node.timers.values():
            timer.gen += 1
        step = node.broker.step
        node.step = lambda now, event: [e for e in step(now, event) if type(e) is not SetTimer]

    def inject(self, t: float, broker: str, event: Event) -> list[Effect]:
        """Hand an event to a broker right now (client requests are free and instantaneous);
        the effects it produced (already carried out)."""
        return self._step(t, self.nodes[broker], event)

    # ---- the hot path -----------------------------------------------------------------------

    def _step(self, now: float, node: Node, event: Any) -> list[Effect]:
        self.steps += 1
        native = node.native
        effects = node._step_fn(now, event) if native is None else native.step(now, event)
        if not effects:
            return effects
        links = node.links
        # Same-time batching: the sends of one message that this step puts on the constant-
        # delay FIFO share one queue item (one seq, one Receive), handed to each destination in
        # send order. The items would have had consecutive seqs at one time, so nothing could
        # have run between them: the order of events is the same. `batch_msg` is the message
        # of the step's last FIFO item, which takes more destinations only while nothing else
        # was scheduled (`self._seq` still `batch_next`): a timer effect, or an observer of a
        # delivery or trace record that schedules, closes it.
        batch_msg: Message | None = None
        batch: _Arrival | None = None
        batch_next = -1
        for e in effects:
            # Sends dominate by far, then deliveries; test for them first, the rest go through
            # the dict.
            if type(e) is not Send:
                if type(e) is Deliver:
                    self._on_deliver(now, node, e)
                else:
                    self._effects[type(e)](now, node, e)
                continue
            link = links.get(e.neighbor)
            if link is None:
                link = self._connect(node, e.neighbor)
                if link is None:
                    self.stray += 1
                    continue
            msg = e.message
            if type(msg) is Notify:
                self._notifies += 1
            else:
                self._sent[type(msg)] += 1
            if link.faulty:
                self._faulty_send(now, link, msg)
                continue
            constant = self._constant
            arrival = now + (self._delay(link, msg) if constant is None else constant)
            if arrival < link.last:
                arrival = link.last
            elif constant is not None:
                # now + δ never decreases: constant-delay arrivals are born sorted, and a deque
                # takes them at O(1) instead of the heap's O(log n) (most events are these)
                link.last = arrival
                if batch is not None and msg is batch_msg and self._seq == batch_next:
                    more = batch.more
                    if more is None:  # the second destination: the item becomes a batch
                        batch.more = [link.dst]
                    else:
                        more.append(link.dst)
                else:
                    seq = self._seq
                    self._seq = batch_next = seq + 1
                    batch_msg = msg
                    batch = _Arrival(arrival, seq, link.dst, Receive(link.src, msg))
                    self._fifo.append(batch)
                if self._on_link is not None:
                    self._on_link(now, "send", link.src, link.dst.id, msg)
                continue
            link.last = arrival
            seq = self._seq
            self._seq = seq + 1
            item: Item = (arrival, seq, self._arrive, link.dst, Receive(link.src, msg))
            heappush(self._heap, item)
            if self._on_link is not None:
                self._on_link(now, "send", link.src, link.dst.id, msg)
        return effects

    def _connect(self, node: Node, to: str) -> Link | None:
        """A FIFO channel to any broker of the simulation, opened at first use: the link
        exchange sends out of band and adds links at run time (the thesis assumes every broker
        can reach every other, L5665). Whether the receiver accepts it is its own business."""
        dst = self.nodes.get(to)
        if dst is None or dst is node:
            return None
        link = node.links[to] = Link(node.id, dst)
        return link

    def observe_sends(self, observer: LinkObserver) -> None:
        """Also tell `observer` of every send and link-fault loss from now on (receives too if
        the engine was built with `on_link`): a driver that counts messages, such as the
        reconfiguration manager counting coordination messages by reconfiguration id."""
        previous = self._on_link
        if previous is None:
            self._on_link = observer
            return

        def both(now: float, kind: str, src: str, dst: str, msg: Message) -> None:
            previous(now, kind, src, dst, msg)
            observer(now, kind, src, dst, msg)

        self._on_link = both

    def _traced_arrival(self, now: float, node: Node, event: Receive) -> None:
        self._on_link(now, "receive", event.neighbor, node.id, event.message)  # type: ignore[misc]
        self._step(now, node, event)

    # ---- the other effects ------------------------------------------------------------------

    def _set_timer(self, now: float, node: Node, effect: SetTimer) -> None:
        timer = node.timers.get(effect.timer)
        if timer is None:
            timer = node.timers[effect.timer] = _Timer(node, effect.timer)
        timer.gen += 1  # whatever is still queued for this timer is now stale
        at = effect.at if effect.at >= now else now  # also maps a NaN from corrupted RAM to now
        seq = self._seq
        self._seq = seq + 1
        item: Item = (at, seq, self._fire, timer, timer.gen)
        heappush(self._heap, item)

    def _fire(self, now: float, timer: _Timer, gen: int) -> None:
        if gen == timer.gen:
            self._step(now, timer.node, timer.event)

    # ---- delay models -----------------------------------------------------------------------

    def _uniform_delay(self) -> Callable[[Link, Message], float]:
        lo, span, draw = self.delta_min, self.delta_max - self.delta_min, self._delay_rng.random
        return lambda link, msg: lo + span * draw()  # random.uniform's formula, minus a call

    def _adversarial_delay(self, link: Link, msg: Message) -> float:
        if isinstance(msg, Sub):
            # copies alternate fast, slow, fast, …: every other renewal gap is
            # ρ + d·(δmax − δmin), so a too-small π is caught again and again, not just once
            if msg.sub_id in link.seen:
                link.seen.discard(msg.sub_id)
                return self.delta_max
            link.seen.add(msg.sub_id)
            return self.delta_min
        if isinstance(msg, Unsub):
            link.seen.discard(msg.sub_id)  # keeps `seen` as small as the live subscriptions
            return self.delta_min
        if isinstance(msg, Switch):
            return self.delta_min
        return self.delta_max

    # ---- link faults ------------------------------------------------------------------------

    def report_link(self, a: str, b: str, up: bool) -> None:
        """Tell both ends that link a-b failed or works again (a killed broker's step takes
        nothing): what a live broker learns when its stream breaks or comes back."""
        for x, y in ((a, b), (b, a)):
            self.inject(self.now, x, LinkUp(y) if up else LinkDown(y))

    def set_link_fault(
        self, a: str, b: str, *, drop: float | None = None, duplicate: float | None = None,
        delay: float | None = None, clear_delay: bool = False, both_ways: bool = True,
        hold_until: float | None = None, clear_hold: bool = False,
    ) -> None:
        """Change the fault settings of link a-b, both directions or only a -> b (None leaves
        a setting as it is). `hold_until`: what is sent arrives at that time at the earliest
        (a paused process reads its socket when it resumes)."""
        ab = self.nodes[a].links.get(b) or self._connect(self.nodes[a], b)
        ba = self.nodes[b].links.get(a) or self._connect(self.nodes[b], a)
        if ab is None or ba is None:
            raise ValueError(f"set_link_fault: no link {a}-{b}: both must be brokers")
        for link in (ab, ba) if both_ways else (ab,):
            if drop is not None:
                link.drop = drop
            if duplicate is not None:
                link.duplicate = duplicate
            if delay is not None:
                link.fault_delay = delay
            if clear_delay:
                link.fault_delay = None
            if hold_until is not None:
                link.hold_until = hold_until
            if clear_hold:
                link.hold_until = None
            link.faulty = (link.drop > 0 or link.duplicate > 0 or link.fault_delay is not None
                           or link.hold_until is not None)

    def _faulty_send(self, now: float, link: Link, msg: Message) -> None:
        rng = self._fault_rng
        if link.drop and rng.random() < link.drop:
            self.dropped += 1
            if self._on_link is not None:
                self._on_link(now, "drop", link.src, link.dst.id, msg)
            return
        delay = link.fault_delay if link.fault_delay is not None else self._delay(link, msg)
        arrival = max(now + delay, link.last)
        if link.hold_until is not None:
            arrival = max(arrival, link.hold_until)
        link.last = arrival
        copies = 1
        if link.duplicate and rng.random() < link.duplicate:
            self.duplicated += 1
            copies = 2  # the copy arrives right behind the original, still in FIFO order
        for _ in range(copies):
            received = Receive(link.src, msg)
            seq = self._seq
            self._seq = seq + 1
            item: Item = (arrival, seq, self._arrive, link.dst, received)
            heappush(self._heap, item)
            if self._on_link is not None:
                self._on_link(now, "send", link.src, link.dst.id, msg)


def _ignore(now: float, node: Node, effect: Any) -> None:
    pass
