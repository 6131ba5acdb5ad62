"""DockerBackend: every broker a container of the offline-built broker image, every overlay
link a Docker network of its own, driven through the official Docker SDK.

The network of a run with tag T (4 hex digits), all from 198.19.0.0/16 (the Mininet
backend's twin half of the benchmarking block, RFC 2544), one /20 per run:

    weeble-T-mgmt   internal bridge, inter-container traffic off (enable_icc=false): the
                    orchestrator (on the host, through the bridge's gateway address) reaches
                    every broker, no broker reaches another over it; the broker binds its
                    admin and metrics here only
    weeble-T-a-b    internal bridge per overlay link (a /29): only a and b are on it
    weeble-T-peers  a run that reconfigures: internal bridge with inter-container traffic on,
                    every broker on it (the last /24): the address book's addresses, for the
                    links and channels a reconfiguration makes at run time (peernet.py)

Internal networks give a container no default route, so two brokers talk only over their
link's network: a cut disconnects both containers from it (the interface leaves their
namespaces, the kernel drops what they send there), a heal connects them again with the same
addresses. Rate limits are a tbf qdisc on the container's link interface, set from the host in
the container's namespace (nsenter); delay, jitter, loss, duplication and corruption stay in
the brokers' user-space link shaper (admin SetLink), as everywhere (no netem in this kernel).

The run directory is bind-mounted at the same path, so configs, traces and TLS material keep
their host paths: the traces are collected by being written there. A pause is `docker pause`
(the cgroup freezer), a crash `docker kill` (SIGKILL), a restart `docker start` of the same
container (a fresh process, empty RAM, same networks and addresses).

Containers and networks carry the label weeble.run=T; a registry entry names the run's owner
(weeble/orchestrator/backends/registry.py), so a dead owner's leftovers are found and removed
(`weeble clean`, and the next Docker run).

The end of a run goes one step at a time: the containers stop one after the other, then they
are removed, and the networks go only once the engine lists none of them. Docker 20.10 before
20.10.27 (Debian 12's docker.io is 20.10.24) takes its network controller's and a network's
locks in opposite orders when one container leaves a network (the endpoint's sbLeave) while
the endpoint of another on the same network is deleted (the controller's watch loop): the two
deadlock, and from then on every network call (`docker network ls`, `docker info`) and the
containers caught in their exit (listed "Up", their shims gone) hang until dockerd restarts
(moby/moby#42545, moby/libnetwork#2649). Every broker of a run shares its management and peer
networks, so stopping them all at once (as this backend did, 16 at a time) is what hit it, twice
in CI. A call of the teardown the engine does not answer within `STEP_TIMEOUT` is an
`EngineHang` naming the step and saying what still answers, not a 120 s ReadTimeout, and
`docker_client` refuses an engine whose network controller hangs, at once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from weeble.orchestrator.backend import (
    AdminAccess,
    BackendError,
    BrokerAddress,
    BrokerState,
    LinkShapeChange,
    LinkState,
    Placement,
    Ports,
    ProcessControl,
)
from weeble.orchestrator.backends import registry
from weeble.orchestrator.backends.admin import wait_serving
from weeble.orchestrator.backends.assembly import Assembly, _open_backends
from weeble.orchestrator.backends.image import PYTHON, ensure_image
from weeble.orchestrator.backends.peernet import PeerNetwork
from weeble.runtime.config import BrokerConfig

KIND = "docker"
LABEL = "weeble.run"
WORKDIR = "weeble.workdir"  # the run's broker directory: whose run this is
POOL = ipaddress.IPv4Network("198.19.0.0/16")
BLOCK_PREFIX = 20  # per run: a /24 for management, 480 /29 links
DEFAULT_LISTEN, DEFAULT_ADMIN, DEFAULT_METRICS = 7000, 7001, 9100
ALIVE = ("running", "paused", "restarting")  # a container's State.Status while its broker runs
ENGINE_TIMEOUT = 120  # s: an engine call while a run goes on (a loaded machine's engine is slow)
STEP_TIMEOUT = 30  # s: an engine call of the teardown, or a probe (a stop: plus its grace)
PROBE_AFTER_HANG = 10  # s: `docker_client`'s look at an engine this process saw hang
SETTLE = 0.1  # s: after a call that took a container off its networks (the engine's watch loop
#               deletes the endpoints after the call returned; see the module's docstring)
HANG_ISSUE = "moby/moby#42545"

T = TypeVar("T")


class EngineHang(BackendError):
    """The Docker engine did not answer a call within its timeout: the message names the step
    and what the engine still answers (restart dockerd: scripts/setup.sh starts it)."""


def _timed_out(e: BaseException) -> bool:
    """Is `e` the docker SDK's socket giving up on an answer (not an answer of the engine)?"""
    try:
        import requests
    except ImportError:  # pragma: no cover - the docker SDK depends on it
        return False
    if isinstance(e, requests.exceptions.Timeout):
        return True
    return isinstance(e, requests.exceptions.ConnectionError) and "timed out" in str(e)


