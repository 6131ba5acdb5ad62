"""The simulator gives the same runs, event for event, as before it was sped up (issue 15).

Every variant of `tests/sim_golden.py` (each routing algorithm, hierarchical and peer-to-peer,
the rebuild wrapper, the three delay models, state and link faults) is run with a complete trace
(sends, receives, snapshots) and compared with the digest stored from the simulator before the
speed-up.
"""

from __future__ import annotations

import pytest

from tests.sim_golden import digest, stored, variants


@pytest.mark.parametrize("name", list(variants()))
def test_the_run_is_the_one_recorded_before_the_speed_up(name: str) -> None:
    assert digest(name) == stored()[name], (
        f"{name}: the simulator's trace changed; if that is intended, regenerate with "
        "`python -m tests.sim_golden --update` and say why in the commit")
