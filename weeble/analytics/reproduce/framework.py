"""The structure every `weeble reproduce NAME` experiment shares.

An experiment is a grid of points (named parameters) and a set of claims from a paper. Each point
is evaluated by one or more *columns*: "model" (a pure, exact evaluation, e.g. the cost model)
and, where a simulator can run the point, "simulation". A column that does not exist yet is
declared *pending* with the reason, and the report shows it as such. A claim has a paper value,
a tolerance and a `measure` that reads its value for any column out of the results (straight
from one point, or from a curve over many points, e.g. a break-even), so adding a column adds a
value to every claim without touching the claims.

Results are kept per point in OUT/points/<key>.json as each point is evaluated, with the
evaluator's version: a rerun (or a `--full` run after a short one) evaluates only what is missing
or stale.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol


class ReproduceError(Exception):
    """A reproduction cannot run: an unknown experiment, an unreadable results directory, ..."""


@dataclass(frozen=True)
class Point:
    """One grid point: named parameters in a fixed order (the order makes the key stable)."""

    params: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, **params: float) -> Point:
        return cls(params=tuple(params.items()))

    def __getitem__(self, name: str) -> float:
        for key, value in self.params:
            if key == name:
                return value
        raise KeyError(name)

    def matches(self, where: Mapping[str, float]) -> bool:
        return all(math.isclose(self[k], v, rel_tol=1e-12, abs_tol=1e-12)
                   for k, v in where.items())

    @property
    def key(self) -> str:
        """A file-name-safe id, e.g. omega=1000_mu_inv=600_rho=60_n=300000."""
        return "_".join(f"{k}={_number(v)}" for k, v in self.params)

    def as_dict(self) -> dict[str, float]:
        return dict(self.params)


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class Evaluator(Protocol):
    """A column: evaluates points to named quantities (messages/s, entries, ...)."""

    name: str
    version: str  # stored with every result; a different version re-evaluates the point

    def applies_to(self, point: Point, *, full: bool) -> bool:
        """Whether this column evaluates `point` in a short (or --full) run."""
        ...

    def evaluate(self, point: Point) -> dict[str, float]: ...


class SimulationColumnBase:
    """A "simulation" column of an experiment that is all simulation (chapters 4 and 5): costly
    (runs in --jobs processes), every point, versioned by its label and its setup (a changed
    setup recomputes every point). Subclasses are frozen dataclasses with `setup` and `label`."""

    name = "simulation"
    costly = True
    label = ""
    setup: Any = None

    @property
    def version(self) -> str:
        return f"{self.label} {self.setup}"

    def applies_to(self, point: Point, *, full: bool) -> bool:
        return True


class Results:
    """Every column's values at every evaluated point."""

    def __init__(self, points: Sequence[Point],
                 values: Mapping[str, Mapping[str, dict[str, float]]]) -> None:
        self.points = list(points)
        self._values = values  # point key -> column -> quantity -> value

    def value(self, column: str, point: Point, quantity: str) -> float | None:
        return self._values.get(point.key, {}).get(column, {}).get(quantity)

    def columns_at(self, point: Point) -> list[str]:
        return sorted(self._values.get(point.key, {}))

    def curve(self, column: str, quantity: str, *, x: str,
              where: Mapping[str, float]) -> list[tuple[float, float]]:
        """(x, quantity) over the points matching `where` that `column` evaluated, sorted by x."""
        out = []
        for p in self.points:
            if p.matches(where):
                v = self.value(column, p, quantity)
                if v is not None:
                    out.append((p[x], v))
        return sorted(out)


Measure = Callable[[Results, str], float | None]
"""(results, column) -> the claim's value in that column, or None if the column cannot give it."""


@dataclass(frozen=True)
class Tolerance:
    """|value − paper| ≤ max(absolute, relative·|paper|)."""

    relative: float = 0.0
    absolute: float = 0.0

    def slack(self, paper: float) -> float:
        return max(self.absolute, self.relative * abs(paper)) * (1 + 1e-12)

    def allows(self, value: float, paper: float, relation: str = "≈") -> bool:
        """`value` against `paper` for a claim "≈ paper", "≥ paper" or "≤ paper"."""
        if relation == "≈":
            return abs(value - paper) <= self.slack(paper)
        if relation == "≥":
            return value >= paper - self.slack(paper)
        if relation == "≤":
            return value <= paper + self.slack(paper)
        raise ReproduceError(f"unknown relation {relation!r} (≈, ≥ or ≤)")

    def describe(self, paper: float) -> str:
        """The slack this tolerance gives around `paper`, e.g. "±0.5" or "±60 (0.05 %)"."""
        slack = max(self.absolute, self.relative * abs(paper))
        if slack == 0:
            return "0"
        if self.relative * abs(paper) > self.absolute:
            return f"±{fmt(slack, digits=3)} ({self.relative * 100:.3g} %)"
        return f"±{fmt(slack, digits=3)}"


