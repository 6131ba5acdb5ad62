"""MininetBackend: every broker a Mininet host (its own network namespace), every overlay link
a Mininet link between two hosts, driven through Mininet's own Python API.

The network, for a run with tag T (4 hex digits, unique among the runs on this machine):

    root namespace (the orchestrator, its clients)
       | wTmK  <- management veth, a /30 per host: the orchestrator's only way in
    host wThK (broker b): mgmt 198.18.x.y/30, one interface per overlay link, each link its own
       | /30 (198.18.x.y); the broker binds its links' and clients' port on all interfaces,
       | its admin (and metrics) only on the management address
    host wThJ (a neighbour)

Addresses come from 198.18.0.0/16, half the block set aside for network benchmarks (RFC 2544):
not routed anywhere, and not a private range another network on the machine may use. Each
run takes the first free /21 (512 /30s: 121 brokers and their links fit twice). Hosts have
no default route and no host forwards, so two brokers talk only over their overlay link:
a cut link (both interfaces down, `configLinkStatus`) really stops their traffic; the
management /30s reach only the root namespace.

Delay, jitter, loss, duplication and corruption stay in the brokers' user-space link shaper
(admin SetLink): this kernel has no netem qdisc, which Mininet's TCLink would need for them.
Rate limits go to the kernel, as Mininet does it: an htb qdisc on the sending interface.

Cleanup: everything of a run carries its tag, and a registry entry (/run/weeble/mininet-T.json,
weeble/orchestrator/backends/registry.py) names the process that owns it. `close()` (also on
an exception, Ctrl-C, SIGTERM and atexit) stops the brokers and the network; a run whose
owner died (SIGKILL, a crash) is removed by `clean_leftovers()`: the next Mininet run and
`weeble clean` call it. Removing a run kills its host shells, its brokers and every process in
their namespaces (the namespaces, and the veths in them, go with the last process) and deletes
its root-side interfaces.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.orchestrator.backend import (
    AdminAccess,
    BackendError,
    BrokerAddress,
    LinkShapeChange,
    LinkState,
    Placement,
    Ports,
)
from weeble.orchestrator.backends import registry
from weeble.orchestrator.backends.assembly import Assembly, _open_backends
from weeble.orchestrator.backends.peernet import PeerNetwork
from weeble.orchestrator.backends.processes import LocalProcesses
from weeble.runtime.config import BrokerConfig

KIND = "mininet"
POOL = ipaddress.IPv4Network("198.18.0.0/16")  # (198.19.0.0/16: the Docker backend's)
BLOCK_PREFIX = 21  # per run: 2048 addresses, 512 /30 subnets
DEFAULT_LISTEN, DEFAULT_ADMIN, DEFAULT_METRICS = 7000, 7001, 9100
_ROOT_INTF = re.compile(r"^w([0-9a-f]{4})m\d+$")


def import_mininet() -> Any:
    """Mininet's API (Debian's package, linked into the venv by scripts/setup.sh), as root."""
    try:
        import mininet.link
        import mininet.log
        import mininet.net
        import mininet.node
    except ImportError as e:
        raise BackendError(
            f"mininet backend: cannot import Mininet ({e}); install it (apt-get install"
            " mininet) and run scripts/setup.sh, which makes it importable in .venv") from None
    if os.geteuid() != 0:
        raise BackendError("mininet backend: needs root (network namespaces, veth pairs)")
    mininet.log.setLogLevel("warning")
    return mininet


def _root_interfaces() -> dict[str, str]:
    """Interface name -> its IPv4 addresses (space separated), in the root namespace."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         check=False).stdout
    addrs: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3:
            addrs[parts[1].split("@")[0]] = addrs.get(parts[1], "") + " " + parts[3]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=False).stdout
    for line in links.splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0]
        addrs.setdefault(name, "")
    return addrs


