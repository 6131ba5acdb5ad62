"""`simulate(scenario, out_dir)`: one simulated run, from scenario to trace and summary.json.

It wires the engine (brokers, links, timers), the clients (workload.py), the faults of the
scenario, and two observers:
- the delivery oracle: for every publication, which clients must receive it, and what each
  Deliver effect was (expected, duplicate, spurious, ...): the service-level view;
- the legitimacy monitor: every `check_every` s, `legitimacy.check` on the brokers' tables: the
  state-level view, from which the stabilization time after the last fault is read.

The oracle is deliberately conservative (it may excuse a miss, never invent one):
a client must receive notification n published at t_p iff one of its subscriptions matches n,
started at least d·δ_max + ρ before t_p (time to propagate, plus one refresh period of slack for
a subscription whose first copy met a transiently wrong table), and does not end before
t_p + d·δ_max (n crosses at most d links). A delivery to a client that holds no matching
subscription at that moment violates safety (c) and is spurious, unless the client crashed: the
broker cannot know, and the crashed client's lease lingers up to 2π (F12).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from weeble.broker.core.broker import Broker
from weeble.broker.core.events import Deliver, Trace
from weeble.broker.core.legitimacy import LiveSub, check
from weeble.broker.core.messages import Message, Notification
from weeble.broker.sim.engine import MESSAGE_KINDS, Engine, Node
from weeble.broker.sim.target import SimTarget
from weeble.broker.sim.workload import Clients, ClientSub
from weeble.model.experiment import tree_of_scenario
from weeble.model.scenario import Scenario
from weeble.trace.header import RunHeader
from weeble.trace.writer import SimSink, message_ids

SUMMARY_VERSION = 1
SIM = "sim"  # the node of the simulator's own records (legitimacy checks, link faults)
RETENTION_SLACK = 1.0  # s a publication stays open for late deliveries beyond its deadline


@dataclass(slots=True)
class Summary:
    """The content of summary.json (see `as_dict`; `performance` is the only non-deterministic
    part: everything else is a function of the scenario)."""

    v: int
    scenario: str
    seed: int
    duration: float
    topology: dict[str, Any]
    routing: dict[str, Any]
    params: dict[str, Any]
    bound: float  # Δ of the algorithm (Params.bound)
    messages: dict[str, Any]  # inter-broker messages by kind, total, per simulated second
    link_faults: dict[str, int]
    clients: dict[str, int]  # subscriptions, refreshes, unsubscriptions, crashes, publications
    deliveries: dict[str, Any]  # the oracle's verdict
    legitimacy: dict[str, Any]
    faults: list[dict[str, Any]]
    last_fault_end: float
    stabilization_time: float | None  # s after the last fault; None if never legitimate
    ratio: float | None  # stabilization_time / bound
    performance: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- the delivery oracle --------------------------------------------------------------------


class _Tally:
    __slots__ = ("delivered", "duplicate", "expected", "missed", "phantom", "spurious")

    def __init__(self) -> None:
        self.expected = self.delivered = self.missed = 0
        self.duplicate = self.spurious = self.phantom = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("expected", "delivered", "missed", "duplicate",
                                              "spurious", "phantom")}


class _Pub:
    __slots__ = ("after", "attrs", "cls", "delivered", "expected", "hits", "key", "t")

    def __init__(self, key: tuple[str, int], t: float, n: Notification, cls: int | None,
                 expected: set[str], after: bool) -> None:
        self.key, self.t, self.attrs, self.cls = key, t, n.attributes, cls
        self.expected = expected
        self.delivered: set[str] = set()
        self.hits = 0  # expected clients delivered so far
        self.after = after  # published after last fault end + Δ: misses are violations


class Oracle:
    def __init__(self, *, activation: float, path: float, retention: float,
                 bound_start: float) -> None:
        self.activation, self.path = activation, path
        self.retention, self.bound_start = retention, bound_start
        self.by_class: dict[int, dict[str, ClientSub]] = {}  # workload subs by class and client
        self.explicit: dict[str, ClientSub] = {}  # subs with arbitrary filters, by sub_id
        self.subs_of: dict[str, list[ClientSub]] = {}  # live subs per client
        self.crashed: set[str] = set()
        self.last_seq: dict[str, int] = {}  # per publisher: anything above was never published
        self.pending: dict[tuple[str, int], _Pub] = {}
        self.order: deque[_Pub] = deque()  # pending, in publication order
        self.all, self.after = _Tally(), _Tally()
        self.late = self.to_crashed = self.unfinished = 0

    # Listener interface (called by Clients)

    def started(self, t: float, sub: ClientSub) -> None:
        if sub.cls is not None:
            self.by_class.setdefault(sub.cls, {})[sub.client] = sub
        else:
            self.explicit[sub.sub_id] = sub
        self.subs_of.setdefault(sub.client, []).append(sub)

    def ended(self, t: float, sub: ClientSub) -> None:
        if sub.cls is not None:
            del self.by_class[sub.cls][sub.client]
        else:
            del self.explicit[sub.sub_id]
        subs = self.subs_of[sub.client]
        subs.remove(sub)
        if not subs:
            del self.subs_of[sub.client]
        if sub.crashed:
            self.crashed.add(sub.client)
            # A crash fault comes unannounced: publications that counted on the client are off.
            for pub in reversed(self.order):
                if pub.t + self.path <= t:
                    break
                pub.expected.discard(sub.client)

    def published(self, t: float, n: Notification, cls: int | None) -> None:
        self._retire(t)
        lo, hi = t - self.activation, t + self.path
        expected: set[str] = set()
        if cls is not None:
            group = self.by_class.get(cls)
            if group:
                expected = {c for c, s in group.items() if s.start <= lo and s.end >= hi}
        for s in self.explicit.values():
            if s.start <= lo and s.end >= hi and s.filter.matches(n.attributes):
                expected.add(s.client)
        key = (n.publisher, n.seq)
        self.last_seq[n.publisher] = n.seq
        pub = _Pub(key, t, n, cls, expected, t >= self.bound_start)
        self.pending[key] = pub
        self.order.append(pub)

    # engine observer (hot: one call per Deliver effect)

    def deliver(self, now: float, node: Node, effect: Deliver) -> None:
        # The common case (an expected first delivery) takes the fewest steps possible.
        n = effect.notification
        after = now >= self.bound_start  # safety is judged by delivery time
        self.all.delivered += 1
        if after:
            self.after.delivered += 1
        pub = self.pending.get((n.publisher, n.seq))
        if pub is None or (n.attributes is not pub.attrs and n.attributes != pub.attrs):
            self._unknown(after, n, pub)
            return
        client = effect.client
        delivered = pub.delivered
        if client in delivered:
            self.all.duplicate += 1
            if after:
                self.after.duplicate += 1
            return
        delivered.add(client)
        if client in pub.expected:
            pub.hits += 1
            return
        for s in self.subs_of.get(client, ()):
            if s.cls == pub.cls if s.cls is not None else s.filter.matches(n.attributes):
                return  # not required (too young, or ending soon), but allowed
        if client in self.crashed:
            self.to_crashed += 1
            return
        self.all.spurious += 1
        if after:
            self.after.spurious += 1

    def _unknown(self, after: bool, n: Notification, pub: _Pub | None) -> None:
        if pub is None and 1 <= n.seq <= self.last_seq.get(n.publisher, 0):
            self.late += 1  # published, but closed long ago: no verdict possible
            return
        self.all.phantom += 1  # never published, or altered on the way (F8)
        if after:
            self.after.phantom += 1

    def _retire(self, now: float) -> None:
        order = self.order
        while order and order[0].t + self.retention < now:
            self._close(order.popleft())

    def _close(self, pub: _Pub) -> None:
        del self.pending[pub.key]
        missed = len(pub.expected) - pub.hits
        for tally in (self.all, self.after) if pub.after else (self.all,):
            tally.expected += len(pub.expected)
            tally.missed += missed

    def finish(self, end: float) -> dict[str, Any]:
        """Close every publication whose deadline has passed; ignore the rest."""
        while self.order:
            pub = self.order.popleft()
            if pub.t + self.path <= end:
                self._close(pub)
            else:
                self.unfinished += 1
                del self.pending[pub.key]
        return {
            **self.all.as_dict(),
            "late": self.late,
            "to_crashed": self.to_crashed,
            "unfinished": self.unfinished,
            "after_bound": {"from": self.bound_start, **self.after.as_dict()},
        }


# ---- the legitimacy monitor -----------------------------------------------------------------


class Legitimacy:
    """Periodic `legitimacy.check`. A subscription is required once it had d·δ_max to spread;
    an ended one stays allowed for 2π + d·δ_max (second chance removes its last entry by then)."""

    def __init__(self, engine: Engine, brokers: dict[str, Broker], clients: Clients,
                 trace: SimSink | None, *, period: float, activation: float, linger: float,
                 until: float) -> None:
        self.engine, self.brokers, self.clients, self.trace = engine, brokers, clients, trace
        self.period, self.activation, self.linger, self.until = period, activation, linger, until
        self.results: list[tuple[float, int]] = []  # (time, number of problems)
        self.samples: list[str] = []
        self.first_failure: float | None = None
        self.last_failure: float | None = None
        engine.schedule(period, self._check)

    def _check(self, t: float, _a: object, _b: object) -> None:
        ended = self.clients.ended
        assert ended is not None  # Clients(keep_ended=True)
        while ended and ended[0].ended_at + self.linger < t:  # type: ignore[operator]
            ended.popleft()
        required: list[LiveSub] = []
        allowed: list[LiveSub] = []
        for s in self.clients.live.values():
            (required if s.start < t - self.activation else allowed).append(_live(s))
        allowed.extend(_live(s) for s in ended)
        problems = check(self.brokers, required, allowed)
        self.results.append((t, len(problems)))
        if problems:
            if self.first_failure is None:
                self.first_failure = t
            self.last_failure = t
            self.samples = problems[:5]
        if self.trace is not None:
            self.trace.write(SIM, t, SIM, "legitimacy",
                             {"ok": not problems, "problems": len(problems),
                              "sample": problems[:3], "required": len(required)})
        if t + self.period <= self.until:
            self.engine.schedule(t + self.period, self._check)

    def stabilization(self, since: float) -> float | None:
        """Time from `since` to the first check after which every check was legitimate."""
        later = [(t, bad) for t, bad in self.results if t >= since]
        if not later or later[-1][1]:
            return None
        i = len(later)
        while i > 0 and not later[i - 1][1]:
            i -= 1
        return later[i][0] - since

    @staticmethod
    def disabled() -> dict[str, Any]:
        return {"checks": 0, "legitimate": 0, "illegitimate": 0, "first_illegitimate": None,
                "last_illegitimate": None, "sample_problems": []}

    def as_dict(self) -> dict[str, Any]:
        failed = sum(1 for _, bad in self.results if bad)
        return {"checks": len(self.results), "legitimate": len(self.results) - failed,
                "illegitimate": failed, "first_illegitimate": self.first_failure,
                "last_illegitimate": self.last_failure, "sample_problems": self.samples}


def _live(s: ClientSub) -> LiveSub:
    if s.live_sub is None:
        s.live_sub = LiveSub(s.sub_id, s.filter, s.client, s.broker)
    return s.live_sub


# ---- the run --------------------------------------------------------------------------------


class FaultHook(Protocol):
    """Schedules a run's faults on the simulator's Target before the run starts; returns what
    gives the summary's list of faults once the run is over. The chaos module provides it
    (weeble.chaos.runner.in_simulation): the simulator does not import chaos."""

    def __call__(self, target: SimTarget) -> Callable[[], list[dict[str, Any]]]: ...


def simulate(scenario: Scenario, out_dir: str | Path, progress: bool = True, *,
             faults: FaultHook | None = None) -> Summary:
    """Run `scenario` in virtual time; write out_dir/summary.json and out_dir/trace/.

    A scenario with faults (its `chaos:` experiment) needs `faults`, the chaos module's hook
    that carries them out: `simulate(s, out, faults=weeble.chaos.runner.in_simulation(s))`."""
    if scenario.chaos is not None and faults is None:
        raise ValueError(f"scenario {scenario.name!r} has faults (chaos:): pass"
                         " faults=weeble.chaos.runner.in_simulation(scenario)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    topology = scenario.build_topology()
    params = scenario.params
    root = scenario.root_broker
    brokers = {b: Broker(rom) for b, rom in scenario.roms().items()}
    trace = SimSink(out) if scenario.trace.enabled else None
    if trace is not None:
        trace.header(0.0, SIM, run_header(scenario).fields())
    path = params.d * params.delta_max  # the longest a legal message journey takes
    bound = scenario.bound
    last_fault_end = scenario.last_fault_end
    max_fault_delay = scenario.longest_fault_delay

    oracle = Oracle(activation=path + params.rho, path=path,
                    retention=path + max_fault_delay + RETENTION_SLACK,
                    bound_start=last_fault_end + bound)
    engine = Engine(
        brokers,
        topology.links,
        delta_min=params.delta_min,
        delta_max=params.delta_max,
        delay=scenario.timing.delay,
        seed=scenario.seed,
        on_deliver=_delivery_observer(oracle, trace),
        on_trace=_broker_tracer(trace) if trace is not None else None,
        on_link=_link_tracer(trace) if trace is not None and scenario.trace.sends else None,
    )
    clients = Clients(engine, scenario, oracle, trace, keep_ended=scenario.check_every is not None)
    fault_log: Callable[[], list[dict[str, Any]]] = list
    if faults is not None:
        fault_log = faults(SimTarget(engine=engine, brokers=brokers, clients=clients,
                                     tree=tree_of_scenario(scenario), params=params,
                                     trace=trace))
    monitor = None
    if scenario.check_every is not None:
        monitor = Legitimacy(engine, brokers, clients, trace, period=scenario.check_every,
                             activation=path, linger=2 * params.pi + path,
                             until=scenario.duration)
    if trace is not None and scenario.trace.snapshots_every:
        _schedule_snapshots(engine, brokers, trace, scenario.trace.snapshots_every,
                            scenario.duration)

    wall = time.perf_counter()
    engine.start(0.0)
    clients.start()
    _run(engine, scenario.duration, progress and sys.stderr.isatty(), scenario.name)
    wall = time.perf_counter() - wall
    if trace is not None:
        trace.end(scenario.duration, SIM, "the simulation reached its duration")
        trace.close()

    stab = monitor.stabilization(last_fault_end) if monitor is not None else None
    sent = {MESSAGE_KINDS.get(t, t.__name__.lower()): n for t, n in engine.sent.items()}
    total = sum(sent.values())
    summary = Summary(
        v=SUMMARY_VERSION,
        scenario=scenario.name,
        seed=scenario.seed,
        duration=scenario.duration,
        topology={"brokers": len(topology.brokers), "links": len(topology.links),
                  "diameter": topology.diameter(), "root": root,
                  "leaves": len(topology.leaves(root))},
        routing=scenario.routing.model_dump(mode="json"),
        params={"pi": params.pi, "rho": params.rho, "delta_min": params.delta_min,
                "delta_max": params.delta_max, "d": params.d, "delay": scenario.timing.delay},
        bound=bound,
        messages={**sent, "total": total, "per_second": total / scenario.duration},
        link_faults={"dropped": engine.dropped, "duplicated": engine.duplicated,
                     "stray": engine.stray},
        clients={"subscriptions": clients.subscriptions, "refreshes": clients.refreshes,
                 "unsubscriptions": clients.unsubscriptions, "crashes": clients.crashes,
                 "publications": clients.publications, "live_at_end": len(clients.live)},
        deliveries=oracle.finish(scenario.duration),
        legitimacy=monitor.as_dict() if monitor is not None else Legitimacy.disabled(),
        faults=fault_log(),
        last_fault_end=last_fault_end,
        stabilization_time=stab,
        ratio=stab / bound if stab is not None and bound > 0 else None,
        performance={
            "events": engine.steps,
            "wall_time": wall,
            "events_per_wall_second": engine.steps / wall if wall > 0 else 0.0,
            "sim_seconds_per_wall_second": scenario.duration / wall if wall > 0 else 0.0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
    )
    (out / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary


def _delivery_observer(oracle: Oracle, trace: SimSink | None) -> Any:
    if trace is None:
        return oracle.deliver
    judge, record, subs_of = oracle.deliver, trace.deliver, oracle.subs_of

    def observe(now: float, node: Node, effect: Deliver) -> None:
        judge(now, node, effect)
        n = effect.notification
        # The subscription it matched: the client's first live one whose filter matches (the
        # live broker picks the same); none when a wrong table delivered it.
        sub_id = next((s.sub_id for s in subs_of.get(effect.client, ())
                       if s.filter.matches(n.attributes)), None)
        record(now, node.id, effect.client, sub_id, n)

    return observe


def _broker_tracer(trace: SimSink) -> Any:
    def observe(now: float, node: Node, effect: Trace) -> None:
        trace.write(node.id, now, node.id, effect.kind, effect.fields)

    return observe


def _link_tracer(trace: SimSink) -> Any:
    def observe(now: float, kind: str, src: str, dst: str, msg: Message) -> None:
        node = dst if kind == "receive" else src
        trace.write(node, now, node, kind, {"from": src, "to": dst, **message_ids(msg)})

    return observe


def _schedule_snapshots(engine: Engine, brokers: dict[str, Broker], trace: SimSink,
                        every: float, until: float) -> None:
    def snap(t: float, round_: object, _b: object) -> None:
        for b, broker in brokers.items():
            trace.write(b, t, b, "snapshot", {**broker.snapshot(), "round": round_})
        if t + every <= until:
            engine.schedule(t + every, snap, round_ + 1)  # type: ignore[operator]

    engine.schedule(every, snap, 1)


def run_header(scenario: Scenario) -> RunHeader:
    """The trace header of a simulated run."""
    return RunHeader.of_scenario(scenario, backend="sim", clock="virtual",
                                 snapshot_period=scenario.trace.snapshots_every)


def _run(engine: Engine, duration: float, show: bool, name: str) -> None:
    """Run to `duration`, in slices so a progress bar can follow without touching the loop."""
    if not show:
        engine.run(duration)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed:.0f}/{task.total:.0f} s"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"simulating {name}", total=duration)
        steps = 200
        for i in range(1, steps + 1):
            engine.run(duration * i / steps)
            bar.update(task, completed=duration * i / steps)
