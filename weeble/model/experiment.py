"""Experiments: YAML schedules of faults, validated with errors that name the field.

    name: mixed-bag
    seed: 7                      # default: the run's scenario seed
    duration: 60                 # optional: bounds `every` without `times`
    faults:
      - {name: flag, kind: corrupt, field: entry.flag, target: root, at: 5}
      - {kind: clock, target: {random: 1, among: leaves}, after: 8}        # 8 s after `flag`
      - {kind: cut, link: [b0, b1], at: 25, duration: 3}                   # then healed
      - {kind: crash, target: b4, at: 35, duration: 2}                     # restart, empty RAM
      - {kind: duplicate, link: {of: b2}, probability: 0.5, at: 45, duration: 4}
      - {kind: clock, target: all, at: 10, every: 20, times: 3}            # at 10, 30 and 50
      - {kind: corrupt, target: b3, field: exchange.queue.clear,           # inside exchange r2,
         during: {reconfiguration: 2, phase: locked, broker: b3, delay: 0.01}}  # b3 locked

Timing: `at` is seconds from the experiment's start; `after` is seconds after the previous
fault in the list ended (its last repetition, including its duration); `every` repeats a fault
with that period, `times` times in all (or, without `times`, until the experiment's duration).
`during` (instead of `at`/`after`) strikes inside a reconfiguration window: when reconfiguration
`r<n>` reaches a phase (the manager's `started`/`finished`, or a broker's `reconfig` phase such
as `locked`, optionally at one broker), plus `delay` s (faults.During). Its time is known only
when the run gets there, so it is not on the timeline's clock (`Injection.during`), and a fault
after it cannot use `after`.

`Experiment.check(tree)` validates it against a broker tree: unknown brokers, links that are
not links, a random draw larger than its population. `timeline()` unrolls the schedule into
`Injection`s, each with its own id (the fault's `name`, or f<index>; `.n` for repetitions) and
its own random stream derived from the seed, so the same experiment hits the same targets live
and in simulation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from weeble.core.rom import Params
from weeble.model.errors import problems
from weeble.model.faults import COLOUR_PHASES, EXCHANGE_PHASES, KINDS, During, Fault, FaultError
from weeble.model.selectors import Tree

# Every registered kind, told apart by `kind` (pydantic reports an unknown kind by name).
FaultSpec = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007


class ExperimentError(ValueError):
    """An experiment the user must fix: `path` is the field (`faults[2].target`)."""

    def __init__(self, path: str, problem: str, source: str | None = None) -> None:
        where = ": ".join(x for x in (source, path) if x)
        super().__init__(f"{where}: {problem}" if where else problem)
        self.path, self.problem = path, problem


@dataclass(frozen=True, slots=True)
class Injection:
    """One occurrence of a fault on the experiment's clock."""

    id: str
    index: int  # position of the fault in `faults`
    fault: Fault
    start: float  # s from the experiment's start (a `during` fault: 0 until it is triggered)
    end: float | None  # the fault's planned end; None: it lasts until something else ends it

    @property
    def during(self) -> During | None:
        """The reconfiguration phase that triggers this fault (None: `start` is its time)."""
        return self.fault.during

    def seed(self, experiment_seed: int) -> str:
        return f"{experiment_seed}:chaos:{self.id}"

    def starting(self, start: float) -> Injection:
        """This injection struck at `start` (a triggered one, once its phase came)."""
        return replace(self, start=start, end=_end(self.fault, start))


