"""Carry out an experiment on a Target, and keep the evidence of every injection.

One executor for both targets: `Executor` schedules each injection on the target's clock (its
`lead` preparation first, for a client crash), runs the fault kind's action (actions.py), writes
the fault_begin record with the evidence, ends a lasting fault at its planned end and writes
fault_end. A `cut` or `crash` without a duration stays until a later `heal` or `restart` ends it.
One failed injection (a broker that is down, a table with no entry to corrupt) is recorded with
`took_effect: false` and its error; the experiment goes on.

    live:       outcomes = await ChaosRunner(bed, experiment).run()   # returns when all ended
    simulated:  simulate(scenario, out, faults=in_simulation(scenario))

Live, each injection is its own task, so faults overlap when the schedule says so. Once begun,
an action completes even if the experiment is cancelled meanwhile (Ctrl-C, the end of
`weeble run`): the runner then stops its clock, and every lasting fault with a planned end is
ended at once, so a testbed is never left paused, cut or shaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.chaos.actions import ACTIONS, Call, Shaping, error_text, prepare_client_crash
from weeble.chaos.evidence import TRACE_FILE, ChaosTrace, fault_fields
from weeble.chaos.live import LiveTarget
from weeble.chaos.target import Step, Target
from weeble.model import faults as F
from weeble.model.experiment import Experiment, ExperimentError, Injection
from weeble.model.scenario import Scenario
from weeble.orchestrator.testbed import Testbed

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """One injection, as the verdict table and the simulator's summary show it."""

    fault_id: str
    kind: str
    what: str
    targets: list[str]  # as resolved; [] when skipped (then `selector` says what it aimed at)
    took_effect: bool | None  # None: not begun yet (a simulated run ended first)
    error: str | None
    planned: float = 0.0  # s from the experiment's start
    planned_end: float | None = None
    selector: str = ""
    begin: float | None = None  # s from the experiment's start, as the target's clock read
    end: float | None = None
    skipped: str | None = None  # why the injection never happened
    during: str | None = None  # the reconfiguration phase it was scheduled in ("r2 locked")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Open:
    inj: Injection
    step: Step
    fields: dict[str, Any]
    outcome: Outcome
    remaining: set[str]


