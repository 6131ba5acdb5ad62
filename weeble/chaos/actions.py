"""One implementation per fault kind, written against a Target (target.py).

The same code carries out a fault in the simulator and on live brokers; only the Target differs.
An action resolves the fault's selector with the injection's own random stream (so a live run
and its replay hit the same brokers), acts, and reads back what the target reports: that is the
evidence. A lasting fault's Step says how to end it (the runner ends it at its planned end).

Registered with `@action(kind)`; `ACTIONS` has one entry per kind of the vocabulary
(weeble/model/faults.py), which a test checks.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from weeble.chaos.target import Step, Target, TargetError
from weeble.model import faults as F
from weeble.model.experiment import Injection
from weeble.model.faults import state_diff
from weeble.model.selectors import link_key, link_name

Directed = tuple[str, str]


@dataclass
class Shaping:
    """The lasting shapings in force on each directed link of a run, in the order they began,
    and each link's shape before the first of them. Faults on one link overlap (a nemesis draws
    them independently): one that ends hands each of its settings back to the latest shaping
    still in force that sets it, or to that base, never to what it found when it began (the
    shape of a fault that may have ended since: two overlapping duplicate faults left a link
    duplicating for the rest of the run)."""

    base: dict[Directed, dict[str, float]] = field(default_factory=dict)
    on: dict[Directed, list[tuple[object, dict[str, float]]]] = field(default_factory=dict)

    def begin(self, d: Directed, token: object, change: dict[str, float],
              found: dict[str, float]) -> None:
        if not self.on.get(d):
            self.base[d] = dict(found)
        self.on.setdefault(d, []).append((token, change))

    def end(self, d: Directed, token: object, change: dict[str, float]) -> dict[str, float]:
        """The settings of `change`'s keys once the shaping `token` is over."""
        stack = [(t, c) for t, c in self.on.get(d, []) if t is not token]
        base = self.base.get(d, {})
        out = {}
        for k in change:
            later = [c[k] for _, c in stack if k in c]
            out[k] = later[-1] if later else base.get(k, 0.0)
        if stack:
            self.on[d] = stack
        else:
            self.on.pop(d, None)
            self.base.pop(d, None)
        return out


@dataclass
class Call:
    """One injection as an action sees it: its fault id (which the brokers' own fault records
    carry too, so the analytics join them), its schedule entry and its random stream."""

    fault_id: str
    inj: Injection
    rng: random.Random
    strike: float  # s after the start: the planned instant (after the fault's `lead`)
    prepared: Any = None  # what the fault's preparation made (a client crash's clients)
    shaping: Shaping = field(default_factory=Shaping)  # the run's, shared by its calls


Action = Callable[[Target, Any, Call], Awaitable[Step]]
ACTIONS: dict[str, Action] = {}


def action(*kinds: str) -> Callable[[Action], Action]:
    def register(fn: Action) -> Action:
        for kind in kinds:
            if kind not in F.KINDS:
                raise KeyError(f"no fault kind {kind!r}")
            ACTIONS[kind] = fn
        return fn

    return register


