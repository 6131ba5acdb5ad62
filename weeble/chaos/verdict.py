"""The verdict table: each injected fault, whether it took effect, and how the system recovered.

Two sources meet here by fault id: the chaos runner's outcomes (what was injected where, and
whether the system's own report shows that it took effect) and the analytics' per-fault verdict
(stabilization time at the service level, the bound Δ, their ratio, and the publications lost,
duplicated and reordered from the fault's start until the next fault). A fault passes when it
took effect and its episode stabilized within Δ; the run passes when every fault does and the
analytics' run verdict (which also judges the fault-free start) passes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from weeble.chaos.runner import Outcome
from weeble.check.status import Status, exit_code


@dataclass(frozen=True, slots=True)
class Row:
    fault_id: str
    kind: str
    target: str
    took_effect: bool | None
    stabilization: float | None  # service level, from the end of the episode's last fault
    status: str  # why there is no stabilization time, or "" when there is one
    bound: float | None
    ratio: float | None
    lost: int | None
    duplicated: int | None
    reordered: int | None
    passed: bool | None  # None: not judged (skipped, or no analysis)
    note: str = ""
    state: float | None = None  # state level (legitimacy checks of the snapshots), same origin
    state_status: str = ""
    verdict: str = ""  # pass, fail, assumptions violated (the analytics' word for the episode)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def verdict_rows(outcomes: Sequence[Outcome], analysis: dict[str, Any] | None) -> list[Row]:
    judged = {f["fault_id"]: f for f in (analysis or {}).get("faults", [])}
    rows = []
    for o in outcomes:
        target = ",".join(o.targets) or o.selector
        if o.skipped is not None:
            rows.append(Row(o.fault_id, o.kind, target, None, None, "", None, None, None, None,
                            None, None, f"skipped: {o.skipped}"))
            continue
        v = judged.get(o.fault_id)
        if v is None:
            rows.append(Row(o.fault_id, o.kind, target, o.took_effect, None,
                            "not analyzed" if analysis is None else "not in the analysis", None,
                            None, None, None, None, None if analysis is None else False,
                            o.error or ""))
            continue
        # the chaos evidence decides "took effect"; the analytics' view can only add a failure
        took = o.took_effect and v.get("took_effect") is not False
        rows.append(_judged(v, o.kind, target, took, bool(took and v.get("pass")),
                            o.error or ""))
    return rows


def analysis_rows(analysis: dict[str, Any]) -> list[Row]:
    """The rows of an analysis alone (`weeble analyze`, which has no chaos outcomes): whether
    each fault took effect is the analytics' view (None: unknown)."""
    return [_judged(f, f.get("type") or "?", f["target"], f.get("took_effect"),
                    bool(f.get("pass")), "") for f in analysis.get("faults", [])]


def _judged(v: dict[str, Any], kind: str, target: str, took: bool | None, passed: bool,
            note: str) -> Row:
    """The row of a fault the analytics judged (`v`: its entry in the analysis' faults)."""
    if v.get("episode_end") is not None:
        note = (f"{note}; " if note else "") + (
            f"stabilization measured from {v['measured_from']}")
    return Row(v["fault_id"], kind, target, took, v.get("service_time"),
               "" if v.get("service_time") is not None else
               str(v.get("service_status") or "not stabilized"),
               v.get("bound"), v.get("ratio"), v.get("lost"), v.get("duplicated"),
               v.get("reordered"), passed, note,
               state=v.get("state_time"), state_status=str(v.get("state_status") or ""),
               verdict=str(v.get("status") or ""))


def run_passes(rows: Sequence[Row], analysis: dict[str, Any] | None) -> bool:
    verdict = (analysis or {}).get("verdict") or {}
    return verdict.get("pass") is not False and all(r.passed is not False for r in rows)


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _int(x: int | None) -> str:
    return "-" if x is None else str(x)


def _mark(x: bool | None, yes: str = "yes", no: str = "NO") -> str:
    return "-" if x is None else (yes if x else no)