def _controller_hang(timeout: float) -> str:
    return (f"the engine answers /_ping but `docker network ls` gives no answer in {timeout:g}"
            " s: its network controller is deadlocked (Docker 20.10 before 20.10.27,"
            f" {HANG_ISSUE}); restart dockerd (`kill $(pidof dockerd)`, then `nohup dockerd"
            " >/var/log/weeble-dockerd.log 2>&1 &`, as scripts/setup.sh does)")


def engine_diagnosis(timeout: float = 10.0) -> tuple[bool, str]:
    """Whether the engine hangs, and what it still answers, asked afresh with `timeout` (after a
    call it did not answer)."""
    try:
        import docker

        probe = docker.from_env(timeout=timeout)
    except Exception as e:
        return True, f"no Docker client ({e})"
    try:
        try:
            probe.ping()
        except Exception as e:
            return True, (f"the engine does not answer /_ping either ({type(e).__name__}):"
                          " dockerd hangs or is gone; restart it")
        try:
            probe.networks.list(filters={"label": f"{LABEL}=-"})
        except Exception as e:
            if _timed_out(e):
                return True, _controller_hang(timeout)
            return False, f"`docker network ls` fails: {e}"
        return False, "the engine answers /_ping and `docker network ls` again (it was slow)"
    finally:
        with contextlib.suppress(Exception):
            probe.close()


_hung: str | None = None  # the last hang of this process, until `docker_client` finds it over


def _step(what: str, call: Callable[[], T]) -> T:
    """`call`, an engine call: its timeout an `EngineHang` that names `what` and says what the
    engine still answers. After a hang, no call waits again: each is an `EngineHang` at once
    (a teardown at exit, the next steps), until `docker_client` finds the engine answering."""
    global _hung
    if _hung is not None:
        raise EngineHang(f"docker: {what}: not tried, the engine hung before: {_hung}")
    try:
        return call()
    except Exception as e:
        if not _timed_out(e):
            raise
        hung, diagnosis = engine_diagnosis()
        message = f"docker: {what}: the engine gave no answer ({type(e).__name__}); {diagnosis}"
        if hung:
            _hung = message
        raise EngineHang(message) from None


def docker_client(timeout: float = ENGINE_TIMEOUT) -> Any:
    """A client of the engine, whose calls give up after `timeout`; refused if the engine does
    not answer, or answers but its network controller hangs (a deadlocked engine: every network
    call would wait out its timeout, run after run)."""
    global _hung
    try:
        import docker
    except ImportError as e:
        raise BackendError(f"docker backend: the docker SDK is missing ({e})") from None
    probe = STEP_TIMEOUT if _hung is None else PROBE_AFTER_HANG
    try:
        client = docker.from_env(timeout=probe)
        client.ping()
    except Exception as e:
        raise BackendError(f"docker backend: no Docker engine answers ({e}); start dockerd"
                           " (scripts/setup.sh starts it as root)") from None
    try:
        client.networks.list(filters={"label": f"{LABEL}=-"})  # the controller's lock
    except Exception as e:
        if _timed_out(e):
            _hung = _controller_hang(probe)
            raise EngineHang(f"docker backend: {_hung}") from None
        raise BackendError(f"docker backend: `docker network ls` fails: {e}") from None
    _hung = None
    client.api.timeout = timeout
    return client