def error_text(e: BaseException) -> str:
    """A transport error as `CODE: details` (gRPC), anything else as `Type: message`."""
    code, details = getattr(e, "code", None), getattr(e, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {details()}"
    if isinstance(e, TargetError | LookupError):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _outcome(targets: list[str], evidence: dict[str, Any], errors: list[str],
             effective: list[Any], nothing: str, **more: Any) -> Step:
    """Took effect when something changed and nothing failed; the error says what went wrong."""
    return Step(targets, bool(effective) and not errors, evidence,
                error="; ".join(errors) or (None if effective else nothing), **more)


# ---- state faults (the core's corruption API) -----------------------------------------------


async def _corrupt_one(target: Target, broker: str, field: str, value: Any,
                       args: dict[str, Any], fault_id: str) -> tuple[bool, dict[str, Any]]:
    before, after = await target.corrupt(broker, field=field, value=value, args=args,
                                         fault_id=fault_id)
    diff = state_diff(before, after)
    return bool(diff), {"field": field, "value": value, "args": args, "changed": diff}


async def _state_fault(target: Target, brokers: list[str], call: Call, nothing: str,
                       draw: Callable[[str], Awaitable[tuple[str, Any, dict[str, Any]]]]) -> Step:
    """The core's corruption API at each broker, with what `draw` picks for it."""
    evidence: dict[str, Any] = {}
    errors, effective = [], []
    for b in brokers:
        try:
            field, value, args = await draw(b)
            ok, evidence[b] = await _corrupt_one(target, b, field, value, args, call.fault_id)
        except Exception as e:  # one broker down must not hide what the others did
            errors.append(f"{b}: {error_text(e)}")
            continue
        if ok:
            effective.append(b)
    return _outcome(brokers, evidence, errors, effective, nothing)


@action("corrupt")
async def _corrupt(target: Target, f: F.CorruptFault, call: Call) -> Step:
    async def draw(b: str) -> tuple[str, Any, dict[str, Any]]:
        return f.draw(target.rom(b), await target.snapshot(b), call.rng)

    return await _state_fault(target, f.target.resolve(target.tree, call.rng), call,
                              "the state did not change", draw)


@action("clock")
async def _clock(target: Target, f: F.ClockFault, call: Call) -> Step:
    async def draw(b: str) -> tuple[str, Any, dict[str, Any]]:
        return "clock", f.clock_value(target.params.pi, call.rng), {}

    return await _state_fault(target, f.target.resolve(target.tree, call.rng), call,
                              "the clock did not change", draw)


# ---- injected messages ----------------------------------------------------------------------


def _directed(links: list[tuple[str, str]], direction: str) -> list[tuple[str, str]]:
    out = []
    for a, b in links:
        if direction in ("both", "forward"):
            out.append((a, b))
        if direction in ("both", "backward"):
            out.append((b, a))
    return out


@action("inject")
async def _inject(target: Target, f: F.InjectFault, call: Call) -> Step:
    links = f.link.resolve(target.tree, call.rng)
    message = f.message.to_core()
    evidence: dict[str, Any] = {}
    errors, effective = [], []
    for src, dst in _directed(links, f.direction):
        name = f"{src}->{dst}"
        try:
            before, after, effects = await target.inject(src, dst, message, call.fault_id)
        except Exception as e:
            errors.append(f"{name}: {error_text(e)}")
            continue
        diff = state_diff(before, after)
        evidence[name] = {"effects": effects, "changed": diff}
        if diff or effects.get("send") or effects.get("deliver"):
            effective.append(name)
    names = [link_name(x) for x in links]
    return _outcome(names, evidence, errors, effective, "the core consumed it without any effect",
                    links=names)


# ---- link shaping ---------------------------------------------------------------------------


_SHAPE = {"drop": "loss", "duplicate": "duplicate", "garble": "corrupt"}


def _shape_of(f: Any) -> dict[str, float]:
    if f.kind == "delay":
        return {"delay_ms": f.delay_ms, "jitter_ms": f.jitter_ms}
    return {_SHAPE[f.kind]: f.probability}


async def _set_shapes(target: Target, wanted: dict[tuple[str, str], dict[str, float]]) -> Step:
    """Set each directed link's shaping; the evidence is what the brokers then report."""
    reported = {d: await target.shape(*d, shape) for d, shape in wanted.items()}
    evidence = {f"{a}->{b}": reported[a, b] for a, b in wanted}
    took = all(abs(reported[d].get(k, 0.0) - v) < 1e-9 for d, s in wanted.items()
               for k, v in s.items())
    names = sorted({link_name((min(d), max(d))) for d in wanted})
    return Step(names, took, evidence, error=None if took else "a link reports another shape",
                links=names)


@action("drop", "duplicate", "garble", "delay")
async def _shaping(target: Target, f: Any, call: Call) -> Step:
    directed = _directed(f.link.resolve(target.tree, call.rng), f.direction)
    previous = {d: await target.link_shape(*d) for d in directed}
    change = _shape_of(f)
    token = object()
    for d in directed:
        call.shaping.begin(d, token, change, previous[d])
    step = await _set_shapes(target, {d: change for d in directed})

    async def end() -> Step:
        return await _set_shapes(target, {d: call.shaping.end(d, token, change)
                                          for d in directed})

    step.end = end
    return step


# ---- link state -----------------------------------------------------------------------------


async def _cut_links(target: Target, links: list[tuple[str, str]], cut: bool) -> Step:
    """Cut (or heal) each link; the evidence is the target's reading of each link (each
    broker's own link state, the interface or network state of a backend, the simulator's)."""
    names = [link_name(x) for x in links]
    evidence: dict[str, Any] = {}
    ok = True
    for (a, b), name in zip(links, names, strict=True):
        try:
            is_cut, evidence[name] = await target.cut(a, b, cut)
        except Exception as e:
            evidence[name] = {"error": error_text(e)}
            ok = False
            continue
        ok = ok and is_cut == cut
    return Step(names, ok, evidence, links=names, undoes={link_key(x) for x in links},
                error=None if ok else f"a link is not {'cut' if cut else 'healed'}")


async def _cut_for(target: Target, links: list[tuple[str, str]], lasting: bool) -> Step:
    step = await _cut_links(target, links, cut=True)
    if lasting:
        step.end = lambda: _cut_links(target, links, cut=False)
    return step


@action("cut")
async def _cut(target: Target, f: F.CutFault, call: Call) -> Step:
    return await _cut_for(target, f.link.resolve(target.tree, call.rng), lasting=True)


@action("heal")
async def _heal(target: Target, f: F.HealFault, call: Call) -> Step:
    return await _cut_links(target, f.link.resolve(target.tree, call.rng), cut=False)


@action("partition")
async def _partition(target: Target, f: F.PartitionFault, call: Call) -> Step:
    side = f.target.resolve(target.tree, call.rng)
    links = target.tree.boundary(side)
    if not links:
        return Step(side, False, {}, error="no link crosses the boundary of " + ",".join(side))
    step = await _cut_for(target, links, lasting=True)
    step.evidence = {"side": side, "links": step.evidence}
    return step


@action("flap")
async def _flap(target: Target, f: F.FlapFault, call: Call) -> Step:
    links = f.link.resolve(target.tree, call.rng)
    step = await _cut_for(target, links, lasting=False)
    state = {"cuts": 1, "down": True, "over": False}

    async def toggle() -> None:
        t = target.elapsed()
        while True:
            t += f.down if state["down"] else f.up
            if not await target.sleep_until(t) or state["over"]:
                return
            state["down"] = not state["down"]
            await _cut_links(target, links, cut=bool(state["down"]))
            state["cuts"] += state["down"]

    target.spawn(toggle())

    async def end() -> Step:
        state["over"] = True
        healed = await _cut_links(target, links, cut=False)
        healed.evidence = {"cuts": state["cuts"], "links": healed.evidence}
        return healed

    step.end = end
    return step


# ---- processes ------------------------------------------------------------------------------


async def _each(brokers: list[str], act: Callable[[str], Awaitable[dict[str, Any]]]) -> Step:
    evidence: dict[str, Any] = {}
    errors = []
    for b in brokers:
        try:
            evidence[b] = await act(b)
        except Exception as e:
            errors.append(f"{b}: {error_text(e)}")
    return Step(brokers, not errors, evidence, error="; ".join(errors) or None,
                undoes=set(brokers) - {e.split(":")[0] for e in errors})


@action("crash")
async def _crash(target: Target, f: F.CrashFault, call: Call) -> Step:
    brokers = f.target.resolve(target.tree, call.rng)
    step = await _each(brokers, target.kill)
    step.end = lambda: _each(brokers, target.restart)
    step.undoes = set(brokers)
    return step


@action("restart")
async def _restart(target: Target, f: F.RestartFault, call: Call) -> Step:
    return await _each(f.target.resolve(target.tree, call.rng), target.restart)


@action("pause")
async def _pause(target: Target, f: F.PauseFault, call: Call) -> Step:
    brokers = f.target.resolve(target.tree, call.rng)
    step = await _each(brokers, lambda b: target.pause(b, f.duration))
    paused = [b for b in brokers if b in step.evidence]
    step.end = lambda: _each(paused, target.resume)
    return step


# ---- clients --------------------------------------------------------------------------------


def client_name(fault_id: str, broker: str) -> str:
    return f"chaos-{fault_id}-{broker}".replace(".", "-").replace("#", "-")


async def prepare_client_crash(target: Target, f: F.ClientCrashFault, call: Call) -> Any:
    """`settle` s before the fault: a chaos client subscribes at each target broker."""
    if f.target is None:
        return None
    prepared = []
    for b in f.target.resolve(target.tree, call.rng):
        try:
            prepared.append((b, await target.subscribe_client(client_name(call.fault_id, b), b,
                                                              f.filter)))
        except Exception as e:
            prepared.append((b, e))
    return prepared


@action("client_crash")
async def _client_crash(target: Target, f: F.ClientCrashFault, call: Call) -> Step:
    evidence: dict[str, Any] = {}
    errors = []
    if f.clients is not None:  # subscribers of the workload
        clients = f.clients.resolve(target.subscribers(), call.rng)
        for c in clients:
            try:
                evidence[c] = await target.crash_subscriber(c)
            except Exception as e:
                errors.append(f"{c}: {error_text(e)}")
        return Step(clients, bool(clients) and not errors, evidence,
                    error="; ".join(errors) or (None if clients else "no live subscriber"))
    prepared = call.prepared or []
    brokers = [b for b, _ in prepared]
    for b, handle in prepared:
        if isinstance(handle, BaseException):
            errors.append(f"{b}: {error_text(handle)}")
            continue
        try:
            evidence[b] = await target.crash_client(handle)
        except Exception as e:
            errors.append(f"{b}: {error_text(e)}")
    crashed = [e for e in evidence.values() if "sub_id" in e]
    # the subscription it crashed, by (client, sub_id): ids are unique per client only
    fields = ({"sub_id": crashed[0]["sub_id"], "client": crashed[0]["client"]}
              if len(crashed) == 1 and "client" in crashed[0] else
              {"sub_id": crashed[0]["sub_id"]} if len(crashed) == 1 else {})
    return Step(brokers, bool(evidence) and not errors, evidence,
                error="; ".join(errors) or None, fields=fields)
