"""The backend interface: where a live run's brokers are and how the orchestrator handles them.

One interface for every place brokers can run (local processes, Mininet hosts, Docker
containers, Kubernetes pods), so the testbed, the reconfiguration controllers and the chaos
module drive them all the same way, and chaos never reaches around it (no `os.kill`, no
`/proc` outside a backend). It is deliberately synchronous: each call is a short control
action (start a process, flip a link), and an asyncio caller runs one with `asyncio.to_thread`.

What a backend answers as evidence is its own mechanism's word: `broker_state` says what the
process, container or pod is (running, paused, gone, with the kernel's or the engine's
status), `link_state` says whether a link is cut and by what (user space at both ends, an
interface down, a network disconnected, a NetworkPolicy).

Broker state lives in the broker: `restart_broker` starts a fresh process with empty RAM (the
same ROM, from the same config), which is what a crash-and-recover looks like to the others.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, get_args

from weeble.model.scenario import Scenario
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.client import ClientTls
from weeble.runtime.config import BrokerConfig


class BackendError(RuntimeError):
    """A broker could not be started, reached or controlled; the message says which and why."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where one broker can be reached from the orchestrator."""

    broker_id: str
    listen: str  # links and clients
    admin: str  # management: admin service and health
    metrics: str | None  # Prometheus /metrics, if enabled


@dataclass(frozen=True, slots=True)
class Ports:
    """The ports a run asks for (None: the backend's default), and whether any free port will
    do (tests, and runs beside others on one loopback)."""

    listen: int | None = None
    admin: int | None = None
    metrics: int | None = None
    metrics_enabled: bool = False
    any_ports: bool = False
    base_host: str = "127.0.0.2"  # local backend: the first broker's loopback address
    # a segment every broker is on, for the links and channels a reconfiguration makes at run
    # time (backends with a network of their own; weeble/orchestrator/backends/peernet.py)
    peer_network: bool = False


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a backend puts one broker: what the broker binds (its config's addresses) and
    where the orchestrator reaches it. They differ where the broker lives in a namespace or a
    container: it binds its own interfaces, the orchestrator dials a management address."""

    listen: str
    admin: str
    metrics: str | None
    reach: BrokerAddress


@dataclass(frozen=True, slots=True)
class LinkShapeChange:
    """Egress shaping to set on a link; fields left None keep their current value."""

    delay_ms: float | None = None
    jitter_ms: float | None = None
    loss: float | None = None
    duplicate: float | None = None
    rate_bps: float | None = None
    corrupt: float | None = None

    def fields(self) -> dict[str, float]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """What it takes to call a run's admin services: the per-run token, and the run's TLS
    material when the run speaks TLS (`live.tls`: CA to verify the brokers, client certificate
    to present), on the admin port and on the listen port alike."""

    token: str
    ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def client(self, address: str, timeout: float = 10.0, *,
               broker: str | None = None) -> AdminClient:
        """An async AdminClient for one broker's management address; over TLS, it accepts
        only a certificate that names `broker` (each broker has its own, certs.py)."""
        return AdminClient(address, self.token, ca=self.ca, client_cert=self.client_cert,
                           client_key=self.client_key, server_name=broker, timeout=timeout)

    def client_tls(self) -> ClientTls | None:
        """What a client of the run presents on a broker's listen port (None: plain)."""
        if self.ca is None or self.client_cert is None or self.client_key is None:
            return None
        return ClientTls.from_files(self.ca, self.client_cert, self.client_key)


@dataclass(frozen=True, slots=True)
class BrokerState:
    """What the backend sees of one broker's process, container or pod, as evidence.

    `running`: it exists and has not exited (a paused broker is running); `paused`: it is
    frozen (SIGSTOP, the cgroup freezer); `detail`: the backend's own word for it (the kernel's
    process state letter, the container's status, the pod's phase)."""

    broker_id: str
    running: bool
    paused: bool
    handle: str | None  # pid, container id, pod name
    detail: str
    exit_code: int | None = None

    def evidence(self) -> dict[str, Any]:
        return {"handle": self.handle, "running": self.running, "paused": self.paused,
                "process": self.detail,
                **({"exit_code": self.exit_code} if self.exit_code is not None else {})}


@dataclass(frozen=True, slots=True)
class LinkState:
    """Whether the overlay link a-b is cut, by which mechanism, and what each end shows.

    `mechanism`: "user-space" (both brokers drop the link's traffic), "interface" (the link's
    interfaces are down), "network" (a container left the link's network), "network-policy".
    `ends`: per broker, what the mechanism reads there (link state, interface operstate)."""

    a: str
    b: str
    cut: bool
    mechanism: str
    ends: dict[str, str]

    def evidence(self) -> dict[str, Any]:
        return {"cut": self.cut, "mechanism": self.mechanism, **self.ends}


class ProcessControl(ABC):
    """The process part of a backend: start, stop, crash, pause and resume a broker, and
    what its process, container or pod is now (subprocesses: backends/processes.py; Docker
    containers, Kubernetes pods: their backends' modules). Which broker exists is the
    backend's to check; a part acts on the broker it is named."""

    paused: set[str]  # paused by this part: continued before a stop, and when the run closes

    @abstractmethod
    def start(self, config: BrokerConfig, *, health_address: str) -> None: ...

    @abstractmethod
    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool,
                     address: str) -> None: ...

    @abstractmethod
    def alive(self, broker_id: str) -> bool: ...

    @abstractmethod
    def handle(self, broker_id: str) -> str | None: ...

    @abstractmethod
    def state(self, broker_id: str) -> BrokerState: ...

    @abstractmethod
    def pause(self, broker_id: str) -> BrokerState: ...

    @abstractmethod
    def resume(self, broker_id: str) -> BrokerState: ...

    @abstractmethod
    def stop(self, targets: list[str], timeout: float = 10.0) -> dict[str, int | None]:
        """Graceful stop of these brokers at once; their exit codes where known."""

    @abstractmethod
    def kill(self, broker_id: str) -> None: ...

    @abstractmethod
    def forget(self, broker_id: str) -> None:
        """The broker left the run: drop what this part keeps of it."""

    @abstractmethod
    def log_tail(self, broker_id: str, lines: int = 30) -> str: ...

    @abstractmethod
    def collect_logs(self, dest: Path, brokers: list[str]) -> list[Path]: ...


