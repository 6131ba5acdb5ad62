"""Layer `optimize`: the Cost-and-Interest heuristic and the l-MST / l-MIT baselines (thesis
5.5-5.6; spec ch5 §2), as one more layer of the pure broker.

Every `broadcast_interval` a broker floods its interest summary η hops through the tree
(`Broadcast`, Alg. 17); whoever receives one learns the originator's summary and the p and c
along the path (its environment), and evaluates the direct link to the originator (phase 1,
`beneficial`). If it pays, a request (`Propose`, Alg. 18) travels the tree path to the
originator and every broker of the cycle the new link would close adds its cost of removing
each cycle edge (phase 2, `edge_costs`); the originator removes the cheapest edge, or nothing
when that is the new link, by starting the coordinated link exchange of ch. 4 (layer `exchange`,
initiator = the originator, as in the thesis). The three heuristics differ only in those two
functions (thesis L7762-7765).

What a broker consumes (a notification delivered to a local client, or published by one) goes
into its cache: the broker calls `consumed` for every such notification.

Choices where the thesis is silent (spec ch5 §2.10): 0/0 in eq. 5.11 is 1; a tie prefers no change;
a request whose broker lacks an environment entry, or whose next hop is no longer a neighbour,
is dropped; a decision that meets its originator inside another exchange is dropped (the tree
it was computed for is changing). Only the originator's summary is kept (Alg. 17.12). The
baselines (the thesis gives no rules): l-MST proposes when the new link is cheaper than the
dearest link of the tree path and removes the dearest cycle edge; l-MIT proposes when the
originator shares more traffic with me than my first hop towards it (Baldoni et al.) and removes
the cycle edge whose endpoints share the least traffic.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from weeble.core.events import Effect, Send, SetTimer, StartExchange, Trace
from weeble.core.optimize.cost import (
    choose,
    cycle_costs,
    cycle_edges,
    effective_cost,
)
from weeble.core.optimize.interest import Cache, unpack
from weeble.core.optimize.messages import Broadcast, Propose
from weeble.core.overlay import Overlay
from weeble.core.rom import Heuristic, Optimizer, Rom

BROADCAST = "ci:broadcast"  # the timer of the periodic broadcast


class Known:
    """What the environment table knows of one broker (Alg. 17.9-20)."""

    __slots__ = ("bits", "interest", "p", "seen")

    def __init__(self, p: float, seen: float) -> None:
        self.p = p
        self.seen = seen
        self.bits: np.ndarray | None = None  # its summary, unpacked (originators only)
        self.interest = 0  # I_{me,X}: my cached ids in its summary


class OptimizeRam:
    """The optimizer's slice of RAM: cache, environment, link costs learned, counters."""

    __slots__ = ("cache", "env", "links", "measured", "next_id", "proposed", "started")

    def __init__(self, params: Optimizer) -> None:
        self.cache = Cache(size=params.cache_size, m=params.filter_size, k=params.hashes)
        self.env: dict[str, Known] = {}
        self.links: dict[tuple[str, str], tuple[float, float]] = {}  # (a, b) -> (c, seen)
        self.measured: dict[str, float] = {}  # c(me, x) measured live (LinkMeasured)
        self.next_id = 0
        self.proposed = 0
        self.started = 0  # exchanges this broker started as the originator

    def snapshot(self) -> dict[str, Any]:
        """Its cache (size, newest ids), each known broker's p, I_{me,X} and summary weight
        (bits set), the remote link costs it learned, its measured costs, its counters."""
        cache = self.cache
        newest = [cache.ids[(cache._next - 1 - i) % cache.size] for i in range(min(3, len(cache)))]
        return {"cache": len(cache), "newest": newest,
                "env": {x: {"p": k.p, "interest": k.interest,
                            "summary": None if k.bits is None else int(k.bits.sum())}
                        for x, k in sorted(self.env.items())},
                "links": {f"{a}-{b}": c for (a, b), (c, _) in sorted(self.links.items())},
                "proposed": self.proposed, "started": self.started,
                "measured": {x: round(c, 3) for x, c in sorted(self.measured.items())}}


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


