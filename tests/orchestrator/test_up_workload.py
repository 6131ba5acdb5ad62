"""`weeble up --workload`: the hand-run flow (up, down, check) judges the scenario's clients
as `weeble run` does (issue 23 item 6). The workload runs in a process of its own that outlives
`weeble up`; `weeble down` stops it first, and its clients' traces are complete."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from tests.runtime.livebed import REPO, next_base_host, weeble
from weeble.check.status import STATUSES
from weeble.orchestrator.backends.processes import pid_alive
from weeble.orchestrator.background import PID_FILE, STATS_FILE


def _published(trace: Path) -> int:
    """The publish records the clients have written so far (a torn last line aside)."""
    n = 0
    for path in trace.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                n += json.loads(line).get("kind") == "publish"
    return n


def test_up_with_the_workload_then_down_and_check_judges_its_publications(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    up = weeble("up", str(REPO / "scenarios" / "quickstart.yaml"), "--workload", "--duration",
                "60", "--runs-dir", str(runs), "--run-id", "w", "--base-host",
                next_base_host(), "--any-ports", timeout=300)
    run_dir = runs / "w"
    try:
        assert up.returncode == 0, up.stderr
        assert "workload: the scenario's clients for 60 s" in up.stdout
        pid = int((run_dir / PID_FILE).read_text())
        assert pid_alive(pid, str(run_dir.resolve()))  # it outlives `weeble up`
        deadline = time.monotonic() + 240  # a wait for the first publications, not a figure
        while _published(run_dir / "trace") == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        down = weeble("down", "w", "--runs-dir", str(runs), timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    # stopped before its 60 s by `weeble down`, through its clients' own shutdown
    assert not pid_alive(pid, str(run_dir.resolve()))
    stats = json.loads((run_dir / STATS_FILE).read_text())
    assert stats["publications"] > 0 and stats["subscriptions"] > 0, stats
    assert _published(run_dir / "trace") == stats["publications"]
    check = weeble("check", str(run_dir), timeout=300)
    assert "verdict: " in check.stdout, check.stdout + check.stderr
    assert "publications 0 " not in check.stdout
    # no fault: the whole run is judged on its publications, never "not judged" for want of them
    assert check.returncode in {s.exit_code for s in STATUSES}, check.stdout + check.stderr
    assert "no publications observed" not in check.stdout, check.stdout


def test_a_workload_that_ends_before_down_ends_its_subscriptions(tmp_path: Path) -> None:
    """The brokers outlive the workload: its clients unsubscribe at its end, so the tables
    the brokers let expire afterwards are legitimate (a subscription never ended lives forever,
    R1: before, `weeble check` failed every such run, "missing entry for alice/0")."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({
        "name": "up-ends", "seed": 2, "duration": 4,
        "topology": {"kind": "kary", "m": 2, "levels": 2},
        "routing": {"algorithm": "simple"},
        "timing": {"pi": 1, "rho": 0.5, "delta_min": 0, "delta_max": 0.05},
        "workload": {"filter_classes": 2, "subscriptions": 3, "mean_lifetime": 30,
                     "publish_rate": 10},
        "subscriptions": [{"client": "alice", "broker": "b1", "filter": "class == 1"}],
    }))
    runs = tmp_path / "runs"
    up = weeble("up", str(path), "--workload", "--runs-dir", str(runs), "--run-id", "e",
                "--base-host", next_base_host(), "--any-ports", timeout=300)
    run_dir = runs / "e"
    try:
        assert up.returncode == 0, up.stderr
        pid = int((run_dir / PID_FILE).read_text())
        deadline = time.monotonic() + 240  # the workload's 4 s on a busy machine, not a figure
        while pid_alive(pid, str(run_dir.resolve())) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (run_dir / STATS_FILE).exists(), "the workload did not end by itself"
        time.sleep(4)  # past 2π: the leases the brokers held for the clients ran out
    finally:
        down = weeble("down", "e", "--runs-dir", str(runs), timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    alice = [json.loads(line)["kind"] for line in
             (run_dir / "trace" / "alice.jsonl").read_text(encoding="utf-8").splitlines()]
    assert alice.count("client_unsubscribe") == 1, alice
    check = weeble("check", str(run_dir), timeout=300)
    assert "missing entry" not in check.stdout + check.stderr, check.stdout
    assert check.returncode == 0, check.stdout + check.stderr
