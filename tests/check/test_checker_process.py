"""The online checker in a second process (`weeble.check.offload`) judges as the inline one.

An untraced run records the checker's input (`Recorder`) and ships it in batches to a checker
process; these runs force the process with tiny batches (many frames, the warm start's records
spread over several) and hold the summary to the inline checker's, count for count. A checker
process that fails or dies stops the run with an error that says so, never a hang.
"""

from __future__ import annotations

import os
import signal
import tempfile
from typing import Any, ClassVar

import pytest

from tests.sim.sim_golden import scenario
from weeble.chaos.runner import in_simulation
from weeble.check.deliveries import Deliveries, Recorder, pack, unpack
from weeble.check.offload import CheckerFailed, CheckerProcess
from weeble.core.events import Deliver
from weeble.core.messages import Notification
from weeble.model.scenario import Scenario, Trace
from weeble.sim import observe
from weeble.sim.run import simulate


class Node:
    def __init__(self, id: str) -> None:
        self.id = id


def untraced(name: str) -> Scenario:
    return scenario(name).model_copy(update={"trace": Trace(enabled=False)})


def summary(s: Scenario) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = simulate(s, tmp, progress=False, faults=in_simulation(s)).as_dict()
    out.pop("performance")
    return out


class Counted(CheckerProcess):
    """A CheckerProcess that remembers every instance (did the run use one, how many frames)."""

    made: ClassVar[list[Counted]] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        Counted.made.append(self)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Counted]:
    Counted.made = []
    monkeypatch.setattr(observe, "CheckerProcess", Counted)
    return Counted.made


# faults (link and state), a delay model, filters that cover and overlap: every rule has work
@pytest.mark.parametrize("name", ["identity-adversarial", "merging1-p2p"])
def test_the_checker_process_finds_what_the_inline_checker_finds(
        name: str, monkeypatch: pytest.MonkeyPatch, counted: list[Counted]) -> None:
    s = untraced(name)
    monkeypatch.setenv(observe.CHECKER, "inline")
    inline = summary(s)
    monkeypatch.setenv(observe.CHECKER, "process")
    monkeypatch.setattr(observe, "BATCH", 7)
    parallel = summary(s)
    assert len(counted) == 1 and counted[0].frames > 20, "the run did not use the process"
    assert counted[0].proc.returncode == 0
    assert parallel == inline
    assert inline["deliveries"]["deliveries"] > 100
    # auto: a run this small has no process (its records replayed here at the
    # end); a larger one (here: > 9 deliveries) a process if a core is free, else its batches
    # replayed here as they fill
    monkeypatch.setenv(observe.CHECKER, "auto")
    assert summary(s) == inline
    assert len(counted) == 1
    monkeypatch.setattr(observe, "SPAWN_AFTER", 9)
    monkeypatch.setattr(observe, "_core_free", lambda: False)
    assert summary(s) == inline
    assert len(counted) == 1
    monkeypatch.setattr(observe, "_core_free", lambda: True)
    assert summary(s) == inline
    assert len(counted) == 2 and counted[1].frames > 20


def test_a_checker_process_killed_mid_run_stops_the_run_with_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Killed(CheckerProcess):
        def ship(self, batch: Any) -> None:
            if self.frames == 5:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            super().ship(batch)

    monkeypatch.setattr(observe, "CheckerProcess", Killed)
    monkeypatch.setenv(observe.CHECKER, "process")
    monkeypatch.setattr(observe, "BATCH", 7)
    with pytest.raises(CheckerFailed, match=r"checker process \(pid \d+\) stopped reading.*"
                                            r"killed by signal 9"):
        summary(untraced("identity-hier"))


def test_a_checker_process_that_fails_reports_its_traceback() -> None:
    d = Deliveries(activation=1.0, deactivation=1.0, crash_linger=1.0)
    p = CheckerProcess(d.settings())
    recorder = Recorder(1000, p.ship)
    recorder.subscribe(0.0, "c", "b0", "c/0", "class == 1")
    recorder.others.append((0, ("x", 1.0)))  # no such record: the child's Replay refuses it
    with pytest.raises(CheckerFailed, match="not a record of the checker's history"):
        p.finish(recorder.take(), 10.0)
    assert p.proc.returncode == 1


def test_a_batch_whose_columns_differ_or_hold_a_nul_is_refused() -> None:
    recorder = Recorder(1000, lambda columns: None)
    with pytest.raises(ValueError, match="columns of 2"):
        unpack((bytes(16), bytes(16), "a\0b", "p\0p", "b0", []))
    recorder.observe(0.0, Node("b0"), Deliver("bad\0name", Notification("p", 1, {})))
    with pytest.raises(ValueError, match="NUL"):
        pack(recorder.take())
