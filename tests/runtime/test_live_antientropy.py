"""The anti-entropy mode live (issue 14): 15 real broker processes (scenarios/anti-entropy.yaml,
shortened) whose tables are kept by per-edge sketch rounds over their gRPC link streams; a
routing-table corruption and a crash (the process killed, restarted with empty RAM); the run's
verdict by the one checker (weeble/check) over its traces passes, each fault took effect and
was stabilized within the mode's bound, and the rounds' messages and a correction are in the
traces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.runtime.livebed import run_and_check

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "anti-entropy.yaml"


def test_fifteen_brokers_in_the_anti_entropy_mode_pass_their_verdict(tmp_path: Path) -> None:
    data = yaml.safe_load(SCENARIO.read_text())
    # faster rounds and leases; δmax = 0.5 s covers the hop delays of a loaded machine (CI has
    # seen 0.45 s: the timing model must hold, or the verdict is "assumptions violated"):
    # Δ = 2π + (K+1)·T + 2δmax + 2dδmax = 4 + 2.5 + 1 + 6 = 13.5 s of calm after each fault
    data["duration"] = 33
    data["timing"] = {**data["timing"], "pi": 2.0, "rho": 1.0, "delta_max": 0.5}
    data["anti_entropy"] = {**data["anti_entropy"], "period": 0.5}
    data["trace"] = {"sends": True}
    data["chaos"]["faults"] = [
        {"name": "table", "kind": "corrupt", "field": "entry.filter", "target": "b1", "at": 3},
        {"name": "crash", "kind": "crash", "target": "b2", "at": 18, "duration": 1}]
    _, report = run_and_check(data, tmp_path, "ae")
    verdict = report["verdict"]
    assert verdict["status"] == "pass", verdict["reasons"]
    assert report["run"]["bound"] == pytest.approx(13.5)
    faults = {f["fault_id"]: f for f in verdict["faults"]}
    assert faults.keys() == {"table", "crash"}
    for f in faults.values():
        assert f["took_effect"] and f["status"] == "pass", f
    d = report["deliveries"]
    assert d["expected"] > 100 and d["duplicate"] == d["spurious"] == 0, d
    load = report["load"]
    kinds = load["by_kind"]
    # every directed edge (28) ran about one round per 0.5 s: Observe and its reply
    assert kinds["aeobserve"] > 28 * 40 and kinds["aereply"] > 28 * 40
    assert kinds.get("aecorrect", 0) >= 1  # the corrupted entry was found by a round
    assert load["control_bytes"]["max"] > load["control_bytes"]["mean"] > 0