def printed_precision(text: str) -> Tolerance:
    """The tolerance a value printed as `text` allows: half a unit in its last digit, and at
    least 4 significant digits (5·10⁻⁴ relative), e.g. "3772.4" → ±0.05, "120000" → ±0.05 %."""
    digits = text.split(".")[1] if "." in text else ""
    return Tolerance(relative=5e-4, absolute=0.5 * 10 ** (-len(digits)))


@dataclass(frozen=True)
class Claim:
    """A number the paper states (or the spec recomputed), and how to measure it."""

    id: str
    statement: str
    source: str  # "thesis l.1632", "spec ch3 §5.6 (recomputed)"
    paper: float
    tolerance: Tolerance
    measure: Measure
    group: str = "claims"  # the report renders each group as its own table
    note: str = ""  # e.g. the erratum applied
    relation: str = "≈"  # the paper says value ≈ paper, ≥ paper (a lower bound) or ≤ paper
    # a column that cannot be as exact as the model (a simulation: finite runs, grid points
    # instead of a root finder) is allowed more here: it gets the looser of the two tolerances
    column_tolerance: Mapping[str, Tolerance] = field(default_factory=dict)

    def tolerance_for(self, column: str) -> Tolerance:
        extra = self.column_tolerance.get(column)
        if extra is None:
            return self.tolerance
        return Tolerance(relative=max(self.tolerance.relative, extra.relative),
                         absolute=max(self.tolerance.absolute, extra.absolute))

    def describe_tolerance(self) -> str:
        return "; ".join([self.tolerance.describe(self.paper)] + [
            f"{c}: {self.tolerance_for(c).describe(self.paper)}" for c in self.column_tolerance])


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    values: dict[str, float | None]  # column -> value (None: not available in that column)

    @property
    def met(self) -> bool:
        """Every column that has a value is within tolerance, and at least one has one."""
        present = {c: v for c, v in self.values.items() if v is not None}
        return bool(present) and all(
            self.claim.tolerance_for(c).allows(v, self.claim.paper, self.claim.relation)
            for c, v in present.items())


class Experiment(Protocol):
    name: str
    title: str
    evaluators: Sequence[Evaluator]
    pending: Mapping[str, str]  # column -> why it has no values yet
    # groups of many claims (e.g. every cell of a reference table) that the report summarizes in
    # one line, listing only the unmet ones; the experiment renders them itself in `sections`
    compact_groups: frozenset[str]

    def grid(self, *, full: bool) -> list[Point]: ...

    def claims(self) -> list[Claim]: ...

    def figures(self, results: Results, out: Path) -> list[tuple[Path, str]]:
        """Write the figures into `out`; (path, caption) each."""
        ...

    def sections(self, results: Results, outcomes: Sequence[Outcome]) -> list[str]:
        """Markdown sections of the report after the claims table."""
        ...


@dataclass
class SimulatedExperiment:
    """The part every simulated experiment (ch4, ch5, sketches, skipring) shares, after its own
    name, title, `setup` and grid knobs: its columns (`evaluators`; by default its `model`
    column, if it has one, and its `simulation` column of its setup), the columns pending with
    why, and the compact claim groups. A subclass is a dataclass that names its column
    classes."""

    # the column classes of an experiment made without `evaluators`
    simulation: ClassVar[Callable[[Any], Evaluator]]
    model: ClassVar[Callable[[], Evaluator] | None] = None

    evaluators: Sequence[Evaluator] = ()
    pending: dict[str, str] = field(default_factory=dict)
    compact_groups: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.evaluators:
            model = type(self).model
            self.evaluators = ((model(),) if model is not None else ()) + (
                type(self).simulation(self.setup),)  # type: ignore[attr-defined]


@dataclass
class Run:
    """What `run` did: for the command to render."""

    experiment: Experiment
    outcomes: list[Outcome]
    figures: list[tuple[Path, str]]
    report: Path
    evaluated: int = 0  # (point, column) evaluations done in this run
    reused: int = 0  # found in OUT/points from an earlier run
    columns: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return all(o.met for o in self.outcomes)


