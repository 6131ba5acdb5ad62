"""The backend interface: where a live run's brokers are and how the orchestrator handles them.

One small interface for every place brokers can run (local processes today; network
namespaces, Docker and Kubernetes later), so the testbed and the chaos module drive them all
the same way. It is deliberately synchronous: each call is a short control action (start a
process, flip a link), and an asyncio caller runs one with `asyncio.to_thread`.

Broker state lives in the broker: `restart_broker` starts a fresh process with empty RAM (the
same ROM, from the same config), which is what a crash-and-recover looks like to the others.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

from weeble.broker.runtime.admin_client import AdminClient
from weeble.broker.runtime.config import BrokerConfig


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
    material when admin speaks TLS (CA to verify the brokers, client certificate to present)."""

    token: str
    ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def client(self, address: str, timeout: float = 10.0) -> AdminClient:
        """An async AdminClient for one broker's management address."""
        return AdminClient(address, self.token, ca=self.ca, client_cert=self.client_cert,
                           client_key=self.client_key, timeout=timeout)


class Backend(ABC):
    """Start, stop, crash and restart brokers; cut, heal and shape links; find and collect."""

    name: ClassVar[str]

    # ---- brokers ----------------------------------------------------------------------------

    @abstractmethod
    def start_broker(self, config: BrokerConfig) -> None:
        """Start a broker from its config (returns at once; see `wait_healthy`)."""

    @abstractmethod
    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool = False) -> None:
        """Return once the broker serves (with `links`: once every link of it is up).

        Raises BackendError, with what the broker said, if it died or the time ran out."""

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
    def restart_broker(self, broker_id: str) -> None:
        """Start a fresh process of a stopped or killed broker (same config, empty RAM)."""

    @abstractmethod
    def alive(self, broker_id: str) -> bool: ...

    @abstractmethod
    def handle(self, broker_id: str) -> str | None:
        """What identifies the running broker on this backend (a pid, a container id)."""

    @abstractmethod
    def brokers(self) -> list[str]:
        """Every broker this backend knows, running or not, in start order."""

    @abstractmethod
    def address(self, broker_id: str) -> BrokerAddress: ...

    # ---- links ------------------------------------------------------------------------------

    @abstractmethod
    def cut_link(self, a: str, b: str) -> None:
        """Nothing passes between neighbours a and b, either way, until `heal_link`."""

    @abstractmethod
    def heal_link(self, a: str, b: str) -> None: ...

    @abstractmethod
    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        """Set delay, jitter, loss, duplication or rate on a -> b (and b -> a)."""

    # ---- results ----------------------------------------------------------------------------

    @abstractmethod
    def collect_traces(self, dest: Path) -> list[Path]:
        """Bring every broker's trace file into `dest`; returns the files there."""

    @abstractmethod
    def close(self) -> None:
        """Stop whatever is still running (idempotent): the last word of every run."""