class Executor:
    """An experiment on one Target: its injections, their outcomes, the open faults."""

    def __init__(self, experiment: Experiment, target: Target, *, seed: int,
                 until: float | None = None, prefix: str = "",
                 say: Callable[[str], None] | None = None) -> None:
        """`until`: s after the start beyond which nothing new is injected (the end of the
        workload); `prefix`: for the fault ids of a second experiment on the same run."""
        self.experiment = experiment
        self.target = target
        self.seed = seed
        self.until = until
        self.prefix = prefix
        self.say = say or (lambda _msg: None)
        self.timeline = experiment.timeline(until=until)
        self.outcomes: list[Outcome] = []
        self._open: dict[str, _Open] = {}
        self._waiting: dict[str, Injection] = {}  # `during` faults whose phase has not come
        self._shaping = Shaping()  # the link shapings in force, shared by the faults

    def injections(self) -> list[Coroutine[Any, Any, None]]:
        """One coroutine per injection to run (the others are recorded as skipped)."""
        work = []
        for inj in self.timeline:
            if self.until is not None and inj.start >= self.until:  # not observable
                self.outcomes.append(self._outcome(
                    inj, [], False, None, skipped=f"starts at {inj.start:g} s, after the run"
                                                  f" ends ({self.until:g} s)"))
                continue
            work.append(self._inject(inj))
        return work

    def results(self) -> list[Outcome]:
        """The outcomes so far, in planned order; a fault `during` a reconfiguration whose
        phase has not come (yet, or ever: a run that ended) is skipped."""
        waiting = [self._outcome(inj, [], None, None, skipped=_never(inj))
                   for inj in self._waiting.values()]
        return sorted([*self.outcomes, *waiting],
                      key=lambda o: (o.planned, o.begin or 0.0, o.fault_id))

    def _outcome(self, inj: Injection, targets: list[str], took_effect: bool | None,
                 error: str | None, **more: Any) -> Outcome:
        return Outcome(fault_id=self.prefix + inj.id, kind=inj.fault.kind,
                       what=inj.fault.describe(), targets=targets, took_effect=took_effect,
                       error=error, planned=inj.start, planned_end=inj.end,
                       selector=inj.fault.selector(),
                       during=inj.during.describe() if inj.during is not None else None,
                       **more)

    # ---- one injection ----------------------------------------------------------------------

    async def _inject(self, inj: Injection) -> None:
        if inj.during is not None:
            triggered = await self._trigger(inj)
            if triggered is None:
                return
            inj = triggered
            if self.until is not None and inj.start >= self.until:
                self.outcomes.append(self._outcome(inj, [], False, None, skipped=(
                    f"its phase came, but {inj.start:g} s is after the run ends"
                    f" ({self.until:g} s)")))
                return
        target, f = self.target, inj.fault
        call = Call(fault_id=self.prefix + inj.id, inj=inj,
                    rng=random.Random(inj.seed(self.seed)), strike=inj.start,
                    shaping=self._shaping)
        if f.lead:
            if not await target.sleep_until(max(0.0, inj.start - f.lead)):
                return
            if isinstance(f, F.ClientCrashFault):
                call.prepared = await prepare_client_crash(target, f, call)
        # after a preparation the fault goes ahead even when stopping: its clients must crash
        if not await target.sleep_until(inj.start) and not f.lead:
            return
        outcome = self._outcome(inj, [], None, None)
        self.outcomes.append(outcome)
        outcome.begin = target.elapsed()
        try:
            step = await ACTIONS[f.kind](target, f, call)
        except Exception as e:  # one failed injection must not stop the experiment
            log.warning("chaos %s (%s) failed: %s", call.fault_id, f.describe(), e)
            step = Step([], False, {}, error=error_text(e))
        if step.at is not None:
            outcome.begin = step.at
        outcome.targets, outcome.took_effect, outcome.error = (
            step.targets, step.took_effect, step.error)
        fields = {**fault_fields(inj, call.fault_id, step.targets, step.links), **step.fields}
        target.record("fault_begin", outcome.begin, {
            **fields, "took_effect": step.took_effect, "evidence": step.evidence,
            **({"error": step.error} if step.error else {})})
        mark = "took effect" if step.took_effect else f"DID NOT take effect ({step.error})"
        self.say(f"{call.fault_id}: {f.describe()} -> {', '.join(step.targets) or '-'}: {mark}")
        if step.end is None:  # instantaneous: it ends as it begins
            outcome.end = target.elapsed()
            target.record("fault_end", outcome.end, {**fields, "ok": step.error is None,
                                                     "took_effect": step.took_effect})
            self._closes(call.fault_id, inj, step)
        elif inj.end is None and not target.stopping():  # until a heal/restart (or never)
            self._open[call.fault_id] = _Open(inj, step, fields, outcome, set(step.undoes))
        else:
            # the planned end, or at once when the experiment stops: ended either way
            reached = inj.end is not None and await target.sleep_until(inj.end)
            await self._end(fields, step, outcome, cut_short=not reached)

    async def _trigger(self, inj: Injection) -> Injection | None:
        """A fault `during` a reconfiguration: wait for its phase, then its delay; the
        injection with the time it strikes (None: the run ended first, recorded as skipped)."""
        d = inj.during
        assert d is not None
        self._waiting[inj.id] = inj
        t = await self.target.wait_phase(d.reconfiguration, d.phase, d.broker)
        if t is None:
            return None  # `results()` reports it, still waiting
        del self._waiting[inj.id]
        inj = inj.starting(t + d.delay)
        self.say(f"{self.prefix + inj.id}: {d.reconfiguration} reached {d.phase}"
                 f"{f' at {d.broker}' if d.broker else ''} at {t:.3f} s")
        return inj

    async def _end(self, fields: dict[str, Any], step: Step, outcome: Outcome,
                   cut_short: bool) -> None:
        assert step.end is not None
        try:
            done = await step.end()
        except Exception as e:
            done = Step(step.targets, False, {}, error=error_text(e))
        outcome.end = self.target.elapsed()
        self.target.record("fault_end", outcome.end, {
            **fields, "ok": done.error is None and done.took_effect,
            "took_effect": step.took_effect, "evidence": done.evidence,
            **({"error": done.error} if done.error else {}),
            **({"cut_short": True} if cut_short else {})})
        self.say(f"{fields['fault_id']}: ended ({'ok' if done.error is None else done.error})")

    def _closes(self, fault_id: str, inj: Injection, step: Step) -> None:
        """A heal or restart ends the open cuts/crashes it undid completely. A restart that
        failed at a broker ends the crash it meant to end there too, with `ok: false` and the
        reason: that crash's episode is judged from this record, alone, instead of never
        ending and swallowing every later fault (R10)."""
        if inj.fault.kind not in ("heal", "restart"):
            return
        ends = ("crash",) if inj.fault.kind == "restart" else ("cut", "partition")
        failed = (set(step.targets) - step.undoes
                  if step.error and inj.fault.kind == "restart" else set())
        for open_id, open_ in list(self._open.items()):
            if open_.inj.fault.kind not in ends:
                continue
            open_.remaining -= step.undoes
            if open_.remaining & failed:
                del self._open[open_id]
                open_.outcome.end = self.target.elapsed()
                self.target.record("fault_end", open_.outcome.end, {
                    **open_.fields, "ok": False, "took_effect": open_.step.took_effect,
                    "ended_by": fault_id, "error": f"{fault_id} failed: {step.error}",
                    "evidence": step.evidence})
            elif not open_.remaining:
                del self._open[open_id]
                open_.outcome.end = self.target.elapsed()
                self.target.record("fault_end", open_.outcome.end, {
                    **open_.fields, "ok": True, "took_effect": open_.step.took_effect,
                    "ended_by": fault_id, "evidence": step.evidence})


