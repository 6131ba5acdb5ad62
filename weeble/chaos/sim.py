"""The same experiment in the simulator: each fault kind mapped onto engine calls, for replay.

A live run keeps its scenario (with its `chaos:` block and its seed) in runs/<id>/scenario.json,
so `weeble simulate runs/<id>/scenario.json --out DIR` replays the run in virtual time: the same
workload streams, the same experiment clock (t = 0 is the workload's start, as live), and the
same targets (every injection draws from the same seeded stream as live).

What maps exactly: state faults (`corrupt`, `clock`: the same core Corrupt events), injected
messages (`inject`), drop, duplicate, delay beyond the bounds, cut/heal/flap/partition (a cut is
a link that loses everything), client crashes. What maps approximately, and says so in its
evidence (`sim`):
- `garble`: the simulator has no bytes; a garbled envelope usually no longer decodes, and the
  receiver drops it, so it is a loss with the same probability;
- `crash`: the broker is cut off from its neighbours, and a restart gives it a fresh core
  (empty RAM, same ROM) and a Start; its local clients are not told;
- `pause`: every message to or from the broker is held for the pause (a link delay of the pause's
  length) — the simulated broker itself keeps running its timers;
- link faults act on both directions (the engine's link faults are per link, not per direction).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from weeble.broker.core.broker import Broker
from weeble.broker.core.corruption import CorruptionError
from weeble.broker.core.events import Corrupt, Receive, Start
from weeble.broker.core.filters import Filter
from weeble.broker.core.rom import Params
from weeble.broker.sim.engine import Engine
from weeble.chaos.evidence import NODE, fault_fields
from weeble.model import faults as F
from weeble.model.experiment import Experiment, Injection
from weeble.model.faults import state_diff
from weeble.model.selectors import Tree, link_key, link_name


class TraceSink(Protocol):
    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None: ...


class SimClients(Protocol):
    """What a client_crash needs of the simulated clients (sim/workload.py's Clients)."""

    def subscribe(self, t: float, client: str, broker: str, f: Filter) -> Any: ...

    def crash(self, t: float, sub: Any) -> None: ...


@dataclass
class SimStep:
    targets: list[str]
    took_effect: bool
    evidence: dict[str, Any]
    error: str | None = None
    links: list[str] | None = None
    end: Callable[[float], SimStep] | None = None
    undoes: set[str] = field(default_factory=set)  # as live (runner.Step)


@dataclass
class Sim:
    """The simulated system the actions work on."""

    engine: Engine
    brokers: dict[str, Broker]  # shared with the monitors: a restart replaces the value
    tree: Tree
    params: Params
    clients: SimClients | None = None
    cut: dict[tuple[str, str], int] = field(default_factory=dict)  # link -> open cuts
    prepared: dict[str, Any] = field(default_factory=dict)  # injection id -> its preparation
    # cuts and crashes without a planned end, until a heal or restart undoes them (as live)
    open: dict[str, tuple[str, set[str], dict[str, Any]]] = field(default_factory=dict)

    def set_cut(self, link: tuple[str, str], cut: bool) -> None:
        """Cuts nest: a link crossed by a partition and a flap is up only when both ended."""
        key = (min(link), max(link))
        n = self.cut.get(key, 0) + (1 if cut else -1)
        self.cut[key] = max(n, 0)
        self.engine.set_link_fault(*key, drop=1.0 if self.cut[key] else 0.0)


SimAction = Callable[[Sim, Any, Injection, float, random.Random], SimStep]
_ACTIONS: dict[str, SimAction] = {}


def simulated(*kinds: str) -> Callable[[SimAction], SimAction]:
    def register(action: SimAction) -> SimAction:
        for kind in kinds:
            if kind not in F.KINDS:
                raise KeyError(f"no fault kind {kind!r}")
            _ACTIONS[kind] = action
        return action

    return register


def schedule(experiment: Experiment, sim: Sim, trace: TraceSink | None, *, seed: int,
             start: float = 0.0, until: float | None = None) -> list[dict[str, Any]]:
    """Schedule every injection on the engine; returns the log the summary keeps (filled in as
    the simulation runs)."""
    log: list[dict[str, Any]] = []
    for inj in experiment.timeline(until=until):
        if until is not None and inj.start >= until:  # as live: not observable
            continue
        entry: dict[str, Any] = {"id": inj.id, "kind": inj.fault.kind, "at": start + inj.start,
                                 "end": None if inj.end is None else start + inj.end,
                                 "targets": [], "took_effect": None, "error": None}
        log.append(entry)
        if inj.fault.lead:
            sim.engine.schedule(max(0.0, start + inj.start - inj.fault.lead), _prepare,
                                (sim, seed), inj)
        sim.engine.schedule(start + inj.start, _begin, (sim, trace, seed), (inj, entry))
    return log


def _prepare(t: float, ctx: tuple[Sim, int], inj: Injection) -> None:
    """client_crash: the clients subscribe `settle` s before they crash (as live)."""
    sim, seed = ctx
    f = inj.fault
    assert isinstance(f, F.ClientCrashFault)
    if sim.clients is None:
        return
    brokers = f.target.resolve(sim.tree, random.Random(inj.seed(seed)))
    sim.prepared[inj.id] = [
        (b, sim.clients.subscribe(t, _client_name(inj.id, b), b, Filter.parse(f.filter)))
        for b in brokers]


def _client_name(fault_id: str, broker: str) -> str:
    return f"chaos-{fault_id}-{broker}".replace(".", "-")


def _begin(t: float, ctx: tuple[Sim, TraceSink | None, int],
           what: tuple[Injection, dict[str, Any]]) -> None:
    sim, trace, seed = ctx
    inj, entry = what
    rng = random.Random(inj.seed(seed))
    action = _ACTIONS.get(inj.fault.kind)
    if action is None:
        step = SimStep([], False, {}, error=f"{inj.fault.kind}: not simulated")
    else:
        try:
            step = action(sim, inj.fault, inj, t, rng)
        except (CorruptionError, LookupError) as e:
            step = SimStep([], False, {}, error=str(e))
    entry.update(targets=step.targets, took_effect=step.took_effect, error=step.error)
    fields = fault_fields(inj, inj.id, step.targets, step.links)
    _write(trace, t, "fault_begin", {**fields, "took_effect": step.took_effect,
                                     "evidence": step.evidence,
                                     **({"error": step.error} if step.error else {})})
    if step.end is None:
        _write(trace, t, "fault_end", {**fields, "ok": step.error is None,
                                       "took_effect": step.took_effect})
        _closes(sim, trace, t, inj, step)
    elif inj.end is not None:
        sim.engine.schedule(t + (inj.end - inj.start), _finish, (trace, fields), step)
    else:
        sim.open[inj.id] = (inj.fault.kind, set(step.undoes), fields)


def _closes(sim: Sim, trace: TraceSink | None, t: float, inj: Injection, step: SimStep) -> None:
    """A heal or restart ends the open cuts/crashes it undid completely (as live)."""
    if inj.fault.kind not in ("heal", "restart") or step.error:
        return
    wanted = ("crash",) if inj.fault.kind == "restart" else ("cut", "partition")
    for fault_id, (kind, remaining, fields) in list(sim.open.items()):
        if kind in wanted:
            remaining -= step.undoes
            if not remaining:
                del sim.open[fault_id]
                _write(trace, t, "fault_end", {**fields, "ok": True, "took_effect": True,
                                               "ended_by": inj.id})


def _finish(t: float, ctx: tuple[TraceSink | None, dict[str, Any]], step: SimStep) -> None:
    trace, fields = ctx
    assert step.end is not None
    done = step.end(t)
    _write(trace, t, "fault_end", {**fields, "ok": done.error is None,
                                   "took_effect": step.took_effect, "evidence": done.evidence})


def _write(trace: TraceSink | None, t: float, kind: str, fields: dict[str, Any]) -> None:
    if trace is not None:
        trace.write(NODE, t, NODE, kind, fields)


# ---- state faults ---------------------------------------------------------------------------


def _corrupt_at(sim: Sim, t: float, broker: str, event: Corrupt) -> tuple[bool, dict[str, Any]]:
    before = sim.brokers[broker].snapshot()
    sim.engine.inject(t, broker, event)
    diff = state_diff(before, sim.brokers[broker].snapshot())
    return bool(diff), {"field": event.target, "changed": diff}


@simulated("corrupt")
def _corrupt(sim: Sim, f: F.CorruptFault, inj: Injection, t: float,
             rng: random.Random) -> SimStep:
    brokers = f.target.resolve(sim.tree, rng)
    evidence, effective = {}, []
    for b in brokers:
        broker = sim.brokers[b]
        target, value, args = f.draw(broker.rom, broker.snapshot(), rng)
        event = Corrupt(target, value, args)
        ok, evidence[b] = _corrupt_at(sim, t, b, event)
        if ok:
            effective.append(b)
    return SimStep(brokers, bool(effective), evidence,
                   error=None if effective else "the state did not change")


@simulated("clock")
def _clock(sim: Sim, f: F.ClockFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    brokers = f.target.resolve(sim.tree, rng)
    evidence, effective = {}, []
    for b in brokers:
        ok, evidence[b] = _corrupt_at(sim, t, b,
                                      Corrupt("clock", f.clock_value(sim.params.pi, rng)))
        if ok:
            effective.append(b)
    return SimStep(brokers, bool(effective), evidence,
                   error=None if effective else "the clock did not change")


@simulated("inject")
def _inject(sim: Sim, f: F.InjectFault, inj: Injection, t: float,
            rng: random.Random) -> SimStep:
    links = f.link.resolve(sim.tree, rng)
    evidence = {}
    for a, b in links:
        pairs = {"forward": [(a, b)], "backward": [(b, a)], "both": [(a, b), (b, a)]}
        for src, dst in pairs[f.direction]:
            before = sim.brokers[dst].snapshot()
            sim.engine.inject(t, dst, Receive(src, f.message.to_core()))
            evidence[f"{src}->{dst}"] = {"changed": state_diff(before,
                                                               sim.brokers[dst].snapshot())}
    names = [link_name(x) for x in links]
    return SimStep(names, True, evidence, links=names)


# ---- links ----------------------------------------------------------------------------------


@simulated("drop", "duplicate", "garble", "delay")
def _shaping(sim: Sim, f: Any, inj: Injection, t: float, rng: random.Random) -> SimStep:
    links = f.link.resolve(sim.tree, rng)
    setting = {"drop": {"drop": getattr(f, "probability", 0.0)},
               "garble": {"drop": getattr(f, "probability", 0.0)},  # see the module docstring
               "duplicate": {"duplicate": getattr(f, "probability", 0.0)},
               "delay": {"delay": getattr(f, "delay_ms", 0.0) / 1000}}[f.kind]
    for a, b in links:
        sim.engine.set_link_fault(a, b, **setting)
    names = [link_name(x) for x in links]

    def end(t: float) -> SimStep:
        for a, b in links:
            if f.kind == "delay":
                sim.engine.set_link_fault(a, b, clear_delay=True)
            else:
                sim.engine.set_link_fault(a, b, **{k: 0.0 for k in setting})
        return SimStep(names, True, {"sim": "link fault cleared"}, links=names)

    approx = {"sim": "both directions"} if f.direction != "both" else {}
    if f.kind == "garble":
        approx["sim"] = "garbled = lost (no bytes in the simulator)"
    return SimStep(names, True, {"setting": setting, **approx}, links=names, end=end)


def _cut_step(sim: Sim, links: list[tuple[str, str]], lasting: bool) -> SimStep:
    for link in links:
        sim.set_cut(link, True)
    names = [link_name(x) for x in links]

    def end(t: float) -> SimStep:
        for link in links:
            sim.set_cut(link, False)
        return SimStep(names, True, {"healed": names}, links=names)

    return SimStep(names, True, {"cut": names}, links=names, end=end if lasting else None,
                   undoes={link_key(x) for x in links})


@simulated("cut")
def _cut(sim: Sim, f: F.CutFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    return _cut_step(sim, f.link.resolve(sim.tree, rng), lasting=True)


@simulated("heal")
def _heal(sim: Sim, f: F.HealFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    links = f.link.resolve(sim.tree, rng)
    for link in links:
        sim.cut[min(link), max(link)] = 1  # a heal undoes every cut at once
        sim.set_cut(link, False)
    names = [link_name(x) for x in links]
    return SimStep(names, True, {"healed": names}, links=names,
                   undoes={link_key(x) for x in links})


@simulated("partition")
def _partition(sim: Sim, f: F.PartitionFault, inj: Injection, t: float,
               rng: random.Random) -> SimStep:
    return _cut_step(sim, sim.tree.boundary(f.target.resolve(sim.tree, rng)), lasting=True)


@simulated("flap")
def _flap(sim: Sim, f: F.FlapFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    links = f.link.resolve(sim.tree, rng)
    step = _cut_step(sim, links, lasting=True)
    until = t + (f.duration or 0.0)
    state = {"down": True, "cuts": 1}

    def toggle(now: float, _a: object, _b: object) -> None:
        if now >= until:
            return
        state["down"] = not state["down"]
        for link in links:
            sim.set_cut(link, state["down"])
        state["cuts"] += state["down"]
        sim.engine.schedule(now + (f.down if state["down"] else f.up), toggle)

    sim.engine.schedule(t + f.down, toggle)
    plain_end = step.end

    def end(now: float) -> SimStep:
        assert plain_end is not None
        if state["down"]:
            done = plain_end(now)
        else:
            done = SimStep(step.targets, True, {}, links=step.links)
        state["down"] = False
        done.evidence["cuts"] = state["cuts"]
        return done

    step.end = end
    return step


# ---- processes ------------------------------------------------------------------------------


def _isolate(sim: Sim, broker: str, cut: bool) -> list[tuple[str, str]]:
    links = [(a, b) for a, b in sim.tree.links if broker in (a, b)]
    for link in links:
        sim.set_cut(link, cut)
    return links


def _restart(sim: Sim, brokers: list[str], t: float) -> SimStep:
    for b in brokers:
        fresh = Broker(sim.brokers[b].rom)  # same ROM, empty RAM
        sim.brokers[b] = fresh
        node = sim.engine.nodes[b]
        node.broker, node.step = fresh, fresh.step
        _isolate(sim, b, cut=False)
        sim.engine.inject(t, b, Start())
    return SimStep(brokers, True, {b: {"sim": "fresh core, Start"} for b in brokers},
                   undoes=set(brokers))


@simulated("crash")
def _crash(sim: Sim, f: F.CrashFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    brokers = f.target.resolve(sim.tree, rng)
    for b in brokers:
        _isolate(sim, b, cut=True)
    return SimStep(brokers, True, {b: {"sim": "cut off from its neighbours"} for b in brokers},
                   end=lambda now: _restart(sim, brokers, now), undoes=set(brokers))


@simulated("restart")
def _restart_action(sim: Sim, f: F.RestartFault, inj: Injection, t: float,
                    rng: random.Random) -> SimStep:
    return _restart(sim, f.target.resolve(sim.tree, rng), t)


@simulated("pause")
def _pause(sim: Sim, f: F.PauseFault, inj: Injection, t: float, rng: random.Random) -> SimStep:
    brokers = f.target.resolve(sim.tree, rng)
    links = [(a, b) for a, b in sim.tree.links if a in brokers or b in brokers]
    for a, b in links:
        sim.engine.set_link_fault(a, b, delay=f.duration or 0.0)

    def end(now: float) -> SimStep:
        for a, b in links:
            sim.engine.set_link_fault(a, b, clear_delay=True)
        return SimStep(brokers, True, {"sim": "links back to their delays"})

    return SimStep(brokers, True, {"sim": f"links held {f.duration:g} s"}, end=end)


@simulated("client_crash")
def _client_crash(sim: Sim, f: F.ClientCrashFault, inj: Injection, t: float,
                  rng: random.Random) -> SimStep:
    brokers = f.target.resolve(sim.tree, rng)
    prepared = sim.prepared.pop(inj.id, None)
    if sim.clients is None or prepared is None:
        return SimStep(brokers, False, {}, error="client_crash: no simulated clients")
    evidence = {}
    for b, sub in prepared:
        sim.clients.crash(t, sub)
        evidence[b] = {"client": _client_name(inj.id, b)}
    return SimStep(brokers, True, evidence)