Progress = Callable[[int, int, str], None]  # (done, total, what)


def _load_point(path: Path, point: Point) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return {"point": point.as_dict(), "columns": {}}
    except (OSError, ValueError) as exc:
        raise ReproduceError(f"{path}: unreadable point result ({exc}); delete it to "
                             "recompute") from None
    if record.get("point") != point.as_dict():
        raise ReproduceError(f"{path}: holds another point {record.get('point')}; delete it")
    return record


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # an interrupted run leaves the old file or the new one, never half


def run(experiment: Experiment, *, out: Path, full: bool = False,
        progress: Progress | None = None, jobs: int = 1) -> Run:
    """Evaluate the grid (resuming from OUT/points), check the claims, write figures and report.

    `jobs` > 1: the evaluations of costly columns (an evaluator with `costly = True`, e.g. a
    simulation) run in that many processes at once; each result is stored as it arrives."""
    if jobs < 1:
        raise ReproduceError(f"jobs must be at least 1, got {jobs}")
    out = Path(out)
    points_dir = out / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    grid = experiment.grid(full=full)
    keys = [p.key for p in grid]
    if len(set(keys)) != len(keys):
        raise ReproduceError(f"{experiment.name}: the grid has duplicate points")
    todo = [(p, e) for p in grid for e in experiment.evaluators if e.applies_to(p, full=full)]
    values: dict[str, dict[str, dict[str, float]]] = {}
    evaluated = reused = done = 0
    records = {p.key: _load_point(points_dir / f"{p.key}.json", p) for p in grid}

    def store(point: Point, evaluator: Evaluator, result: dict[str, float]) -> None:
        nonlocal evaluated, done
        record = records[point.key]
        record["columns"][evaluator.name] = {"version": evaluator.version, "values": result}
        _write_atomic(points_dir / f"{point.key}.json", json.dumps(record, indent=1) + "\n")
        evaluated += 1
        done += 1
        if progress is not None:
            progress(done, len(todo), f"{evaluator.name} {point.key}")

    costly: list[tuple[Point, Evaluator]] = []
    for point, evaluator in todo:
        stored = records[point.key]["columns"].get(evaluator.name)
        if stored is not None and stored.get("version") == evaluator.version:
            reused += 1
            done += 1
            if progress is not None:
                progress(done, len(todo), f"{evaluator.name} {point.key} (reused)")
        elif jobs > 1 and getattr(evaluator, "costly", False):
            costly.append((point, evaluator))
        else:
            store(point, evaluator, evaluator.evaluate(point))
    if costly:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(e.evaluate, p): (p, e) for p, e in costly}
            for future in as_completed(futures):
                point, evaluator = futures[future]
                store(point, evaluator, future.result())
    for point in grid:
        values[point.key] = {name: c["values"]
                             for name, c in records[point.key]["columns"].items()}
    results = Results(grid, values)
    columns = [e.name for e in experiment.evaluators] + [c for c in experiment.pending
                                                          if c not in {e.name for e in
                                                                       experiment.evaluators}]
    outcomes = [Outcome(claim=c, values={col: c.measure(results, col) for col in columns})
                for c in experiment.claims()]
    figures = experiment.figures(results, out)
    report = out / "report.md"
    _write_atomic(report, render_report(experiment, outcomes=outcomes, figures=figures,
                                        sections=experiment.sections(results, outcomes),
                                        columns=columns, full=full, out=out))
    _write_atomic(out / "claims.json", json.dumps(
        [{"id": o.claim.id, "group": o.claim.group, "statement": o.claim.statement,
          "source": o.claim.source, "paper": o.claim.paper,
          "relation": o.claim.relation, "tolerance": o.claim.describe_tolerance(),
          "values": o.values, "met": o.met}
         for o in outcomes], indent=1) + "\n")
    return Run(experiment=experiment, outcomes=outcomes, figures=figures, report=report,
               evaluated=evaluated, reused=reused, columns=columns)


def fmt(v: float | None, *, digits: int = 6) -> str:
    if v is None:
        return "—"
    if v == 0:
        return "0"
    if abs(v) < 1e-9:  # floating-point noise around a limit of 0
        return f"{v:.2g}"
    if abs(v) >= 1e5:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def difference(value: float | None, paper: float, relation: str = "≈") -> str:
    """value − paper; for a bound ("≥", "≤") the margin by which the value keeps it."""
    if value is None:
        return "—"
    if relation != "≈":
        margin = value - paper if relation == "≥" else paper - value
        return f"margin {fmt(margin, digits=4)}"
    d = value - paper
    rel = f" ({d / paper * 100:+.3g} %)" if paper else ""
    return f"{fmt(d, digits=4)}{rel}"


