"""Testbed: a scenario's broker tree, live on a backend, with a run directory to show for it.

    with Testbed.plan(scenario) as bed:          # configs, tokens, certificates; nothing runs
        bed.up()                                  # start all, wait until serving and linked
        async with bed.admin("b0") as admin: ...  # the chaos module drives it from here
        bed.cut("b0", "b1"); bed.restart("b3")
        bed.down()                                # SIGTERM, drain, collect the traces

Everything a run leaves is under `runs/<id>/`:

    testbed.json   the state file: brokers, pids, addresses, tokens (mode 0600), state
    scenario.json  the validated scenario the run used (for replay in simulation)
    brokers/       each broker's BrokerConfig (<id>.json) and log (<id>.log)
    trace/         one JSON-lines trace per node, brokers and clients alike (run.jsonl: header)
    tls/           the run's throwaway CA and certificates, when admin uses TLS

`weeble status` and `weeble down` find a run by its state file (`Testbed.attach`), so they work
from any process, not only the one that started the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from weeble.codec.wire import MAX_BATCH
from weeble.core.reconfig.plan import Tree
from weeble.model.scenario import Scenario, ScenarioError
from weeble.orchestrator import background
from weeble.orchestrator.backend import (
    AdminAccess,
    Backend,
    BackendError,
    BrokerAddress,
    LinkShapeChange,
    Placement,
    Ports,
    backend_class,
)
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.certs import generate_run_certs, issue_broker_cert
from weeble.runtime.client import ClientTls
from weeble.runtime.clientauth import client_token, new_client_secret
from weeble.runtime.config import BrokerConfig, TlsConfig, split_address
from weeble.runtime.linkshaper import LinkShape
from weeble.runtime.private import private_dir, write_private
from weeble.trace.header import RunHeader
from weeble.trace.schema import TRACE_DIR
from weeble.trace.writer import write_header, write_run_end

STATE_FILE = "testbed.json"
ORCHESTRATOR = "orchestrator"  # the node of the run header records
STATE_VERSION = 1


class RunNotFound(BackendError):
    """No run matches what the user named (or no run exists yet)."""


def new_run_id(name: str) -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def broker_configs(scenario: Scenario, places: dict[str, Placement],
                   peer_address: Callable[[str, str], str], *, admin_token: str,
                   link_token: str, client_secret: str | None, tls: TlsConfig | None,
                   trace_path: Callable[[str], Path],
                   link_tls: dict[str, TlsConfig] | None = None,
                   address_book: Callable[[str], str] | None = None
                   ) -> dict[str, BrokerConfig]:
    """Every broker's config for a scenario laid out by a backend (its placements and the
    addresses brokers dial each other at): the one place a scenario becomes broker ROM.
    `address_book(b)`: where any broker reaches b on a link made at run time (the backend's
    `book_address`; None: the brokers get no address book)."""
    live = scenario.live
    if scenario.routing.adverts:
        # live clients do not advertise: a live run would silently run something else
        # (subscriptions that go nowhere), so say so rather than run the wrong experiment
        raise ScenarioError(f"{scenario.name}: routing.adverts is simulator only for now"
                            " (`weeble simulate`)")
    if scenario.optimizer is not None and scenario.optimizer.heuristic != "none" \
            and not address_book:
        # the optimizer's exchanges link brokers that are not neighbours yet: they need every
        # broker's address (the local backend's address book)
        raise ScenarioError(f"{scenario.name}: optimizer: this backend gives the brokers no"
                            " address book (the optimizer's exchanges need every broker's)")
    if str(scenario.mode) == "skip_ring" and not address_book:
        # a topic's skip ring links brokers that are no tree neighbours (and its supervisor)
        raise ScenarioError(f"{scenario.name}: mode skip_ring: this backend gives the brokers no"
                            " address book (a topic's skip ring links any two brokers)")
    if live.link_batch > MAX_BATCH:
        # a peer drops a larger batch whole (codec/wire.py): said here, naming both, rather
        # than by the broker config's validation of tuning.link_batch_max
        raise ScenarioError(f"{scenario.name}: live.link_batch: {live.link_batch}, over the"
                            f" bound MAX_BATCH = {MAX_BATCH} (a broker drops a larger batch)")
    topology = scenario.build_topology()
    roms = scenario.roms()  # the ROM the simulator's brokers get too
    shape = LinkShape(**live.links.model_dump())
    shaped = shape != LinkShape()
    configs: dict[str, BrokerConfig] = {}
    for i, b in enumerate(topology.brokers):
        neighbors = topology.neighbors(b)
        # the address book of run-time links (reconfiguration): every broker, where the
        # network reaches it from b (on loopback: its listen address)
        peers = ({n: address_book(n) for n in topology.brokers if n != b
                  and n not in neighbors} if address_book is not None else {})
        configs[b] = BrokerConfig(
            **BrokerConfig.rom_fields(roms[b]),
            neighbors={n: peer_address(n, b) for n in neighbors},
            peers=peers,
            run_brokers=sorted(topology.brokers),
            listen_address=places[b].listen,
            admin_address=places[b].admin,
            admin_token=admin_token,
            link_token=link_token,
            client_secret=client_secret,
            open_clients=client_secret is None,
            # admin TLS: a shared `tls` if given, else the broker's own certificate
            tls=tls if tls is not None or link_tls is None else link_tls.get(b),
            link_tls=link_tls.get(b) if link_tls is not None else None,
            trace_path=trace_path(b) if scenario.trace.enabled else None,
            metrics_address=places[b].metrics,
            # every broker-to-broker link, the run-time ones too (a link exchange's new link)
            links={n: shape for n in [*neighbors, *peers]} if shaped else {},
            tuning={"link_batch_max": live.link_batch, "drain_timeout_s": live.drain,
                    "reconnect_max_s": 1.0, "seed": scenario.seed * 100_003 + i,
                    "snapshot_period_s": snapshot_period(scenario)},
        )
    return configs


def snapshot_period(scenario: Scenario) -> float:
    """Table snapshots in every broker's trace, for the state-level view of a live run: every
    `trace.snapshots_every` s, by default ten per Δ (a stabilization time is read to Δ/10)."""
    return scenario.trace.snapshots_every or scenario.bound / 10


def reshapes(scenario: Scenario) -> bool:
    """Does a live run of the scenario link brokers at run time (reconfigurations, the colour
    scheme, the optimizer)?"""
    return bool(scenario.reconfigurations.operations or scenario.colours is not None
                or (scenario.optimizer is not None and scenario.optimizer.heuristic != "none"))


class Testbed:
    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, *, run_id: str, run_dir: Path, scenario: dict[str, Any],
                 configs: dict[str, BrokerConfig], backend: Backend, access: AdminAccess,
                 root: str, edges: list[tuple[str, str]], link_token: str,
                 created: str | None = None, state: str = "planned",
                 startup_timeout: float = 30.0) -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self.scenario = scenario  # the scenario as JSON data (attach has no Scenario object)
        self.configs = configs
        self.backend = backend
        self.access = access
        self.root = root
        self.edges = edges
        self.link_token = link_token
        self.created = created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.state = state
        self.startup_timeout = startup_timeout
        # the fields of the run's header record, written once the testbed is up (None for a
        # testbed attached from another process: its header is written already)
        self.header: dict[str, Any] | None = None
        self.retired: list[str] = []  # brokers that left the tree (reconfiguration)
        self.retired_hosts: list[str] = []  # addresses given out at run time

    # ---- building ---------------------------------------------------------------------------

    @classmethod
    def plan(cls, scenario: Scenario, *, runs_dir: Path | str = "runs",
             run_id: str | None = None, base_host: str | None = None,
             any_ports: bool = False, log_level: str = "INFO",
             backend: str | None = None, reconfigurable: bool = False) -> Testbed:
        """Write the run directory and every broker's config; start nothing.

        `base_host` overrides live.base_host; `any_ports` picks free ports instead of the
        scenario's fixed ones (tests, and runs beside others); `backend` overrides the
        scenario's `backend:` (local, mininet, docker, k8s); `reconfigurable`: ready for
        `weeble reconfigure` even if the scenario itself does not reshape the tree (on
        Mininet and Docker: a peer network, weeble/orchestrator/backends/peernet.py)."""
        run_id = run_id or new_run_id(scenario.name)
        run_dir = (Path(runs_dir) / run_id).resolve()
        if (run_dir / STATE_FILE).exists():
            raise BackendError(f"run {run_id!r} exists already in {run_dir.parent}")
        live = scenario.live
        if base_host is not None:
            live = live.model_copy(update={"base_host": base_host})
        topology = scenario.build_topology()
        brokers = list(topology.brokers)
        edges = [(a, b) for a, b in topology.links]

        # the run directory holds tokens (testbed.json, brokers/*.json) and keys (tls/)
        private_dir(run_dir)
        for sub in ("brokers", TRACE_DIR):
            private_dir(run_dir / sub)
        admin_token = secrets.token_urlsafe(32)
        link_token = secrets.token_urlsafe(24)
        client_secret = None if live.open_clients else new_client_secret()
        access = AdminAccess(admin_token)
        kind = backend or getattr(scenario, "backend", None) or "local"
        needed = reshapes(scenario)
        cls_ = backend_class(kind)
        if needed and not cls_.links_at_run_time:
            raise BackendError(f"{scenario.name}: live reconfiguration and the optimizer do not"
                               f" run on the {kind} backend: {cls_.links_at_run_time_why}")
        backend_obj = cls_.create(run_dir, access, run_id=run_id, log_level=log_level)
        try:
            places = backend_obj.plan(brokers, edges, Ports(
                listen=live.listen_port, admin=live.admin_port, metrics=live.metrics_port,
                metrics_enabled=live.metrics_port is not None, any_ports=any_ports,
                base_host=live.base_host,
                peer_network=(needed or reconfigurable) and cls_.links_at_run_time))
        except BaseException:
            backend_obj.close()
            raise
        tls: TlsConfig | None = None
        link_tls: dict[str, TlsConfig] | None = None
        if live.tls:
            # each broker's own certificate names it, for its admin port, its listen port and
            # its links: one broker's key cannot answer as another's admin
            named = {b: sorted({split_address(a)[0] for a in (
                         p.listen, p.reach.listen, p.admin, p.reach.admin)} - {"0.0.0.0"})
                     for b, p in places.items()}
            certs = generate_run_certs(run_dir / "tls", named, run_id=run_id)
            link_tls = {b: TlsConfig(cert=cert, key=key, ca=certs.ca)
                        for b, (cert, key) in certs.brokers.items()}
            access = AdminAccess(admin_token, certs.ca, certs.client_cert, certs.client_key)
            backend_obj.access = access

        root = scenario.root_broker
        configs = broker_configs(
            scenario, places, backend_obj.peer_address, admin_token=admin_token,
            link_token=link_token, client_secret=client_secret, tls=tls,
            trace_path=lambda b: backend_obj.trace_path(run_dir / TRACE_DIR, b),
            link_tls=link_tls,
            address_book=backend_obj.book_address if backend_obj.reconfigurable else None)
        bed = cls(run_id=run_id, run_dir=run_dir, scenario=scenario.model_dump(mode="json"),
                  configs=configs, backend=backend_obj, access=access, root=root,
                  edges=edges, link_token=link_token,
                  startup_timeout=live.startup_timeout)
        (run_dir / "scenario.json").write_text(json.dumps(bed.scenario, indent=2) + "\n")
        bed.header = RunHeader.of_scenario(scenario, backend=backend_obj.name, clock="wall",
                                           run_id=run_id,
                                           snapshot_period=snapshot_period(scenario)).fields()
        bed.save_state()
        return bed

    # ---- lifecycle --------------------------------------------------------------------------

    def up(self, on_event: Callable[[str], None] | None = None) -> None:
        """Start every broker at once, wait until each serves and then until each has all its
        links up. On any failure every broker is stopped again and BackendError says why."""
        say = on_event or (lambda _msg: None)
        self.state = "starting"
        try:
            self.backend.preflight(list(self.configs.values()))  # fail before starting any
            for config in self.configs.values():
                self.backend.start_broker(config)
            self.save_state()
            say(f"started {len(self.configs)} brokers")
            for b in self.configs:
                self.backend.wait_healthy(b, self.startup_timeout)
            say("all brokers serving")
            for b in self.configs:
                self.backend.wait_healthy(b, self.startup_timeout, links=True)
            say("all links up")
            if self.header is not None:  # the run's origin: every broker serves, links up
                write_header(self.run_dir, ORCHESTRATOR, self.header)
        except BaseException as e:
            self.backend.stop_all(timeout=5)
            self.state = "failed"
            self.save_state()
            if isinstance(e, BackendError):
                raise BackendError(f"run {self.run_id}: {e}") from None
            raise
        self.state = "up"
        self.save_state()

    def origin(self) -> None:
        """Move the run's origin to now: its header is written again (nothing else is in
        run.jsonl before the run ends). `weeble run` does so after the workload's warm start
        (live.warm_start_rate), so that the run begins with those subscriptions in place and
        their records come before t = 0, as a broker's `start` records do."""
        if self.header is not None and self.state == "up":
            write_header(self.run_dir, ORCHESTRATOR, self.header)

    def down(self, timeout: float = 15.0) -> dict[str, int | None]:
        """Stop the workload `weeble up --workload` started, then every broker (SIGTERM,
        drain, SIGKILL at the deadline); collect the traces."""
        background.stop(self.run_dir, timeout)  # its last records before the brokers stop
        if self.state == "up":  # the observation ends where the brokers start to stop
            write_run_end(self.run_dir, ORCHESTRATOR, "the brokers were stopped")
        codes = self.backend.stop_all(timeout)
        self.backend.collect_traces(self.trace_dir)
        self.state = "down"
        self.save_state()
        return codes

    def detach(self) -> None:
        """Leave the brokers running after this process exits (`weeble up`)."""
        self.backend.detach()
        self.save_state()

    def close(self) -> None:
        """Stop whatever this process started and still runs (idempotent)."""
        if self.state in ("starting", "up") and not self.backend.detached:
            self.down()
        self.backend.close()

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- what the chaos module drives -------------------------------------------------------

    @property
    def trace_dir(self) -> Path:
        """Where every node of the run (brokers, clients, chaos) writes its trace."""
        return self.run_dir / TRACE_DIR

    @property
    def brokers(self) -> list[str]:
        return list(self.configs)

    def address(self, broker_id: str) -> BrokerAddress:
        return self.backend.address(broker_id)

    def addresses(self) -> dict[str, BrokerAddress]:
        return {b: self.backend.address(b) for b in self.configs}

    @property
    def open_clients(self) -> bool:
        """True if the brokers let any client in under any id (scenario live.open_clients)."""
        return any(c.open_clients for c in self.configs.values())

    def client_tls(self) -> ClientTls | None:
        """What this run's clients present to its brokers' listen ports (None: plain)."""
        return self.access.client_tls()

    def client_token(self, client: str) -> str | None:
        """The token that proves `client`'s id to this run's brokers (None: open mode)."""
        secret = next(iter(self.configs.values())).client_secret if self.configs else None
        return None if secret is None else client_token(secret, client)

    def admin(self, broker_id: str, timeout: float = 10.0) -> AdminClient:
        return self.access.client(self.backend.address(broker_id).admin, timeout,
                                  broker=broker_id)

    async def snapshot(self, broker_id: str) -> dict[str, Any]:
        async with self.admin(broker_id) as admin:
            return await admin.snapshot()

    async def snapshots(self, brokers: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Admin snapshots of the given (default: all running) brokers, taken concurrently."""
        names = brokers if brokers is not None else [b for b in self.configs
                                                     if self.backend.alive(b)]
        replies = await asyncio.gather(*(self.snapshot(b) for b in names))
        return dict(zip(names, replies, strict=True))

    def kill(self, broker_id: str) -> None:
        self.backend.kill_broker(broker_id)
        self.save_state()

    def restart(self, broker_id: str) -> None:
        self.backend.restart_broker(broker_id)
        self.save_state()

    def cut(self, a: str, b: str) -> None:
        self.backend.cut_link(a, b)

    def heal(self, a: str, b: str) -> None:
        self.backend.heal_link(a, b)

    def shape(self, a: str, b: str, *, both_ways: bool = True, **shape: float) -> None:
        self.backend.shape_link(a, b, LinkShapeChange(**shape), both_ways=both_ways)

    # ---- reconfiguration (weeble/orchestrator/reconfigure.py drives these) ------------------

    @property
    def reconfigures(self) -> bool:
        """Live reconfiguration is available on this testbed (its brokers have an address
        book: the local backend; Mininet and Docker runs planned with a peer network)."""
        return self.backend.reconfigurable

    def book_address(self, broker_id: str) -> str:
        """Where any broker of the run reaches `broker_id` on a link made at run time."""
        return self.backend.book_address(broker_id)

    def tree(self) -> Tree:
        """The broker tree as the testbed knows it (the last reconfiguration included)."""
        return Tree.of(self.edges, [self.root])  # its brokers: the links' (a lone root)

    def settings(self) -> dict[str, Any]:
        """The scenario's reconfiguration knobs the live manager takes."""
        x = self.scenario.get("reconfigurations") or {}
        overlay = self.scenario.get("overlay") or {}
        return {"strawman": bool(x.get("strawman", False)), "gap": float(x.get("gap", 0.0)),
                "seed": int(self.scenario.get("seed", 0)),
                "colours": overlay.get("kind") == "coloured"}

    def trace_file(self, broker_id: str) -> Path | None:
        config = self.configs.get(broker_id)
        return None if config is None else config.trace_path

    def reconfigurer(self, *, clients: Any = None, t0: float | None = None,
                     on_event: Callable[[str], None] | None = None) -> Any:
        """The live manager (`async with bed.reconfigurer() as m: await m.reconfigure(op)`);
        `clients`: the live workload (a leaving leaf's clients leave with it); `t0`: the loop
        time the run's clock starts at (a scenario's `at` times)."""
        from weeble.orchestrator.reconfigure import LiveReconfigurator

        return LiveReconfigurator(self, clients=clients, t0=t0, on_event=on_event)

    async def reconfigure(self, op: Any, *, timeout: float = 120.0,
                          on_event: Callable[[str], None] | None = None) -> Any:
        """Carry out one reconfiguration (plan.ExchangeLink, AddLeaf, RemoveLeaf; a Tree with
        the 3-colour scheme) now, under whatever traffic flows; returns its Record (outcome
        done or failed, duration, why) once it has ended. PlanError if it does not fit."""
        async with self.reconfigurer(on_event=on_event) as manager:
            return await manager.reconfigure(op, timeout=timeout)

    def add_broker(self, broker_id: str, attach: str) -> BrokerConfig:
        """Start a new broker as a leaf of `attach` (the ROM of `attach`, its own loopback
        address and the run's ports, or a host or container of its own); returns once it
        serves. Its link to `attach` comes up when `attach` is told of it (the
        reconfiguration's AddNeighbor)."""
        if not self.reconfigures:
            raise BackendError(f"add broker: this {self.backend.name} run cannot link brokers"
                               " at run time (planned without a peer network: `weeble up"
                               " --reconfigurable`, or a scenario that reconfigures)")
        if broker_id in self.configs:
            raise BackendError(f"add broker: {broker_id!r} is a broker of this run already")
        template = self.configs[attach]
        # a backend with a network of its own gives the new broker its addresses (_place)
        host = (split_address(template.listen_address)[0] if self.backend.assigns_addresses
                else self._next_host())
        _, listen_port = split_address(template.listen_address)
        _, admin_port = split_address(template.admin_address)
        listen, admin = f"{host}:{listen_port}", f"{host}:{admin_port}"
        metrics = None
        if template.metrics_address is not None:
            metrics = f"{host}:{split_address(template.metrics_address)[1]}"
        trace = (template.trace_path.parent / f"{broker_id}.jsonl"
                 if template.trace_path is not None else None)
        config = template.model_copy(update={
            "broker_id": broker_id, "parent": attach,
            "neighbors": {attach: template.listen_address},
            "peers": {b: self.backend.book_address(b) for b in self.configs if b != attach},
            "links": {attach: next(iter(template.links.values()))} if template.links else {},
            "listen_address": listen, "admin_address": admin, "metrics_address": metrics,
            "trace_path": trace,
            "tuning": template.tuning.model_copy(
                update={"seed": template.tuning.seed + 7919 * (len(self.configs) + 1)}),
        })
        config = BrokerConfig.model_validate(config.model_dump())  # checked like any other

        def certify(placed: BrokerConfig) -> BrokerConfig:
            """With TLS (live.tls): a certificate from the run's CA naming the new broker and
            the addresses the backend gave it, for its links, its listen and admin ports."""
            if template.link_tls is None:
                return placed
            reach = self.backend.address(broker_id)
            hosts = sorted({split_address(a)[0] for a in (
                placed.listen_address, placed.admin_address, reach.listen, reach.admin)}
                - {"0.0.0.0"})
            try:
                cert, key = issue_broker_cert(template.link_tls.cert.parent, broker_id, hosts)
            except ValueError as e:
                raise BackendError(f"add broker {broker_id}: {e}") from None
            own = TlsConfig(cert=cert, key=key, ca=template.link_tls.ca)
            return placed.model_copy(update={"link_tls": own, "tls": own})

        started = self.backend.add_broker(config, prepare=certify)
        self.configs[broker_id] = started
        if broker_id in self.retired:  # it left earlier and comes back (its trace goes on)
            self.retired.remove(broker_id)
        update = getattr(self.backend, "update_config", None)
        book = self.backend.book_address(broker_id)
        for b, c in list(self.configs.items()):  # a restarted broker must know it too
            if b != broker_id and update is not None:
                self.configs[b] = update(b, peers={**c.peers, broker_id: book}) \
                    if b != attach else self.backend.config(b)
        self.save_state()
        self.backend.wait_healthy(broker_id, self.startup_timeout)
        return started

    def check_remove(self, broker_id: str) -> None:
        """BackendError if the backend could not take this broker away (asked before it
        leaves the tree)."""
        self.backend.check_remove(broker_id)

    def remove_broker(self, broker_id: str) -> None:
        """Stop a broker that has left the tree (SIGTERM: it drains, then exits)."""
        if broker_id == self.root:
            raise BackendError(f"remove broker: {broker_id!r} is the root")
        self.backend.remove_broker(broker_id, timeout=10.0)
        self.configs.pop(broker_id, None)
        self.retired.append(broker_id)
        self.save_state()

    def tree_changed(self, tree: Tree) -> None:
        """Record the tree a reconfiguration made: the state file, and the backend's configs
        (the neighbours and parent a restarted broker boots with: issue 28 found a broker
        that crashed after an exchange back with the tree the run was configured with)."""
        old = {tuple(sorted(e)) for e in self.edges}
        new = set(tree.edges)
        for a, b in sorted(old - new):
            if a in self.configs and b in self.configs:
                with contextlib.suppress(BackendError, KeyError):
                    self.backend.remove_link(a, b)
        for a, b in sorted(new - old):
            # the backend's config, not ours: a leaf add linked its broker already, and a link
            # an earlier exchange removed is still in the config the run started with
            if a in self.configs and b in self.configs \
                    and b not in self.backend.config(a).neighbors:
                with contextlib.suppress(BackendError, KeyError):
                    self.backend.add_link(a, b)
        parents = tree.parents(self.root) if self.root in tree.nodes else {}
        update = getattr(self.backend, "update_config", None)
        for b in list(self.configs):
            with contextlib.suppress(BackendError):
                config = self.backend.config(b)
                parent = parents.get(b, config.parent)
                if update is not None and config.parent != parent:
                    config = update(b, parent=parent)  # (the Kubernetes backend publishes it)
                if config != self.configs[b]:  # a restart by another process reads the file
                    self.configs[b] = config
                    config.dump(self.backend.config_path(b))
        self.edges = sorted(new)  # type: ignore[arg-type]
        self.save_state()

    def _next_host(self) -> str:
        used = [ipaddress.IPv4Address(split_address(c.listen_address)[0])
                for c in self.configs.values()]
        used += [ipaddress.IPv4Address(h) for h in self.retired_hosts]
        host = max(used) + 1
        if not host.is_loopback:
            raise BackendError(f"add broker: no loopback address left after {max(used)}")
        self.retired_hosts.append(str(host))
        return str(host)

    # ---- the state file ---------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.run_dir / STATE_FILE

    def save_state(self) -> None:
        data = {
            "version": STATE_VERSION,
            "run_id": self.run_id,
            "created": self.created,
            "state": self.state,
            "backend": self.backend.name,
            "backend_state": self.backend.state(),
            "orchestrator_pid": os.getpid(),
            "detached": self.backend.detached,  # handed on (`weeble up`), not left by a crash
            "root": self.root,
            "edges": self.edges,
            "startup_timeout": self.startup_timeout,
            "admin": {"token": self.access.token,
                      "ca": _str(self.access.ca), "client_cert": _str(self.access.client_cert),
                      "client_key": _str(self.access.client_key)},
            "link_token": self.link_token,
            "retired": self.retired,
            "hosts": self.retired_hosts,
            "brokers": {
                b: {**_handle(self.backend.handle(b)),
                    "config": str(self.backend.config_path(b)),
                    "log": str(self.backend.log_path(b)),
                    "listen": c.listen_address, "admin": c.admin_address,
                    "metrics": c.metrics_address,
                    "trace": _str(c.trace_path)}
                for b, c in self.configs.items()
            },
        }
        # it holds the admin token: readable by the owner only, and never half-written
        write_private(self.state_path, json.dumps(data, indent=2) + "\n")

    @classmethod
    def attach(cls, run: str | Path | None = None, *, runs_dir: Path | str = "runs",
               active: bool = False) -> Testbed:
        """The testbed of a run started by any process: by run id, run directory, or (None)
        the newest run in `runs_dir` (with `active`, the newest that is up)."""
        run_dir = find_run(run, runs_dir=runs_dir, active=active)
        data = read_state(run_dir)
        a = data["admin"]
        access = AdminAccess(a["token"], _path(a.get("ca")), _path(a.get("client_cert")),
                             _path(a.get("client_key")))
        configs: dict[str, BrokerConfig] = {}
        for b, info in data["brokers"].items():
            config = BrokerConfig.load(info["config"]) if Path(info["config"]).exists() else None
            if config is None:
                raise BackendError(f"run {data['run_id']}: broker {b}: config file"
                                   f" {info['config']} is missing")
            configs[b] = config
        backend = backend_class(data.get("backend", "local")).reattach(
            run_dir, access, configs, data["brokers"], data.get("backend_state") or {})
        scenario_path = run_dir / "scenario.json"
        scenario = json.loads(scenario_path.read_text()) if scenario_path.exists() else {}
        bed = cls(run_id=data["run_id"], run_dir=run_dir, scenario=scenario, configs=configs,
                  backend=backend, access=access, root=data["root"],
                  edges=[tuple(e) for e in data["edges"]],  # type: ignore[misc]
                  link_token=data["link_token"], created=data["created"],
                  state=data["state"], startup_timeout=data.get("startup_timeout", 30.0))
        bed.retired = list(data.get("retired") or [])
        bed.retired_hosts = list(data.get("hosts") or [])
        return bed


def read_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunNotFound(f"{run_dir}: not a run directory (no {STATE_FILE})") from None
    except (OSError, ValueError) as e:
        raise BackendError(f"{path}: unreadable state file: {e}") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise BackendError(f"{path}: not a version-{STATE_VERSION} state file")
    return data


def runs(runs_dir: Path | str = "runs") -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every run in `runs_dir` with its state, newest first."""
    found = []
    for path in Path(runs_dir).glob(f"*/{STATE_FILE}"):
        try:
            found.append((path.parent, read_state(path.parent)))
        except BackendError:
            continue
    found.sort(key=lambda item: (item[1].get("created", ""), item[0].name), reverse=True)
    yield from found


def find_run(run: str | Path | None, *, runs_dir: Path | str = "runs",
             active: bool = False) -> Path:
    if run is not None:
        for candidate in (Path(runs_dir) / str(run), Path(run)):
            if (candidate / STATE_FILE).exists():
                return candidate.resolve()
        raise RunNotFound(f"no run {str(run)!r} in {runs_dir}/ (and no such run directory)")
    for run_dir, data in runs(runs_dir):
        if not active or data.get("state") in ("starting", "up"):
            return run_dir.resolve()
    what = "no run is up" if active else "no runs"
    raise RunNotFound(f"{what} in {runs_dir}/ (start one with `weeble up SCENARIO`)")


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _handle(value: str | None) -> dict[str, Any]:
    """A broker's handle in the state file; a pid also as "pid" (an int)."""
    if value is not None and value.isdigit():
        return {"handle": value, "pid": int(value)}
    return {"handle": value, "pid": None}


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)
