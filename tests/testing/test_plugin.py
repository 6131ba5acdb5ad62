"""The pytest plugin (weeble.testing): examples/chaos-suite run by pytest itself with its JUnit
output (local backend), a failing test's testbed torn down all the same, and the assertion
helper's message (the verdict row)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.analytics import handmade
from weeble.check.history import check_run
from weeble.check.status import Status
from weeble.orchestrator.testbed import read_state
from weeble.testing import Verdict, assert_verdict

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "chaos-suite"


def pytest_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)


def test_the_example_chaos_suite_passes_with_pytest_junit_output(tmp_path: Path) -> None:
    xml = tmp_path / "chaos.xml"
    done = pytest_run(str(SUITE), f"--junitxml={xml}", "--weeble-backend", "local",
                      "--weeble-runs", str(tmp_path / "runs"), "-q", cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    assert {c.get("name") for c in suite.iter("testcase")} == {
        "test_the_root_forgets_its_routing_table", "test_a_lossy_link_heals",
        "test_a_crashed_leaf_comes_back", "test_a_link_exchange_loses_nothing"}
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 4  # one testbed per test, each stopped
    assert all(read_state(r)["state"] == "down" for r in runs)


def test_a_failing_test_still_tears_its_testbed_down(tmp_path: Path) -> None:
    (tmp_path / "test_fails.py").write_text(f"""
def test_fails(weeble_testbed):
    bed = weeble_testbed({str(SUITE / "scenario.yaml")!r}, duration=5)
    open("run_dir.txt", "w").write(str(bed.run_dir))
    assert False, "the test's own failure"
""")
    done = pytest_run(str(tmp_path / "test_fails.py"), "-q", "--weeble-runs",
                      str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 1 and "the test's own failure" in done.stdout, done.stdout
    run_dir = Path((tmp_path / "run_dir.txt").read_text())
    state = read_state(run_dir)
    assert state["state"] == "down"
    for b in state["brokers"].values():  # no broker process is left
        pid = b.get("pid")
        if isinstance(pid, int):
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


def test_the_assertion_message_is_the_verdict_row(tmp_path: Path) -> None:
    run = handmade.build(tmp_path / "run")
    report = check_run(run)
    v = report["verdict"]
    verdict = Verdict(status=v["status"], reasons=v["reasons"], faults=v["faults"],
                      reconfigurations=[], run_dir=run, report=report)
    with pytest.raises(AssertionError) as failed:
        assert_verdict(verdict)
    message = str(failed.value)
    assert message.startswith(f"run {run}: fail, expected pass")
    assert "f2" in message and "a fault never ended" in message
    assert_verdict(verdict, Status.FAIL)  # what it is
    assert_verdict(verdict, fault="f1")  # the episode of f1 passed
    with pytest.raises(AssertionError, match=r"fault f2: not judged, expected pass"):
        assert_verdict(verdict, fault="f2")