def _remove_run(client: Any, tag: str, wait: float = STEP_TIMEOUT) -> list[str]:
    """Remove every container and network labelled with run `tag`: the containers one after the
    other, then, once the engine lists none of them, the networks (see the module's docstring).
    A container still listed `wait` s after its removal is a BackendError that leaves the
    networks and the registry entry to the next `weeble clean`."""
    label = {"label": f"{LABEL}={tag}"}
    removed = []
    for c in _step(f"run {tag}: listing its containers",
                   lambda: client.containers.list(all=True, filters=label)):
        running = c.status in ALIVE
        try:
            _step(f"run {tag}: removing container {c.name}", lambda c=c: c.remove(force=True))
            removed.append(f"container {c.name}")
        except EngineHang:
            raise
        except Exception:  # gone meanwhile, or refused: the wait below tells
            pass
        if running:  # removed running: stopped first, off its networks
            time.sleep(SETTLE)
    deadline = time.monotonic() + wait
    while left := _step(f"run {tag}: listing its containers after their removal",
                        lambda: client.containers.list(all=True, filters=label)):
        if time.monotonic() > deadline:
            raise BackendError(
                f"docker: run {tag}: container(s) {', '.join(c.name for c in left)} still"
                f" there {wait:g} s after their removal; the run's networks stay (`weeble"
                " clean` removes them)")
        time.sleep(0.2)
    # tried again for a while only just after its containers went: a network no container of
    # the run was on (a leftover) that refuses is the engine's leaked endpoint count, which the
    # parallel stops left behind and only a restart of dockerd clears; one try per run for it
    retry = 10.0 if removed else 0.0
    for n in _step(f"run {tag}: listing its networks",
                   lambda: client.networks.list(filters=label)):
        if _remove_network(n, timeout=retry):
            removed.append(f"network {n.name}")
    registry.forget(KIND, tag)
    return removed


