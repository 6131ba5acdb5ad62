"""LocalBackend: every broker a `python -m weeble.runtime` subprocess on this machine.

Each broker gets its own loopback address (127.0.0.x), so a broker is one host, as on a real
network, and all of them can use the same port numbers. Link cuts and shaping go through the
admin API of the brokers at both ends (CutLink/HealLink/SetLink): the kernel here has no netem,
so the brokers emulate links in user space (DESIGN.md, "Network emulation"). A pause is
SIGSTOP/SIGCONT, and the evidence of a process's state is the kernel's state letter from
/proc (backends/processes.py, with this module's port helpers the one place of the project
that signals or reads broker processes). The backend is an assembly of those parts
(backends/assembly.py) with placement on loopback.

No process outlives the run by accident. Every broker a LocalBackend starts is stopped when the
backend closes: at the end of its `with` block, on an exception, on Ctrl-C, on SIGTERM/SIGHUP
inside `signals_raise()`, and from an atexit hook as the last resort. On purpose, `weeble up`
calls `detach()` and leaves the brokers running; another process then `attach`es to them by
the pids in the run's state file, and `stop_all` ends them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from weeble.orchestrator.backend import (
    AdminAccess,
    BackendError,
    BrokerAddress,
    Placement,
    Ports,
)
from weeble.orchestrator.backends.assembly import Assembly, _open_backends
from weeble.orchestrator.backends.processes import LocalProcesses
from weeble.runtime.config import BrokerConfig, split_address


@contextlib.contextmanager
def signals_raise(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into SystemExit while inside, so `with` blocks and `finally`
    clauses stop the brokers, as they do for Ctrl-C's KeyboardInterrupt. (A signal's default
    action would end the orchestrator without running them, leaving the brokers behind.)"""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; its owner handles the signals
        return

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# ---- small helpers --------------------------------------------------------------------------


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports that are free on `host` right now (the OS picks them). All are
    held until the last is picked: a port released at once may be handed out again by the
    next pick (CI once got a broker whose admin port was its listen port)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((host, 0))
            ports.append(int(s.getsockname()[1]))
        return ports


def free_port(host: str) -> int:
    """A port that is free on `host` right now (the OS picks it)."""
    return free_ports(host, 1)[0]


def check_free(address: str, what: str) -> None:
    """Raise BackendError naming `address` if something already listens there."""
    host, port = split_address(address)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # a TIME_WAIT leftover of an earlier run does not stop gRPC (it sets SO_REUSEADDR too)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise BackendError(
                f"{what} {address}: {e.strerror or e}; is another run up? (`weeble status`, "
                "`weeble down`), or choose other addresses (live.base_host, live.*_port)"
            ) from None


def holders(address: str) -> list[str]:
    """Who listens on `address` (IPv4): "pid N (command)" for each process holding such a
    socket, read from /proc (empty when nothing does, or without procfs)."""
    host, port = split_address(address)
    try:
        want = f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[1] == want and cols[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{cols[9]}]")
    except (OSError, ValueError, IndexError):
        return []
    out = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                pid = fd_dir.parent.name
                cmd = (fd_dir.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                out.append(f"pid {pid} ({cmd.decode(errors='replace').strip()[:120]})")
        except OSError:
            continue
    return out


# ---- the backend ----------------------------------------------------------------------------


class LocalBackend(Assembly):
    """Every broker a subprocess on its own loopback address: placement on 127.0.0.x,
    process control by signals (backends/processes.py), links in the brokers' link layer
    (backends/userlinks.py)."""

    name = "local"
    # a broker added at run time gets its addresses from the caller (a loopback address),
    # not from this backend's network
    assigns_addresses = False

    def __init__(self, workdir: Path | str, access: AdminAccess, *,
                 python: str = sys.executable, log_level: str = "INFO") -> None:
        super().__init__(workdir, access, log_level=log_level)
        self.python = python
        self.processes = LocalProcesses(self.workdir, lambda: self.access, python=python,
                                        log_level=log_level)

    @classmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> LocalBackend:
        return cls(Path(run_dir) / "brokers", access, log_level=log_level)

    @classmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any]) -> LocalBackend:
        return cls.attach(Path(run_dir) / "brokers", access,
                          {b: (c, brokers.get(b, {}).get("pid")) for b, c in configs.items()})

    @classmethod
    def attach(cls, workdir: Path | str, access: AdminAccess,
               brokers: dict[str, tuple[BrokerConfig, int | None]]) -> LocalBackend:
        """Take over brokers another process started (their configs and pids). Closing the
        result does not stop them; `stop_all` does."""
        backend = cls(workdir, access)
        backend._detached = True
        _open_backends.discard(backend)
        for broker_id, (config, pid) in brokers.items():
            backend._configs[broker_id] = config
            if pid is not None:
                backend.processes.attach(broker_id, pid)
        return backend

    def preflight(self, configs: list[BrokerConfig]) -> None:
        for config in configs:
            self.check_addresses(config)

    def check_addresses(self, config: BrokerConfig) -> None:
        check_free(config.listen_address, f"broker {config.broker_id}: listen address")
        check_free(config.admin_address, f"broker {config.broker_id}: admin address")
        if config.metrics_address is not None:
            check_free(config.metrics_address, f"broker {config.broker_id}: metrics address")

    def await_addresses(self, config: BrokerConfig, timeout: float) -> None:
        # The killed process's sockets are closed by the kernel as it exits, which under load
        # can take longer than kill_broker waits: retry until they are free (up to `timeout`),
        # then say who still holds them instead of a bare "Address already in use".
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.check_addresses(config)
                break
            except BackendError as e:
                if time.monotonic() > deadline:
                    held = [h for a in (config.listen_address, config.admin_address)
                            for h in holders(a)]
                    raise BackendError(f"{e} (after {timeout:g} s; held by "
                                       f"{', '.join(held) or 'no process'})") from None
                time.sleep(0.1)

    # ---- the network --------------------------------------------------------------------------

    def plan(self, brokers: list[str], edges: list[tuple[str, str]],
             ports: Ports) -> dict[str, Placement]:
        """One loopback address per broker from `ports.base_host` up; the same (or, with
        `any_ports`, free) ports on each. Brokers bind what the orchestrator dials."""
        base = ipaddress.IPv4Address(ports.base_host)
        hosts = {b: str(base + i) for i, b in enumerate(brokers)}
        if not all(ipaddress.IPv4Address(h).is_loopback for h in hosts.values()):
            raise BackendError(f"base host {ports.base_host}: {len(brokers)} brokers do not fit"
                               " in 127.0.0.0/8 from there")

        out = {}
        for b, h in hosts.items():
            fixed = [ports.listen, ports.admin, ports.metrics]
            free = iter(free_ports(h, len(fixed)))  # distinct, for the slots not fixed
            listen, admin, metric = (f"{h}:{next(free) if ports.any_ports or not f else f}"
                                     for f in fixed)
            metrics = metric if ports.metrics_enabled else None
            out[b] = Placement(listen, admin, metrics, BrokerAddress(b, listen, admin, metrics))
        self._reach.update({b: p.reach for b, p in out.items()})
        return out

