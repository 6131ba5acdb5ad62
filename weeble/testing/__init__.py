"""Chaos suites in Python: a live testbed a test drives, and assertions over its verdict.

    def test_the_root_forgets(weeble_testbed):
        bed = weeble_testbed("scenarios/quickstart.yaml")       # up; always torn down
        bed.inject({"kind": "corrupt", "target": "root", "field": "table.clear"})
        bed.wait_for_stabilization()
        assert_verdict(bed.verdict())                           # the verdict row on failure

The `weeble_testbed` fixture (weeble.testing.plugin, registered as a pytest11 entry point)
makes a `ChaosTestbed`: the scenario's brokers up on the chosen backend (`--weeble-backend`,
default local), its workload running in the background from the start. The test injects faults
(the chaos vocabulary of `weeble chaos`, as dicts) or whole experiments, reconfigures the tree,
waits, and asks for the verdict: the brokers are stopped, the traces collected and the
reference checker (`weeble check`) judges the run. The testbed is stopped at the end of the
test whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weeble.check.status import Status
from weeble.model.scenario import Scenario, load_scenario

__all__ = ["ChaosTestbed", "Verdict", "assert_verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The reference checker's verdict of a run (`weeble check RUN_DIR --json` holds it all)."""

    status: str
    reasons: list[str]
    faults: list[dict[str, Any]]  # one row per fault, as the verdict table shows it
    reconfigurations: list[dict[str, Any]]  # R15's rows
    run_dir: Path
    report: dict[str, Any] = field(repr=False)

    @property
    def passed(self) -> bool:
        return self.status == Status.PASS

    def table(self, faults: Sequence[str] | None = None) -> str:
        """The verdict table as `weeble run` prints it (only the given faults' rows)."""
        from weeble.chaos.verdict import analysis_rows, print_verdict

        rows = [r for r in analysis_rows({"faults": self.faults})
                if faults is None or r.fault_id in faults]
        out = io.StringIO()
        print_verdict(rows, self.passed, self.reasons, file=out,
                      reconfigurations=self.reconfigurations if faults is None else (),
                      status=self.status)
        return out.getvalue()


def assert_verdict(verdict: Verdict, status: str = Status.PASS, *,
                   fault: str | None = None) -> None:
    """Fail the test unless the run's status is `status` (or, with `fault`, unless that
    fault's episode has it); the failure message is the verdict table's row(s) and the
    reasons."""
    if fault is not None:
        row = next((f for f in verdict.faults if f["fault_id"] == fault), None)
        if row is None:
            raise AssertionError(f"no fault {fault!r} in the verdict of {verdict.run_dir} "
                                 f"(faults: {', '.join(f['fault_id'] for f in verdict.faults)})")
        if row["status"] != status:
            raise AssertionError(f"fault {fault}: {row['status']}, expected {status}\n"
                                 + verdict.table([fault]))
        return
    if verdict.status != status:
        raise AssertionError(f"run {verdict.run_dir}: {verdict.status}, expected {status}\n"
                             + verdict.table())


