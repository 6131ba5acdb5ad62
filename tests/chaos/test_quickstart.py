"""The main job end to end: `weeble run scenarios/quickstart.yaml`, shortened for CI.

Up, the workload with the scenario's chaos experiment, down, the Spark analysis in process, the
verdict table on stdout; the exit status follows the verdict. With --duration 23 the first two
faults (a routing-table corruption at 5 s, a clock corruption at 14 s) are injected, each with
9 s > Δ = 8.2 s to recover; the later ones are listed as skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.runtime.livebed import REPO, next_base_host, weeble
from weeble.check.status import STATUSES, exit_code
from weeble.orchestrator.backends.processes import pid_alive
from weeble.orchestrator.testbed import Testbed


# About 130 s on 2 quiet cores (up, 23 s of workload, down, a Spark analysis in a fresh JVM);
# past 400 s at a load of 30, where the run's own timeout killed it: 840 s, inside the test's.
@pytest.mark.timeout(900)
def test_quickstart_prints_a_verdict_table_and_exits_by_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    try:
        result = weeble("run", str(REPO / "scenarios" / "quickstart.yaml"), "--duration", "23",
                        "--runs-dir", str(runs), "--run-id", "q", "--base-host",
                        next_base_host(), "--any-ports", "--quiet", timeout=840)
    finally:  # a `weeble run` killed by the timeout cannot stop its brokers itself
        if (runs / "q" / "testbed.json").exists():
            Testbed.attach("q", runs_dir=runs).down(timeout=5)
    out = result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert "verdict per fault" in out, f"stdout:\n{out}\nstderr:\n{result.stderr[-3000:]}"
    header = next(line for line in out.splitlines() if "took effect" in line)
    for column in ("kind", "target", "took effect", "stabilization", "bound", "ratio", "lost",
                   "duplicated", "reordered", "verdict"):
        assert column in header
    rows = {m.group(1): line for line in out.splitlines()
            if (m := re.match(r"\W*(table|clock|cut|crash|dup)\s", line))}
    assert set(rows) == {"table", "clock", "cut", "crash", "dup"}
    assert " corrupt " in rows["table"] and " b0 " in rows["table"]
    assert " clock " in rows["clock"] and " b1 " in rows["clock"]
    for name in ("table", "clock"):  # injected, with evidence that they took effect
        assert " yes " in rows[name], rows[name]
        assert "8.20" in rows[name]  # the bound Δ = 2π + d·δ_max
    for name in ("cut", "crash", "dup"):  # after the shortened run's end
        assert "skipped" in rows[name]
    verdict = re.search(r"run verdict: ([A-Z ]+?)(?: \(exit code (\d)|$)", out, re.MULTILINE)
    assert verdict is not None, out
    # the printed status is the exit status's (weeble.check.status)
    status = verdict.group(1).lower()
    assert status in {s.status.value for s in STATUSES}, status
    assert result.returncode == exit_code(status), (status, result.returncode,
                                                     result.stderr[-3000:])
    if verdict.group(2) is not None:
        assert int(verdict.group(2)) == result.returncode
    report = re.search(r"^report: (\S+)", out, re.MULTILINE)  # then "(text: report.md)"
    assert report is not None and Path(report.group(1)).exists()

    run_dir = runs / "q"
    records = [json.loads(line) for line in
               (run_dir / "trace" / "chaos.jsonl").read_text().splitlines()]
    begins = {r["fault_id"]: r for r in records if r["kind"] == "fault_begin"}
    assert set(begins) == {"table", "clock"}
    assert all(r["took_effect"] and r["evidence"] for r in begins.values())
    summary = json.loads((run_dir / "analysis" / "summary.json").read_text())
    assert {f["fault_id"] for f in summary["faults"]} >= {"table", "clock"}
    # live brokers trace table snapshots: every fault gets a state-level time beside the
    # service-level one, each measured from the end of its episode's last fault
    for f in summary["faults"]:
        assert f["service_time"] is not None, f
        assert f["state_time"] is not None and f["state_status"] != "no checks observed", f
        assert "end of episode" in f["measured_from"], f
    assert "measured from" in out
    state = json.loads((run_dir / "testbed.json").read_text())
    assert not any(pid_alive(i["pid"], i["config"]) for i in state["brokers"].values())
