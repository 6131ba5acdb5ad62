"""A small deterministic message driver for the pure seed-002/003 modules (interim).

The simulator (weeble/broker/sim) is being restructured into the one simulation front door; until
the seed modes are layers of the broker and run there, these tests drive the pure state machines
with this heap of timed deliveries. It is deliberately minimal (no trace, no faults vocabulary)
and goes away when the modes run in `weeble simulate`.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable
from heapq import heappop, heappush
from typing import Any

from weeble.broker.core.events import Send
from weeble.broker.core.overlay.skipring.layer import SkipRingLayer
from weeble.broker.core.overlay.skipring.legitimacy import install, problems
from weeble.broker.core.overlay.skipring.member import Delivered, MemberParams
from weeble.broker.core.overlay.skipring.trie import Publication


class Net:
    """Timed delivery of messages between named nodes; non-FIFO unless `fifo`."""

    def __init__(self, *, seed: int, delay: tuple[float, float] = (0.01, 0.05),
                 fifo: bool = False) -> None:
        self.rng = random.Random(seed)
        self.delay = delay
        self.fifo = fifo
        self.now = 0.0
        self._q: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._last: dict[tuple[str, str], float] = {}
        self.handlers: dict[str, Callable[[str, Any], None]] = {}
        self.crashed: set[str] = set()
        self.cut: set[frozenset[str]] = set()
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.lost = 0

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        heappush(self._q, (t, next(self._seq), fn, args))

    def every(self, period: float, fn: Callable[[], None], *, phase: float | None = None) -> None:
        first = self.rng.uniform(0, period) if phase is None else phase

        def tick() -> None:
            fn()
            self.at(self.now + period, tick)

        self.at(self.now + first, tick)

    def send(self, src: str, dst: str, msg: Any) -> None:
        self.sent[src] += 1
        self.kinds[type(msg).__name__] += 1
        size = getattr(msg, "size", None)
        self.bytes_sent[src] += size() if size else 0
        if frozenset((src, dst)) in self.cut:
            self.lost += 1
            return
        t = self.now + self.rng.uniform(*self.delay)
        if self.fifo:
            t = max(t, self._last.get((src, dst), 0.0))
            self._last[(src, dst)] = t
        self.at(t, self._deliver, src, dst, msg)

    def _deliver(self, src: str, dst: str, msg: Any) -> None:
        if dst in self.crashed or dst not in self.handlers:
            self.lost += 1
            return
        if frozenset((src, dst)) in self.cut:
            self.lost += 1
            return
        self.received[dst] += 1
        self.handlers[dst](src, msg)

    def run(self, until: float) -> None:
        q = self._q
        while q and q[0][0] <= until:
            t, _, fn, args = heappop(q)
            self.now = t
            fn(*args)
        self.now = until

    def reset_counts(self) -> None:
        self.sent.clear()
        self.received.clear()
        self.bytes_sent.clear()
        self.kinds.clear()


class SkipRingWorld:
    """One supervisor `S` and members n0…n{n−1} of topic `t`. With `oracle_detector` an
    eventually-correct failure detector reports the crashed set at every supervisor Timeout;
    without it, crashes are found by the members' Suspect reports alone."""

    TOPIC = "t"

    def __init__(self, n: int, *, seed: int = 0, member_period: float = 1.0,
                 supervisor_period: float = 0.25, delay: tuple[float, float] = (0.01, 0.05),
                 params: MemberParams | None = None, oracle_detector: bool = True) -> None:
        self.net = Net(seed=seed, delay=delay)
        self.oracle_detector = oracle_detector
        self.member_period = member_period
        self.sup = "S"
        self.ids = [f"n{i}" for i in range(n)]
        self.layers = {v: SkipRingLayer(v, supervisors=(self.sup,), seed=seed, params=params)
                       for v in [self.sup, *self.ids]}
        self.wanted: set[str] = set()
        self.delivered: dict[str, set[int]] = {v: set() for v in self.ids}
        self.published: set[int] = set()
        self._seq = itertools.count()
        for v, layer in self.layers.items():
            self.net.handlers[v] = self._handler(v, layer)
        self.supervisor_state = self.layers[self.sup].supervisor(self.TOPIC)
        for v in self.ids:
            self.net.every(member_period, lambda v=v: self._member_tick(v))
        self.net.every(supervisor_period, self._supervisor_tick)

    def _handler(self, v: str, layer: SkipRingLayer) -> Callable[[str, Any], None]:
        def handle(src: str, msg: Any) -> None:
            self.emit(v, layer.receive(msg))
        return handle

    def emit(self, v: str, effects: Iterable[Any]) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.net.send(v, e.neighbor, e.message)
            elif isinstance(e, Delivered):
                self.delivered[v].add(e.pub.key)

    def _member_tick(self, v: str) -> None:
        if v not in self.net.crashed:
            self.emit(v, self.layers[v].member_timeout())

    def _supervisor_tick(self) -> None:
        layer = self.layers[self.sup]
        if self.oracle_detector:
            self.emit(self.sup, layer.failure_report(self.net.crashed))
        self.emit(self.sup, layer.supervisor_timeout())

    # ---- operations ----------------------------------------------------------------------------

    def member(self, v: str) -> Any:
        return self.layers[v].member(self.TOPIC)

    def subscribe(self, v: str) -> None:
        self.wanted.add(v)
        self.emit(v, self.layers[v].subscribe(self.TOPIC))

    def unsubscribe(self, v: str) -> None:
        self.wanted.discard(v)
        self.emit(v, self.layers[v].unsubscribe(self.TOPIC))

    def crash(self, v: str) -> None:
        self.net.crashed.add(v)

    def publish(self, v: str, payload: bytes = b"x") -> Publication:
        pub = Publication(publisher=v, seq=next(self._seq), payload=payload)
        self.published.add(pub.key)
        self.emit(v, self.layers[v].publish(self.TOPIC, pub))
        return pub

    def install_legitimate(self, order: list[str], pubs: Iterable[Publication] = ()) -> None:
        pubs = list(pubs)
        self.wanted = set(order)
        self.published |= {p.key for p in pubs}
        install(self.supervisor_state, {v: self.member(v) for v in order}, order, pubs)

    def alive(self) -> set[str]:
        return self.wanted - self.net.crashed

    def problems(self, *, publications: bool = True) -> list[str]:
        members = {v: self.member(v) for v in self.alive()}
        return problems(self.supervisor_state, members, alive=self.alive(),
                        publications=self.published if publications else None)

    def run_until_legitimate(self, limit: float, *, publications: bool = True,
                             check_every: float | None = None, settle: int = 5) -> float | None:
        """Run until the state is legitimate and stays so for `settle` more checks (messages in
        flight are implicit edges: a state can look right while delegations still travel); the
        time from the start to the first check of that streak, or None."""
        step = check_every or self.member_period
        start = self.net.now
        streak_from: float | None = None
        streak = 0
        while self.net.now - start < limit + settle * step:
            self.net.run(self.net.now + step)
            if self.problems(publications=publications):
                streak_from, streak = None, 0
                if self.net.now - start >= limit:
                    return None
                continue
            if streak_from is None:
                streak_from = self.net.now - start
            streak += 1
            if streak > settle:
                return streak_from
        return None

    def snapshot(self) -> dict[str, Any]:
        """Labels, edges and database, for closure checks."""
        out: dict[str, Any] = {"db": dict(self.supervisor_state.db)}
        for v in self.alive():
            m = self.member(v)
            out[v] = (m.label, m.left, m.right, m.ring, dict(m.shortcuts), m.store.root)
        return out
