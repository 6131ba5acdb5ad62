"""One verdict-table printer: `weeble analyze` (an analysis alone) and `weeble run` (the chaos
outcomes beside it) print the same rows through `weeble.chaos.verdict.print_verdict`."""

from __future__ import annotations

import io
from typing import Any

from weeble.chaos.runner import Outcome
from weeble.chaos.verdict import analysis_rows, print_verdict, run_passes, verdict_rows
from weeble.commands import analyze


def _fault(fault_id: str, *, passed: bool, service_time: float | None,
           status: str | None = None) -> dict[str, Any]:
    return {"fault_id": fault_id, "type": "corrupt", "target": "b0", "begin": 5.0, "end": 5.0,
            "took_effect": True, "episode": 0, "service_time": service_time,
            "service_status": "" if service_time is not None else "not stabilized",
            "state_time": 1.5, "state_status": "", "bound": 8.2, "ratio":
            None if service_time is None else service_time / 8.2, "state_ratio": 0.2,
            "lost": 3, "duplicated": 0, "spurious": 0, "reordered": 1,
            "status": status or ("pass" if passed else "fail"), "pass": passed}


def _analysis(faults: list[dict[str, Any]], passed: bool,
              status: str | None = None) -> dict[str, Any]:
    return {"run": {"name": "r"}, "faults": faults,
            "verdict": {"pass": passed, "status": status or ("pass" if passed else "fail"),
                        "bound": 8.2,
                        "reasons": [] if passed else ["f1 did not stabilize"],
                        "stabilization_measured_from": "the end of each episode's last fault"},
            "deliveries": dict.fromkeys(("publications", "judged", "correct", "expected",
                                         "missing", "window", "spurious", "duplicate",
                                         "phantom"), 0),
            "ordering": {"violations": 0}, "report": None}


def _printed(rows: Any, analysis: dict[str, Any]) -> str:
    out = io.StringIO()
    v = analysis["verdict"]
    print_verdict(rows, v["pass"], v["reasons"], file=out,
                  measured_from=v["stabilization_measured_from"], status=v["status"])
    return out.getvalue()


def test_analyze_and_run_print_the_same_table_for_the_same_analysis() -> None:
    analysis = _analysis([_fault("f0", passed=True, service_time=2.0),
                          _fault("f1", passed=False, service_time=None)], passed=False)
    outcomes = [Outcome(fault_id=f, kind="corrupt", what="table", targets=["b0"],
                        took_effect=True, error=None) for f in ("f0", "f1")]
    alone = _printed(analysis_rows(analysis), analysis)
    assert alone == _printed(verdict_rows(outcomes, analysis), analysis)
    f0 = next(line for line in alone.splitlines() if " f0 " in f" {line} " and "corrupt" in line)
    f1 = next(line for line in alone.splitlines() if " f1 " in f" {line} " and "corrupt" in line)
    assert "2.00" in f0 and "pass" in f0
    assert "not stabilized" in f1 and f1.rstrip(" │|").endswith("fail")
    assert "why: f1 did not stabilize" in alone
    assert alone.rstrip().endswith("run verdict: FAIL")


def test_analyze_prints_the_table_and_says_when_a_run_had_no_faults(capsys: Any) -> None:
    analyze.print_verdict(_analysis([], passed=True))
    out = capsys.readouterr().out
    assert "no faults in this run: no stabilization time" in out
    assert "verdict per fault" not in out
    assert "run verdict: PASS" in out

    analyze.print_verdict(_analysis([_fault("f0", passed=True, service_time=2.0)], passed=True))
    out = capsys.readouterr().out
    assert "verdict per fault" in out and "run verdict: PASS" in out
    assert "bound Δ = 8.2 s" in out


def test_each_row_and_the_run_print_their_status_never_a_pass_for_another() -> None:
    """A status other than pass and fail (weeble.check.status) is printed as itself, per row
    and for the run with its exit code, as `weeble run` exits with it; a fault whose chaos
    evidence says it did not take effect fails a run the analysis passes."""
    from weeble.chaos.verdict import run_status
    from weeble.check.status import STATUSES, exit_code

    for s in STATUSES:
        if s.status in ("pass", "fail"):
            continue
        passed = False  # the analysis' verdict passes only with status pass
        analysis = _analysis([_fault("f0", passed=passed, service_time=2.0,
                                     status=s.status)], passed=passed, status=s.status)
        out = _printed(analysis_rows(analysis), analysis)
        f0 = next(line for line in out.splitlines() if " f0 " in f" {line} ")
        assert f0.rstrip(" │|").endswith(s.status.value), (s.status, f0)
        assert out.rstrip().endswith(
            f"run verdict: {s.status.value.upper()} (exit code {s.exit_code}; see why)"), out
        assert run_status(passed, s.status) == s.status
    analysis = _analysis([_fault("f0", passed=True, service_time=2.0)], passed=True)
    outcomes = [Outcome(fault_id="f0", kind="corrupt", what="table", targets=["b0"],
                        took_effect=False, error=None)]
    rows = verdict_rows(outcomes, analysis)
    passed = run_passes(rows, analysis)  # as `weeble run` judges it
    out = io.StringIO()
    print_verdict(rows, passed, [], file=out, status="pass")
    out = out.getvalue()
    f0 = next(line for line in out.splitlines() if " f0 " in f" {line} ")
    assert " NO " in f0 and f0.rstrip(" │|").endswith("fail"), f0
    assert out.rstrip().endswith("run verdict: FAIL")
    assert not passed and exit_code(run_status(passed, "pass")) == 1
