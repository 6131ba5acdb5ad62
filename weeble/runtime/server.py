"""BrokerServer: one live broker. Drives exactly one core `Broker` from one asyncio loop.

The core is not thread-safe, so every event — a link message, a client request, a timer, an
admin fault — is stepped on the loop thread, and every effect is carried out without awaiting:
Send goes into the neighbour's outgoing (shaped, bounded) queue, Deliver into the client's
subscribe stream, SetTimer becomes a loop.call_at that replaces the pending timer of the same
name, Trace goes to the trace file. The core's `now` is loop time since the server started.

A core exception while handling one event is caught, logged, traced (kind "error") and
counted; the event is lost, the loop goes on. Two gRPC servers: the listen address carries
links, clients, health and reflection; the management address carries admin (token, optional
TLS), health and reflection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from weeble.core.broker import Broker
from weeble.core.events import (
    ClientPublish,
    Deliver,
    Effect,
    Event,
    LinkMeasured,
    Receive,
    Send,
    SetTimer,
    Start,
    TimerFired,
    Trace,
)
from weeble.core.messages import Message, Notification, Notify
from weeble.core.rom import OverlayKind
from weeble.proto.v1 import admin_pb2, admin_pb2_grpc, client_pb2, link_pb2
from weeble.runtime.admin import ADMIN_SERVICE, AdminService, BearerTokenInterceptor
from weeble.runtime.admin import server_credentials as admin_credentials
from weeble.runtime.allocator import MemoryReturner
from weeble.runtime.client_service import CLIENT_SERVICE, ClientService
from weeble.runtime.config import BrokerConfig, split_address
from weeble.runtime.links import (
    LINK_SERVICE,
    Link,
    LinkService,
    LinkState,
    channel_options,
    listen_credentials,
    tls_credentials,
)
from weeble.runtime.metrics import Metrics
from weeble.runtime.peercap import PeerStreamCap, RequestDeadline
from weeble.runtime.quiet import rate_limited
from weeble.trace.writer import LiveSink

# Health service name that is SERVING only while every neighbour link is up.
LINKS_HEALTH = LINK_SERVICE

log = rate_limited(logging.getLogger(__name__))
# gRPC's own servicer errors (an exception a handler let out, a failed batch): one traceback
# per call made 70 KB of log for 38 refused streams; rate-limited and counted like ours
for _name in ("grpc._cython.cygrpc", "grpc.aio._server", "grpc._server"):
    rate_limited(logging.getLogger(_name))


class StartupError(RuntimeError):
    """The broker could not start (typically: an address is in use or not local)."""


def server_options(config: BrokerConfig) -> list[tuple[str, Any]]:
    size = config.tuning.max_message_bytes
    return [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
        # An address in use must fail loudly, not be silently shared with another broker.
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        # Ping idle peers too: a link session whose dialer died silently must end (a session
        # for a neighbour that has one is refused, so the restarted dialer waits for this).
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


class BrokerServer:
    def __init__(self, config: BrokerConfig, broker: Broker | None = None) -> None:
        self.config = config
        self.broker = broker if broker is not None else Broker(config.to_rom())
        t = config.tuning
        self.trace = LiveSink(config.trace_path, config.broker_id,
                              flush_interval=t.trace_flush_interval_s,
                              max_bytes=t.trace_max_bytes)
        self.metrics = Metrics(config.broker_id)
        self._seeds = random.Random(t.seed)
        # the address book: where every broker of the run is dialled from here (the
        # orchestrator keeps it current, admin SetPeers); the configured neighbours first
        self.book: dict[str, str] = {**config.peers, **config.neighbors}
        self.book.pop(config.broker_id, None)
        self._run_brokers = frozenset(config.run_brokers)
        self.links: dict[str, Link] = {
            n: Link(config, n, receive=self._on_link_message,
                    receive_notifies=self._on_link_notifies, trace=self.trace,
                    metrics=self.metrics, rng=random.Random(self._seeds.getrandbits(64)))
            for n in sorted(config.neighbors)
        }
        self.clients = ClientService(
            config.broker_id, self.is_broker, self.step, self.publish, self.trace,
            self.metrics, queue_limit=t.client_queue_limit, queue_bytes=t.client_queue_bytes,
            max_message_bytes=t.max_message_bytes, limits=config.limits(),
            client_secret=config.client_secret, hello_timeout=t.hello_timeout_s,
        )
        self.health = health_aio.HealthServicer()
        self.admin_health = health_aio.HealthServicer()
        self.listen_port = 0
        self.admin_port = 0
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._server: grpc.aio.Server | None = None
        self._admin: grpc.aio.Server | None = None
        self._started = False
        self._stop_task: asyncio.Task[None] | None = None
        self._stopped: asyncio.Event | None = None
        self._links_serving: bool | None = None
        self._memory = MemoryReturner()

    # ---- time -------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The core's clock: seconds of loop (monotonic) time since start."""
        # the loop itself, not asyncio.get_running_loop(): that checks os.getpid() (a system
        # call) on every event, a few per cent of a busy broker
        loop = self._loop or asyncio.get_running_loop()
        return loop.time() - self._t0

    # ---- the one place where the core is driven ---------------------------------------------

    def step(self, event: Event, notification: Notification | None = None,
             wire: bytes | None = None) -> bool:
        """Step the core with one event and carry out its effects; False if the core failed.

        `wire`: the encoded form of `notification`, which the event carries (a publication,
        a Notify from a link). The core passes the notification object on into its Send and
        Deliver effects; those forward these bytes instead of encoding it again."""
        try:
            effects = self.broker.step(self.now, event)
        except Exception as e:
            self._core_error(event, e)
            return False
        self._apply(effects, notification, wire)
        return True

    def publish(self, client: str, accepted: list[tuple[Notification, bytes]]) -> None:
        """Step the core with the publications of one request, in order."""
        self.step_all([(ClientPublish(client, n), n, wire) for n, wire in accepted])

    def step_all(self, events: list[tuple[Event, Notification, bytes]]) -> None:
        """`step` for each (event, the notification it carries, its encoded form), in order,
        at one clock reading: they arrived together (a publish request, a link batch)."""
        now = self.now
        step_many = self.broker.step_many
        todo = [event for event, _, _ in events]
        done = 0  # events stepped (or failed) so far
        while done < len(events):
            out: list[list[Effect]] = []
            failed: Exception | None = None
            try:  # the core in one call; only an event that raises costs a call more
                step_many(now, todo if not done else todo[done:], out)
            except Exception as e:
                failed = e
            self._apply_all(events[done:done + len(out)] if done or failed else events, out)
            done += len(out)
            if failed is not None:
                self._core_error(events[min(done, len(events) - 1)][0], failed)
                done += 1

    def _apply_all(self, events: list[tuple[Event, Notification, bytes]],
                   out: list[list[Effect]]) -> None:
        """`_apply` of each event's effects, in order; a run of Sends that forward the
        notifications as they arrived to one link goes to it in one call (`Link.send_notifies`:
        the Sends of a request or a link batch towards the next broker of a chain), and a run
        of their Delivers to one client likewise (`ClientService.deliver_all`)."""
        links = self.links
        apply = self._apply
        # at most one of the two runs holds anything: each is flushed before the other grows
        sends: list[tuple[Notify, bytes]] = []  # for `link`, not sent yet
        link: Link | None = None
        delivers: list[tuple[Notification, bytes]] = []  # for `client`, not delivered yet
        client = ""
        for (_, n, wire), effects in zip(events, out, strict=True):
            for effect in effects:
                kind = type(effect)
                if kind is Send:
                    message = effect.message  # type: ignore[union-attr]
                    if (type(message) is Notify and message.notification is n
                            and not message.gray):
                        to = links.get(effect.neighbor)  # type: ignore[union-attr]
                        if to is not None:
                            if delivers:
                                self._deliver_run(client, delivers)
                                delivers = []
                            if to is not link and sends:
                                self._send_run(link, sends)
                                sends = []
                            link = to
                            sends.append((message, wire))
                            continue
                elif kind is Deliver and effect.notification is n:  # type: ignore[union-attr]
                    if sends:
                        self._send_run(link, sends)
                        sends = []
                    if effect.client != client and delivers:  # type: ignore[union-attr]
                        self._deliver_run(client, delivers)
                        delivers = []
                    client = effect.client  # type: ignore[union-attr]
                    delivers.append((n, wire))
                    continue
                if sends:
                    self._send_run(link, sends)
                    sends = []
                if delivers:
                    self._deliver_run(client, delivers)
                    delivers = []
                apply([effect], n, wire)
        if sends:
            self._send_run(link, sends)
        if delivers:
            self._deliver_run(client, delivers)

    def _send_run(self, link: Link | None, run: list[tuple[Notify, bytes]]) -> None:
        assert link is not None
        try:
            link.send_notifies(run)
        except Exception as e:  # as _apply: one bad effect must not cost the others
            log.exception("sending %d notifications to %s failed", len(run), link.neighbor)
            self.metrics.core_error("effect")
            self.trace.record("error", effect="Send", error=str(e))

    def _deliver_run(self, client: str, run: list[tuple[Notification, bytes]]) -> None:
        try:
            self.clients.deliver_all(client, run)
        except Exception as e:  # as _apply
            log.exception("delivering %d notifications to %s failed", len(run), client)
            self.metrics.core_error("effect")
            self.trace.record("error", effect="Deliver", error=str(e))

    def step_checked(self, event: Event) -> list[Effect]:
        """Like step, but the core's exception propagates (admin reports it to the caller)."""
        effects = self.broker.step(self.now, event)
        self._apply(effects)
        return effects

    def _core_error(self, event: Event, error: Exception) -> None:
        name = type(event).__name__
        log.error("core failed on %s: %s: %s", name, type(error).__name__, error, exc_info=error)
        self.metrics.core_error(name)
        self.trace.record("error", event=name, error=f"{type(error).__name__}: {error}",
                          detail=repr(event)[:500])

    def _apply(self, effects: list[Effect], notification: Notification | None = None,
               wire: bytes | None = None) -> None:
        """Carry out effects; those that pass `notification` on forward `wire`, its bytes."""
        for effect in effects:
            try:
                kind = type(effect)
                if kind is Send:
                    link = self.links.get(effect.neighbor)  # type: ignore[union-attr]
                    if link is None:
                        link = self.open_link(effect.neighbor)  # type: ignore[union-attr]
                    message = effect.message  # type: ignore[union-attr]
                    # a gray Notify (link exchange) is not the message that arrived: encode it
                    link.send(message, wire if wire is not None and type(message) is Notify
                              and message.notification is notification
                              and not message.gray else None)
                elif kind is Deliver:
                    n = effect.notification  # type: ignore[union-attr]
                    self.clients.deliver(effect.client, n,  # type: ignore[union-attr]
                                         wire if n is notification else None)
                elif kind is SetTimer:
                    self._set_timer(effect.timer, effect.at)  # type: ignore[union-attr]
                elif kind is Trace:
                    self._core_trace(effect)  # type: ignore[arg-type]
                else:
                    raise TypeError(f"unknown effect {effect!r}")
            except Exception as e:  # one bad effect must not cost the others
                log.exception("effect %r failed", effect)
                self.metrics.core_error("effect")
                self.trace.record("error", effect=type(effect).__name__, error=str(e))

    def _core_trace(self, effect: Trace) -> None:
        self.trace.record(effect.kind, effect.fields)
        if effect.kind == "reconfig":  # a chaos fault `during` this phase waits for it
            self.trace.flush_soon()
            self.metrics.reconfig_phase(str(effect.fields.get("phase")))
        elif effect.kind == "recolor":
            colour = effect.fields.get("c_cur")
            self.metrics.recolor(colour if isinstance(colour, int) else None)
        if effect.kind == "expire":
            count = effect.fields.get("count", 1)
            self.metrics.expiries(count if isinstance(count, int) else 1)

    def _set_timer(self, name: str, at: float) -> None:
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        if not math.isfinite(at):
            raise ValueError(f"timer {name!r}: time {at!r} is not finite")
        loop = self._loop or asyncio.get_running_loop()
        self._timers[name] = loop.call_at(self._t0 + at, self._fire_timer, name, self._t0 + at)

    def _fire_timer(self, name: str, due: float) -> None:
        self._timers.pop(name, None)
        # the timing model (trace rule R13c): how late the loop ran the timer
        late = (self._loop or asyncio.get_running_loop()).time() - due
        self.trace.record("timer", timer=name, late=late, due=time.time() - late)
        self.step(TimerFired(name))

    # ---- link costs measured live (optimizer.link_costs: {model: measured}) -------------------

    def _on_rtt(self, peer: str, rtt: float) -> None:
        self.step(LinkMeasured(peer, rtt))

    async def _measure_forever(self, every: float) -> None:
        """Every `every` s, the round trip to every broker of the address book, for the
        optimizer's link costs: a Ping over the link where its session is up (through both
        link shapers, so an emulated delay counts), else a gRPC health check of the peer's
        listen address over a probe channel kept per peer (the network's round trip)."""
        probes: dict[str, grpc.aio.Channel] = {}
        try:
            while True:
                for peer, address in list(self.book.items()):
                    link = self.links.get(peer)
                    if link is not None:
                        link.on_rtt = self._on_rtt
                        if link.ping():
                            continue
                    rtt = await self._probe(probes, peer, address)
                    if rtt is not None:
                        self.step(LinkMeasured(peer, rtt))
                await asyncio.sleep(every)
        finally:
            for channel in probes.values():
                with contextlib.suppress(Exception):
                    await channel.close()

    async def _probe(self, probes: dict[str, grpc.aio.Channel], peer: str,
                     address: str) -> float | None:
        """One health check's round trip to `peer` (None: it did not answer, or the probe
        channel was not connected yet: a connection's set-up is not a round trip)."""
        channel = probes.get(peer)
        if channel is None or getattr(channel, "_weeble_address", None) != address:
            if channel is not None:
                await channel.close()
            tls = self.config.link_tls
            options = channel_options(self.config)
            channel = (grpc.aio.insecure_channel(address, options=options) if tls is None
                       else grpc.aio.secure_channel(address, tls_credentials(tls), options=[
                           *options, ("grpc.ssl_target_name_override", peer)]))
            channel._weeble_address = address  # type: ignore[attr-defined]
            probes[peer] = channel
        ready = channel.get_state(try_to_connect=True) is grpc.ChannelConnectivity.READY
        stub = health_pb2_grpc.HealthStub(channel)
        t0 = time.monotonic()
        try:
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
        except grpc.RpcError:
            return None
        return time.monotonic() - t0 if ready else None

    # ---- dynamic links (reconfiguration) ------------------------------------------------------

    def open_link(self, peer: str) -> Link:
        """The link to `peer`, opened from the address book if there is none: a neighbour the
        core gained, or an out-of-band channel of the link exchange. KeyError if `peer` is not
        in the book (the effect fails, is counted and traced; the broker goes on)."""
        link = self.links.get(peer)
        if link is not None:
            return link
        address = self.book.get(peer)
        if address is None or peer == self.config.broker_id:
            raise KeyError(f"Send to {peer!r}, which is neither a neighbour nor in the address"
                           " book")
        link = self._new_link(peer, address)
        link.dial()
        return link

    def _new_link(self, peer: str, address: str) -> Link:
        link = Link(self.config, peer, receive=self._on_link_message,
                    receive_notifies=self._on_link_notifies, trace=self.trace,
                    metrics=self.metrics, rng=random.Random(self._seeds.getrandbits(64)),
                    address=address, dynamic=True)
        self.links[peer] = link
        self.trace.record("link_open", peer=peer, address=address)
        log.info("link %s opened (dynamic, %s)", peer, address)
        return link

    def is_broker(self, name: str) -> bool:
        """`name` is a broker of this run: planned, in the address book, or linked to."""
        return (name == self.config.broker_id or name in self._run_brokers
                or name in self.book or name in self.links)

    def accept_link(self, peer: str) -> Link | None:
        """The acceptor's Link for a dialer that has none yet: a broker of the address book
        that is a current neighbour or a planned one (None: refused)."""
        address = self.book.get(peer)
        if address is None or peer == self.config.broker_id or not self.admits(peer):
            return None
        return self._new_link(peer, address)

    def admits(self, peer: str) -> bool:
        """A link session from `peer` is admitted (docs/guide/live-limits.md): a neighbour now
        (every colour's tree; the cycle of a link exchange I am locked in, whose Lock announced
        its links), or in mode skip_ring a broker my state refers to, a supervisor, one whose
        planned link its supervisor announced (a lease), and at a supervisor any broker of the
        run (a join reaches it first, seed 003). The rest are refused, even from the address
        book: whoever holds the link token could otherwise open a session as any of them."""
        if peer in self.wanted_links():
            return True
        rom = self.broker.rom
        if rom.overlay is OverlayKind.COLOURED and self.is_broker(peer) and (
                rom.is_root or rom.colours.degree > 0):
            # a broker that lost its place in the coloured tree (A13) walks from R (A14:
            # AskPlace; its join request goes to R too), and with a degree bound down the
            # c_new tree to wherever A15 points it: none of them is its neighbour yet. Refused,
            # a child dropped for one late ACK never came back (a loaded test run lost
            # 378 deliveries). A broker added at run time is one too (its address pushed)
            return True
        node = getattr(self.broker, "skip_ring_node", None)
        if node is None:
            return False
        try:
            supervisors = node.sr.supervisors
            return (peer in supervisors or self.config.broker_id in supervisors
                    or peer in node.planned_links(self.now) or peer in node.known())
        except Exception:  # a corrupted RAM: admit while it heals, as wanted_links keeps links
            return True

    def set_peers(self, peers: dict[str, str]) -> None:
        """Update the address book (admin SetPeers); links of known peers keep their address
        until they are dialled again."""
        for peer, address in peers.items():
            if peer == self.config.broker_id:
                continue
            self.book[peer] = address
            link = self.links.get(peer)
            if link is not None:  # its next dial goes there (a session up now stays up)
                link.address = address
        self.trace.record("peers", peers=sorted(peers))

    def wanted_links(self, cycle: bool = True) -> set[str]:
        """The peers this broker needs a link to now: its overlay neighbours (every colour's,
        on the coloured overlay) and (`cycle`) the cycle of a link exchange it takes part in."""
        ram = self.broker.ram
        try:
            trees = getattr(ram.overlay, "trees", None)
            wanted = set(ram.overlay.neighbors)
            if trees is not None:
                for tree in trees:
                    wanted |= set(tree.neighbors)
            x = ram.exchange
            if cycle and x is not None and x.locked:
                wanted |= set(x.path)
        except Exception:  # a corrupted RAM: keep every link until it heals
            return set(self.links)
        wanted.discard(self.config.broker_id)
        return wanted

    async def _reconcile_links(self, idle_s: float) -> None:
        """Open links to neighbours that have none; close dynamic links nobody needs (not a
        neighbour, not on a locked cycle, nothing queued, idle for `idle_s`). The cycle of a
        locked exchange is not dialled ahead: its brokers admit me once the Lock reached
        them, and the exchange sends to each only after that (a dial ahead was refused)."""
        wanted, neighbours = self.wanted_links(), self.wanted_links(cycle=False)
        now = time.monotonic()
        for peer in neighbours:
            if peer not in self.links and peer in self.book:
                self.open_link(peer)
        for link in self.links.values():  # needed, or something to send: get a session
            if link.dynamic and not link.connected and not link.dialing and not link.cut and (
                    link.neighbor in neighbours or len(link.queue)):
                link.dial()
        for peer, link in list(self.links.items()):
            if (peer in wanted or len(link.queue) or link.unacked
                    or now - link.last_used < idle_s):
                continue
            del self.links[peer]
            self.trace.record("link_close", peer=peer, why="not needed")
            log.info("link %s closed (not a neighbour any more)", peer)
            await link.close()

    def _on_link_message(self, neighbor: str, message: Message, wire: bytes | None) -> None:
        if wire is not None:
            self.step(Receive(neighbor, message), message.notification,  # type: ignore[union-attr]
                      wire)
        else:
            self.step(Receive(neighbor, message))

    def _on_link_notifies(self, neighbor: str, notifies: list[tuple[Notify, bytes]]) -> None:
        self.step_all([(Receive(neighbor, m), m.notification, wire) for m, wire in notifies])

    # ---- views used by admin ----------------------------------------------------------------

    def core_snapshot(self) -> dict[str, Any]:
        return self.broker.snapshot()

    def client_streams(self) -> list[str]:
        return self.clients.open_streams()

    # ---- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("BrokerServer.start() called twice")
        self._started = True
        loop = self._loop = asyncio.get_running_loop()
        self._t0 = loop.time()
        self._stopped = asyncio.Event()
        cfg = self.config
        self.trace.start()
        # neighbours as a list (the trace schema's type); their addresses beside it
        self.trace.record("start", algorithm=cfg.algorithm.value, listen=cfg.listen_address,
                          admin=cfg.admin_address, neighbors=sorted(cfg.neighbors),
                          addresses=cfg.neighbors)
        try:
            await self._start_servers()
            if cfg.metrics_address is not None:
                self.metrics.serve(cfg.metrics_address, cfg.tls)
        except Exception:
            await self._stop_servers(grace=0)
            await self.trace.aclose()
            raise
        self.step(Start())
        for link in self.links.values():
            link.start()
        self._tasks.append(loop.create_task(self._sample_forever(), name="sampler"))
        if cfg.tuning.snapshot_period_s is not None and self.trace.enabled:
            self._tasks.append(loop.create_task(self._snapshot_forever(), name="snapshots"))
        opt = self.broker.rom.optimizer
        if opt is not None and opt.measure_every > 0:
            self._tasks.append(loop.create_task(self._measure_forever(opt.measure_every),
                                                name="link-costs"))
        await self._update_link_health()
        log.info("broker %s serving on %s (admin %s), neighbours %s", cfg.broker_id,
                 cfg.listen_address, cfg.admin_address, sorted(cfg.neighbors) or "none")
        if cfg.open_clients:
            log.warning("broker %s: OPEN client mode: clients are not authenticated, any client"
                        " may use any client id (local play only)", cfg.broker_id)

    async def _start_servers(self) -> None:
        cfg = self.config
        options = server_options(cfg)
        cap = cfg.tuning.max_streams_per_peer
        # every call says what it wants within hello_timeout_s (RequestDeadline, outermost)
        silent = RequestDeadline(cfg.tuning.hello_timeout_s)
        server = grpc.aio.server(options=options, interceptors=(
            silent, PeerStreamCap(cap, self.metrics.stream_refused),))
        server.add_generic_rpc_handlers(
            (LinkService(cfg, self.links, self.metrics, self.accept_link,
                         lambda peer: peer in self.book).handler(),
             self.clients.handler())
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (
                client_pb2.DESCRIPTOR.services_by_name["Client"].full_name,
                link_pb2.DESCRIPTOR.services_by_name["Link"].full_name,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        self.listen_port = _bind(server, cfg.listen_address, listen_credentials(cfg),
                                 "listen_address")
        self._server = server

        admin = grpc.aio.server(options=options, interceptors=(
            silent, PeerStreamCap(cap, self.metrics.stream_refused),
            BearerTokenInterceptor(cfg.admin_token)))
        admin_pb2_grpc.add_AdminServicer_to_server(AdminService(self), admin)
        health_pb2_grpc.add_HealthServicer_to_server(self.admin_health, admin)
        reflection.enable_server_reflection(
            (
                admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            admin,
        )
        self.admin_port = _bind(admin, cfg.admin_address, admin_credentials(cfg), "admin_address")
        self._admin = admin
        await server.start()
        await admin.start()
        for name in ("", CLIENT_SERVICE):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        for name in ("", ADMIN_SERVICE):
            await self.admin_health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def _sample_forever(self) -> None:
        """Keep the links' health status current (fast) and sample the gauges (slower)."""
        loop = asyncio.get_running_loop()
        interval = self.config.tuning.metrics_interval_s
        next_sample = loop.time()
        while True:
            try:
                await self._reconcile_links(self.config.tuning.link_idle_s)
            except Exception as e:  # never stop the sampler
                log.warning("link reconciliation failed: %s", e)
            await self._update_link_health()
            for link in self.links.values():
                link.ack_if_due()  # the link layer's acknowledgements: at least every 0.1 s
            if loop.time() >= next_sample:
                next_sample = loop.time() + interval
                self._sample_gauges()
            await asyncio.sleep(min(interval, 0.1))

    async def _snapshot_forever(self) -> None:
        """Trace a snapshot of the core's state every period, at wall-clock multiples of it, so
        that the brokers of a run snapshot together: round k is taken at about k·period (Unix
        time), and the analysis checks each complete round as one global state (R8b)."""
        period = self.config.tuning.snapshot_period_s
        assert period is not None
        while True:
            now = time.time()
            k = math.floor(now / period) + 1
            await asyncio.sleep(k * period - now)
            try:
                snapshot = self.broker.snapshot()
            except Exception as e:  # a corrupted state must not stop the snapshots
                self.trace.record("error", event="snapshot", error=f"{type(e).__name__}: {e}")
                continue
            self.trace.record("snapshot", snapshot, round=k)

    def _sample_gauges(self) -> None:
        try:
            # count in place: a full snapshot renders every entry (10^4 filters: ~40 ms a second)
            self.metrics.table_sizes([len(t) for t in self.broker.ram.tables])
        except Exception as e:  # a corrupted state must not stop the sampling
            log.debug("table size sampling failed: %s", e)
        for link in self.links.values():
            self.metrics.link_queued(link.neighbor, len(link.queue), link.queue.bytes)
        self.metrics.client_queued(self._client_queued())
        # per-subscription state of the client service ends with the lease (2π: surely over)
        self.clients.prune(2 * self.config.params.pi)
        # what a peer that left, or a drained backlog, held goes back to the system
        if self._memory.sample():
            self.metrics.memory_trim()

    def _client_queued(self) -> int:
        """Bytes queued for the local clients' subscribe streams."""
        return sum(s.size for subs in self.clients.streams.values() for s in subs.values())

    async def _update_link_health(self) -> None:
        links = self.links
        serving = all(n in links and links[n].connected for n in self.wanted_links(cycle=False))
        if serving != self._links_serving:
            self._links_serving = serving
            status = (health_pb2.HealthCheckResponse.SERVING if serving
                      else health_pb2.HealthCheckResponse.NOT_SERVING)
            await self.health.set(LINKS_HEALTH, status)
            await self.admin_health.set(LINKS_HEALTH, status)

    def link_states(self) -> dict[str, LinkState]:
        return {n: link.state for n, link in self.links.items()}

    def request_stop(self, drain_s: float | None = None) -> None:
        """Begin a graceful stop (SIGTERM, admin Shutdown); idempotent."""
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self.stop(drain_s))

    async def wait_stopped(self) -> None:
        assert self._stopped is not None, "not started"
        await self._stopped.wait()

    async def stop(self, drain_s: float | None = None) -> None:
        """Drain outgoing link queues (bounded by drain_s), flush the trace, stop everything."""
        if self._stopped is None or self._stopped.is_set():
            return
        loop = asyncio.get_running_loop()
        drain = self.config.tuning.drain_timeout_s if drain_s is None else drain_s
        log.info("broker %s stopping (drain %.2fs)", self.config.broker_id, drain)
        self.clients.close_all()
        await self.health.enter_graceful_shutdown()
        await self.admin_health.enter_graceful_shutdown()
        deadline = loop.time() + drain
        await asyncio.gather(*(link.drain(deadline) for link in self.links.values()))
        queued = sum(len(link.queue) for link in self.links.values())
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0.02)  # let gRPC put the last written messages on the wire
        for link in self.links.values():
            await link.close()
        await self._stop_servers(grace=0.2)
        self.metrics.close()
        self.trace.record("stop", undrained=queued,
                          counters={**self.metrics.counters, "trace_dropped": self.trace.dropped})
        await self.trace.aclose()
        self._stopped.set()
        log.info("broker %s stopped", self.config.broker_id)

    async def _stop_servers(self, grace: float) -> None:
        for server in (self._server, self._admin):
            if server is not None:
                with contextlib.suppress(Exception):
                    await server.stop(grace)

    async def __aenter__(self) -> BrokerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(drain_s=0)


def _bind(server: grpc.aio.Server, address: str, creds: grpc.ServerCredentials | None,
          field: str) -> int:
    host, _ = split_address(address)
    try:
        port = (server.add_secure_port(address, creds) if creds is not None
                else server.add_insecure_port(address))
    except RuntimeError as e:
        raise StartupError(f"{field}: cannot bind {address}: {e}") from None
    if port == 0:
        raise StartupError(f"{field}: cannot bind {address} (in use, or not a local address?)")
    log.debug("bound %s (%s) port %d", address, host, port)
    return port
