"""A view of the one Simulation in mode skip_ring for seed 003's claims: `SkipRingWorld` gives
`weeble reproduce skipring`, its benchmark and the claim tests (tests/seeds/) the handles they
need (member and supervisor state, message counts, crash, inject).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from weeble.core.events import Corrupt, TimerFired
from weeble.core.messages import Notification
from weeble.core.overlay.skipring.legitimacy import install, problems
from weeble.core.overlay.skipring.member import MemberParams
from weeble.core.overlay.skipring.trie import Publication


class SkipRingWorld:
    """One supervisor `S` and members n0…n{n−1} of topic `t`, as brokers of the one Simulation
    (weeble/sim/simulation.py) in mode skip_ring: the same core, engine and ROM as
    `weeble simulate`. Members join through a client's topic subscription (a lease that never
    runs out here); `net` counts messages per node and kind (the engine's link observer). With
    `oracle_detector` an eventually-correct failure detector tells the supervisor of each crash
    (the `skipring.dead` fault: the supervisor's view); without it, crashes are found by the
    members' Suspect reports alone."""

    TOPIC = "t"
    FILTER = 'topic == "t"'

    def __init__(self, n: int, *, seed: int = 0, member_period: float = 1.0,
                 supervisor_period: float = 0.25, delay: tuple[float, float] = (0.01, 0.05),
                 params: MemberParams | None = None, oracle_detector: bool = True) -> None:
        from weeble.core.rom import Algorithm, Mode, Params, Rom, SkipRing
        from weeble.model.topology import from_edges
        from weeble.sim.simulation import Simulation

        self.oracle_detector = oracle_detector
        self.member_period = member_period
        self.sup = "S"
        self.ids = [f"n{i}" for i in range(n)]
        p = params or MemberParams()
        sr = SkipRing(supervisors=(self.sup,), interval=member_period,
                      supervisor_interval=supervisor_period, p_base=p.p_base, q=p.q,
                      flood=p.flood, push_hints=p.push_hints, plausibility=p.plausibility,
                      suspect_after=p.suspect_after, seed=seed)
        # leases that outlive every test: the members stay until told to leave
        timing = Params(pi=1e7, rho=1e6, delta_min=delay[0], delta_max=delay[1], d=2)
        topology = from_edges([(self.sup, v) for v in self.ids])
        roms = {b: Rom(broker_id=b, neighbors=frozenset(topology.neighbors(b)), root=self.sup,
                       parent=None if b == self.sup else self.sup, algorithm=Algorithm.SIMPLE,
                       params=timing, mode=Mode.SKIP_RING, skip_ring=sr)
                for b in topology.brokers}
        self.net = _Counts(self)
        self.sim = Simulation(topology, algorithm=Algorithm.SIMPLE, params=timing, roms=roms,
                              seed=seed, delay="constant" if delay[0] == delay[1] else "uniform",
                              boot="together", keep_history=False, on_link=self.net.observe)
        self.wanted: set[str] = set()
        self.published: set[int] = set()
        self.crashed: set[str] = set()
        self.supervisor_state = self.layer(self.sup).supervisor(self.TOPIC)
        self.sim.start()

    # ---- views ---------------------------------------------------------------------------------

    def layer(self, v: str) -> Any:
        return self.sim.brokers[v].skip_ring_node.layer

    def member(self, v: str) -> Any:
        return self.layer(v).member(self.TOPIC)

    def alive(self) -> set[str]:
        return self.wanted - self.crashed

    # ---- operations ----------------------------------------------------------------------------

    def subscribe(self, v: str) -> None:
        self.wanted.add(v)
        self.sim.subscribe(self.sim.now, f"c-{v}", v, self.FILTER, sub_id=f"c-{v}/0")

    def unsubscribe(self, v: str) -> None:
        self.wanted.discard(v)
        self.sim.unsubscribe(self.sim.now, f"c-{v}/0")

    def add_member(self, v: str) -> None:
        """A broker that joins the system now (booted at once), not yet subscribed."""
        self.sim.add_broker(self.sim.now, v, attach=self.sup)
        self.ids.append(v)

    def crash(self, v: str) -> None:
        """v stops (takes no event again); with the oracle, the supervisor learns of it."""
        self.crashed.add(v)
        self.sim.engine.nodes[v].step = lambda now, event: []
        if self.oracle_detector:
            self.sim.corrupt(self.sim.now, self.sup, Corrupt(
                "skipring.dead", sorted(self.crashed), {"topic": self.TOPIC}))

    def publish(self, v: str) -> Publication:
        """A client of v publishes on the topic now; the publication as the tries hold it."""
        from weeble.core.overlay.skipring.node import to_publication

        nid = self.sim.publish(self.sim.now, v, {"topic": self.TOPIC}, publisher=f"p-{v}")
        publisher, seq = nid.rsplit("#", 1)
        pub = to_publication(Notification(publisher, int(seq), {"topic": self.TOPIC},
                                          self.sim.now))
        self.published.add(pub.key)
        return pub

    def inject(self, src: str, dst: str, msg: Any) -> None:
        """A message from src appears at dst now (a junk or a hand-made one), counted as sent."""
        self.net.observe(self.sim.now, "send", src, dst, msg)
        self.sim.inject_message(self.sim.now, src, dst, msg)

    def stop_timers(self) -> None:
        """No Timeout fires again (what is in flight still arrives)."""
        for node in self.sim.engine.nodes.values():
            for timer in node.timers.values():
                timer.gen += 1
            node.step = _no_timers(node.step)

    def install_legitimate(self, order: list[str], pubs: Iterable[Publication] = ()) -> None:
        pubs = list(pubs)
        self.wanted = set(order)
        self.published |= {p.key for p in pubs}
        install(self.supervisor_state, {v: self.member(v) for v in order}, order, pubs)
        for v in order:  # the clients whose leases keep the members in
            self.sim.subscribe(self.sim.now, f"c-{v}", v, self.FILTER, sub_id=f"c-{v}/0")
        self.sim.run(self.sim.now)

    # ---- legitimacy ----------------------------------------------------------------------------

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
        start = self.sim.now
        streak_from: float | None = None
        streak = 0
        while self.sim.now - start < limit + settle * step:
            self.sim.run(self.sim.now + step)
            if self.problems(publications=publications):
                streak_from, streak = None, 0
                if self.sim.now - start >= limit:
                    return None
                continue
            if streak_from is None:
                streak_from = self.sim.now - start
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


def _no_timers(step: Callable[[float, Any], Any]) -> Callable[[float, Any], Any]:
    def filtered(now: float, event: Any) -> Any:
        return [] if isinstance(event, TimerFired) else step(now, event)
    return filtered


class _Counts:
    """Messages per node and kind, from the engine's link observer."""

    def __init__(self, world: SkipRingWorld) -> None:
        self.world = world
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()

    def observe(self, now: float, kind: str, src: str, dst: str, msg: Any) -> None:
        if kind == "send":
            self.sent[src] += 1
            self.kinds[type(msg).__name__] += 1
            size = getattr(msg, "size", None)
            self.bytes_sent[src] += size() if size else 0
        elif kind == "receive":
            self.received[dst] += 1

    @property
    def now(self) -> float:
        return self.world.sim.now

    def run(self, until: float) -> None:
        self.world.sim.run(until)

    def reset_counts(self) -> None:
        self.sent.clear()
        self.received.clear()
        self.bytes_sent.clear()
        self.kinds.clear()
