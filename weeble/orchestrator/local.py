"""LocalBackend: every broker a `python -m weeble.runtime` subprocess on this machine.

Each broker gets its own loopback address (127.0.0.x), so a broker is one host, as on a real
network, and all of them can use the same port numbers. Link cuts and shaping go through the
admin API of the brokers at both ends (CutLink/HealLink/SetLink): the kernel here has no netem,
so the brokers emulate links in user space (DESIGN.md, "Network emulation"). A pause is
SIGSTOP/SIGCONT, and the evidence of a process's state is the kernel's state letter from
/proc: this module is the one place of the project that signals or reads broker processes.

No process outlives the run by accident. Every broker a LocalBackend starts is stopped when the
backend closes: at the end of its `with` block, on an exception, on Ctrl-C, on SIGTERM/SIGHUP
inside `signals_raise()`, and from an atexit hook as the last resort. On purpose, `weeble up`
calls `detach()` and leaves the brokers running; another process then `attach`es to them by
the pids in the run's state file, and `stop_all` ends them.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from weeble.orchestrator.backend import (
    AdminAccess,
    Backend,
    BackendError,
    BrokerAddress,
    BrokerState,
    LinkShapeChange,
    LinkState,
    Placement,
    Ports,
    ProcessControl,
)
from weeble.orchestrator.backends.admin import AdminCalls
from weeble.orchestrator.backends.processes import LocalProcesses
from weeble.proto.v1 import admin_pb2
from weeble.runtime.config import BrokerConfig, split_address
from weeble.runtime.linkshaper import LinkShape

# ---- cleanup on every way out ---------------------------------------------------------------

_open_backends: weakref.WeakSet[LocalBackend] = weakref.WeakSet()


@atexit.register
def _close_open_backends() -> None:
    for backend in list(_open_backends):
        with contextlib.suppress(Exception):
            backend.close()


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


def _without(config: BrokerConfig, neighbor: str) -> BrokerConfig:
    """The config with one neighbour (and its shaping, and the parent pointer to it) gone."""
    return config.model_copy(update={
        "neighbors": {n: a for n, a in config.neighbors.items() if n != neighbor},
        "links": {n: s for n, s in config.links.items() if n != neighbor},
        "parent": None if config.parent == neighbor else config.parent})


class UserSpaceLinks:
    """A network part made of the brokers' own link layer: a link is cut and shaped at both
    ends through admin (`user-space` in the evidence). The local backend's links are all such;
    on Mininet and Docker the links a reconfiguration makes over the shared peer network are.
    What was set is kept, to be put back when a broker restarts (a cut cable stays cut)."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.cuts: set[frozenset[str]] = set()
        self.shapes: dict[tuple[str, str], LinkShape] = {}  # (from, to) -> current shape

    def cut(self, a: str, b: str) -> None:
        # Cut at both ends: each end drops what it would send and what it receives, so the
        # link stays cut even while one end restarts.
        self.cuts.add(frozenset((a, b)))
        for x, y in self.backend._ends(a, b):
            self.backend.admin.call(x, "CutLink", admin_pb2.LinkRequest(neighbor=y))

    def heal(self, a: str, b: str) -> None:
        self.cuts.discard(frozenset((a, b)))
        for x, y in self.backend._ends(a, b):
            self.backend.admin.call(x, "HealLink", admin_pb2.LinkRequest(neighbor=y))

    def shape(self, a: str, b: str, change: LinkShapeChange, *, both_ways: bool = True) -> None:
        ends = self.backend._ends(a, b)
        for x, y in ends if both_ways else [e for e in ends if e == (a, b)]:
            reply = self.backend.admin.call(
                x, "SetLink", admin_pb2.SetLinkRequest(neighbor=y, **change.fields()))
            s = reply.link.shape
            self.shapes[x, y] = LinkShape(s.delay_ms, s.jitter_ms, s.loss, s.duplicate,
                                          s.rate_bps, s.corrupt)

    def is_cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cuts

    def state(self, a: str, b: str) -> LinkState:
        """Each running end's own word on the link (Snapshot): "cut" at every running end."""
        bk = self.backend
        ends: dict[str, str] = {}
        for x, y in ((a, b), (b, a)):
            if y not in bk._config(x).neighbors:
                raise BackendError(f"no link {a}-{b}: {y} is not a neighbour of {x}")
            if not bk.alive(x):
                ends[x] = "not running"
                continue
            reply = bk.admin.call(x, "Snapshot", admin_pb2.SnapshotRequest())
            ends[x] = next((ls.state for ls in reply.links if ls.neighbor == y), "absent")
        running = [s for s in ends.values() if s != "not running"]
        cut = all(s == "cut" for s in running) if running else self.is_cut(a, b)
        return LinkState(a, b, cut=cut, mechanism="user-space", ends=ends)

    def forget(self, a: str, b: str | None = None) -> None:
        """The link a-b removed (b None: every link of broker a)."""
        if b is not None:
            self.cuts.discard(frozenset((a, b)))
            self.shapes.pop((a, b), None)
            self.shapes.pop((b, a), None)
            return
        self.cuts = {k for k in self.cuts if a not in k}
        self.shapes = {k: v for k, v in self.shapes.items() if a not in k}

    def shapes_from(self, broker_id: str) -> dict[str, LinkShape]:
        """The shapes set on `broker_id`'s side of its links: neighbour -> shape."""
        return {to: shape for (frm, to), shape in self.shapes.items() if frm == broker_id}

    def cut_again(self, broker_id: str) -> None:
        """A restarted broker: its links that were cut, cut again at its end."""
        for cut in self.cuts:
            if broker_id in cut:
                (other,) = cut - {broker_id}
                self.backend.admin.call(broker_id, "CutLink",
                                        admin_pb2.LinkRequest(neighbor=other))


