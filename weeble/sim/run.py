"""`simulate(scenario, out_dir)`: one simulated run, from scenario to trace and summary.json.

It wires the engine (brokers, links, timers), the clients (workload.py), the faults of the
scenario, and the observers (observe.py): the trace sink and the reference checker of
`weeble.check`, fed online — the service level (every publication and delivery judged by the
rules R1-R7 of docs/trace-schema.md), the state level (every `check_every` s a legitimacy check
of the brokers' tables), the episodes of faults and their stabilization times, the verdict.

A scenario's `reconfigurations:` are carried out by the one reconfiguration driver
(`reconfigure.Reconfigurator`: the coordinated link exchange, or the 3-colour scheme when
`overlay.kind` is coloured); the summary reports each by rule R15 (its duration, coordination
messages, and the lost, duplicated and reordered notifications of its window), and the
overlay's own legitimacy, checked every `check_every` s.
"""

from __future__ import annotations

import contextlib
import gc
import json
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from weeble.core.broker import Broker
from weeble.core.events import Trace
from weeble.core.messages import Message
from weeble.core.reconfig.plan import Tree
from weeble.core.routing.leasing import Leasing, NewSubscriptionTally
from weeble.model.experiment import tree_of_scenario
from weeble.model.scenario import Scenario
from weeble.sim.engine import MESSAGE_KINDS, Engine, Node
from weeble.sim.observe import Observers
from weeble.sim.optimize import CostMonitor
from weeble.sim.reconfigure import Reconfigurator
from weeble.sim.simulation import Simulation
from weeble.sim.target import SimTarget
from weeble.sim.workload import Clients
from weeble.trace.header import RunHeader
from weeble.trace.writer import SimSink, message_ids

SUMMARY_VERSION = 2
RETENTION_SLACK = 1.0  # s a publication stays open for late deliveries beyond its deadline