def _never(inj: Injection) -> str:
    d = inj.during
    assert d is not None
    at = f" at {d.broker}" if d.broker else ""
    return f"reconfiguration {d.reconfiguration} did not reach phase {d.phase}{at} (by the end)"


def experiment_seed(experiment: Experiment, default: int) -> int:
    """An experiment's own seed, or the run's (the scenario's)."""
    return experiment.seed if experiment.seed is not None else default


# ---- in the simulator -----------------------------------------------------------------------


def in_simulation(scenario: Scenario) -> Callable[[Any], Callable[[], list[dict[str, Any]]]]:
    """The scenario's chaos experiment as the simulator's `faults` hook (broker/sim/run.py): it
    schedules every injection on the simulator's Target, t = 0 at the workload's start, and
    gives the summary's fault list once the run is over."""

    def attach(target: Any) -> Callable[[], list[dict[str, Any]]]:
        if scenario.chaos is None:
            return list
        executor = Executor(scenario.chaos, target,
                            seed=experiment_seed(scenario.chaos, scenario.seed),
                            until=scenario.duration)
        for work in executor.injections():
            target.spawn(work)
        return lambda: [_summary_entry(o) for o in executor.results()]

    return attach


def _summary_entry(o: Outcome) -> dict[str, Any]:
    """An outcome in the simulator's summary.json (times in s of the run)."""
    return {"id": o.fault_id, "kind": o.kind, "what": o.what, "at": o.planned,
            "end": o.planned_end, "targets": o.targets, "took_effect": o.took_effect,
            "error": o.error, "began": o.begin, "ended": o.end, "skipped": o.skipped,
            **({"during": o.during} if o.during is not None else {})}


# ---- live -----------------------------------------------------------------------------------


def repeat_prefix(name: str, ids: list[str], taken: set[str]) -> str:
    """The prefix of the fault ids of experiment `name` (its injections' `ids`) on a run whose
    trace already holds the fault ids `taken`: none the first time; on a repeat `name#n.`, the
    first n ≥ 2 that clashes with nothing, so the ids stay readable (restart-b3#2.up, not
    restart-b32.up) and distinct."""
    if not any(i in taken for i in ids):
        return ""
    n = 2
    while any(f"{name}#{n}.{i}" in taken for i in ids):
        n += 1
    return f"{name}#{n}."


class ChaosRunner:
    """An experiment against a live Testbed, through its Backend and the brokers' admin API."""

    def __init__(self, bed: Testbed, experiment: Experiment, *, seed: int | None = None,
                 until: float | None = None, trace_path: Path | None = None,
                 clients: Any = None, on_event: Callable[[str], None] | None = None) -> None:
        """`until`: s after `run()` starts beyond which nothing new is injected (the end of
        the workload); `seed`: default for an experiment without one (the scenario's);
        `clients`: the run's live workload, for client crashes of its subscribers."""
        scenario_seed = bed.scenario.get("seed", 0) if isinstance(bed.scenario, dict) else 0
        self.seed = experiment_seed(experiment, seed if seed is not None
                                    else int(scenario_seed or 0))
        during = [i for i, f in enumerate(experiment.faults) if f.during is not None]
        if during and not getattr(bed, "reconfigures", False):
            raise ExperimentError(f"faults[{during[0]}].during", "this live testbed carries"
                                  " out no reconfigurations (its backend, or this version of"
                                  " the live brokers, cannot reconfigure), so no phase of one"
                                  " will come; schedule the fault with `at`, or run the"
                                  " scenario in the simulator (`weeble simulate SCENARIO"
                                  " --chaos FILE`)")
        self.trace = ChaosTrace(trace_path or bed.trace_dir / TRACE_FILE)
        self.target = LiveTarget(bed, self.trace, clients=clients)
        self.target.until = until  # a `during` phase is not waited for beyond it
        experiment.check(self.target.tree, self.target.params, until=None)
        prefix = repeat_prefix(experiment.name, [inj.id for inj in
                                                 experiment.timeline(until=until)],
                               self.trace.known_ids())
        self.executor = Executor(experiment, self.target, seed=self.seed, until=until,
                                 prefix=prefix, say=on_event)
        self.timeline = self.executor.timeline

    async def run(self) -> list[Outcome]:
        self.target.begin()
        tasks = [asyncio.ensure_future(work) for work in self.executor.injections()]
        try:
            if tasks:
                await asyncio.wait(tasks)  # unlike gather, a cancel here leaves them running
        finally:
            # cancelled (or done): stop the clock, so that every task ends what it began
            self.target.stop()
            while not all(t.done() for t in tasks):
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(asyncio.wait(tasks))
            await self.target.close()
            self.trace.close()
        return self.results()

    def results(self) -> list[Outcome]:
        """The outcomes so far (all of them once `run()` returned or was cancelled)."""
        return self.executor.results()
