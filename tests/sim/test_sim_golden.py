"""The simulator gives the same runs, event for event, as before it was sped up (issue 15).

Every variant of `tests/sim/sim_golden.py` (each routing algorithm, hierarchical and peer-to-peer,
the rebuild wrapper, the three delay models, state and link faults, the link exchange and the
optimizer) is run with a complete trace (sends, receives, snapshots) and compared with the digest
stored from the simulator before the speed-up.
"""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from tests.sim.sim_golden import digest, scenario, scenario_digest, stored, variants
from weeble.chaos.runner import in_simulation
from weeble.model.scenario import Scenario
from weeble.sim.run import simulate


@pytest.mark.parametrize("name", list(variants()))
def test_the_run_is_the_one_recorded_before_the_speed_up(name: str) -> None:
    assert digest(name) == stored()[name], (
        f"{name}: the simulator's trace changed; if that is intended, regenerate with "
        "`python -m tests.sim.sim_golden --update` and say why in the commit")


@pytest.mark.parametrize("name", ["identity-hier", "identity-exchange", "simple-optimizer"])
def test_a_run_in_slices_for_its_progress_is_the_same_run(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`weeble simulate` runs the engine to 200 points of its duration in turn so the progress
    display can follow; the run must not notice."""
    assert scenario_digest(scenario(name), progress=True) == stored()[name]
    assert f"simulating golden-{name}: 45/45 simulated s, " in capsys.readouterr().err


@pytest.mark.parametrize("name", ["identity-hier", "covering2-uniform", "merging1-p2p",
                                  "identity-adversarial"])
def test_a_run_without_a_trace_has_the_summary_of_the_traced_run(name: str) -> None:
    """The golden digests hold traced runs; a large run (seed000) writes no trace, and its
    deliveries are judged by the checker's untraced path: it must find the same, to the
    last count (faults, missing, spurious, windows, path timing)."""
    s = scenario(name)  # the untraced run still checks its snapshot rounds (R8b)
    traced, untraced = (summary(x) for x in (s, s.model_copy(
        update={"trace": s.trace.model_copy(update={"enabled": False})})))
    assert untraced == traced
    assert traced["deliveries"]["deliveries"] > 0


def summary(s: Scenario) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = simulate(s, tmp, progress=False, faults=in_simulation(s)).as_dict()
    out.pop("performance")
    return out
