"""Apply an experiment to a running Testbed, and keep the evidence of every injection.

    runner = ChaosRunner(bed, experiment)
    outcomes = await runner.run()            # returns when the last fault has ended

Each injection starts at its planned offset from `run()`'s start, as its own task, so faults
overlap when the schedule says so. A live action (one per fault kind, `@live(kind)`) carries
the fault out through the admin API (state faults, injected messages, link shaping) or the
backend's own controls (cuts, kill and restart, pause and resume), then reads back what the
system and the backend report — that is the evidence. A lasting fault's action returns how to
end it; the runner ends it at its planned end, or, on cancellation (Ctrl-C, the end of
`weeble run`), at once: a testbed is never left paused, and a cut or a shaped link with a
planned end is healed. A `cut` or `crash` without a duration stays until a later `heal` or
`restart` ends it.

One failed injection (a broker that is down, a table with no entry to corrupt) is recorded
with `took_effect: false` and its error; the experiment goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from weeble.broker.core.rom import Params
from weeble.broker.runtime.wire import message_to_envelope
from weeble.chaos.evidence import TRACE_FILE, ChaosTrace, fault_fields, now_ns
from weeble.model import faults as F
from weeble.model.experiment import Experiment, Injection
from weeble.model.faults import state_diff
from weeble.model.selectors import Tree, link_key, link_name
from weeble.orchestrator.backend import BackendError
from weeble.orchestrator.testbed import Testbed

log = logging.getLogger(__name__)


@dataclass
class Step:
    """What one action did, as the system reports it."""

    targets: list[str]
    took_effect: bool
    evidence: dict[str, Any]
    error: str | None = None
    links: list[str] | None = None
    # A lasting fault: how to end it (the end's own Step)
    end: Callable[[], Awaitable[Step]] | None = None
    at_ns: int | None = None  # when the fault struck, if not when the action began
    # what a heal or restart undoes (link keys, brokers): how it closes a cut or crash that
    # had no planned end
    undoes: set[str] = field(default_factory=set)
    fields: dict[str, Any] = field(default_factory=dict)  # more ids for the trace records


@dataclass
class Outcome:
    """One injection, as the verdict table shows it."""

    fault_id: str
    kind: str
    what: str
    targets: list[str]  # as resolved; [] when skipped (then `selector` says what it aimed at)
    took_effect: bool
    error: str | None
    begin_ns: int | None
    planned: float = 0.0  # s from the experiment's start
    selector: str = ""
    end_ns: int | None = None
    skipped: str | None = None  # why the injection never happened

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Call:
    """One injection as an action sees it: its fault id (which the brokers' own fault records
    carry too, so the analytics join them), its schedule entry and its random stream."""

    fault_id: str
    inj: Injection
    rng: random.Random
    strike: float  # loop time of the planned instant (after the fault's `lead` preparation)


LiveAction = Callable[["Live", Any, Call], Awaitable[Step]]
_ACTIONS: dict[str, LiveAction] = {}


def live(kind: str) -> Callable[[LiveAction], LiveAction]:
    """Register the live action of a fault kind."""
    if kind not in F.KINDS:
        raise KeyError(f"no fault kind {kind!r}")

    def register(action: LiveAction) -> LiveAction:
        _ACTIONS[kind] = action
        return action

    return register


@dataclass
class Live:
    """What the actions work with: the testbed, its tree and timing, one backend lock."""

    bed: Testbed
    tree: Tree
    params: Params
    trace_dir: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    paused: set[str] = field(default_factory=set)  # brokers paused right now: always resumed

    async def backend(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A blocking backend call, off the loop, one at a time (the backend is synchronous
        and keeps state, such as the set of cut links, that two calls must not race on)."""
        async with self.lock:
            return await asyncio.to_thread(fn, *args)

    async def admin_call(self, broker: str, method: str, *args: Any, **kw: Any) -> Any:
        async with self.bed.admin(broker, timeout=5.0) as admin:
            return await getattr(admin, method)(*args, **kw)

    async def link_states(self, links: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """{broker: {neighbour: {state, shape}}} at both ends of each link, from Snapshot."""
        out: dict[str, dict[str, Any]] = {}
        for b in sorted({x for link in links for x in link}):
            if not self.bed.backend.alive(b):
                out[b] = {"error": "not running"}
                continue
            try:
                snap = await self.admin_call(b, "snapshot")
            except grpc.aio.AioRpcError as e:
                out[b] = {"error": f"{e.code().name}: {e.details()}"}
                continue
            ends = {n for link in links if b in link for n in link if n != b}
            out[b] = {ls["neighbor"]: {"state": ls["state"], "shape": ls["shape"]}
                      for ls in snap["links"] if ls["neighbor"] in ends}
        return out


class ChaosRunner:
    def __init__(self, bed: Testbed, experiment: Experiment, *, seed: int | None = None,
                 until: float | None = None, trace_path: Path | None = None,
                 on_event: Callable[[str], None] | None = None) -> None:
        """`until`: s after `run()` starts beyond which nothing new is injected (the end of
        the workload); `seed`: default for an experiment without one (the scenario's)."""
        self.bed = bed
        self.experiment = experiment
        scenario_seed = bed.scenario.get("seed", 0) if isinstance(bed.scenario, dict) else 0
        self.seed = experiment.seed if experiment.seed is not None else (
            seed if seed is not None else int(scenario_seed or 0))
        self.until = until
        self.tree = tree_of_testbed(bed)
        experiment.check(self.tree, params_of(bed), until=None)
        self.timeline = experiment.timeline(until=until)
        trace_dir = bed.trace_dir
        self.trace = ChaosTrace(trace_path or trace_dir / TRACE_FILE)
        self.live = Live(bed, self.tree, params_of(bed), trace_dir)
        self.say = on_event or (lambda _msg: None)
        taken = self.trace.known_ids()
        self.prefix = ""
        if any(inj.id in taken for inj in self.timeline):  # an earlier experiment on this run
            n = 2
            while any(f"{experiment.name}{n}.{inj.id}" in taken for inj in self.timeline):
                n += 1
            self.prefix = f"{experiment.name}{n}."
        self.outcomes: list[Outcome] = []
        self._open: dict[str, _Open] = {}  # lasting faults without a planned end, by fault id

    async def run(self) -> list[Outcome]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        tasks = []
        try:
            for inj in self.timeline:
                if self.until is not None and inj.start >= self.until:  # not observable
                    self.outcomes.append(Outcome(
                        self.prefix + inj.id, inj.fault.kind, inj.fault.describe(), [], False,
                        None, None, inj.start, inj.fault.selector(),
                        skipped=f"starts at {inj.start:g} s, after the run ends"
                                f" ({self.until:g} s)"))
                    continue
                tasks.append(asyncio.create_task(self._inject(inj, t0),
                                                 name=f"chaos-{inj.id}"))
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            # the ending actions run inside the cancelled tasks; let them finish
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._resume_paused()
            self.trace.close()
        return self.results()

    def results(self) -> list[Outcome]:
        """The outcomes so far (all of them once `run()` returned or was cancelled)."""
        return sorted(self.outcomes, key=lambda o: (o.planned, o.begin_ns or 0, o.fault_id))

    # ---- one injection ----------------------------------------------------------------------

    async def _inject(self, inj: Injection, t0: float) -> None:
        loop = asyncio.get_running_loop()
        delay = t0 + inj.start - inj.fault.lead - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        fault_id = self.prefix + inj.id
        call = Call(fault_id, inj, random.Random(inj.seed(self.seed)), t0 + inj.start)
        begin = now_ns()
        # Once begun, an action completes even if the experiment is cancelled meanwhile: a cut
        # or a SIGSTOP half done and never undone would outlive the experiment.
        acting = asyncio.ensure_future(_ACTIONS[inj.fault.kind](self.live, inj.fault, call))
        cancelled = False
        try:
            step = await asyncio.shield(acting)
        except asyncio.CancelledError:
            cancelled = True
            step = await _settled(acting)
        except Exception as e:  # one failed injection must not stop the experiment
            log.warning("chaos %s (%s) failed: %s", fault_id, inj.fault.describe(), e)
            step = Step([], False, {}, error=_error_text(e))
        begin = step.at_ns or begin
        outcome = Outcome(fault_id, inj.fault.kind, inj.fault.describe(), step.targets,
                          step.took_effect, step.error, begin, inj.start, inj.fault.selector())
        self.outcomes.append(outcome)
        fields = {**fault_fields(inj, fault_id, step.targets, step.links), **step.fields}
        self.trace.write("fault_begin", begin, {
            **fields, "took_effect": step.took_effect, "evidence": step.evidence,
            **({"error": step.error} if step.error else {})})
        mark = "took effect" if step.took_effect else f"DID NOT take effect ({step.error})"
        self.say(f"{fault_id}: {inj.fault.describe()} -> {', '.join(step.targets) or '-'}:"
                 f" {mark}")
        if step.end is None:  # instantaneous: it ends as it begins
            outcome.end_ns = now_ns()
            self.trace.write("fault_end", outcome.end_ns, {**fields, "ok": step.error is None,
                                                           "took_effect": step.took_effect})
            self._closes(fault_id, inj, step)
        elif inj.end is None and not cancelled:  # until a heal/restart ends it (or never)
            self._open[fault_id] = _Open(fault_id, inj, step, fields, outcome, set(step.undoes))
        else:
            try:
                if not cancelled:
                    await asyncio.sleep(max(0.0, t0 + inj.end - loop.time()))
            except asyncio.CancelledError:
                cancelled = True
            # the planned end, or the experiment's: end it either way, and completely
            await asyncio.shield(self._end(fields, step, outcome, cut_short=cancelled))
        if cancelled:
            raise asyncio.CancelledError

    async def _end(self, fields: dict[str, Any], step: Step, outcome: Outcome,
                   cut_short: bool) -> None:
        assert step.end is not None
        try:
            done = await step.end()
        except Exception as e:
            done = Step(step.targets, False, {}, error=_error_text(e))
        outcome.end_ns = now_ns()
        self.trace.write("fault_end", outcome.end_ns, {
            **fields, "ok": done.error is None and done.took_effect,
            "took_effect": step.took_effect, "evidence": done.evidence,
            **({"error": done.error} if done.error else {}),
            **({"cut_short": True} if cut_short else {})})
        self.say(f"{fields['fault_id']}: ended ({'ok' if done.error is None else done.error})")

    def _closes(self, fault_id: str, inj: Injection, step: Step) -> None:
        """A heal or restart ends the open cuts/crashes it undid completely."""
        if inj.fault.kind not in ("heal", "restart") or step.error:
            return
        ends = ("crash",) if inj.fault.kind == "restart" else ("cut", "partition")
        for open_id, open_ in list(self._open.items()):
            if open_.inj.fault.kind not in ends:
                continue
            open_.remaining -= step.undoes
            if not open_.remaining:
                del self._open[open_id]
                open_.outcome.end_ns = now_ns()
                self.trace.write("fault_end", open_.outcome.end_ns, {
                    **open_.fields, "ok": True, "took_effect": open_.step.took_effect,
                    "ended_by": fault_id, "evidence": step.evidence})

    async def _resume_paused(self) -> None:
        for b in list(self.live.paused):
            with contextlib.suppress(BackendError):
                await self.live.backend(self.bed.backend.resume_broker, b)
            self.live.paused.discard(b)


@dataclass
class _Open:
    fault_id: str
    inj: Injection
    step: Step
    fields: dict[str, Any]
    outcome: Outcome
    remaining: set[str]


async def _settled(acting: asyncio.Future[Step]) -> Step:
    """The action's Step once it finished (or a failed Step), whatever else is cancelled."""
    while not acting.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(acting)
    if acting.cancelled():
        return Step([], False, {}, error="cancelled")
    e = acting.exception()
    return Step([], False, {}, error=_error_text(e)) if e is not None else acting.result()


def tree_of_testbed(bed: Testbed) -> Tree:
    return Tree(bed.brokers, bed.edges, bed.root)


def params_of(bed: Testbed) -> Params:
    p = next(iter(bed.configs.values())).params
    return Params(p.pi, p.rho, p.delta_min, p.delta_max, p.d)


def _error_text(e: BaseException) -> str:
    if isinstance(e, grpc.aio.AioRpcError):
        return f"{e.code().name}: {e.details()}"
    return f"{type(e).__name__}: {e}"


# ---- state faults ---------------------------------------------------------------------------


async def _corrupt_one(ctx: Live, broker: str, target: str, value: Any, args: dict[str, Any],
                       fault_id: str) -> tuple[bool, dict[str, Any], str | None]:
    try:
        reply = await ctx.admin_call(broker, "corrupt", target, value, args, fault_id)
    except grpc.aio.AioRpcError as e:
        return False, {}, f"{broker}: {_error_text(e)}"
    diff = state_diff(reply["before"], reply["after"])
    return bool(diff), {"field": target, "value": value, "args": args, "changed": diff}, None


@live("corrupt")
async def _corrupt(ctx: Live, f: F.CorruptFault, call: Call) -> Step:
    rng = call.rng
    brokers = f.target.resolve(ctx.tree, rng)
    evidence: dict[str, Any] = {}
    errors, effective = [], []
    for b in brokers:
        try:
            snap = (await ctx.admin_call(b, "snapshot"))["core"]
            target, value, args = f.draw(ctx.bed.configs[b].to_rom(), snap, rng)
        except (grpc.aio.AioRpcError, LookupError) as e:
            errors.append(f"{b}: {_error_text(e) if isinstance(e, grpc.aio.AioRpcError) else e}")
            continue
        ok, ev, err = await _corrupt_one(ctx, b, target, value, args, call.fault_id)
        evidence[b] = ev
        if err:
            errors.append(err)
        elif ok:
            effective.append(b)
    return Step(brokers, bool(effective) and not errors, evidence,
                error="; ".join(errors) or (None if effective else "the state did not change"))


@live("clock")
async def _clock(ctx: Live, f: F.ClockFault, call: Call) -> Step:
    brokers = f.target.resolve(ctx.tree, call.rng)
    evidence: dict[str, Any] = {}
    errors, effective = [], []
    for b in brokers:
        value = f.clock_value(ctx.params.pi, call.rng)
        ok, ev, err = await _corrupt_one(ctx, b, "clock", value, {}, call.fault_id)
        evidence[b] = ev
        if err:
            errors.append(err)
        elif ok:
            effective.append(b)
    return Step(brokers, bool(effective) and not errors, evidence,
                error="; ".join(errors) or (None if effective else "the clock did not change"))


# ---- injected messages ----------------------------------------------------------------------


def _directed(links: list[tuple[str, str]], direction: str) -> list[tuple[str, str]]:
    out = []
    for a, b in links:
        if direction in ("both", "forward"):
            out.append((a, b))
        if direction in ("both", "backward"):
            out.append((b, a))
    return out


@live("inject")
async def _inject(ctx: Live, f: F.InjectFault, call: Call) -> Step:
    links = f.link.resolve(ctx.tree, call.rng)
    message = f.message.to_core()
    evidence: dict[str, Any] = {}
    errors, effective = [], []
    for src, dst in _directed(links, f.direction):
        name = f"{src}->{dst}"
        try:
            reply = await ctx.admin_call(dst, "inject", src, message_to_envelope(message, 0),
                                         call.fault_id)
        except grpc.aio.AioRpcError as e:
            errors.append(f"{name}: {_error_text(e)}")
            continue
        diff = state_diff(reply["before"], reply["after"])
        evidence[name] = {"effects": reply["effects"], "changed": diff}
        acted = {k: v for k, v in reply["effects"].items() if k in ("send", "deliver")}
        if diff or acted:
            effective.append(name)
    return Step([link_name(x) for x in links], bool(effective) and not errors, evidence,
                error="; ".join(errors) or (None if effective else
                                            "the core consumed it without any effect"),
                links=[link_name(x) for x in links])


# ---- link shaping ---------------------------------------------------------------------------


_SHAPE = {"drop": "loss", "duplicate": "duplicate", "garble": "corrupt"}


def _shape_of(f: Any) -> dict[str, float]:
    if f.kind == "delay":
        return {"delay_ms": f.delay_ms, "jitter_ms": f.jitter_ms}
    return {_SHAPE[f.kind]: f.probability}


async def _shapes(ctx: Live, directed: list[tuple[str, str]]) -> dict[tuple[str, str],
                                                                      dict[str, float]]:
    states = await ctx.link_states([tuple(sorted(d)) for d in directed])  # type: ignore[misc]
    out = {}
    for a, b in directed:
        info = states.get(a, {}).get(b)
        if info is None:
            raise LookupError(f"{a}: no link status for {b} ({states.get(a)})")
        out[a, b] = info["shape"]
    return out


async def _set_shapes(ctx: Live, wanted: dict[tuple[str, str], dict[str, float]]) -> Step:
    """Set each directed link's shape; the evidence is what the brokers then report."""
    for (a, b), shape in wanted.items():
        await ctx.backend(lambda a=a, b=b, s=shape: ctx.bed.shape(a, b, both_ways=False, **s))
    reported = await _shapes(ctx, list(wanted))
    evidence = {f"{a}->{b}": reported[a, b] for a, b in wanted}
    took = all(abs(reported[d].get(k, 0.0) - v) < 1e-9 for d, s in wanted.items()
               for k, v in s.items())
    names = sorted({link_name(tuple(sorted(d))) for d in wanted})  # type: ignore[arg-type]
    return Step(names, took, evidence, error=None if took else "a link reports another shape",
                links=names)


async def _shaping(ctx: Live, f: Any, call: Call) -> Step:
    directed = _directed(f.link.resolve(ctx.tree, call.rng), f.direction)
    previous = await _shapes(ctx, directed)
    change = _shape_of(f)
    step = await _set_shapes(ctx, {d: change for d in directed})

    async def end() -> Step:
        restore = {d: {k: previous[d].get(k, 0.0) for k in change} for d in directed}
        return await _set_shapes(ctx, restore)

    step.end = end
    return step


for _kind in ("drop", "duplicate", "garble", "delay"):
    live(_kind)(_shaping)


# ---- link state -----------------------------------------------------------------------------


async def _cut_links(ctx: Live, links: list[tuple[str, str]], cut: bool) -> Step:
    """Cut (or heal) through the backend; the evidence is its mechanism's reading of each link
    (each broker's own link state locally, interface or network state on Mininet/Docker)."""
    for a, b in links:
        await ctx.backend(ctx.bed.cut if cut else ctx.bed.heal, a, b)
    names = [link_name(x) for x in links]
    evidence: dict[str, Any] = {}
    ok = True
    for (a, b), name in zip(links, names, strict=True):
        try:
            state = await ctx.backend(ctx.bed.backend.link_state, a, b)
        except BackendError as e:
            evidence[name] = {"error": str(e)}
            continue
        evidence[name] = state.evidence()
        ok = ok and state.cut == cut
    return Step(names, ok, evidence, links=names, undoes={link_key(x) for x in links},
                error=None if ok else f"a link is not {'cut' if cut else 'healed'}")


async def _cut_for(ctx: Live, links: list[tuple[str, str]], lasting: bool) -> Step:
    step = await _cut_links(ctx, links, cut=True)
    if lasting:
        step.end = lambda: _cut_links(ctx, links, cut=False)
    return step


@live("cut")
async def _cut(ctx: Live, f: F.CutFault, call: Call) -> Step:
    return await _cut_for(ctx, f.link.resolve(ctx.tree, call.rng), lasting=True)


@live("heal")
async def _heal(ctx: Live, f: F.HealFault, call: Call) -> Step:
    return await _cut_links(ctx, f.link.resolve(ctx.tree, call.rng), cut=False)


@live("partition")
async def _partition(ctx: Live, f: F.PartitionFault, call: Call) -> Step:
    side = f.target.resolve(ctx.tree, call.rng)
    links = ctx.tree.boundary(side)
    if not links:
        return Step(side, False, {}, error="no link crosses the boundary of " + ",".join(side))
    step = await _cut_for(ctx, links, lasting=True)
    step.evidence = {"side": side, "links": step.evidence}
    return step


@live("flap")
async def _flap(ctx: Live, f: F.FlapFault, call: Call) -> Step:
    links = f.link.resolve(ctx.tree, call.rng)
    step = await _cut_for(ctx, links, lasting=False)
    cycles = [1]

    async def toggle() -> None:
        while True:
            await asyncio.sleep(f.down)
            await _cut_links(ctx, links, cut=False)
            await asyncio.sleep(f.up)
            await _cut_links(ctx, links, cut=True)
            cycles[0] += 1

    toggler = asyncio.create_task(toggle(), name=f"flap-{call.fault_id}")

    async def end() -> Step:
        toggler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await toggler
        healed = await _cut_links(ctx, links, cut=False)
        healed.evidence = {"cuts": cycles[0], "links": healed.evidence}
        return healed

    step.end = end
    return step


# ---- processes ------------------------------------------------------------------------------


async def _kill(ctx: Live, brokers: list[str]) -> Step:
    evidence: dict[str, Any] = {}
    errors = []
    for b in brokers:
        before = ctx.bed.backend.broker_state(b)
        if not before.running:
            errors.append(f"{b}: not running")
            continue
        await ctx.backend(ctx.bed.kill, b)
        after = ctx.bed.backend.broker_state(b)
        evidence[b] = {**after.evidence(), "killed": before.handle}
        if after.running:
            errors.append(f"{b}: still running after the kill")
    return Step(brokers, not errors, evidence, error="; ".join(errors) or None)


async def _restart(ctx: Live, brokers: list[str]) -> Step:
    evidence: dict[str, Any] = {}
    errors = []
    for b in brokers:
        old = ctx.bed.backend.handle(b)
        try:
            await ctx.backend(ctx.bed.restart, b)
            snap = await ctx.admin_call(b, "snapshot")
        except Exception as e:
            errors.append(f"{b}: {_error_text(e)}")
            continue
        evidence[b] = {"old_pid": old, "pid": ctx.bed.backend.handle(b),
                       "uptime": round(snap["now"], 3),  # a fresh process: RAM started empty
                       "entries": sum(len(t) for t in snap["core"]["tables"])}
    return Step(brokers, not errors, evidence, error="; ".join(errors) or None,
                undoes=set(brokers) - {e.split(":")[0] for e in errors})


@live("crash")
async def _crash(ctx: Live, f: F.CrashFault, call: Call) -> Step:
    brokers = f.target.resolve(ctx.tree, call.rng)
    step = await _kill(ctx, brokers)
    step.end = lambda: _restart(ctx, brokers)
    step.undoes = set(brokers)
    return step


@live("restart")
async def _restart_action(ctx: Live, f: F.RestartFault, call: Call) -> Step:
    return await _restart(ctx, f.target.resolve(ctx.tree, call.rng))


async def _freeze(ctx: Live, brokers: list[str], pause: bool) -> Step:
    """Pause (or resume) each broker through the backend; its state afterwards is the evidence."""
    evidence: dict[str, Any] = {}
    errors = []
    for b in brokers:
        if pause and not ctx.bed.backend.alive(b):
            errors.append(f"{b}: not running")
            continue
        try:
            act = ctx.bed.backend.pause_broker if pause else ctx.bed.backend.resume_broker
            state = await ctx.backend(act, b)
        except BackendError as e:
            errors.append(f"{b}: {e}")
            continue
        (ctx.paused.add if pause else ctx.paused.discard)(b)
        evidence[b] = state.evidence()
        if state.paused != pause:
            errors.append(f"{b}: {'not paused' if pause else 'still paused'}"
                          f" ({state.detail})")
    return Step(brokers, not errors, evidence, error="; ".join(errors) or None)


@live("pause")
async def _pause(ctx: Live, f: F.PauseFault, call: Call) -> Step:
    brokers = f.target.resolve(ctx.tree, call.rng)
    step = await _freeze(ctx, brokers, pause=True)
    paused = [b for b in brokers if b in ctx.paused]
    step.end = lambda: _freeze(ctx, paused, pause=False)
    return step


# ---- clients --------------------------------------------------------------------------------


async def _until_closed(ctx: Live, broker: str, stream: str,
                        timeout: float = 3.0) -> dict[str, Any]:
    """The broker's snapshot once it saw the client's stream close (it learns of it a moment
    after the client), or the last one at the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        snap: dict[str, Any] = await ctx.admin_call(broker, "snapshot")
        if stream not in snap["client_streams"] or loop.time() > deadline:
            return snap
        await asyncio.sleep(0.05)


@live("client_crash")
async def _client_crash(ctx: Live, f: F.ClientCrashFault, call: Call) -> Step:
    from weeble.broker.client import Subscriber
    from weeble.trace.writer import LiveSink

    brokers = f.target.resolve(ctx.tree, call.rng)
    evidence: dict[str, Any] = {}
    errors = []
    struck: int | None = None
    for b in brokers:
        client = f"chaos-{call.fault_id}-{b}".replace(".", "-")
        sub_id = f"{client}/0"
        trace = LiveSink(ctx.trace_dir / f"{client}.jsonl", client)
        trace.record("client_start", broker=b, address=ctx.bed.address(b).listen)
        sub = Subscriber(ctx.bed.address(b).listen, client, rho=ctx.params.rho, trace=trace)
        try:
            trace.record("client_subscribe", client=client, sub_id=sub_id, broker=b,
                         filter=f.filter)
            await sub.subscribe(f.filter, sub_id)
            await asyncio.sleep(max(0.0, call.strike - asyncio.get_running_loop().time()))
            before = await ctx.admin_call(b, "snapshot")
            trace.record("crash", client=client, sub_id=sub_id, broker=b)
            struck = struck or now_ns()
            await sub.close()  # no unsubscription: the refreshes just stop (F12)
            after = await _until_closed(ctx, b, f"{client}/{sub_id}")
        except Exception as e:
            errors.append(f"{b}: {_error_text(e)}")
            await sub.close()
            continue
        finally:
            trace.close()
        stream = f"{client}/{sub_id}"
        had = stream in before["client_streams"]
        gone = stream not in after["client_streams"]
        entries = [e for t in after["core"]["tables"] for e in t if e["sub_id"] == sub_id]
        evidence[b] = {"client": client, "sub_id": sub_id, "stream_before": had,
                       "stream_after": not gone, "entries_left": entries}
        if not (had and gone):
            errors.append(f"{b}: the client's stream was {'not open' if not had else 'kept'}")
    sub_ids = [e["sub_id"] for e in evidence.values()]
    return Step(brokers, not errors, evidence, error="; ".join(errors) or None, at_ns=struck,
                fields={"sub_id": sub_ids[0]} if len(sub_ids) == 1 else {})