def print_verdict(rows: Sequence[Row], passed: bool, reasons: Sequence[str] = (),
                  file: Any = None, measured_from: str | None = None,
                  reconfigurations: Sequence[dict[str, Any]] = (),
                  status: str | None = None) -> None:
    """The verdict table, the one printer of it (`weeble run`, `weeble analyze`): plain text
    (stdout by default), readable in a CI log and by a parser; below it, one row per
    reconfiguration (R15) when the run had any. `status`: the analytics' run status;
    each row and the run print their status (weeble.check.status), the run's last with its
    exit code when it is neither pass (0) nor fail (1)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="verdict per fault", title_justify="left", show_lines=False)
    for name, justify in (("fault", "left"), ("kind", "left"), ("target", "left"),
                          ("took effect", "center"), ("stabilization s", "right"),
                          ("state level s", "right"), ("bound Δ s", "right"),
                          ("ratio", "right"),
                          ("lost", "right"), ("duplicated", "right"), ("reordered", "right"),
                          ("verdict", "center")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        stab = _num(r.stabilization) if r.stabilization is not None else (r.status or "-")
        state = _num(r.state) if r.state is not None else (r.state_status or "-")
        verdict = "skipped" if r.note.startswith("skipped") else row_status(r)
        table.add_row(r.fault_id, r.kind, r.target, _mark(r.took_effect), stab, state,
                      _num(r.bound), _num(r.ratio), _int(r.lost), _int(r.duplicated),
                      _int(r.reordered), verdict)
    console = Console(file=file or sys.stdout, width=160, no_color=True, highlight=False)
    if rows:
        console.print(table)
    else:
        console.print("no faults in this run: no stabilization time")
    if rows and measured_from:
        console.print(f"  stabilization (service and state level) is measured from "
                      f"{measured_from}")
    for r in rows:
        if r.note:
            console.print(f"  {r.fault_id}: {r.note}")
    print_reconfigurations(reconfigurations, console)
    for reason in reasons:
        console.print(f"  why: {reason}")
    shown = run_status(passed, status)
    code = exit_code(shown)
    console.print(f"run verdict: {shown.upper()}" + (
        "" if code in (0, 1) else f" (exit code {code}; see why)"))


def row_status(row: Row) -> str:
    """A row's status (weeble.check.status): its episode's, except that a fault the chaos
    evidence does not show taking effect fails; "-" when nothing judged it."""
    if row.verdict and not (row.verdict == Status.PASS and row.passed is False):
        return row.verdict
    return "-" if row.passed is None else Status.PASS if row.passed else Status.FAIL


def run_status(passed: bool, status: str | None) -> str:
    """The run's status as `weeble run` prints it and exits with: the analysis' status, made
    a failure when the run does not pass for a reason only the chaos evidence shows (a fault
    that did not take effect); pass or fail from `passed` when there is no status."""
    if status and not (status == Status.PASS and not passed):
        return status
    return Status.PASS if passed else Status.FAIL


def print_reconfigurations(reconfigurations: Sequence[dict[str, Any]], console: Any,
                           title: str = "verdict per reconfiguration") -> None:
    """One row per reconfiguration (the R15 rows of a checker's or the analytics' report),
    then why each one that has a reason failed; nothing when there are none."""
    from rich.table import Table

    from weeble.check.reconfig import TABLE_COLUMNS, table_cells

    if not reconfigurations:
        return
    table = Table(title=title, title_justify="left")
    for name in TABLE_COLUMNS:
        table.add_column(name, justify="left" if name in (
            "reconfiguration", "operation", "outcome", "verdict") else "right")
    for x in reconfigurations:
        table.add_row(*table_cells(x))
    console.print(table)
    for x in reconfigurations:
        if x.get("reason"):
            console.print(f"  {x['rid']}: {x['verdict']}: {x['reason']}")


def outcome_table(outcomes: Sequence[Outcome], file: Any = None) -> None:
    """What `weeble chaos` shows: the injections and whether each took effect."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="chaos injections", title_justify="left")
    for name in ("fault", "kind", "what", "targets", "took effect", "error"):
        table.add_column(name)
    for o in outcomes:
        table.add_row(o.fault_id, o.kind, o.what, ",".join(o.targets) or "-",
                      "skipped" if o.skipped else _mark(o.took_effect),
                      o.skipped or o.error or "")
    Console(file=file or sys.stdout, width=140, no_color=True, highlight=False).print(table)