# ---- the backend ----------------------------------------------------------------------------


class LocalBackend(Backend):
    name = "local"

    def __init__(self, workdir: Path | str, access: AdminAccess, *,
                 python: str = sys.executable, log_level: str = "INFO") -> None:
        self.workdir = Path(workdir).resolve()
        self.access = access
        self.python = python
        self.log_level = log_level
        self._configs: dict[str, BrokerConfig] = {}
        # its process control: subprocesses of this machine (under a prefix on Mininet)
        self.processes: ProcessControl = LocalProcesses(
            self.workdir, lambda: self.access, python=python, log_level=log_level,
            prefix=self._prefix)
        # its admin access: one stub per broker, at the address the orchestrator dials
        self.admin = AdminCalls(lambda: self.access, lambda b: self.address(b).admin)
        self._reach: dict[str, BrokerAddress] = {}  # where the orchestrator dials, if planned
        self.user_links = UserSpaceLinks(self)  # its network part: the brokers' link layer
        self._detached = False
        _open_backends.add(self)

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

    # ---- brokers ----------------------------------------------------------------------------

    def _config(self, broker_id: str) -> BrokerConfig:
        try:
            return self._configs[broker_id]
        except KeyError:
            known = ", ".join(self._configs) or "none"
            raise BackendError(f"unknown broker {broker_id!r} (brokers: {known})") from None

    def preflight(self, configs: list[BrokerConfig]) -> None:
        for config in configs:
            self.check_addresses(config)

    def check_addresses(self, config: BrokerConfig) -> None:
        check_free(config.listen_address, f"broker {config.broker_id}: listen address")
        check_free(config.admin_address, f"broker {config.broker_id}: admin address")
        if config.metrics_address is not None:
            check_free(config.metrics_address, f"broker {config.broker_id}: metrics address")

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

    # ---- brokers ----------------------------------------------------------------------------

    def _prefix(self, broker_id: str) -> list[str]:
        """The command a broker runs under (none here; a namespace's `mnexec -a` on Mininet)."""
        return []

    def start_broker(self, config: BrokerConfig) -> None:
        broker_id = config.broker_id
        if broker_id in self._configs and self.alive(broker_id):
            raise BackendError(f"broker {broker_id} is already running")
        self.check_addresses(config)
        self._configs[broker_id] = config
        self.processes.start(config, health_address=self.address(broker_id).listen)

    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool = False) -> None:
        self.processes.wait_healthy(broker_id, timeout, links=links,
                                    address=self.address(broker_id).listen)

    def alive(self, broker_id: str) -> bool:
        return self.processes.alive(broker_id)

    def handle(self, broker_id: str) -> str | None:
        return self.processes.handle(broker_id)

    def broker_state(self, broker_id: str) -> BrokerState:
        self._config(broker_id)
        return self.processes.state(broker_id)

    def pause_broker(self, broker_id: str) -> BrokerState:
        return self.processes.pause(broker_id)

    def resume_broker(self, broker_id: str) -> BrokerState:
        self._config(broker_id)
        return self.processes.resume(broker_id)

    def config(self, broker_id: str) -> BrokerConfig:
        return self._config(broker_id)

    def brokers(self) -> list[str]:
        return list(self._configs)

    def address(self, broker_id: str) -> BrokerAddress:
        reach = self._reach.get(broker_id)
        if reach is not None:
            return reach
        c = self._config(broker_id)
        return BrokerAddress(broker_id, c.listen_address, c.admin_address, c.metrics_address)

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        # one loopback address per broker: its neighbours dial the address clients use
        self.address(neighbor)
        return self.address(broker_id).listen

    # ---- run-time membership ----------------------------------------------------------------

    # a broker added at run time gets its addresses from the caller (a loopback address),
    # not from this backend's network
    assigns_addresses = False
    links_at_run_time = True

    @property
    def reconfigurable(self) -> bool:
        return True  # on loopback every broker reaches every other

    def book_address(self, broker_id: str) -> str:
        return self.address(broker_id).listen

    def _place(self, config: BrokerConfig) -> BrokerConfig:
        """The config of a broker added at run time, with this backend's addresses: locally,
        the ones the caller chose."""
        return config

    def add_broker(self, config: BrokerConfig, *,
                   prepare: Callable[[BrokerConfig], BrokerConfig] | None = None
                   ) -> BrokerConfig:
        broker_id = config.broker_id
        if broker_id in self._configs:
            raise BackendError(f"broker {broker_id} exists already")
        unknown = [n for n in config.neighbors if n not in self._configs]
        if unknown:
            raise BackendError(f"broker {broker_id}: unknown neighbour(s) {unknown}")
        placed = self._place(config)
        self._configs[broker_id] = placed.model_copy(
            update={"neighbors": {}, "links": {}, "parent": None})
        try:
            for n in config.neighbors:
                self.add_link(broker_id, n)
            final = self._configs[broker_id].model_copy(
                update={"links": placed.links, "parent": placed.parent})
            if prepare is not None:
                final = prepare(final)
            self.start_broker(final)
        except BaseException:
            self.remove_broker(broker_id)
            raise
        return final

    def update_config(self, broker_id: str, **fields: Any) -> BrokerConfig:
        """Change fields of the config a (re)start of `broker_id` uses (e.g. its address book
        after a broker joined); the running process is told by the admin API, not here."""
        self._configs[broker_id] = self._config(broker_id).model_copy(update=fields)
        return self._configs[broker_id]

    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        self._config(broker_id)
        if self.alive(broker_id):
            self.stop_broker(broker_id, timeout)
        self._forget(broker_id)

    def _forget(self, broker_id: str) -> None:
        """A broker removed: its config, its neighbours' entries of it, its cuts and shapes."""
        config = self._config(broker_id)
        for n in list(config.neighbors):
            if n in self._configs:
                self._configs[n] = _without(self._configs[n], broker_id)
        self.user_links.forget(broker_id)
        del self._configs[broker_id]
        self.processes.forget(broker_id)
        self._reach.pop(broker_id, None)

    def add_link(self, a: str, b: str) -> None:
        ca, cb = self._config(a), self._config(b)
        if a == b:
            raise BackendError(f"link {a}-{b}: a broker is not its own neighbour")
        # on loopback every broker already reaches every other: the link is the neighbour entry
        self._configs[a] = ca.model_copy(
            update={"neighbors": {**ca.neighbors, b: self.peer_address(b, a)}})
        self._configs[b] = cb.model_copy(
            update={"neighbors": {**cb.neighbors, a: self.peer_address(a, b)}})

    def remove_link(self, a: str, b: str) -> None:
        self._ends(a, b)  # raises if there is no such link
        self._configs[a] = _without(self._configs[a], b)
        self._configs[b] = _without(self._configs[b], a)
        self.user_links.forget(a, b)

    def links(self) -> list[tuple[str, str]]:
        return sorted({(min(a, n), max(a, n)) for a, c in self._configs.items()
                       for n in c.neighbors if n in self._configs})

    def stop_broker(self, broker_id: str, timeout: float = 10.0) -> int | None:
        return self.stop_all(timeout, only=[broker_id])[broker_id]

    def stop_all(self, timeout: float = 10.0, *,
                 only: list[str] | None = None) -> dict[str, int | None]:
        """Stop these brokers (all: None) at once, as the process control does it (they
        drain in parallel)."""
        targets = [self._config(b).broker_id for b in only] if only else self.brokers()
        codes = self.processes.stop(targets, timeout)
        self.admin.drop(targets)
        return codes

    def kill_broker(self, broker_id: str) -> None:
        self._config(broker_id)
        self.processes.kill(broker_id)
        self.admin.drop([broker_id])

    def restart_broker(self, broker_id: str, timeout: float = 30.0) -> None:
        """Kill the broker if it still runs, start a fresh process and return once it serves.

        The new process starts from the config with empty RAM; the link shapes and cuts this
        backend set are put back (a cut cable stays cut across a reboot)."""
        config = self._config(broker_id)
        if self.alive(broker_id):
            self.kill_broker(broker_id)
        shapes = self.user_links.shapes_from(broker_id)
        if shapes:
            config = config.model_copy(update={"links": {**config.links, **shapes}})
        self._configs.pop(broker_id)  # start_broker re-adds it
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
                    self._configs[broker_id] = config
                    held = [h for a in (config.listen_address, config.admin_address)
                            for h in holders(a)]
                    raise BackendError(f"{e} (after {timeout:g} s; held by "
                                       f"{', '.join(held) or 'no process'})") from None
                time.sleep(0.1)
        try:
            self.start_broker(config)
        except BackendError:
            self._configs[broker_id] = config
            raise
        self.wait_healthy(broker_id, timeout)
        self.user_links.cut_again(broker_id)

    # ---- links ------------------------------------------------------------------------------

    def _ends(self, a: str, b: str) -> list[tuple[str, str]]:
        """Both directions of link a-b, at the ends that are running."""
        for x, y in ((a, b), (b, a)):
            if y not in self._config(x).neighbors:
                raise BackendError(f"no link {a}-{b}: {y} is not a neighbour of {x}")
        return [(x, y) for x, y in ((a, b), (b, a)) if self.alive(x)]

    def cut_link(self, a: str, b: str) -> None:
        self.user_links.cut(a, b)

    def heal_link(self, a: str, b: str) -> None:
        self.user_links.heal(a, b)

    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        self.user_links.shape(a, b, change, both_ways=both_ways)

    def link_cut(self, a: str, b: str) -> bool:
        return self.user_links.is_cut(a, b)

    def link_state(self, a: str, b: str) -> LinkState:
        return self.user_links.state(a, b)

    # ---- results ----------------------------------------------------------------------------

    def collect_traces(self, dest: Path) -> list[Path]:
        """The brokers write their traces straight to files here; copy any kept elsewhere."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for config in self._configs.values():
            path = config.trace_path
            if path is None or not Path(path).exists():
                continue
            target = dest / Path(path).name
            if Path(path).resolve() != target.resolve():
                shutil.copy2(path, target)
            out.append(target)
        return out

    def collect_logs(self, dest: Path) -> list[Path]:
        return self.processes.collect_logs(dest, list(self._configs))

    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        return self.processes.log_tail(broker_id, lines)

    @property
    def detached(self) -> bool:
        return self._detached

    def detach(self) -> None:
        """Leave the brokers running when this backend closes (`weeble up`)."""
        self._detached = True
        _open_backends.discard(self)

    def teardown(self) -> None:
        running = [b for b in self._configs if self.alive(b)]
        if running:
            self.stop_all(only=running)
        self.admin.drop()

    def close(self) -> None:
        for b in list(self.processes.paused):  # a frozen broker would outlive a detached run
            self.resume_broker(b)
        if not self._detached:
            self.teardown()
        self.admin.drop()
        _open_backends.discard(self)

    def __enter__(self) -> LocalBackend:
        return self