class ChaosTestbed:
    """A scenario's brokers, live, with its workload running, for a test to drive. The
    scenario's own chaos experiment is not applied: the test injects what it wants."""

    def __init__(self, scenario: str | Path | Scenario, *, backend: str | None = None,
                 runs_dir: str | Path = "runs", duration: float | None = None) -> None:
        from weeble.orchestrator.testbed import Testbed

        loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.scenario = loaded.model_copy(update={"chaos": None})
        self.duration = duration if duration is not None else self.scenario.duration
        self.bed = Testbed.plan(self.scenario, runs_dir=runs_dir, any_ports=True,
                                backend=backend, reconfigurable=True)
        self.run_dir = self.bed.run_dir
        self.outcomes: list[Any] = []
        self.reconfigurations: list[Any] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="weeble-testbed")
        self._workload: Any = None
        self._running: Future[Any] | None = None
        self._last_fault_end = 0.0
        self._verdict: Verdict | None = None
        self._down = False

    # ---- life -----------------------------------------------------------------------------

    def up(self) -> ChaosTestbed:
        """Start the brokers, then the workload (in the background, for `duration` s)."""
        from weeble.orchestrator.workload import LiveWorkload

        self.bed.up()
        self._thread.start()
        addresses = {b: a.listen for b, a in self.bed.addresses().items()}
        self._workload = LiveWorkload(
            self.scenario, addresses,
            self.bed.trace_dir if self.scenario.trace.enabled else None,
            tokens=self.bed.client_token, tls=self.bed.client_tls())
        self._running = asyncio.run_coroutine_threadsafe(
            self._workload.run(self.duration), self._loop)
        return self

    def close(self) -> None:
        """Stop the workload and the brokers (idempotent; the fixture always calls it)."""
        if self._down:
            return
        self._down = True
        try:
            self._stop_workload()
        finally:
            try:
                self.bed.down()
            finally:
                if self._thread.is_alive():
                    self._loop.call_soon_threadsafe(self._loop.stop)
                    self._thread.join(timeout=30)

    def _stop_workload(self) -> None:
        if self._running is not None and not self._running.done():
            self._running.cancel()  # the workload's own `finally` closes its clients
            with contextlib.suppress(Exception):
                self._running.exception(timeout=60)

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        if self._down or not self._thread.is_alive():
            coro.close()
            raise RuntimeError("the testbed is not up (call up(), or use the weeble_testbed "
                               "fixture)")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ---- what a test does -------------------------------------------------------------------

    def inject(self, fault: Mapping[str, Any]) -> Any:
        """One fault now (or `at` s from now), in the chaos vocabulary (`weeble chaos`'s
        faults: kind, target or link, field, duration, ...); returns its Outcome once it ended
        (`took_effect`, the evidence)."""
        (outcome,) = self.experiment({"faults": [{"at": 0, **fault}]})
        return outcome

    def experiment(self, experiment: str | Path | Mapping[str, Any]) -> list[Any]:
        """A chaos experiment (a `weeble chaos` file, or its content as a dict), its times
        from now; returns the outcomes once every fault ended."""
        from weeble.chaos.runner import ChaosRunner
        from weeble.model.experiment import load_experiment, parse_experiment

        parsed = (parse_experiment(dict(experiment)) if isinstance(experiment, Mapping)
                  else load_experiment(experiment))
        runner = ChaosRunner(self.bed, parsed, clients=self._workload)
        outcomes = self._call(runner.run())
        self.outcomes += outcomes
        self._last_fault_end = self._now()
        return list(outcomes)

    def reconfigure(self, op: Any, timeout: float = 120.0) -> Any:
        """One reconfiguration (weeble.core.reconfig.plan: ExchangeLink, AddLeaf,
        RemoveLeaf) under the running workload; returns its record (outcome, duration)."""
        record = self._call(self.bed.reconfigure(op, timeout=timeout))
        self.reconfigurations.append(record)
        return record

    def wait(self, seconds: float) -> None:
        """Let the workload run (and the system recover) for `seconds`."""
        self._call(asyncio.sleep(seconds))

    def wait_for_stabilization(self) -> float:
        """Wait until the bound Δ has passed since the last injected fault ended: by then
        the algorithm promises to be legitimate again, and the verdict says whether it was
        (and when: the stabilization times are measured in the trace). Returns the seconds
        waited."""
        bound = float(self.bed.header["bound"])
        left = max(0.0, self._last_fault_end + bound - self._now())
        self.wait(left)
        return left

    def verdict(self) -> Verdict:
        """Stop the workload and the brokers, collect the traces, judge the run with the
        reference checker (the same verdict as `weeble check RUN_DIR`)."""
        if self._verdict is None:
            from weeble.check.history import check_run

            self.close()
            report = check_run(self.run_dir)
            v = report["verdict"]
            self._verdict = Verdict(status=str(v["status"]), reasons=list(v["reasons"]),
                                    faults=list(v["faults"]),
                                    reconfigurations=list(report.get("operations") or []),
                                    run_dir=self.run_dir, report=report)
        return self._verdict

    def _now(self) -> float:
        return self._loop.time()