class Optimize:
    name = "optimize"

    def __init__(self, rom: Rom, overlay: Overlay, start_exchange: Callable[
            [float, StartExchange], list[Effect]], exchange_busy: Callable[[], bool],
            ram: OptimizeRam) -> None:
        assert rom.optimizer is not None
        self.rom = rom
        self.params = rom.optimizer
        self.me = rom.broker_id
        self.overlay = overlay
        self.ram = ram
        self.p_me = self.params.processing_cost
        self.oracle = dict(self.params.link_costs)  # c(me, x) for every other broker x
        self._start_exchange = start_exchange
        self._busy = exchange_busy
        self.heuristic = self.params.heuristic
        self.receivers: dict[type, Callable[[float, str, Any], list[Effect]]] = {
            Broadcast: self.on_broadcast, Propose: self.on_propose}
        self._joint: dict[tuple[str, str], int] = {}  # I_{me,K,X}, valid until env changes

    def reset_joint(self) -> None:
        """The cached I_{me,K,X} are stale (the cache or the environment changed)."""
        self._joint.clear()

    # ---- costs ------------------------------------------------------------------------------

    def link_cost(self, other: str) -> float:
        measured = self.ram.measured.get(other)
        if measured is not None:
            return measured
        try:
            return self.oracle[other]
        except KeyError:
            raise KeyError(f"optimizer: no link cost from {self.me!r} to {other!r} in the "
                           "scenario") from None

    def on_measured(self, _now: float, event: Any) -> list[Effect]:
        """A round trip the driver measured (events.LinkMeasured): c(me, peer) from now on."""
        if event.peer != self.me and event.rtt >= 0:
            step = self.params.resolution_ms
            ms = max(1, math.ceil(event.rtt * 1000.0 / step - 1e-9)) * step
            self.ram.measured[event.peer] = ms * self.params.cost_per_ms
        return []

    def _c(self, a: str, b: str) -> float | None:
        if a == self.me:
            return self.link_cost(b)
        if b == self.me:
            return self.link_cost(a)
        got = self.ram.links.get(_key(a, b))
        return None if got is None else got[0]

    def _p(self, x: str) -> float | None:
        if x == self.me:
            return self.p_me
        known = self.ram.env.get(x)
        return None if known is None else known.p

    def interest(self, x: str) -> int:
        known = self.ram.env.get(x)
        return 0 if known is None else known.interest

    def joint(self, k: str, x: str) -> int:
        """I_{me,K,X}: my cached ids in the AND of K's and X's summaries."""
        got = self._joint.get((k, x))
        if got is None:
            bk, bx = self.ram.env[k].bits, self.ram.env[x].bits
            assert bk is not None and bx is not None
            got = self.ram.cache.count(bk & bx)
            self._joint[(k, x)] = self._joint[(x, k)] = got
        return got

    def _complete(self, brokers: list[str]) -> bool:
        """Every broker but me has a summary in my environment."""
        env = self.ram.env
        return all(b == self.me or (b in env and env[b].bits is not None) for b in brokers)

    # ---- the periodic broadcast -------------------------------------------------------------

    def on_start(self, now: float) -> list[Effect]:
        phase = random.Random(f"{self.params.seed}:{self.me}").uniform(
            0, self.params.broadcast_interval)
        return [SetTimer(BROADCAST, max(now, self.params.start) + phase)]

    def on_timer(self, now: float) -> list[Effect]:
        params, ram = self.params, self.ram
        for x in [x for x, k in ram.env.items() if now - k.seen > params.update_interval]:
            del ram.env[x]  # garbage collection (L7776-7778)
        for key in [k for k, (_, seen) in ram.links.items() if now - seen > params.update_interval]:
            del ram.links[key]
        self._joint.clear()
        summary = ram.cache.summary()
        effects: list[Effect] = [
            Send(n, Broadcast((self.me,), (self.p_me,), (), summary))
            for n in sorted(self.overlay.ram.neighbors)]
        effects.append(SetTimer(BROADCAST, now + params.broadcast_interval))
        return effects

    def on_broadcast(self, now: float, sender: str, m: Broadcast) -> list[Effect]:
        if sender not in self.overlay.ram.neighbors or not m.path or m.path[-1] != sender \
                or self.me in m.path or len(m.c) != len(m.path) - 1 \
                or len(m.p) != len(m.path):
            return [Trace("garbage", {"from": sender, "why": "malformed optimizer broadcast"})]
        ram = self.ram
        origin = m.path[0]
        for q, b in enumerate(m.path):
            known = ram.env.get(b)
            if known is None:
                known = ram.env[b] = Known(m.p[q], now)
            known.p, known.seen = m.p[q], now
            if q < len(m.path) - 1:
                ram.links[_key(b, m.path[q + 1])] = (m.c[q], now)
        known = ram.env[origin]
        known.bits = unpack(m.summary)
        known.interest = ram.cache.count(known.bits)  # Alg. 17.6
        self._joint = {k: v for k, v in self._joint.items() if origin not in k}
        effects: list[Effect] = []
        if len(m.path) >= 2:
            effects.extend(self._evaluate(now, m))
        if len(m.path) < self.params.eta:  # forward: the originator at hop 1 … η−1 from here
            fwd = Broadcast((*m.path, self.me), (*m.p, self.p_me),
                            (*m.c, self.link_cost(sender)), m.summary)
            effects.extend(Send(n, fwd) for n in sorted(self.overlay.ram.neighbors)
                           if n != sender)
        return effects

    # ---- phase 1: evaluation ----------------------------------------------------------------

    def _evaluate(self, now: float, m: Broadcast) -> list[Effect]:
        route = [self.me, *reversed(m.path)]  # me, my neighbour, …, the originator
        if not self._complete(route):
            return []  # not everything known yet (L7780-7786)
        decision, estimate = self.beneficial(route)
        if not decision:
            return []
        self.ram.next_id += 1
        self.ram.proposed += 1
        rid = f"{self.heuristic.value}:{self.me}:{self.ram.next_id}"
        path = tuple(route)
        n = len(path)
        p = tuple(self._p(b) or 0.0 for b in path)
        c = tuple(self._c(path[t], path[(t + 1) % n]) or 0.0 for t in range(n))
        effects: list[Effect] = [Trace("optimize", {
            "phase": "propose", "rid": rid, "path": list(path), "estimate": estimate,
            "cost": c[-1], "heuristic": self.heuristic.value})]
        req = Propose(rid, path, p, c, (0.0,) * n)
        effects.extend(self.on_propose(now, self.me, req))
        return effects

    def beneficial(self, route: list[str]) -> tuple[bool, float]:
        """directConnectionBeneficial: (propose?, the figure it compared the link cost with)."""
        j = route[-1]
        c_ij = self.link_cost(j)
        if self.heuristic is Heuristic.MST:
            dearest = max(self._c(a, b) or 0.0 for a, b in itertools.pairwise(route))
            return c_ij < dearest, dearest
        if self.heuristic is Heuristic.MIT:
            first = self.interest(route[1])
            return self.interest(j) > first, float(first)
        if self.interest(j) == 0:
            return False, 0.0  # L7591-7592
        p = {b: self._p(b) or 0.0 for b in route}
        estimate = effective_cost(route, self.interest, self.joint, p, self._cost)
        return c_ij < estimate, estimate

    def _cost(self, a: str, b: str) -> float:
        got = self._c(a, b)
        return 0.0 if got is None else got

    # ---- phase 2: consensus -----------------------------------------------------------------

    def edge_costs(self, req: Propose) -> list[float] | None:
        """cost_R(e, me) for every edge of the request's cycle, or None if I cannot tell."""
        path = list(req.path)
        edges = cycle_edges(path)
        if self.heuristic is Heuristic.MST:
            return [-req.c[t] for t in range(len(edges))]
        if not self._complete(path):
            return None
        if self.heuristic is Heuristic.MIT:
            return [float(self.interest(b if a == self.me else a)) if self.me in (a, b) else 0.0
                    for a, b in edges]
        costs = {_key(a, b): req.c[t] for t, (a, b) in enumerate(edges)}
        p = dict(zip(path, req.p, strict=True))
        return cycle_costs(self.me, path, self.interest, self.joint, p,
                           lambda a, b: costs[_key(a, b)])

    def on_propose(self, now: float, sender: str, req: Propose) -> list[Effect]:
        path = req.path
        n = len(path)
        if (self.me not in path or len(req.c) != n or len(req.p) != n or len(req.cost) != n
                or n < 3 or len(set(path)) != n):
            return [Trace("garbage", {"from": sender, "why": "malformed optimizer request"})]
        mine = self.edge_costs(req)
        if mine is None:
            return [_trace("dropped", req, why="environment incomplete")]
        req = Propose(req.rid, path, req.p, req.c,
                      tuple(a + b for a, b in zip(req.cost, mine, strict=True)))
        i = path.index(self.me)
        if i < n - 1:
            nxt = path[i + 1]
            if nxt not in self.overlay.ram.neighbors:
                return [_trace("dropped", req, why=f"{nxt} is no longer a neighbour")]
            return [Send(nxt, req)]
        return self._decide(now, req)

    def _decide(self, now: float, req: Propose) -> list[Effect]:
        path = req.path
        n = len(path)
        t = choose(req.cost)
        if t == n - 1:
            return [_trace("abort", req)]
        remove = (path[t], path[t + 1])
        if path[0] in self.overlay.ram.neighbors:  # another exchange linked us meanwhile
            return [_trace("dropped", req, why=f"{path[0]} is a neighbour already",
                           remove=list(remove))]
        if self._busy():
            return [_trace("dropped", req, why="the originator is inside another exchange",
                           remove=list(remove))]
        self.ram.started += 1
        effects: list[Effect] = [_trace("decide", req, remove=list(remove))]
        effects.extend(self._start_exchange(now, StartExchange(
            req.rid, tuple(reversed(path)), remove, self.params.seed)))
        return effects

    # ---- the cache --------------------------------------------------------------------------

    def consumed(self, nid: str) -> None:
        self.ram.cache.record(nid)

    def snapshot(self) -> dict[str, Any]:
        return self.ram.snapshot()


def _trace(phase: str, req: Propose, **fields: Any) -> Trace:
    return Trace("optimize", {"phase": phase, "rid": req.rid, "path": list(req.path),
                              "costs": list(req.cost), **fields})
