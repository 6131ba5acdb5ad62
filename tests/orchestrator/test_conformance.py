"""Backend conformance: the same small scenario with the same chaos experiment (a routing-table
corruption, a link cut, a crash and restart, a pause) through `weeble run` on every backend
that runs on this machine. Each run's verdict must pass with the same faults taking effect;
what differs is only each backend's own evidence (how a cut was made). A backend that cannot
run here fails its test: it is never skipped.

The runs are judged by the reference checker (`weeble check`), as tests/orchestrator/
test_killed_run.py judges its runs: the verdict does not depend on the backend, only the trace
does, and Spark's analysis of a `weeble run` costs a JVM and minutes of CPU per run on a busy CI
machine. The Spark analysis at the end of `weeble run` is tests/chaos/test_quickstart.py's, and
that Spark agrees with the checker is tests/analytics/test_differential.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runtime.livebed import REPO, next_base_host, weeble
from weeble.check.history import check_run
from weeble.orchestrator.testbed import Testbed
from weeble.trace.schema import TRACE_DIR

FAULTS = {"table": "corrupt", "cut": "cut", "crash": "crash", "pause": "pause"}
CUT_MECHANISM = {"local": "user-space", "mininet": "interface", "docker": "network"}


@pytest.mark.parametrize("backend", ["local", "mininet", "docker"])
def test_conformance_run_passes_with_every_fault_taking_effect(backend: str,
                                                                tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    extra = ["--base-host", next_base_host(), "--any-ports"] if backend == "local" else []
    try:
        result = weeble("run", str(REPO / "scenarios" / "conformance.yaml"), "--backend",
                        backend, "--runs-dir", str(runs), "--run-id", "c", "--quiet",
                        "--no-analysis", *extra, timeout=600)
    finally:  # a `weeble run` killed by the timeout cannot stop its brokers itself
        if (runs / "c" / "testbed.json").exists():
            bed = Testbed.attach("c", runs_dir=runs)
            bed.down(timeout=5)
            bed.backend.teardown()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]

    report = check_run(runs / "c")
    verdict = report["verdict"]
    assert verdict["status"] == "pass", (verdict["reasons"], report["deliveries"])
    rows = {f["fault_id"]: f for f in verdict["faults"]}
    assert set(rows) == set(FAULTS)
    for name, kind in FAULTS.items():
        assert (rows[name]["type"], rows[name]["took_effect"], rows[name]["status"]) == (
            kind, True, "pass"), rows[name]

    records = [json.loads(line) for line in
               (runs / "c" / TRACE_DIR / "chaos.jsonl").read_text().splitlines()]
    begins = {r["fault_id"]: r for r in records if r["kind"] == "fault_begin"}
    assert set(begins) == set(FAULTS) and all(r["took_effect"] for r in begins.values())
    cut = begins["cut"]["evidence"]["b0-b1"]
    assert cut["cut"] is True and cut["mechanism"] == CUT_MECHANISM[backend]
    assert begins["pause"]["evidence"]["b1"]["paused"] is True
    assert begins["crash"]["evidence"]["b2"]["running"] is False
    state = json.loads((runs / "c" / "testbed.json").read_text())
    assert state["backend"] == backend and state["state"] == "down"