def claims_table(outcomes: Iterable[Outcome], columns: Sequence[str],
                 pending: Mapping[str, str]) -> str:
    header = ["claim", "source", "paper", "tolerance"]
    for c in columns:
        header += [c, f"{c} − paper"]
    header.append("verdict")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for o in outcomes:
        row = [o.claim.statement + (f" ({o.claim.note})" if o.claim.note else ""),
               o.claim.source,
               ("" if o.claim.relation == "≈" else o.claim.relation + " ") + fmt(o.claim.paper),
               o.claim.describe_tolerance()]
        for c in columns:
            v = o.values.get(c)
            row += ["later" if v is None and c in pending else fmt(v),
                    difference(v, o.claim.paper, o.claim.relation)]
        row.append("met" if o.met else "**NOT met**")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def render_report(experiment: Experiment, *, outcomes: Sequence[Outcome],
                  figures: Sequence[tuple[Path, str]], sections: Sequence[str],
                  columns: Sequence[str], full: bool, out: Path) -> str:
    met = sum(o.met for o in outcomes)
    command = f"weeble reproduce {experiment.name} --out DIR" + (" --full" if full else "")
    parts = [f"# {experiment.title}", "",
             f"`{command}`: {'the paper' if full else 'the short'} grid. "
             f"**{met} of {len(outcomes)} claims met.**", ""]
    for column, why in experiment.pending.items():
        parts += [f"The *{column}* column is not computed yet: {why}", ""]
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.claim.group, []).append(o)
    for group, members in groups.items():
        if group in experiment.compact_groups:
            unmet = [o for o in members if not o.met]
            parts += [f"## {group}", "",
                      f"{len(members) - len(unmet)} of {len(members)} values met "
                      "(the table itself is below).", ""]
            if unmet:
                parts += [claims_table(unmet, columns, experiment.pending), ""]
        else:
            parts += [f"## {group}", "", claims_table(members, columns, experiment.pending), ""]
    parts += list(sections)
    if figures:
        parts += ["## Figures", ""]
        for path, caption in figures:
            parts += [f"![{caption}]({path.relative_to(out).as_posix()})", "", f"*{caption}*", ""]
    return "\n".join(parts).rstrip() + "\n"


def curve_zero_crossing(curve: Sequence[tuple[float, float]]) -> float | None:
    """The first x where a sampled curve goes from ≥ 0 to < 0, linearly interpolated; None if it
    never does (or has fewer than two samples). For columns that only have grid samples."""
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if y0 >= 0 > y1:
            return x0 + (x1 - x0) * y0 / (y0 - y1)
    return None


def curve_peak(curve: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(x, y) of the largest sample, None for an empty curve."""
    return max(curve, key=lambda xy: xy[1]) if curve else None


def write_index(out: Path, runs: Sequence[Run], left_out: Mapping[str, str], *,
                full: bool) -> Path:
    """`weeble reproduce all`: OUT/index.md, one line per experiment (its verdict, its report,
    its figures) and the experiments left out with the reason."""
    out = Path(out)
    met = sum(sum(o.met for o in r.outcomes) for r in runs)
    total = sum(len(r.outcomes) for r in runs)
    parts = ["# Reproducing the papers", "",
             f"`weeble reproduce all --out DIR{' --full' if full else ''}`: "
             f"{'the papers' if full else 'the short'} grids. **{met} of {total} claims met** "
             f"in {len(runs)} experiment(s).", "",
             "| experiment | claims met | report | figures |", "|---|---|---|---|"]
    for r in runs:
        rel = r.report.relative_to(out).as_posix()
        figures = ", ".join(f"[{p.name}]({p.relative_to(out).as_posix()})" for p, _ in r.figures)
        ok = sum(o.met for o in r.outcomes)
        verdict = f"{ok} of {len(r.outcomes)}" + ("" if r.met else " (**not all**)")
        parts.append(f"| {r.experiment.name}: {r.experiment.title} | {verdict} | "
                     f"[{rel}]({rel}) | {figures or '—'} |")
    for name, why in left_out.items():
        parts.append(f"| {name} | left out: {why} | — | — |")
    path = out / "index.md"
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, "\n".join(parts) + "\n")
    return path