def _remove_network(network: Any, timeout: float = 10.0) -> bool:
    """Remove `network`, again while the engine still counts an endpoint of a container just
    removed ("has active endpoints": a CI run left a run's management network behind once);
    gone already counts as removed. False if it is still there after `timeout` (the next
    `weeble clean` finds it by its label); an `EngineHang` if the engine does not answer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _step(f"removing network {network.name}", network.remove)
            return True
        except EngineHang:
            raise
        except Exception as e:
            if getattr(e, "status_code", None) == 404:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


def clean_leftovers(*, everything: bool = False) -> list[str]:
    """Remove the containers and networks of Docker runs whose owner is gone (and that no
    `weeble up` handed on); with `everything`, of every weeble Docker run."""
    client = docker_client(STEP_TIMEOUT)
    entries = registry.entries(KIND)
    tags = set(entries)
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        tags.add(c.labels.get(LABEL, ""))
    for n in client.networks.list(filters={"label": LABEL}):
        tags.add(n.attrs.get("Labels", {}).get(LABEL, ""))
    removed = []
    for tag in sorted(tags - {""}):
        entry = entries.get(tag)
        if not everything and entry is not None and registry.claimed(entry):
            continue
        try:
            removed += _remove_run(client, tag)
        except EngineHang:
            raise
        except BackendError:  # a container that does not go: the next clean tries again
            continue
    return removed


@dataclass
class _Link:
    a: str
    b: str
    ip: dict[str, str]  # broker -> its address on this link
    network: Any  # docker Network


class DockerBackend(Assembly):
    """Brokers in containers: an assembly (assembly.py) of placement on the run's Docker
    networks, `DockerContainers` (processes), admin access and a `PeerNetwork` of
    `DockerWires` (the network)."""

    name = "docker"
    assigns_addresses = True

    def __init__(self, workdir: Path | str, access: AdminAccess, *, image: str | None = None,
                 tag: str = "", log_level: str = "INFO") -> None:
        super().__init__(workdir, access, log_level=log_level)
        self.peers = PeerNetwork(self, DockerWires(self))  # its network part
        self.network = self.peers
        self.processes: DockerContainers = DockerContainers(self.workdir, lambda: self.access)
        self.run_dir = self.workdir.parent
        self.image = image
        self.tag = tag
        self._client: Any = None
        self._mgmt_ip: dict[str, str] = {}
        self._mgmt: Any = None  # docker Network
        self._mgmt_hosts: Iterator[ipaddress.IPv4Address] = iter(())
        self._subnets: Iterator[ipaddress.IPv4Network] = iter(())
        self._ports: tuple[int, int, int | None] = (DEFAULT_LISTEN, DEFAULT_ADMIN, None)
        self._net_lock = threading.RLock()
        self._peer_net: Any = None  # docker Network: the peer network, if the run has one
        self._peer_hosts: Iterator[ipaddress.IPv4Address] = iter(())

    @classmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> DockerBackend:
        image = ensure_image()
        clean_leftovers()  # a dead run's containers must not hold our names or addresses
        return cls(Path(run_dir) / "brokers", access, image=image, log_level=log_level)

    @classmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any]) -> DockerBackend:
        backend = cls(Path(run_dir) / "brokers", access, tag=state.get("tag", ""))
        backend._detached = True
        _open_backends.discard(backend)
        backend._client = docker_client()
        backend._ports = tuple(state.get("ports", backend._ports))  # type: ignore[assignment]
        backend.peers.load(state)
        backend.image = state.get("image")
        with contextlib.suppress(Exception):  # a leaf added from here needs them
            backend._mgmt = backend._client.networks.get(f"weeble-{backend.tag}-mgmt")
        for b, config in configs.items():
            backend._configs[b] = config
            with contextlib.suppress(Exception):
                backend.processes.containers[b] = backend._client.containers.get(
                    brokers.get(b, {}).get("handle") or f"weeble-{backend.tag}-{b}")
            reach = state.get("reach", {}).get(b)
            if reach:
                backend._reach[b] = BrokerAddress(b, *reach)
                backend._mgmt_ip[b] = reach[1].rsplit(":", 1)[0]
        for name, ips in state.get("links", {}).items():
            a, b = sorted(ips)
            with contextlib.suppress(Exception):
                backend.peers.wired[frozenset((a, b))] = _Link(
                    a, b, ips, backend._client.networks.get(f"weeble-{backend.tag}-{name}"))
        return backend

    @classmethod
    def clean_leftovers(cls, *, everything: bool = False) -> list[str]:
        return clean_leftovers(everything=everything)

    def state(self) -> dict[str, Any]:
        return {"tag": self.tag, "image": self.image, "ports": list(self._ports),
                "reach": {b: [r.listen, r.admin, r.metrics] for b, r in self._reach.items()},
                "links": {f"{e.a}-{e.b}": e.ip for e in self.peers.wired.values()},
                **self.peers.state_record()}

    # ---- the network --------------------------------------------------------------------------

    def plan(self, brokers: list[str], edges: list[tuple[str, str]],
             ports: Ports) -> dict[str, Placement]:
        import docker

        self._client = self._client or docker_client()
        if self.image is None:
            self.image = ensure_image()
        self._ports = (ports.listen or DEFAULT_LISTEN, ports.admin or DEFAULT_ADMIN,
                       (ports.metrics or DEFAULT_METRICS) if ports.metrics_enabled else None)
        with registry.machine_lock(KIND):
            used = set(registry.entries(KIND)) | {
                n.attrs.get("Labels", {}).get(LABEL) for n in self._client.networks.list()}
            self.tag = next(t for t in iter(lambda: secrets.token_hex(2), None)
                            if t not in used)
            block = self._free_block()
            mgmt, *rest, peers = block.subnets(new_prefix=24)
            self._mgmt_hosts = iter(list(mgmt.hosts())[1:])  # .1 is the host's gateway
            self._subnets = (s for r in rest for s in r.subnets(new_prefix=29))
            registry.register(KIND, self.tag, self.workdir)
            try:
                self._mgmt = self._client.networks.create(
                    f"weeble-{self.tag}-mgmt", driver="bridge", internal=True,
                    labels={LABEL: self.tag, WORKDIR: str(self.workdir)},
                    options={"com.docker.network.bridge.enable_icc": "false"},
                    ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                        subnet=str(mgmt), gateway=str(mgmt.network_address + 1))]))
            except Exception as e:
                raise BackendError(f"docker: management network: {e}") from None
            if ports.peer_network:
                self.peers.peer_network = True
                self._peer_hosts = iter(list(peers.hosts())[1:])
                try:
                    self._peer_net = self._client.networks.create(
                        f"weeble-{self.tag}-peers", driver="bridge", internal=True,
                        labels={LABEL: self.tag, WORKDIR: str(self.workdir)},
                        ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                            subnet=str(peers), gateway=str(peers.network_address + 1))]))
                except Exception as e:
                    raise BackendError(f"docker: the peer network: {e}") from None
        with self._net_lock:
            for b in brokers:
                self._create_container(b)
            for a, b in edges:
                self._connect(a, b)
        return {b: self.peers.placement(b, self._mgmt_ip[b]) for b in brokers}

    def _free_block(self) -> ipaddress.IPv4Network:
        taken = set()
        for n in self._client.networks.list():
            for pool in (n.attrs.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(KeyError, ValueError):
                    net = ipaddress.IPv4Network(pool["Subnet"])
                    if net.subnet_of(POOL):
                        taken.add(net.supernet(new_prefix=BLOCK_PREFIX))
        for block in POOL.subnets(new_prefix=BLOCK_PREFIX):
            if block not in taken:
                return block
        raise BackendError(f"docker: every /{BLOCK_PREFIX} of {POOL} is in use")

    def _create_container(self, broker_id: str) -> None:
        api = self._client.api
        try:
            ip = str(next(self._mgmt_hosts))
        except StopIteration:  # used up, or attached to a run another process planned
            ip = self._free_on(self._mgmt, set(self._mgmt_ip.values()), "management")
        config_path = self.config_path(broker_id)
        command = [PYTHON, "-m", "weeble.runtime", "--config", str(config_path),
                   "--log-level", self.log_level]
        try:
            created = api.create_container(
                self.image, command=command, name=f"weeble-{self.tag}-{broker_id}",
                labels={LABEL: self.tag, WORKDIR: str(self.workdir), "weeble.broker": broker_id},
                environment={"PYTHONUNBUFFERED": "1"},
                host_config=api.create_host_config(
                    binds={str(self.run_dir): {"bind": str(self.run_dir), "mode": "rw"}},
                    init=True),  # tini as pid 1: SIGTERM reaches the broker, zombies reaped
                networking_config=api.create_networking_config({
                    self._mgmt.name: api.create_endpoint_config(ipv4_address=ip)}))
        except Exception as e:
            raise BackendError(f"docker: container for broker {broker_id}: {e}") from None
        self.processes.containers[broker_id] = self._client.containers.get(created["Id"])
        self._mgmt_ip[broker_id] = ip
        if self.peers.peer_network:
            self._join_peers(broker_id)

    def _join_peers(self, broker_id: str) -> None:
        if self._peer_net is None:  # attached to a run another process planned
            self._peer_net = self._client.networks.get(f"weeble-{self.tag}-peers")
        try:
            ip = str(next(self._peer_hosts))
        except StopIteration:  # used up, or attached to a run another process planned
            ip = self._free_on(self._peer_net, set(self.peers.peer_ip.values()), "peer")
        try:
            self._peer_net.connect(self.processes.containers[broker_id], ipv4_address=ip)
        except Exception as e:
            raise BackendError(f"docker: broker {broker_id} on the peer network: {e}") from None
        self.peers.peer_ip[broker_id] = ip

    def _free_on(self, network: Any, used: set[str], what: str) -> str:
        """An address of `network` no broker of this run has (.1 is the gateway)."""
        if network is None:
            raise BackendError(f"docker: this run has no {what} network here")
        net = ipaddress.IPv4Network(network.attrs["IPAM"]["Config"][0]["Subnet"])
        for host in list(net.hosts())[1:]:
            if str(host) not in used:
                return str(host)
        raise BackendError(f"docker: this run's {what} network is full")

    def _connect(self, a: str, b: str) -> _Link:
        import docker

        key = frozenset((a, b))
        if key in self.peers.wired:
            raise BackendError(f"link {a}-{b} exists already")
        try:
            subnet = next(self._subnets)
        except StopIteration:
            raise BackendError("docker: this run's address block is used up") from None
        lo, hi = sorted((a, b))
        gateway, ip_lo, ip_hi = (str(h) for h in list(subnet.hosts())[:3])
        try:
            network = self._client.networks.create(
                f"weeble-{self.tag}-{lo}-{hi}", driver="bridge", internal=True,
                labels={LABEL: self.tag, WORKDIR: str(self.workdir)},
                ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                    subnet=str(subnet), gateway=gateway)]))
        except Exception as e:
            raise BackendError(f"docker: network of link {a}-{b}: {e}") from None
        entry = _Link(lo, hi, {lo: ip_lo, hi: ip_hi}, network)
        self.peers.wired[key] = entry
        for broker in (lo, hi):
            self._attach(entry, broker)
            self.processes.no_default_route(broker)
        return entry

    def _attach(self, entry: _Link, broker: str) -> None:
        try:
            entry.network.connect(self.container(broker), ipv4_address=entry.ip[broker])
        except Exception as e:
            raise BackendError(f"docker: connecting {broker} to link {entry.a}-{entry.b}:"
                               f" {e}") from None

    def _detach_end(self, entry: _Link, broker: str) -> None:
        import docker

        with contextlib.suppress(docker.errors.APIError):  # not connected: nothing to do
            entry.network.disconnect(self.processes.containers[broker], force=True)
        self.processes.no_default_route(broker)

    def container(self, broker_id: str) -> Any:
        return self.processes.container(broker_id)

    # ---- brokers ----------------------------------------------------------------------------

    def _place(self, config: BrokerConfig) -> BrokerConfig:
        with self._net_lock:
            self._create_container(config.broker_id)
            p = self.peers.placement(config.broker_id, self._mgmt_ip[config.broker_id])
        return config.model_copy(update={"listen_address": p.listen, "admin_address": p.admin,
                                         "metrics_address": p.metrics})

    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        self.peers.remove_wires_of(broker_id)
        super().remove_broker(broker_id, timeout)
        container = self.processes.containers.pop(broker_id, None)
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        self._mgmt_ip.pop(broker_id, None)
        self.peers.forget(broker_id)

    # ---- links ------------------------------------------------------------------------------

    def _heal(self, a: str, b: str) -> None:
        entry = self.peers.link(a, b)
        with self._net_lock:
            for broker in (a, b):
                if not self._connected(entry, broker):
                    self._attach(entry, broker)
                self.processes.no_default_route(broker)

    def _connected(self, entry: _Link, broker: str) -> bool:
        container = self.container(broker)
        container.reload()
        networks = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
        return entry.network.name in networks

    def _interface(self, broker_id: str, ip: str) -> str:
        shown = self.processes.nsenter(broker_id, "ip", "-o", "-4", "addr", "show")
        for line in shown.splitlines():
            parts = line.split()
            if parts[3].split("/")[0] == ip:
                return parts[1].split("@")[0]
        raise BackendError(f"broker {broker_id}: no interface with {ip} (is the link cut?)")

    def rate(self, a: str, b: str) -> str:
        """The kernel's qdisc on a's link interface toward b (evidence of a rate limit)."""
        entry = self.peers.link(a, b)
        self.container(a).reload()
        return self.processes.nsenter(a, "tc", "qdisc", "show", "dev",
                                      self._interface(a, entry.ip[a]))

    # ---- results and the end ----------------------------------------------------------------

    def detach(self) -> None:
        super().detach()
        if self.tag:
            registry.register(KIND, self.tag, self.workdir, detached=True)

    def teardown(self) -> None:
        """Stop the containers one after the other, keep their logs, remove them, and their
        networks once they are gone (`_remove_run`), each call bounded by `STEP_TIMEOUT`: an
        engine that hangs is an `EngineHang` naming the step (the run's registry entry stays for
        `weeble clean`)."""
        if self._client is None:
            return
        running = [b for b in self.processes.containers if self.processes.running(b)]
        if running:
            self.stop_all(only=running)
        self.collect_logs(self.workdir)  # the containers and their logs go next
        self.admin.drop()
        if self.tag:
            _remove_run(self.processes.engine(), self.tag)
        self.processes.containers.clear()
        self.peers.wired.clear()


class DockerContainers(ProcessControl):
    """The process part of the Docker backend: a broker is a container (made by the backend's
    placement, `DockerBackend._create_container`); a start is `docker start` of it, a pause
    the cgroup freezer, a crash `docker kill`, a stop `docker stop`; its state and its log are
    the engine's. Commands of the host run in a container's network namespace (`nsenter`)."""

    def __init__(self, workdir: Path, access: Callable[[], AdminAccess]) -> None:
        self.workdir = workdir
        self.access = access
        self.containers: dict[str, Any] = {}  # broker -> docker Container
        self.paused: set[str] = set()
        self._engine: Any = None  # a client whose calls give up after STEP_TIMEOUT

    def engine(self) -> Any:
        """The client of the stops and the teardown: its calls give up after `STEP_TIMEOUT`
        (a stop after its grace on top), where the run's own client waits `ENGINE_TIMEOUT`."""
        if self._engine is None:
            self._engine = docker_client(STEP_TIMEOUT)
        return self._engine

    def container(self, broker_id: str) -> Any:
        try:
            return self.containers[broker_id]
        except KeyError:
            raise BackendError(f"broker {broker_id}: no container in this run") from None

    def start(self, config: BrokerConfig, *, health_address: str) -> None:
        broker_id = config.broker_id
        container = self.container(broker_id)
        if self.status(broker_id)[0] in ("running", "paused", "restarting"):
            raise BackendError(f"broker {broker_id} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config.dump(self.workdir / f"{broker_id}.json")
        try:
            container.start()
        except Exception as e:
            raise BackendError(f"docker: starting broker {broker_id}: {e}") from None
        container.reload()
        self.no_default_route(broker_id)

    def no_default_route(self, broker_id: str) -> None:
        """Docker gives a container a default route through one of its networks' gateways
        (the host), and moves it when a network leaves: delete it, so that the only way from
        one broker to another is their link's network (the host could otherwise forward)."""
        if self.status(broker_id)[0] != "running":
            return  # a stopped container has no namespace; its start deletes the route
        with contextlib.suppress(BackendError):  # none: nothing to delete
            self.nsenter(broker_id, "ip", "route", "del", "default")

    def nsenter(self, broker_id: str, *cmd: str) -> str:
        """Run a command of the host in the container's network namespace (tc and ip: the
        image has neither, and needs no capability for them)."""
        container = self.container(broker_id)
        container.reload()
        pid = container.attrs.get("State", {}).get("Pid")
        if not pid:
            raise BackendError(f"broker {broker_id}: its container is not running")
        result = subprocess.run(["nsenter", "-t", str(pid), "-n", *cmd], capture_output=True,
                                text=True, check=False)
        if result.returncode != 0:
            raise BackendError(f"broker {broker_id}: {' '.join(cmd)}: {result.stderr.strip()}")
        return result.stdout

    def status(self, broker_id: str) -> tuple[str, int | None]:
        import docker

        container = self.containers.get(broker_id)
        if container is None:
            return "absent", None
        try:
            _step(f"inspecting container {container.name}", container.reload)
        except docker.errors.NotFound:
            return "absent", None
        return container.status, container.attrs.get("State", {}).get("ExitCode")

    def state(self, broker_id: str) -> BrokerState:
        status, code = self.status(broker_id)
        running = status in ("running", "paused", "restarting")
        container = self.containers.get(broker_id)
        return BrokerState(broker_id, running=running, paused=status == "paused",
                           handle=None if container is None else container.short_id,
                           detail=status, exit_code=None if running else code)

    def alive(self, broker_id: str) -> bool:
        return self.state(broker_id).running

    def handle(self, broker_id: str) -> str | None:
        container = self.containers.get(broker_id)
        return None if container is None else container.short_id

    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool,
                     address: str) -> None:
        try:
            wait_serving(address, timeout, links=links, name=broker_id, access=self.access(),
                         alive=lambda: self.alive(broker_id))
        except BackendError as e:
            raise BackendError(f"{e}:\n{self.log_tail(broker_id)}") from None

    def pause(self, broker_id: str) -> BrokerState:
        if not self.alive(broker_id):
            raise BackendError(f"broker {broker_id} is not running")
        self.container(broker_id).pause()
        self.paused.add(broker_id)
        return self.state(broker_id)

    def resume(self, broker_id: str) -> BrokerState:
        if self.state(broker_id).paused:
            self.container(broker_id).unpause()
        self.paused.discard(broker_id)
        return self.state(broker_id)

    def kill(self, broker_id: str) -> None:
        if self.state(broker_id).paused:
            self.resume(broker_id)
        with contextlib.suppress(Exception):  # it may have died on its own meanwhile
            self.container(broker_id).kill()
        deadline = time.monotonic() + 10
        while self.alive(broker_id) and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self, targets: list[str], timeout: float = 10.0) -> dict[str, int | None]:
        """`docker stop` (SIGTERM, SIGKILL at the deadline) of one container after the other,
        never two at once: two containers of a network leaving it together can deadlock the
        engine (the module's docstring). A broker stops in well under a second when its queues
        are empty, so a run's brokers stop in seconds. A stop the engine does not answer is an
        `EngineHang` naming the container."""
        return {b: self._stop(b, timeout) for b in targets}

    def _stop(self, broker_id: str, timeout: float) -> int | None:
        container = self.containers.get(broker_id)
        if container is None:
            return None
        api = self.engine().api
        state = self._engine_state(broker_id)
        if state is not None and state.get("Paused"):
            _step(f"unpausing container {container.name}", lambda: api.unpause(container.id))
        self.paused.discard(broker_id)
        if state is not None and state.get("Status") in ALIVE:
            grace = int(timeout + 0.999)
            try:
                _step(f"stopping container {container.name} (grace {grace} s)",
                      lambda: api.stop(container.id, timeout=grace))
            except EngineHang:
                raise
            except Exception:  # it ended on its own meanwhile
                pass
            time.sleep(SETTLE)
            state = self._engine_state(broker_id)
        return None if state is None else state.get("ExitCode")

    def _engine_state(self, broker_id: str) -> dict[str, Any] | None:
        """The container's State as the engine says, asked with `STEP_TIMEOUT`; None if gone."""
        import docker

        container = self.container(broker_id)
        try:
            attrs = _step(f"inspecting container {container.name}",
                          lambda: self.engine().api.inspect_container(container.id))
        except docker.errors.NotFound:
            return None
        return dict(attrs.get("State") or {})

    def running(self, broker_id: str) -> bool:
        """Whether the container runs (paused counts), asked with `STEP_TIMEOUT` (teardown)."""
        state = self._engine_state(broker_id)
        return state is not None and state.get("Status") in ALIVE

    def forget(self, broker_id: str) -> None:
        self.paused.discard(broker_id)  # its container is the backend's to remove

    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        container = self.containers.get(broker_id)
        if container is None:
            return "(no container)"
        try:
            return str(container.logs(tail=lines).decode(errors="replace"))
        except Exception as e:
            return f"(no log: {e})"

    def collect_logs(self, dest: Path, brokers: list[str]) -> list[Path]:
        """Every container's log (`brokers` aside: a container outlives its config); an engine
        that does not answer is an `EngineHang`, not a silent wait per container."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for b, container in self.containers.items():
            try:
                log = _step(f"the log of container {container.name}",
                            lambda c=container: self.engine().api.logs(c.id))
            except EngineHang:
                raise
            except Exception:  # gone
                continue
            target = dest / f"{b}.log"
            target.write_bytes(log)
            out.append(target)
        return out


class DockerWires:
    """The network part of the Docker backend (`peernet.Wires`): a Docker network per link, a
    cut by disconnecting both containers from it, a rate as a tbf qdisc in the container's
    namespace."""

    def __init__(self, backend: DockerBackend) -> None:
        self.backend = backend

    def link(self, a: str, b: str) -> None:
        bk = self.backend
        with bk._net_lock:
            bk._connect(a, b)

    def unlink(self, a: str, b: str) -> None:
        bk = self.backend
        entry = bk.peers.link(a, b)
        with bk._net_lock:
            bk._detach_end(entry, a)
            bk._detach_end(entry, b)
            time.sleep(SETTLE)  # the engine deletes the endpoints after the disconnects return
            _remove_network(entry.network)  # not removed: `weeble clean` finds it (its label)
            del bk.peers.wired[frozenset((a, b))]

    def links(self, everything: bool = False) -> list[tuple[str, str]]:
        bk = self.backend
        return sorted((e.a, e.b) for e in bk.peers.wired.values())

    def cut(self, a: str, b: str, status: str) -> None:
        bk = self.backend
        if status == "up":
            bk._heal(a, b)
            return
        entry = bk.peers.link(a, b)
        with bk._net_lock:
            for broker in (a, b):
                bk._detach_end(entry, broker)
                bk.processes.no_default_route(broker)

    def state(self, a: str, b: str) -> LinkState:
        """Whether each container is on the link's network, as the engine says."""
        bk = self.backend
        entry = bk.peers.link(a, b)
        ends = {x: (f"on {entry.network.name} ({entry.ip[x]})" if bk._connected(entry, x)
                    else f"off {entry.network.name}") for x in (a, b)}
        cut = all(v.startswith("off ") for v in ends.values())
        return LinkState(a, b, cut=cut, mechanism="network", ends=ends)

    def shape(self, a: str, b: str, change: LinkShapeChange, both_ways: bool) -> None:
        """Rate as a tbf qdisc on the sending container's link interface; the rest in the
        brokers' link shaper (admin)."""
        bk = self.backend
        fields = change.fields()
        rate = fields.pop("rate_bps", None)
        if rate is not None:
            entry = bk.peers.link(a, b)
            for x in (a, b) if both_ways else (a,):
                bk.container(x).reload()
                dev = bk._interface(x, entry.ip[x])
                if rate > 0:
                    bk.processes.nsenter(x, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                                  "rate", f"{int(rate)}bit", "burst", "32kbit",
                                  "latency", "100ms")
                else:
                    with contextlib.suppress(BackendError):  # none set: nothing to remove
                        bk.processes.nsenter(x, "tc", "qdisc", "del", "dev", dev, "root")
        if fields:
            bk.user_links.shape(a, b, LinkShapeChange(**fields), both_ways=both_ways)
