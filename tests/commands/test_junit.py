"""`--junit FILE`: the verdict as JUnit XML (one case per run-level rule, per fault episode, per
reconfiguration; the verdict's reason as the failure message), and `weeble simulate`'s verdict
table and exit status."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.analytics import handmade
from weeble.check.status import Status, exit_code
from weeble.check.verdict import ASSUMPTIONS, FAIL, PASS
from weeble.cli import main
from weeble.commands.junit import junit_tree

DATA = Path(__file__).resolve().parents[1] / "analytics" / "data"


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {f"{c.get('classname')}::{c.get('name')}": c for c in root.iter("testcase")}


def test_simulate_writes_one_case_per_part_and_prints_the_verdict_last(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = tmp_path / "verdict.xml"
    assert main(["simulate", str(DATA / "report-run.yaml"), "--out", str(tmp_path / "run"),
                 "--junit", str(xml)]) == 0
    out = capsys.readouterr().out
    assert "verdict per fault" in out and "verdict per reconfiguration" in out
    assert out.strip().splitlines()[-1] == "run verdict: PASS"
    root = ET.parse(xml).getroot()
    assert root.get("tests") == "7" and root.get("failures") == "0"
    names = set(cases(root))
    assert names == {
        "weeble.report-run.run::before the first fault",
        "weeble.report-run.run::timing model (R13)",
        "weeble.report-run.episode::episode 0 (f0)",
        "weeble.report-run.episode::episode 1 (f1)",
        "weeble.report-run.reconfiguration::r1 (exchange b1-b5 for b5-b7)",
        "weeble.report-run.reconfiguration::r2 (add_leaf b13 at b9)",
        "weeble.report-run.reconfiguration::r3 (remove_leaf b12)",
    }
    episode = cases(root)["weeble.report-run.episode::episode 0 (f0)"]
    props = {p.get("name"): p.get("value") for p in episode.iter("property")}
    assert props["fault f0"] == "corrupt on b0, took effect: yes"
    assert float(props["service_time"]) < float(props["bound"])


def test_check_names_the_reason_of_each_failing_part(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = handmade.build(tmp_path / "run")
    xml = tmp_path / "check.xml"
    assert main(["check", str(run), "--junit", str(xml)]) == exit_code(Status.FAIL)
    capsys.readouterr()
    root = ET.parse(xml).getroot()
    found = cases(root)
    assert (root.get("failures"), root.get("errors")) == ("1", "1")
    prefix = found["weeble.handmade.run::before the first fault"].find("failure")
    assert prefix is not None and prefix.get("message", "").startswith(
        "1 missing; 1 spurious; 1 duplicate; 1 fifo")
    never = found["weeble.handmade.episode::episode 1 (f2)"].find("error")
    assert never is not None and never.get("type") == Status.NOT_JUDGED
    assert never.get("message") == "a fault never ended: no stabilization time can be measured"
    assert found["weeble.handmade.episode::episode 0 (f1)"].find("failure") is None


def test_assumptions_violated_is_an_error_and_an_ineffective_fault_fails_its_episode() -> None:
    verdict = {"status": ASSUMPTIONS, "bound": 2.0, "parts": [
        {"part": "before the first fault", "status": PASS, "reason": ""},
        {"part": "episode 0 (f0)", "episode": 0, "status": ASSUMPTIONS,
         "reason": "service: 3 s > bound 2 s — assumptions violated: hop delays up to 1 s"},
        {"part": "episode 1 (f1)", "episode": 1, "status": PASS, "reason": ""},
        {"part": "reconfiguration r1 (exchange)", "status": FAIL, "reason": "2 lost"}]}
    faults = [{"fault_id": "f0", "episode": 0, "type": "delay", "target": "b1"},
              {"fault_id": "f1", "episode": 1, "type": "crash", "target": "b2"}]
    ops = [{"rid": "r1", "op": "exchange", "verdict": FAIL, "reason": "2 lost"},
           {"rid": "r2", "op": "add_leaf", "verdict": PASS, "reason": ""}]
    root = junit_tree(suite="s", verdict=verdict, faults=faults, reconfigurations=ops,
                      not_effective={"f1": "no evidence that it did"})
    found = cases(root)
    error = found["weeble.s.episode::episode 0 (f0)"].find("error")
    assert error is not None and error.get("type") == ASSUMPTIONS
    assert "assumptions violated: hop delays" in error.get("message", "")
    f1 = found["weeble.s.episode::episode 1 (f1)"].find("failure")
    assert f1 is not None and f1.get("message") == "f1 did not take effect: no evidence that it did"
    r1 = found["weeble.s.reconfiguration::r1 (exchange)"].find("failure")
    assert r1 is not None and r1.get("message") == "2 lost"
    assert found["weeble.s.reconfiguration::r2 (add_leaf)"].find("failure") is None
    assert (root.get("failures"), root.get("errors")) == ("2", "1")


def test_run_refuses_junit_without_analysis(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "scenarios/quickstart.yaml", "--no-analysis", "--junit", "x.xml"]) == 2
    assert "--junit needs the analysis' verdict" in capsys.readouterr().err