@dataclass(slots=True)
class Summary:
    """The content of summary.json (see `as_dict`; `performance` is the only non-deterministic
    part: everything else is a function of the scenario).

    `deliveries`, `legitimacy`, `episodes`, `stabilization`, `timing` and `verdict` are the
    reference checker's (weeble.check, rules R1-R15 of docs/trace-schema.md), fed online; the
    same checker over the run's trace (`weeble check RUN`) finds the same."""

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
    deliveries: dict[str, Any]  # R1-R7
    legitimacy: dict[str, Any]  # R8-R9 (the monitor's checks)
    faults: list[dict[str, Any]]  # what was injected, with its evidence
    episodes: list[dict[str, Any]]  # R10-R12, each with where its times are measured from
    stabilization: dict[str, Any] | None  # the worst episode's times; None: no fault
    timing: dict[str, Any]  # R13
    verdict: dict[str, Any]  # R14
    performance: dict[str, float]
    reconfigurations: list[dict[str, Any]]  # R15, one per operation, in start order
    overlay: dict[str, Any] | None  # the overlay's legitimacy checks (with reconfigurations)
    steady: dict[str, Any] | None  # the scenario's `measure` window (see `Steady`); None: none
    optimizer: dict[str, Any] | None = None  # the tree optimizer (ch. 5): decisions, cost series

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    sink = SimSink(out) if scenario.trace.enabled else None
    r = scenario.routing
    sim = Simulation(
        topology, algorithm=r.algorithm, params=params, hierarchical=r.hierarchical,
        wrapper=r.wrapper, options=scenario.options, root=root, delay=scenario.timing.delay,
        roms=scenario.roms(), colours=scenario.colours,
        seed=scenario.seed, boot="together", header=run_header(scenario), sink=sink,
        retention=_retention(scenario), keep_history=False,
        on_trace=_broker_tracer(sink) if sink is not None else None,
        on_link=_link_tracer(sink) if sink is not None and scenario.trace.sends else None)
    engine, brokers, observers = sim.engine, sim.brokers, sim.observers
    trace = observers  # every record goes through the observers (the checker sees faults)
    clients = Clients(engine, scenario, observers, trace if sink is not None else None)
    fault_log: Callable[[], list[dict[str, Any]]] = list
    if faults is not None:
        target = SimTarget(engine=engine, brokers=brokers, clients=clients,
                           tree=tree_of_scenario(scenario), params=params, trace=trace,
                           roms=sim.roms)
        # the reconfiguration phases, for the faults scheduled `during` one: the brokers'
        # `reconfig` records and the manager's `reconfiguration` ones
        sim.trace_observers.append(
            lambda now, node, effect: target.observe(now, node.id, effect.kind, effect.fields))
        observers.listeners.append(target.observe)
        sim.tree_observers.append(target.tree_changed)  # what a selector resolves against
        fault_log = faults(target)
    if scenario.check_every is not None:
        observers.watch(engine, brokers, period=scenario.check_every, until=scenario.duration)
    monitor = _reconfigure(scenario, sim, clients)
    if scenario.trace.snapshots_every:  # checked (R8b) whether the trace is written or not
        observers.rounds = True
        _schedule_snapshots(engine, brokers, sink, scenario.trace.snapshots_every,
                            scenario.duration, observers)

    steady = Steady(scenario, engine, brokers, clients) if scenario.measure is not None else None

    wall = time.perf_counter()
    with _no_collections():
        sim.start()
        clients.start()
        _run(engine, scenario.duration, progress, scenario.name)
        # the checker's verdict belongs to the run: a checker process that fell behind is
        # waited for here, and a run replayed into the checker at its end allocates as much
        # as one judged as it went
        report = observers.finish(scenario.duration)
    wall = time.perf_counter() - wall
    if sink is not None:
        sink.close()

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
        bound=scenario.bound,
        messages={**sent, "total": total, "per_second": total / scenario.duration},
        link_faults={"dropped": engine.dropped, "duplicated": engine.duplicated,
                     "stray": engine.stray},
        clients={"subscriptions": clients.subscriptions, "refreshes": clients.refreshes,
                 "unsubscriptions": clients.unsubscriptions, "crashes": clients.crashes,
                 "publications": clients.publications, "live_at_end": len(clients.live)},
        deliveries=report["deliveries"],
        legitimacy=report["legitimacy"],
        faults=fault_log(),
        episodes=report["episodes"],
        stabilization=report["stabilization"],
        timing=report["timing"],
        verdict=report["verdict"],
        performance={
            "events": engine.steps,
            "wall_time": wall,
            "events_per_wall_second": engine.steps / wall if wall > 0 else 0.0,
            "sim_seconds_per_wall_second": scenario.duration / wall if wall > 0 else 0.0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
        reconfigurations=report["operations"],
        overlay=report["overlay"],
        steady=steady.report() if steady is not None else None,
        optimizer=monitor.summary() if monitor is not None else None,
    )
    (out / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary


class Steady:
    """The message complexity of a run at equilibrium (thesis §3.3.3, Figs. 3.2/3.3), over the
    scenario's `measure` window [start, duration]: the inter-broker messages by kind, the
    publications, what flooding would have sent for them (each crosses every link once) and so
    the notifications saved by filtering, and the routing tables sampled inside the window.

    `entries.remote` counts distinct (filter, neighbour) pairs per broker, summed: the routing
    configuration that forwards notifications between brokers, whatever the subscription ids
    (thesis §3.5's x); `entries.local` the entries towards local clients.

    `new_subscriptions` counts the subscription messages of new subscriptions sent in the
    window by what sent them (weeble.core.routing.leasing.NewSubscriptionTally): `flag1` those
    only the flag-1 rule forwarded (thesis §3.3.1), `relayed` their onward hops, `toggle` the
    model's toggles; and, of every subscription, the `repeat_*` ones sent for a filter to a
    neighbour a second time in one overrun period. `per_second` has `flag1`, `relayed` and
    `repeats` (both kinds), all part of `sub`, so of `control`."""

    def __init__(self, scenario: Scenario, engine: Engine, brokers: dict[str, Broker],
                 clients: Clients) -> None:
        assert scenario.measure is not None
        self.start, self.until = scenario.measure.start, scenario.duration
        self.links = len(scenario.build_topology().links)
        self.engine, self.brokers, self.clients = engine, brokers, clients
        self.sent_before: dict[type, int] = {}
        self.publications_before = 0
        self.samples: list[tuple[int, int]] = []
        # the first messages of new subscriptions, by what sent them (flag-1 forwards apart);
        # counted from the start, so that a subscription made before the window is still known
        self.tally = NewSubscriptionTally()
        for broker in brokers.values():
            scheme = getattr(getattr(broker, "routing", None), "subs", None)
            if isinstance(scheme, Leasing):
                scheme.tally = self.tally
        self.tally_before: dict[str, int] = {}
        engine.schedule(self.start, self._open)
        n = scenario.measure.table_samples
        span = self.until - self.start
        for i in range(n):  # in the middle of n equal slices of the window
            engine.schedule(self.start + (i + 0.5) * span / n, self._sample)

    def _open(self, _t: float, _a: object, _b: object) -> None:
        self.sent_before = dict(self.engine.sent)
        self.publications_before = self.clients.publications
        self.tally_before = self.tally.counts()

    def _sample(self, _t: float, _a: object, _b: object) -> None:
        remote = local = 0
        for broker in self.brokers.values():
            neighbors = broker.neighbors
            pairs = {(e.filter, e.dest) for _, e in broker.entries()}
            inter = sum(1 for _, dest in pairs if dest in neighbors)
            remote += inter
            local += len(pairs) - inter
        self.samples.append((remote, local))

    def report(self) -> dict[str, Any]:
        span = self.until - self.start
        sent = {MESSAGE_KINDS.get(t, t.__name__.lower()): n - self.sent_before.get(t, 0)
                for t, n in self.engine.sent.items()}
        publications = self.clients.publications - self.publications_before
        flooding = publications * self.links
        control = sent.get("sub", 0) + sent.get("unsub", 0)
        n = len(self.samples)
        new_subs = {k: v - self.tally_before.get(k, 0) for k, v in self.tally.counts().items()}
        return {
            "from": self.start, "until": self.until, "messages": sent,
            "publications": publications,
            "new_subscriptions": new_subs,
            "per_second": {**{k: v / span for k, v in sent.items()},
                           "control": control / span, "flag1": new_subs["flag1"] / span,
                           "relayed": new_subs["relayed"] / span,
                           "repeats": (new_subs["repeat_new"] + new_subs["repeat_refresh"])
                           / span,
                           "publications": publications / span,
                           "flooding": flooding / span,
                           "saved": (flooding - sent.get("notify", 0)) / span},
            "entries": {"samples": n,
                        "remote": sum(r for r, _ in self.samples) / n if n else None,
                        "local": sum(c for _, c in self.samples) / n if n else None},
        }


def _reconfigure(scenario: Scenario, sim: Simulation, clients: Clients) -> CostMonitor | None:
    """Hand the scenario's reconfigurations to the Reconfigurator, follow the optimizer's
    (its exchanges and the tree's cost), and check the overlay layer every `check_every` s
    while they may change it."""
    x = scenario.reconfigurations
    coloured = scenario.colours is not None
    o = scenario.optimizer
    if not x.operations and not coloured and o is None:
        return None
    topology = scenario.build_topology()
    driver = Reconfigurator(sim, Tree.of(topology.links, topology.brokers), strawman=x.strawman,
                            colours=coloured, gap=x.gap, seed=scenario.seed)
    monitor = None
    if o is not None:
        p, c = o.costs(topology.brokers, scenario.seed)
        monitor = CostMonitor(driver, p, c, o.heuristic, o.cost_every, scenario.duration)
    sim.retire_observers.append(clients.leave)
    driver.schedule(scenario.reconfiguration_plan(), x.start)
    if scenario.check_every is None:
        return monitor
    period, until = scenario.check_every, scenario.duration

    def check(t: float, _a: object, _b: object) -> None:
        problems = sim.overlay_legitimacy()
        sim.observers.write("sim", t, "sim", "overlay_legitimacy", {
            "ok": not problems, "problems": len(problems), "sample": problems[:3]})
        if t + period <= until:
            sim.engine.schedule(t + period, check)

    sim.engine.schedule(period, check)
    return monitor


@contextlib.contextmanager
def _no_collections() -> Iterator[None]:
    """No cyclic garbage collection for the duration of the run. A run allocates millions of
    objects that form no cycles (table entries, subscriptions, the checker's publications)
    and keeps many of them for seconds to minutes: each collection traversed them again for
    almost nothing (seed000, 10 s: 200 collections, ~1,000 objects freed, ~15 % of the CPU
    time). Refcounting frees everything the run drops; the few cycles it makes (~100
    objects per simulated second in seed000) wait for the next collection after it.

    At the end the run's objects join the oldest generation without a traversal (`freeze`,
    then `unfreeze`): re-enabling the collector with them in the youngest one made its first
    collection walk the whole heap of the run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _retention(scenario: Scenario) -> float:
    """How long the online checker keeps a publication open for its deliveries: a delivery
    later than this counts as `late` (no verdict). Legal journeys take d·δmax; delay faults
    hold messages longer."""
    p = scenario.params
    return p.d * p.delta_max + scenario.longest_fault_delay * p.d + RETENTION_SLACK


def _broker_tracer(trace: SimSink) -> Any:
    def observe(now: float, node: Node, effect: Trace) -> None:
        trace.write(node.id, now, node.id, effect.kind, effect.fields)

    return observe


def _link_tracer(trace: SimSink) -> Any:
    from weeble.codec.wire import wire_size

    def observe(now: float, kind: str, src: str, dst: str, msg: Message) -> None:
        node = dst if kind == "receive" else src
        fields = {"from": src, "to": dst, **message_ids(msg)}
        if kind == "send":
            fields["bytes"] = wire_size(msg)
        trace.write(node, now, node, kind, fields)

    return observe


def _schedule_snapshots(engine: Engine, brokers: dict[str, Broker], trace: SimSink | None,
                        every: float, until: float, observers: Observers) -> None:
    def snap(t: float, round_: object, _b: object) -> None:
        records = [{**broker.snapshot(), "round": round_} for broker in brokers.values()]
        for r in records if trace is not None else ():
            trace.write(r["broker"], t, r["broker"], "snapshot", r)
        observers.snapshot_round(t, records)
        if t + every <= until:
            engine.schedule(t + every, snap, round_ + 1)  # type: ignore[operator]

    engine.schedule(every, snap, 1)


def run_header(scenario: Scenario) -> RunHeader:
    """The trace header of a simulated run."""
    return RunHeader.of_scenario(scenario, backend="sim", clock="virtual",
                                 snapshot_period=scenario.trace.snapshots_every)


def _run(engine: Engine, duration: float, show: bool, name: str) -> None:
    """Run to `duration`, in slices so the progress can follow without touching the loop."""
    if not show:
        engine.run(duration)
        return
    from weeble.progress import Progress

    steps = 200
    with Progress(f"simulating {name}", unit="simulated s", total=duration) as bar:
        for i in range(1, steps + 1):
            engine.run(duration * i / steps)
            bar.update(duration * i / steps)