def _processes() -> Iterator[tuple[int, str]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                yield int(entry.name), cmd


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _kill_run(tag: str, workdir: str | None = None) -> list[str]:
    """Kill every process of run `tag` and delete its root-side interfaces; returns what it
    removed. Its processes: the host shells, the brokers (their command line names the run's
    `workdir`; a host shell ends with its owner, the brokers do not) and anything else in the
    namespaces of either."""
    removed = []
    marker = f"{workdir.rstrip('/')}/" if workdir else None
    shells = [(pid, cmd) for pid, cmd in _processes() if f"mininet:w{tag}h" in cmd
              or f"mininet:w{tag}r" in cmd
              or (marker is not None and "weeble.runtime" in cmd and marker in cmd)]
    root_ns = _netns(1)
    namespaces = {ns for pid, cmd in shells if f"mininet:w{tag}r" not in cmd
                  if (ns := _netns(pid)) is not None and ns != root_ns}
    victims = {pid for pid, _ in shells}
    if namespaces:
        victims |= {pid for pid, _ in _processes() if _netns(pid) in namespaces}
    victims.discard(os.getpid())
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            removed.append(f"process {pid}")
    for pid in victims:  # reap our own children; wait for the others to be gone
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.01)
    for name in _root_interfaces():
        m = _ROOT_INTF.match(name)
        if m and m.group(1) == tag:
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
            removed.append(f"interface {name}")
    registry.forget(KIND, tag)
    return removed


def clean_leftovers(*, everything: bool = False) -> list[str]:
    """Remove the Mininet runs whose owner is gone and that were not handed on (`weeble up`);
    with `everything`, every Mininet run of weeble on this machine. Also interfaces and host
    shells of weeble's naming that no registry entry claims (an owner killed mid-start)."""
    removed: list[str] = []
    claimed: set[str] = set()
    for tag, entry in registry.entries(KIND).items():
        if not everything and registry.claimed(entry):
            claimed.add(tag)
            continue
        removed += _kill_run(tag, entry.get("workdir"))
    tags = {m.group(1) for name in _root_interfaces() if (m := _ROOT_INTF.match(name))}
    tags |= {m.group(1) for _, cmd in _processes()
             if (m := re.search(r"mininet:w([0-9a-f]{4})[hr]", cmd))}
    for tag in tags - claimed:
        removed += _kill_run(tag)
    return removed


@dataclass
class _Link:
    """One Mininet link between two hosts and its /30."""

    a: str  # brokers, a < b
    b: str
    ip: dict[str, str]  # broker -> its address on this link
    link: Any  # mininet.link.Link


