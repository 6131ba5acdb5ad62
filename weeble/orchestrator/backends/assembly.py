"""Assembly: a Backend answered by the parts it is made of, as Mininet builds a network from
node and link classes. Each backend is such an assembly of

- placement: where each broker is (`plan`, `_place`: its addresses, its host, container or
  pod) and the run's configs (the brokers' ROM, with the neighbour entries a restart uses);
- process control (`processes`, a ProcessControl: start, stop, crash, pause, resume, state,
  logs): backends/processes.py, or the Docker and Kubernetes backends' own;
- admin access (`admin`, backends/admin.py: Snapshot, CutLink, SetLink, ... and health);
- the network (`network`, a LinkControl: make, remove, cut, heal, shape and read links):
  backends/userlinks.py (the brokers' link layer), backends/peernet.py (Mininet's and
  Docker's own links beside a peer network), or the Kubernetes backend's NetworkPolicies.

This class holds no mechanism of its own: it checks which broker a call names, keeps the
configs, and hands each call to its part. It also closes what it started on every way out
(its `with` block, an exception, Ctrl-C, SIGTERM/SIGHUP inside `local.signals_raise()`, an
atexit hook as the last resort), unless `detach()` handed the run on (`weeble up`).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weeble.orchestrator.backend import (
    AdminAccess,
    Backend,
    BackendError,
    BrokerAddress,
    BrokerState,
    LinkControl,
    LinkShapeChange,
    LinkState,
    ProcessControl,
)
from weeble.orchestrator.backends.admin import AdminCalls
from weeble.orchestrator.backends.userlinks import UserSpaceLinks
from weeble.runtime.config import BrokerConfig

# ---- cleanup on every way out ---------------------------------------------------------------

_open_backends: weakref.WeakSet[Assembly] = weakref.WeakSet()


@atexit.register
def _close_open_backends() -> None:
    for backend in list(_open_backends):
        with contextlib.suppress(Exception):
            backend.close()


def _without(config: BrokerConfig, neighbor: str) -> BrokerConfig:
    """The config with one neighbour (and its shaping, and the parent pointer to it) gone."""
    return config.model_copy(update={
        "neighbors": {n: a for n, a in config.neighbors.items() if n != neighbor},
        "links": {n: s for n, s in config.links.items() if n != neighbor},
        "parent": None if config.parent == neighbor else config.parent})


class Assembly(Backend):
    """A Backend made of parts: `processes` (ProcessControl), `admin` (AdminCalls), `network`
    (LinkControl; `user_links`, the brokers' link layer, is every backend's for the cuts and
    shapes made in user space); placement (`plan`, `_place`) is the backend's own."""

    # a broker added at run time: every backend here links brokers at run time
    links_at_run_time = True
    processes: ProcessControl  # its process part, set by the backend's constructor

    def __init__(self, workdir: Path | str, access: AdminAccess, *,
                 log_level: str = "INFO") -> None:
        self.workdir = Path(workdir).resolve()
        self.access = access
        self.log_level = log_level
        self._configs: dict[str, BrokerConfig] = {}  # the brokers' ROM, as a restart uses it
        # its admin access: one stub per broker, at the address the orchestrator dials
        self.admin = AdminCalls(lambda: self.access, lambda b: self.address(b).admin)
        self._reach: dict[str, BrokerAddress] = {}  # where the orchestrator dials, if planned
        # its network part: the brokers' link layer (Mininet and Docker: a PeerNetwork,
        # whose links made at run time are user-space links; Kubernetes: NetworkPolicies)
        self.user_links = UserSpaceLinks(self)
        self.network: LinkControl = self.user_links
        self._detached = False
        _open_backends.add(self)

    # ---- brokers ----------------------------------------------------------------------------

    def _config(self, broker_id: str) -> BrokerConfig:
        try:
            return self._configs[broker_id]
        except KeyError:
            known = ", ".join(self._configs) or "none"
            raise BackendError(f"unknown broker {broker_id!r} (brokers: {known})") from None

    def check_addresses(self, config: BrokerConfig) -> None:
        """BackendError if the broker's addresses are taken (the local backend checks; where
        each broker has a network of its own, none can be)."""
        return

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

    # ---- run-time membership ----------------------------------------------------------------

    def _place(self, config: BrokerConfig) -> BrokerConfig:
        """The config of a broker added at run time, with this backend's addresses (by
        default the ones the caller chose: the local backend's)."""
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

    # the run's neighbour entries: the link set a (re)start of a broker uses

    def enter_link(self, a: str, b: str) -> None:
        """Record b as a's neighbour and a as b's, at the address each dials the other."""
        ca, cb = self._config(a), self._config(b)
        if a == b:
            raise BackendError(f"link {a}-{b}: a broker is not its own neighbour")
        self._configs[a] = ca.model_copy(
            update={"neighbors": {**ca.neighbors, b: self.peer_address(b, a)}})
        self._configs[b] = cb.model_copy(
            update={"neighbors": {**cb.neighbors, a: self.peer_address(a, b)}})

    def drop_link(self, a: str, b: str) -> None:
        """Undo `enter_link` (and forget the link's user-space cut and shapes)."""
        self.user_links.ends(a, b)  # raises if there is no such link
        self._configs[a] = _without(self._configs[a], b)
        self._configs[b] = _without(self._configs[b], a)
        self.user_links.forget(a, b)

    def entered_links(self) -> list[tuple[str, str]]:
        return sorted({(min(a, n), max(a, n)) for a, c in self._configs.items()
                       for n in c.neighbors if n in self._configs})

    def stop_broker(self, broker_id: str, timeout: float = 10.0) -> int | None:
        return self.stop_all(timeout, only=[broker_id])[broker_id]

    def stop_all(self, timeout: float = 10.0, *,
                 only: list[str] | None = None) -> dict[str, int | None]:
        """Stop these brokers (all: None), as the process control does it: processes and
        namespaces all at once (they drain in parallel), Docker one after the other (parallel
        stops can deadlock Docker 20.10's network controller: backends/docker.py)."""
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
        try:
            self.await_addresses(config, timeout)
            self.start_broker(config)
        except BackendError:
            self._configs[broker_id] = config
            raise
        self.wait_healthy(broker_id, timeout)
        self.user_links.cut_again(broker_id)

    def await_addresses(self, config: BrokerConfig, timeout: float) -> None:
        """Return once the broker's addresses are free to bind again (a restart); nothing to
        wait for where each broker has a network of its own."""
        return

    # ---- links ------------------------------------------------------------------------------

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        return self.network.peer_address(broker_id, neighbor)

    @property
    def reconfigurable(self) -> bool:
        return self.network.reconfigurable

    def book_address(self, broker_id: str) -> str:
        return self.network.book_address(broker_id)

    def add_link(self, a: str, b: str) -> None:
        self.network.add(a, b)

    def remove_link(self, a: str, b: str) -> None:
        self.network.remove(a, b)

    def links(self) -> list[tuple[str, str]]:
        return self.network.links()

    def cut_link(self, a: str, b: str) -> None:
        self.network.cut(a, b)

    def heal_link(self, a: str, b: str) -> None:
        self.network.heal(a, b)

    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        self.network.shape(a, b, change, both_ways=both_ways)

    def link_state(self, a: str, b: str) -> LinkState:
        return self.network.state(a, b)

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

    def __enter__(self) -> Assembly:
        return self
