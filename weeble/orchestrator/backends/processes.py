"""Process control of brokers that are processes of this machine, a part the local and the
Mininet backends compose: start (optionally under a prefix, Mininet's `mnexec -a`), wait for
health, stop, crash, pause and resume by signals, and read the kernel's word on a process.

A pause is SIGSTOP/SIGCONT, and the evidence of a process's state is the kernel's state letter
from /proc: with weeble/orchestrator/local.py's helpers, this is the one place of the project
that signals or reads broker processes. Brokers another process started (`weeble up`) are
known by their pids (`attach`), and told apart from a recycled pid by their config path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from weeble.orchestrator.backend import AdminAccess, BackendError, BrokerState, ProcessControl
from weeble.orchestrator.backends.admin import wait_serving
from weeble.runtime.config import BrokerConfig
from weeble.runtime.process import BrokerProcess, BrokerStartError


def pid_alive(pid: int, marker: str) -> bool:
    """Is `pid` a running process whose command line contains `marker`?

    The marker (the broker's config path) guards against a recycled pid. A zombie counts as
    dead: a broker whose `weeble up` parent has exited may never be reaped here."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: fall back to "a process with this pid exists"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and marker in cmdline.replace(b"\0", b" ").decode(
        errors="replace")


def proc_state(pid: int) -> str:
    """The kernel's state letter of a process (R, S, T = stopped, Z, ...); '-' if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "-"
    return stat.rsplit(")", 1)[-1].split()[0]


class LocalProcesses(ProcessControl):
    """Brokers as `python -m weeble.runtime` subprocesses: those started here (`procs`) and
    those another process started (`attached`: pid). `prefix(broker_id)` is the command a
    broker runs under (none locally; Mininet's `mnexec -a PID` enters its host); `access()`
    the run's admin access as it is now (its TLS material, for brokers attached to)."""

    def __init__(self, workdir: Path, access: Callable[[], AdminAccess], *,
                 python: str = sys.executable,
                 log_level: str = "INFO",
                 prefix: Callable[[str], list[str]] = lambda broker_id: []) -> None:
        self.workdir = workdir
        self.access = access
        self.python = python
        self.log_level = log_level
        self.prefix = prefix
        self.procs: dict[str, BrokerProcess] = {}  # started here
        self.attached: dict[str, int] = {}  # started by another process: pid
        self.paused: set[str] = set()  # SIGSTOPped here: always continued before a stop

    def attach(self, broker_id: str, pid: int) -> None:
        self.attached[broker_id] = pid

    def forget(self, broker_id: str) -> None:
        self.procs.pop(broker_id, None)
        self.attached.pop(broker_id, None)

    def start(self, config: BrokerConfig, *, health_address: str) -> None:
        broker_id = config.broker_id
        self.attached.pop(broker_id, None)
        proc = BrokerProcess(config, self.workdir, python=self.python, log_level=self.log_level,
                             prefix=self.prefix(broker_id), health_address=health_address)
        try:
            proc.start()
        except OSError as e:
            raise BackendError(f"broker {broker_id}: cannot start {self.python}: {e}") from None
        self.procs[broker_id] = proc

    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool,
                     address: str) -> None:
        proc = self.procs.get(broker_id)
        if proc is not None:
            try:
                proc.wait_ready(timeout, links=links)
            except BrokerStartError as e:
                raise BackendError(str(e)) from None
            return
        wait_serving(address, timeout, links=links, name=broker_id,
                     alive=lambda: self.alive(broker_id), access=self.access())

    def pid(self, broker_id: str) -> int | None:
        proc = self.procs.get(broker_id)
        return proc.pid if proc is not None else self.attached.get(broker_id)

    def alive(self, broker_id: str) -> bool:
        proc = self.procs.get(broker_id)
        if proc is not None:
            return proc.alive
        pid = self.attached.get(broker_id)
        return pid is not None and pid_alive(pid, str(self.workdir / f"{broker_id}.json"))

    def handle(self, broker_id: str) -> str | None:
        pid = self.pid(broker_id)
        return None if pid is None else str(pid)

    def state(self, broker_id: str) -> BrokerState:
        pid = self.pid(broker_id)
        running = self.alive(broker_id)
        letter = proc_state(pid) if pid is not None and running else "-"
        return BrokerState(broker_id, running=running, paused=letter == "T",
                           handle=None if pid is None else str(pid), detail=letter,
                           exit_code=None if running else self.exit_code(broker_id))

    def _await_letter(self, broker_id: str, stopped: bool, timeout: float = 1.0) -> BrokerState:
        """The state once the kernel applied SIGSTOP/SIGCONT (it does so asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(broker_id)
            if state.paused == stopped or not state.running or time.monotonic() > deadline:
                return state
            time.sleep(0.01)

    def pause(self, broker_id: str) -> BrokerState:
        if not self.alive(broker_id):
            raise BackendError(f"broker {broker_id} is not running")
        self.signal(broker_id, signal.SIGSTOP)
        self.paused.add(broker_id)
        return self._await_letter(broker_id, stopped=True)

    def resume(self, broker_id: str) -> BrokerState:
        self.signal(broker_id, signal.SIGCONT)
        self.paused.discard(broker_id)
        return self._await_letter(broker_id, stopped=False)

    def signal(self, broker_id: str, signum: int) -> None:
        proc = self.procs.get(broker_id)
        if proc is not None and proc.popen is not None:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signum)
            return
        pid = self.attached.get(broker_id)
        if pid is not None and self.alive(broker_id):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def wait_dead(self, broker_id: str, deadline: float) -> bool:
        proc = self.procs.get(broker_id)
        if proc is not None and proc.popen is not None:
            with contextlib.suppress(Exception):
                proc.popen.wait(max(0.0, deadline - time.monotonic()))
            return proc.popen.poll() is not None
        while self.alive(broker_id):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def exit_code(self, broker_id: str) -> int | None:
        proc = self.procs.get(broker_id)
        return proc.returncode if proc is not None else None

    def stop(self, targets: list[str], timeout: float = 10.0) -> dict[str, int | None]:
        """SIGTERM to all at once (they drain in parallel), SIGKILL to those still up at the
        deadline."""
        for b in targets:
            self.signal(b, signal.SIGTERM)
            if b in self.paused:  # a stopped process acts on SIGTERM only once continued
                self.signal(b, signal.SIGCONT)
                self.paused.discard(b)
        deadline = time.monotonic() + timeout
        for b in targets:
            if not self.wait_dead(b, deadline):
                self.signal(b, signal.SIGKILL)
                self.wait_dead(b, time.monotonic() + 5)
        return {b: self.exit_code(b) for b in targets}

    def kill(self, broker_id: str) -> None:
        self.signal(broker_id, signal.SIGKILL)
        self.paused.discard(broker_id)
        self.wait_dead(broker_id, time.monotonic() + 5)

    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        try:
            text = (self.workdir / f"{broker_id}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def collect_logs(self, dest: Path, brokers: list[str]) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for b in brokers:
            path = self.workdir / f"{b}.log"
            if not path.exists():
                continue
            target = dest / path.name
            if path.resolve() != target.resolve():
                shutil.copy2(path, target)
            out.append(target)
        return out