class LinkControl(ABC):
    """The network part of a backend: the overlay's links made, removed, cut, healed, shaped
    and read, by the backend's own mechanism (the brokers' link layer, backends/userlinks.py;
    veth pairs or Docker networks beside a peer network, backends/peernet.py; NetworkPolicies,
    backends/kubernetes.py), and where a broker is reached over a link."""

    @abstractmethod
    def add(self, a: str, b: str) -> None: ...

    @abstractmethod
    def remove(self, a: str, b: str) -> None: ...

    @abstractmethod
    def links(self) -> list[tuple[str, str]]: ...

    @abstractmethod
    def peer_address(self, broker_id: str, neighbor: str) -> str: ...

    @property
    @abstractmethod
    def reconfigurable(self) -> bool: ...

    @abstractmethod
    def book_address(self, broker_id: str) -> str: ...

    @abstractmethod
    def cut(self, a: str, b: str) -> None: ...

    @abstractmethod
    def heal(self, a: str, b: str) -> None: ...

    @abstractmethod
    def state(self, a: str, b: str) -> LinkState: ...

    @abstractmethod
    def shape(self, a: str, b: str, change: LinkShapeChange, *,
              both_ways: bool = True) -> None: ...


class Backend(ABC):
    """Start, stop, crash, restart, pause and resume brokers; cut, heal and shape links; add
    and remove brokers and links at run time; find brokers; collect traces and logs; clean up.

    Every backend keeps the run's configs (the brokers' ROM) and link set, so `restart_broker`
    and `add_broker` start a broker the way the run knows it now. A backend object is a context
    manager: leaving it (normally, by an exception, by Ctrl-C) calls `close()`, which stops and
    removes everything it created unless `detach()` handed the brokers on (`weeble up`)."""

    name: ClassVar[str]
    # can its runs link brokers at run time (reconfiguration, the optimizer)? if not, why not
    links_at_run_time: ClassVar[bool] = False
    links_at_run_time_why: ClassVar[str] = "it cannot link brokers at run time"
    assigns_addresses: ClassVar[bool] = True  # it places a broker added at run time itself
    workdir: Path  # run_dir/brokers: each broker's config (<id>.json) and log (<id>.log)
    access: AdminAccess

    # ---- making one, finding one again ------------------------------------------------------

    @classmethod
    @abstractmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> Backend:
        """A backend for a new run in `run_dir` (nothing created on the system yet)."""

    @classmethod
    @abstractmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any]) -> Backend:
        """The backend of a run another process started, from its state file (`brokers`: each
        broker's record, `state`: what `state()` returned). It is detached: closing it leaves
        the run as it is; `teardown` ends it (`weeble down`)."""

    @classmethod
    def clean_leftovers(cls, *, everything: bool = False) -> list[str]:
        """Remove what dead runs of this kind left on the system (hosts, interfaces,
        containers, networks) whose owner is gone and that no `weeble up` handed on; with
        `everything`, all of this kind's runs. Returns what it removed."""
        return []

    def state(self) -> dict[str, Any]:
        """What `reattach` needs besides the configs (host shells, containers, networks)."""
        return {}

    def preflight(self, configs: list[BrokerConfig]) -> None:
        """Raise BackendError if these brokers cannot start (an address taken), before any
        of them starts. Nothing to check where each broker gets a fresh network."""
        return

    def trace_path(self, run_trace_dir: Path, broker_id: str) -> Path:
        """Where the broker writes its trace: in the run directory, where the broker shares
        the file system with it (`collect_traces` brings it there otherwise)."""
        return run_trace_dir / f"{broker_id}.jsonl"

    def config_path(self, broker_id: str) -> Path:
        return self.workdir / f"{broker_id}.json"

    def log_path(self, broker_id: str) -> Path:
        return self.workdir / f"{broker_id}.log"

    # ---- the network --------------------------------------------------------------------------

    @abstractmethod
    def plan(self, brokers: list[str], edges: list[tuple[str, str]],
             ports: Ports) -> dict[str, Placement]:
        """Lay out the run's network (hosts, links, addresses) for these brokers and overlay
        links, before any broker starts; `peer_address` answers from then on."""

    # ---- brokers ----------------------------------------------------------------------------

    @abstractmethod
    def start_broker(self, config: BrokerConfig) -> None:
        """Start a broker from its config (returns at once; see `wait_healthy`)."""

    @abstractmethod
    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool = False) -> None:
        """Return once the broker's gRPC health says SERVING (with `links`: once every link
        of it is up). Raises BackendError, with what the broker said, if it died or the time
        ran out."""

    @abstractmethod
    def stop_broker(self, broker_id: str, timeout: float = 10.0) -> int | None:
        """Graceful stop (drain, flush the trace); returns the exit code if known."""

    def stop_all(self, timeout: float = 10.0) -> dict[str, int | None]:
        """Stop every broker; backends that can stop them in parallel override this."""
        return {b: self.stop_broker(b, timeout) for b in self.brokers()}

    @abstractmethod
    def kill_broker(self, broker_id: str) -> None:
        """Crash the broker: no drain, no goodbye, its RAM is lost."""

    @abstractmethod
    def restart_broker(self, broker_id: str, timeout: float = 30.0) -> None:
        """Start a fresh process of the broker (killing it first if it runs): same config,
        empty RAM. Returns once it serves. Link shapes and cuts this backend set stay."""

    @abstractmethod
    def pause_broker(self, broker_id: str) -> BrokerState:
        """Freeze the broker (it keeps its RAM and sockets but does nothing); returns its state
        after the freeze took hold."""

    @abstractmethod
    def resume_broker(self, broker_id: str) -> BrokerState:
        """Undo `pause_broker`; returns the state after it runs again."""

    @abstractmethod
    def broker_state(self, broker_id: str) -> BrokerState:
        """What the backend sees of the broker right now (evidence for chaos)."""

    def alive(self, broker_id: str) -> bool:
        return self.broker_state(broker_id).running

    def handle(self, broker_id: str) -> str | None:
        """What identifies the running broker on this backend (a pid, a container id)."""
        return self.broker_state(broker_id).handle

    @abstractmethod
    def brokers(self) -> list[str]:
        """Every broker this backend knows, running or not, in start order."""

    @abstractmethod
    def config(self, broker_id: str) -> BrokerConfig:
        """The broker's config as this backend starts it now (links added and removed)."""

    @abstractmethod
    def address(self, broker_id: str) -> BrokerAddress:
        """Where the orchestrator (admin, clients, health) reaches the broker."""

    @abstractmethod
    def peer_address(self, broker_id: str, neighbor: str) -> str:
        """Where `neighbor` reaches `broker_id` over their link (host:port)."""

    # ---- run-time membership ----------------------------------------------------------------

    @property
    def reconfigurable(self) -> bool:
        """Can any broker of this run reach any other (the address book a reconfiguration and
        the optimizer dial new links and out-of-band channels from)?"""
        return False

    def book_address(self, broker_id: str) -> str:
        """Where any other broker of the run reaches `broker_id` on a link made at run time
        (its entry in every address book, admin SetPeers)."""
        raise BackendError(f"the {self.name} backend cannot link brokers at run time"
                           " (no address book)")

    @abstractmethod
    def add_broker(self, config: BrokerConfig, *,
                   prepare: Callable[[BrokerConfig], BrokerConfig] | None = None
                   ) -> BrokerConfig:
        """Make room for a broker that was not in the plan (a host, a container), link it to
        its config's neighbours (`add_link`), and start it. The backend sets the addresses of
        its network in the config (listen, admin, metrics, neighbours); `prepare` then sees
        the config with them and may complete it (a certificate naming those addresses)
        before the broker starts. Returns the config it started, at once, like
        `start_broker`."""

    def check_remove(self, broker_id: str) -> None:
        """BackendError (saying why) if `remove_broker` could not take this broker away; a
        removal is asked before the broker leaves the tree, so a refusal leaves it in."""
        return

    @abstractmethod
    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        """Stop the broker and take away what `add_broker`/`start_broker` made for it; its
        links go with it."""

    @abstractmethod
    def add_link(self, a: str, b: str) -> None:
        """Connect a and b at the network level and record b as a's neighbour and a as b's
        (in the configs a restart uses). Telling running brokers about the new neighbour is the
        reconfiguration's job (admin API), not the backend's."""

    @abstractmethod
    def remove_link(self, a: str, b: str) -> None:
        """Undo `add_link`: the network path between a and b goes, and so do the neighbour
        entries in their configs."""

    @abstractmethod
    def links(self) -> list[tuple[str, str]]:
        """Every overlay link this backend has connected, each once (a < b)."""

    # ---- links ------------------------------------------------------------------------------

    @abstractmethod
    def cut_link(self, a: str, b: str) -> None:
        """Nothing passes between neighbours a and b, either way, until `heal_link`."""

    @abstractmethod
    def heal_link(self, a: str, b: str) -> None: ...

    @abstractmethod
    def link_state(self, a: str, b: str) -> LinkState:
        """Whether a-b is cut, as this backend's mechanism reads it (evidence for chaos)."""

    @abstractmethod
    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        """Set delay, jitter, loss, duplication or rate on a -> b (and b -> a)."""

    # ---- results ----------------------------------------------------------------------------

    @abstractmethod
    def collect_traces(self, dest: Path) -> list[Path]:
        """Bring every broker's trace file into `dest`; returns the files there."""

    @abstractmethod
    def collect_logs(self, dest: Path) -> list[Path]:
        """Bring every broker's log into `dest`; returns the files there."""

    @abstractmethod
    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        """The last lines of the broker's log (for error messages)."""

    # ---- the end ----------------------------------------------------------------------------

    @abstractmethod
    def detach(self) -> None:
        """Leave the brokers running when this backend closes (`weeble up`)."""

    @property
    @abstractmethod
    def detached(self) -> bool: ...

    @abstractmethod
    def teardown(self) -> None:
        """Stop every broker and remove everything the run made on the system (hosts, links,
        containers, networks), attached or not (idempotent)."""

    def close(self) -> None:
        """The last word of every run, also on an exception and on Ctrl-C: `teardown`, unless
        the backend is detached (then the run stays up for another process)."""
        if not self.detached:
            self.teardown()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# the kinds a scenario's `backend:` field admits (the scenario model is their one definition)
BACKEND_KINDS: tuple[str, ...] = get_args(Scenario.model_fields["backend"].annotation)


def backend_class(kind: str) -> type[Backend]:
    """The Backend class for a kind of `BACKEND_KINDS` (imported only when asked for: Mininet,
    Docker and Kubernetes need their own libraries)."""
    modules = {"local": ("weeble.orchestrator.local", "LocalBackend"),
               "mininet": ("weeble.orchestrator.backends.mininet", "MininetBackend"),
               "docker": ("weeble.orchestrator.backends.docker", "DockerBackend"),
               "k8s": ("weeble.orchestrator.backends.kubernetes", "KubernetesBackend")}
    if kind in modules:
        module, name = modules[kind]
        try:
            cls: type[Backend] = getattr(importlib.import_module(module), name)
        except ImportError as e:
            raise BackendError(f"backend {kind}: cannot load it: {e}") from None
        return cls
    raise BackendError(f"backend: unknown kind {kind!r} (one of {', '.join(BACKEND_KINDS)})")