def _end(f: Fault, start: float) -> float | None:
    if f.duration is not None:
        return start + f.duration
    return None if f.lasting != "never" else start


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "chaos"
    seed: int | None = None
    duration: float | None = Field(default=None, gt=0)
    faults: list[FaultSpec] = Field(min_length=1)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _unique_names(self) -> Experiment:
        seen: dict[str, int] = {}
        for i, f in enumerate(self.faults):
            if f.name is not None:
                if f.name in seen:
                    raise ValueError(f"faults[{i}].name: {f.name!r} is also faults[{seen[f.name]}]")
                seen[f.name] = i
        return self

    # ---- against a tree ---------------------------------------------------------------------

    def check(self, tree: Tree, params: Params | None = None, until: float | None = None,
              source: str | None = None, reconfigurations: int | None = None,
              joining: frozenset[str] = frozenset(), colours: bool | None = None) -> None:
        """ExperimentError naming the field if a fault cannot apply to `tree` or starts after
        `until` (the end of the run). `reconfigurations`: how many the run has (r1 ... rN),
        when known, for the faults `during` one; `joining`: brokers reconfigurations add;
        `colours`: whether they go through the 3-colour scheme (else the link exchange)."""
        for i, fault in enumerate(self.faults):
            try:
                fault.check(tree, params)
            except FaultError as e:
                raise ExperimentError(f"faults[{i}].{e.field}", e.problem, source) from None
            if fault.during is not None:
                self._check_during(i, fault, tree, reconfigurations, joining, colours, source)
        try:
            timeline = self.timeline(until=until)
        except ExperimentError as e:
            raise ExperimentError(e.path, e.problem, source) from None
        for inj in timeline:
            if until is not None and inj.start > until:
                field = "at" if inj.fault.at is not None else "after"
                raise ExperimentError(f"faults[{inj.index}].{field}",
                                      f"starts at {inj.start:g} s, after the end of the run"
                                      f" ({until:g} s)", source)

    @staticmethod
    def _check_during(i: int, fault: Fault, tree: Tree, reconfigurations: int | None,
                      joining: frozenset[str], colours: bool | None,
                      source: str | None) -> None:
        during = fault.during
        assert during is not None
        where = f"faults[{i}].during"
        if colours is not None:  # a phase the run's mechanism never records never comes
            own, other, name = ((COLOUR_PHASES, EXCHANGE_PHASES, "the 3-colour scheme")
                                if colours else
                                (EXCHANGE_PHASES, COLOUR_PHASES, "the coordinated link exchange"))
            if during.phase in other and during.phase not in own:
                raise ExperimentError(f"{where}.phase", f"{during.phase!r}: this run"
                                      f" reconfigures through {name}, which records"
                                      f" {', '.join(own)} (and the manager's started,"
                                      " finished)", source)
        if fault.lead:
            raise ExperimentError(where, f"a {fault.kind} with `target` prepares {fault.lead:g} s"
                                  " before it strikes, which a reconfiguration's phase cannot"
                                  " tell in advance: use `clients:` or `at`", source)
        # r<n> names the scenario's n-th operation; other ids (an optimizer's decisions,
        # ci:<broker>:<n>) are made up while the run goes and cannot be checked here
        if reconfigurations is not None and re.fullmatch(r"r\d+", during.reconfiguration):
            n = during.reconfiguration
            known = [f"r{k}" for k in range(1, reconfigurations + 1)]
            if n not in known:
                have = (f"the run has {reconfigurations} ({known[0]} ... {known[-1]}, in the"
                        " order they start)" if known else "the run has no reconfigurations")
                raise ExperimentError(f"{where}.reconfiguration", f"{n!r}: {have}", source)
        if during.broker is not None and during.broker not in tree.brokers and \
                during.broker not in joining:
            raise ExperimentError(f"{where}.broker", f"unknown broker {during.broker!r}"
                                  f" (brokers: {', '.join(sorted(set(tree.brokers) | joining))})",
                                  source)

    # ---- the schedule -----------------------------------------------------------------------

    def timeline(self, until: float | None = None) -> list[Injection]:
        """Every occurrence of every fault, in start order (ties: list order)."""
        horizon = self.duration if until is None else (
            until if self.duration is None else min(until, self.duration))
        out: list[Injection] = []
        previous_end = 0.0
        for i, f in enumerate(self.faults):
            if f.during is not None:  # triggered by a reconfiguration: not on this clock
                out.append(Injection(f.name or f"f{i}", i, f, 0.0, _end(f, 0.0)))
                nxt = i + 1
                if nxt < len(self.faults) and self.faults[nxt].after is not None:
                    raise ExperimentError(f"faults[{nxt}].after", f"faults[{i}] strikes"
                                          " `during` a reconfiguration, at a time known only"
                                          " then; use `at` or `during`")
                continue
            base = f.at if f.at is not None else previous_end + (f.after or 0.0)
            times = f.times or 1
            if f.every is not None and f.times is None:
                if horizon is None:
                    raise ExperimentError(f"faults[{i}].times", "`every` without `times` needs"
                                          " the experiment's duration (or a run to end it)")
                times = max(1, int((horizon - base) // f.every) + 1)
            name = f.name or f"f{i}"
            last_end: float | None = base
            for n in range(times):
                start = base + n * (f.every or 0.0)
                end = _end(f, start)
                out.append(Injection(name if times == 1 else f"{name}.{n}", i, f, start, end))
                last_end = end
            if last_end is None:
                nxt = i + 1
                if nxt < len(self.faults) and self.faults[nxt].after is not None:
                    raise ExperimentError(f"faults[{nxt}].after", f"faults[{i}] ({f.kind}) has"
                                          " no duration, so it never ends; use `at`")
                last_end = base
            previous_end = last_end
        out.sort(key=lambda inj: (inj.start, inj.index))
        return out

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(f.kind for f in self.faults))


# ---- loading --------------------------------------------------------------------------------


def load_experiment(path: str | Path) -> Experiment:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExperimentError("", "no such file", str(path)) from None
    except OSError as e:
        raise ExperimentError("", f"cannot read: {e.strerror}", str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ExperimentError(where, f"YAML syntax error: {getattr(e, 'problem', None) or e}",
                              str(path)) from None
    return parse_experiment(data, source=str(path))


def parse_experiment(data: object, source: str = "<experiment>") -> Experiment:
    if not isinstance(data, dict):
        raise ExperimentError("(top level)", "expected a mapping with `faults:`", source)
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        (path, problem), *more = problems(e, Experiment)
        # every problem, the first as the error's own field (the others on their own lines)
        problem += "".join(f"\n  {p}: {q}" for p, q in more[:9])
        if len(more) > 9:
            problem += f"\n  ... and {len(more) - 9} more"
        raise ExperimentError(path, problem, source) from None


def tree_of_scenario(scenario: Any) -> Tree:
    """The broker tree of a Scenario, as selectors see it."""
    topology = scenario.build_topology()
    return Tree(topology.brokers, topology.links, scenario.root_broker)


__all__ = ["Experiment", "ExperimentError", "FaultSpec", "Injection",
           "load_experiment", "parse_experiment", "tree_of_scenario"]


def timing_warnings(experiment: Experiment, params: Params) -> list[str]:
    """The faults that break the timing model the bounds assume (a link delay above δmax):
    what they cause is judged "assumptions violated", not pass or fail (R13, R14). Said before
    the experiment runs, so the verdict does not surprise."""
    out = []
    for i, f in enumerate(experiment.faults):
        worst_ms = getattr(f, "delay_ms", None)
        if f.kind != "delay" or worst_ms is None:
            continue
        worst = (worst_ms + getattr(f, "jitter_ms", 0.0)) / 1000
        if worst > params.delta_max:
            out.append(f"faults[{i}] ({f.name or f.kind}): a delay of up to {worst * 1000:g} ms "
                       f"is above the scenario's δmax = {params.delta_max * 1000:g} ms: it breaks "
                       "the timing model the bounds assume, and the episode it falls in will be "
                       "judged \"assumptions violated\" if anything goes wrong there")
    return out