class MininetBackend(Assembly):
    """Brokers as processes in Mininet hosts: an assembly (assembly.py) of placement in
    Mininet hosts, `LocalProcesses` entering each host (start, signals, state, logs; traces on
    the shared file system), admin access and a `PeerNetwork` of `MininetWires`.

    The peer network of a run that reconfigures (peernet.py) is a Linux bridge in a host of its
    own (`wTshp`: its own namespace, so the root namespace's firewall, Docker's included, never
    sees its frames), with a veth `peer` from every broker's host to it, on the last /23 of
    the run's block."""

    name = "mininet"
    assigns_addresses = True

    def __init__(self, workdir: Path | str, access: AdminAccess, *, tag: str | None = None,
                 log_level: str = "INFO") -> None:
        super().__init__(workdir, access, log_level=log_level)
        # its process part: subprocesses, each entering its host's namespaces (`_prefix`)
        self.processes = LocalProcesses(self.workdir, lambda: self.access,
                                        log_level=log_level, prefix=self._prefix)
        self.peers = PeerNetwork(self, MininetWires(self))  # its network part
        self.network = self.peers
        self.tag = tag or ""
        self._mn: Any = None
        self._net: Any = None
        self._root: Any = None
        self._hosts: dict[str, Any] = {}  # broker -> mininet Host
        self._host_names: dict[str, str] = {}
        self._mgmt: dict[str, tuple[str, str]] = {}  # broker -> (host ip, root ip)
        self._subnets: Iterator[ipaddress.IPv4Network] = iter(())
        self._next_host = 0
        self._ports = (DEFAULT_LISTEN, DEFAULT_ADMIN, None)
        self._rates: dict[tuple[str, str], float] = {}  # (from, to) -> bits/s in the kernel
        self._lock = threading.RLock()  # Mininet's node shells serve one command at a time
        self._attached_state: dict[str, Any] = {}
        self._switch: Any = None  # the peer network's host (its bridge: `pb`)
        self._peer_hosts: Iterator[ipaddress.IPv4Address] = iter(())
        self._peer_prefix = 23
        # hosts a process that did not build the network made (`_attached_host`): broker ->
        # (the pid holding its namespace, its host index)
        self._holders: dict[str, tuple[int, int]] = {}
        self._links_state: dict[str, dict[str, str]] = {}  # attached: the run's links' /30s

    @classmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> MininetBackend:
        import_mininet()
        clean_leftovers()  # what dead runs left behind must not take our names or addresses
        return cls(Path(run_dir) / "brokers", access, log_level=log_level)

    @classmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any]) -> MininetBackend:
        backend = cls(Path(run_dir) / "brokers", access, tag=state.get("tag"))
        backend._detached = True
        _open_backends.discard(backend)
        backend._attached_state = state
        backend.peers.load(state)
        backend._ports = tuple(state.get("ports", backend._ports))  # type: ignore[assignment]
        backend._holders = {b: (int(h[0]), int(h[1]))
                            for b, h in (state.get("holders") or {}).items()}
        backend._links_state = dict(state.get("links") or {})
        for b, config in configs.items():
            backend._configs[b] = config
            pid = brokers.get(b, {}).get("pid")
            if pid is not None:
                backend.processes.attach(b, pid)
            reach = state.get("reach", {}).get(b)
            if reach:
                backend._reach[b] = BrokerAddress(b, *reach)
        return backend

    @classmethod
    def clean_leftovers(cls, *, everything: bool = False) -> list[str]:
        import_mininet()
        return clean_leftovers(everything=everything)

    def state(self) -> dict[str, Any]:
        return {"tag": self.tag,
                "reach": {b: [r.listen, r.admin, r.metrics] for b, r in self._reach.items()},
                "links": {**self._links_state,
                          **{f"{k.a}-{k.b}": k.ip for k in self.peers.wired.values()}},
                "hosts": {b: h.pid for b, h in self._hosts.items()},
                "holders": {b: list(h) for b, h in self._holders.items()},
                "ports": list(self._ports), **self.peers.state_record()}

    # ---- the network --------------------------------------------------------------------------

    def plan(self, brokers: list[str], edges: list[tuple[str, str]],
             ports: Ports) -> dict[str, Placement]:
        self._mn = import_mininet()
        self._ports = (ports.listen or DEFAULT_LISTEN, ports.admin or DEFAULT_ADMIN,
                       (ports.metrics or DEFAULT_METRICS) if ports.metrics_enabled else None)
        with registry.machine_lock(KIND):
            used = {t for name in _root_interfaces() if (m := _ROOT_INTF.match(name))
                    for t in [m.group(1)]}
            used |= set(registry.entries(KIND))
            self.tag = next(t for t in iter(lambda: secrets.token_hex(2), None)
                            if t not in used)
            *ours, peers = self._free_block().subnets(new_prefix=23)
            self._subnets = (s for net in ours for s in net.subnets(new_prefix=30))
            registry.register(KIND, self.tag, self.workdir)
            try:
                self._net = self._mn.net.Mininet(topo=None, build=False, controller=None,
                                                 ipBase=str(POOL), waitConnected=False)
                self._root = self._mn.node.Node(f"w{self.tag}r", inNamespace=False)
            except Exception as e:
                raise BackendError(f"mininet: cannot start the network: {e}") from None
        with self._lock:
            if ports.peer_network:
                self.peers.peer_network = True
                self._peer_hosts = iter(list(peers.hosts()))
                self._peer_prefix = peers.prefixlen
                try:  # named like a host: its shell, and so its namespace, go with the run
                    self._switch = self._net.addHost(f"w{self.tag}hp")
                    out = self._switch.cmd("ip link set lo up; ip link add pb type bridge"
                                           " && ip link set pb up && echo ok")
                except Exception as e:
                    raise BackendError(f"mininet: the peer network: {e}") from None
                if "ok" not in out:
                    raise BackendError(f"mininet: the peer network's bridge: {out.strip()}")
                # a process of its own holds the namespace (and the bridge) when the host
                # shells end with their owner (`weeble up` hands the run on); named like a
                # host shell, so the run's removal finds and ends it
                subprocess.Popen(
                    ["mnexec", "-a", str(self._switch.pid), "bash", "-c",
                     f"exec -a mininet:w{self.tag}hp-holder sleep infinity"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)
            for b in brokers:
                self._add_host(b)
            for a, b in edges:
                self._connect(a, b)
        return {b: self.peers.placement(b, self._mgmt[b][0]) for b in brokers}

    def _free_block(self) -> ipaddress.IPv4Network:
        taken = set()
        for addrs in _root_interfaces().values():
            for cidr in addrs.split():
                ip = ipaddress.IPv4Interface(cidr).ip
                if ip in POOL:
                    taken.add(ipaddress.IPv4Network(f"{ip}/{BLOCK_PREFIX}", strict=False))
        for block in POOL.subnets(new_prefix=BLOCK_PREFIX):
            if block not in taken:
                return block
        raise BackendError(f"mininet: every /{BLOCK_PREFIX} of {POOL} is in use")

    def _pair(self) -> tuple[str, str, int]:
        try:
            net = next(self._subnets)
        except StopIteration:
            raise BackendError("mininet: this run's address block is used up") from None
        first, second = list(net.hosts())
        return str(first), str(second), net.prefixlen

    def _add_host(self, broker_id: str) -> None:
        mn = self._mn
        index = self._next_host
        self._next_host += 1
        name = f"w{self.tag}h{index}"
        root_ip, host_ip, prefix = self._pair()
        try:
            host = self._net.addHost(name, ip=f"{host_ip}/{prefix}")
            mn.link.Link(host, self._root, intfName1="mgmt", intfName2=f"w{self.tag}m{index}",
                         params1={"ip": f"{host_ip}/{prefix}"},
                         params2={"ip": f"{root_ip}/{prefix}"})
            host.cmd("ip link set lo up")
        except Exception as e:
            raise BackendError(f"mininet: host for broker {broker_id}: {e}") from None
        self._hosts[broker_id] = host
        self._host_names[broker_id] = name
        self._mgmt[broker_id] = (host_ip, root_ip)
        if self._switch is not None:
            self._join_peers(broker_id, host, index)

    def _join_peers(self, broker_id: str, host: Any, index: int) -> None:
        """A veth from the broker's host to the peer network's bridge."""
        try:
            ip = str(next(self._peer_hosts))
        except StopIteration:
            raise BackendError("mininet: this run's peer network is full") from None
        try:
            self._mn.link.Link(host, self._switch, intfName1="peer", intfName2=f"p{index}",
                               params1={"ip": f"{ip}/{self._peer_prefix}"})
            out = self._switch.cmd(f"ip link set p{index} master pb && ip link set p{index} up"
                                   " && echo ok")
        except Exception as e:
            raise BackendError(f"mininet: broker {broker_id} on the peer network: {e}") from None
        if "ok" not in out:
            raise BackendError(f"mininet: broker {broker_id} on the peer network: {out.strip()}")
        self.peers.peer_ip[broker_id] = ip

    def _connect(self, a: str, b: str) -> _Link:
        key = frozenset((a, b))
        if key in self.peers.wired:
            raise BackendError(f"link {a}-{b} exists already")
        for x in (a, b):
            if x not in self._hosts:
                raise BackendError(f"link {a}-{b}: no host for broker {x}")
        ip_a, ip_b, prefix = self._pair()
        try:
            link = self._net.addLink(self._hosts[a], self._hosts[b], cls=self._mn.link.TCLink,
                                     params1={"ip": f"{ip_a}/{prefix}"},
                                     params2={"ip": f"{ip_b}/{prefix}"})
        except Exception as e:
            raise BackendError(f"mininet: link {a}-{b}: {e}") from None
        lo, hi = sorted((a, b))
        entry = _Link(lo, hi, {a: ip_a, b: ip_b}, link)
        self.peers.wired[key] = entry
        return entry

    def host(self, broker_id: str) -> Any:
        """The Mininet host of a broker (tests use it to send traffic from inside)."""
        try:
            return self._hosts[broker_id]
        except KeyError:
            raise BackendError(f"broker {broker_id}: no Mininet host in this process") from None

    def _need_net(self, what: str) -> None:
        if self._net is None:
            raise BackendError(f"mininet: {what} needs the process that built the network"
                               " (`weeble run`, not an attached `weeble up` run)")

    # ---- brokers ----------------------------------------------------------------------------

    def _prefix(self, broker_id: str) -> list[str]:
        # mnexec enters the host's namespaces and execs the broker: its pid is the broker's
        if broker_id in self._holders:
            return ["mnexec", "-a", str(self._holders[broker_id][0])]
        return ["mnexec", "-a", str(self.host(broker_id).pid)]

    def _place(self, config: BrokerConfig) -> BrokerConfig:
        with self._lock:
            if self._net is None:
                self._attached_host(config.broker_id)
            else:
                self._add_host(config.broker_id)
            p = self.peers.placement(config.broker_id, self._mgmt[config.broker_id][0])
        return config.model_copy(update={"listen_address": p.listen, "admin_address": p.admin,
                                         "metrics_address": p.metrics})

    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        self.peers.remove_wires_of(broker_id)
        super().remove_broker(broker_id, timeout)
        self.peers.forget(broker_id)
        with self._lock:
            host = self._hosts.pop(broker_id, None)
            if host is not None:
                self._net.delNode(host)
            holder = self._holders.pop(broker_id, None)
            if holder is not None:  # its namespace (and the veths in it) go with the holder
                pid, index = holder
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                subprocess.run(["ip", "link", "del", f"w{self.tag}m{index}"],
                               capture_output=True, check=False)
            self._mgmt.pop(broker_id, None)
            self._host_names.pop(broker_id, None)

    def _attached_host(self, broker_id: str) -> None:
        """A host for a broker added by a process that did not build the network (`weeble
        reconfigure add-leaf` against a `weeble up` run): what Mininet's addHost and Link do,
        by hand, from the run's state. A process of its own holds the new namespace (named
        like a host shell: the run's removal finds it and everything in its namespace); a
        management veth to the root namespace on a free /30 of the run's block, and a veth to
        the peer network's bridge (its namespace found by its holder's name)."""
        if not self.peers.peer_network:
            self._need_net("add_broker (this run has no peer network)")
        tag = self.tag
        mgmt_ips = [ipaddress.IPv4Address(r.admin.rsplit(":", 1)[0])
                    for r in self._reach.values()]
        if not mgmt_ips:
            raise BackendError("mininet: no broker of this run to place a new host beside")
        block = ipaddress.IPv4Network(f"{mgmt_ips[0]}/{BLOCK_PREFIX}", strict=False)
        *ours, peers = block.subnets(new_prefix=23)
        used = {ipaddress.IPv4Network(f"{ip}/30", strict=False) for ip in mgmt_ips}
        for cidrs in _root_interfaces().values():
            for cidr in cidrs.split():
                used.add(ipaddress.IPv4Interface(cidr).network)
        for ends in self._links_state.values():
            used |= {ipaddress.IPv4Network(f"{ip}/30", strict=False) for ip in ends.values()}
        subnet = next((n for net in ours for n in net.subnets(new_prefix=30) if n not in used),
                      None)
        if subnet is None:
            raise BackendError("mininet: this run's address block is used up")
        root_ip, host_ip = (str(a) for a in subnet.hosts())
        taken = set(self.peers.peer_ip.values())
        peer_ip = next((str(a) for a in peers.hosts() if str(a) not in taken), None)
        if peer_ip is None:
            raise BackendError("mininet: this run's peer network is full")
        pattern = re.compile(rf"^w{tag}m(\d+)$")
        index = 1 + max([int(m.group(1)) for name in _root_interfaces()
                         if (m := pattern.match(name))] + [len(self._reach)])
        switch = next((pid for pid, cmd in _processes()
                       if f"mininet:w{tag}hp-holder" in cmd), None)
        if switch is None:
            raise BackendError(f"mininet: the peer network of run {tag} is gone (its holder"
                               " process ended)")
        holder = subprocess.Popen(  # mnexec -n execs in place: its pid holds the namespace
            ["mnexec", "-cn", "bash", "-c", f"exec -a mininet:w{tag}h{index} sleep infinity"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self._holders[broker_id] = (holder.pid, index)
        # mnexec unshares its network namespace after the fork: until it has, the holder's pid
        # names ours, and a veth end sent "netns <pid>" would land here (CI once: 'Cannot find
        # device "mgmt"' inside the new host).
        ours, deadline = _netns(os.getpid()), time.monotonic() + 10.0
        while _netns(holder.pid) in (ours, None) and holder.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if _netns(holder.pid) in (ours, None):
            holder.kill()
            holder.wait()
            del self._holders[broker_id]
            raise BackendError(f"mininet: host for broker {broker_id}: its namespace holder"
                               " did not get a network namespace of its own within 10 s")
        inside = ["mnexec", "-a", str(holder.pid), "sh", "-c"]
        steps = [
            ["ip", "link", "add", f"w{tag}m{index}", "type", "veth", "peer", "name", "mgmt",
             "netns", str(holder.pid)],
            ["ip", "addr", "add", f"{root_ip}/30", "dev", f"w{tag}m{index}"],
            ["ip", "link", "set", f"w{tag}m{index}", "up"],
            ["ip", "link", "add", "peer", "netns", str(holder.pid), "type", "veth", "peer",
             "name", f"p{index}", "netns", str(switch)],
            [*inside, f"ip link set lo up && ip addr add {host_ip}/30 dev mgmt && ip link set"
                      f" mgmt up && ip addr add {peer_ip}/{peers.prefixlen} dev peer && ip"
                      " link set peer up"],
            ["mnexec", "-a", str(switch), "sh", "-c",
             f"ip link set p{index} master pb && ip link set p{index} up"],
        ]
        for cmd in steps:
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                holder.kill()  # what was made goes with it (the root-side veth by name)
                holder.wait()
                subprocess.run(["ip", "link", "del", f"w{tag}m{index}"], capture_output=True,
                               check=False)
                del self._holders[broker_id]
                raise BackendError(f"mininet: host for broker {broker_id}: {' '.join(cmd)}:"
                                   f" {out.stderr.strip()}")
        self._mgmt[broker_id] = (host_ip, root_ip)
        self.peers.peer_ip[broker_id] = peer_ip

    # ---- links ------------------------------------------------------------------------------

    def _intf(self, entry: _Link, broker: str) -> Any:
        """The interface of `broker`'s end of a link."""
        link = entry.link
        return link.intf1 if link.intf1.node is self._hosts[broker] else link.intf2

    def _restore(self, entry: _Link) -> None:
        """An interface taken down and up keeps its IPv4 address on Linux; put back anything
        that went missing (it did on some kernels: the anchors' link up/down complaint)."""
        for broker in (entry.a, entry.b):
            intf = self._intf(entry, broker)
            if entry.ip[broker] not in intf.node.cmd(f"ip -4 -o addr show dev {intf.name}"):
                intf.node.cmd(f"ip addr add {entry.ip[broker]}/30 dev {intf.name}")

    # A cut lives in the network, not in the brokers: a restarted broker finds its link down
    # as it was, and the local backend's user-space cuts (its `user_links`) stay empty here.

    def rate(self, a: str, b: str) -> str:
        """The kernel's qdisc on a's interface toward b (evidence of a rate limit)."""
        intf = self._intf(self.peers.link(a, b), a)
        with self._lock:
            return str(intf.tc("%s qdisc show dev %s"))

    # ---- the end ----------------------------------------------------------------------------

    def detach(self) -> None:
        super().detach()
        if self.tag:
            registry.register(KIND, self.tag, self.workdir, detached=True)

    def teardown(self) -> None:
        super().teardown()
        with self._lock:
            if self._net is not None:
                with contextlib.suppress(Exception):
                    self._net.stop()
                self._net = None
            if self._root is not None:
                with contextlib.suppress(Exception):
                    self._root.stop(deleteIntfs=True)
                    self._root.terminate()
                self._root = None
            self._hosts.clear()
            self._switch = None
        if self.tag:  # whatever escaped Mininet's own stop (an attached run's all)
            _kill_run(self.tag, str(self.workdir))


class MininetWires:
    """The network part of the Mininet backend (`peernet.Wires`): a Mininet link per overlay link,
    a cut by Mininet's link switch (both interfaces down), a rate as htb on the sending
    interface."""

    def __init__(self, backend: MininetBackend) -> None:
        self.backend = backend

    def link(self, a: str, b: str) -> None:
        bk = self.backend
        bk._need_net("add_link")
        with bk._lock:
            bk._connect(a, b)

    def unlink(self, a: str, b: str) -> None:
        bk = self.backend
        bk._need_net("remove_link")
        entry = bk.peers.link(a, b)
        with bk._lock:
            bk._net.delLink(entry.link)
            del bk.peers.wired[frozenset((a, b))]
        bk._rates.pop((a, b), None)
        bk._rates.pop((b, a), None)

    def links(self, everything: bool = False) -> list[tuple[str, str]]:
        bk = self.backend
        if bk._net is None:  # attached: the configs' links that are not peer links
            return [e for e in bk.entered_links() if not bk.peers.is_peer_link(*e)]
        return sorted((e.a, e.b) for e in bk.peers.wired.values())

    def cut(self, a: str, b: str, status: str) -> None:
        bk = self.backend
        bk._need_net(f"link {status}")
        entry = bk.peers.link(a, b)
        with bk._lock:
            # Mininet's own link switch: both interfaces of the veth pair down (or up)
            bk._net.configLinkStatus(bk._host_names[a], bk._host_names[b], status)
            if status == "up":
                bk._restore(entry)

    def state(self, a: str, b: str) -> LinkState:
        """Each end's interface, as the kernel reports it in that host's namespace."""
        bk = self.backend
        bk._need_net("link_state")
        entry = bk.peers.link(a, b)
        ends = {}
        with bk._lock:
            for broker in (a, b):
                intf = bk._intf(entry, broker)
                ends[broker] = f"{intf.name} {'up' if intf.isUp() else 'down'}"
        cut = all(v.endswith(" down") for v in ends.values())
        return LinkState(a, b, cut=cut, mechanism="interface", ends=ends)

    def shape(self, a: str, b: str, change: LinkShapeChange, both_ways: bool) -> None:
        """Rate in the kernel (htb on the sending interface, as Mininet's TCIntf sets it);
        the rest in the brokers' link shaper, through admin."""
        bk = self.backend
        fields = change.fields()
        rate = fields.pop("rate_bps", None)
        directions = [(a, b), (b, a)] if both_ways else [(a, b)]
        if rate is not None:
            bk._need_net("a rate limit")
            entry = bk.peers.link(a, b)
            with bk._lock:
                for x, y in directions:
                    intf = bk._intf(entry, x)
                    if rate > 0:
                        intf.config(bw=rate / 1e6)
                    else:
                        intf.tc("%s qdisc del dev %s root")
                    bk._rates[x, y] = rate
        if fields:
            bk.user_links.shape(a, b, LinkShapeChange(**fields), both_ways=both_ways)
