"""The Admin gRPC service: snapshots, link shaping and cuts, state faults, injected link
messages, shutdown.

Admin can corrupt a broker's state, so (1) it is served only on the management address, by its
own gRPC server, never next to the link and client services; (2) every call must carry
`authorization: Bearer <token>` metadata with the per-run token (else UNAUTHENTICATED; only the
standard health service is exempt, for liveness probes); (3) the server can use TLS with
certificates generated per run (weeble.runtime.certs), optionally requiring client
certificates. Unknown links are NOT_FOUND, bad fields and corruption targets INVALID_ARGUMENT,
each with a message naming what was wrong.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import grpc

from weeble.codec.wire import UINT64_MAX, WireError, envelope_to_message
from weeble.core.corruption import CorruptionError
from weeble.core.events import (
    AddNeighbor,
    Corrupt,
    Effect,
    Event,
    Leave,
    Receive,
    RemoveNeighbor,
    SetParent,
    StartExchange,
    SubmitReconfig,
    Trace,
)
from weeble.proto.v1 import admin_pb2, admin_pb2_grpc
from weeble.runtime.config import BrokerConfig, split_address
from weeble.runtime.links import Link
from weeble.runtime.linkshaper import LinkShape
from weeble.runtime.metrics import Metrics
from weeble.runtime.quiet import rate_limited
from weeble.trace.writer import LiveSink, message_ids

ADMIN_SERVICE = "weeble.v1.Admin"
EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)
SHAPE_FIELDS = ("delay_ms", "jitter_ms", "loss", "duplicate", "rate_bps", "corrupt")

log = rate_limited(logging.getLogger(__name__))


class AdminTarget(Protocol):
    """What the admin service needs from the running broker (BrokerServer)."""

    config: BrokerConfig
    links: dict[str, Link]
    trace: LiveSink
    metrics: Metrics

    @property
    def now(self) -> float: ...

    def core_snapshot(self) -> dict[str, Any]: ...

    def step_checked(self, event: Event) -> list[Effect]: ...

    def client_streams(self) -> list[str]: ...

    def request_stop(self, drain_s: float | None = None) -> None: ...

    def set_peers(self, peers: dict[str, str]) -> None: ...


# ---- authentication -------------------------------------------------------------------------


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, token: str, exempt: tuple[str, ...] = EXEMPT_PREFIXES) -> None:
        self._expected = f"Bearer {token}".encode()
        self._exempt = exempt

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or details.method.startswith(self._exempt):
            return handler
        given = ""
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value if isinstance(value, str) else value.decode(errors="replace")
        if hmac.compare_digest(given.encode(), self._expected):
            return handler
        why = "missing authorization metadata" if not given else "wrong admin token"
        log.warning("admin: refused %s: %s", details.method, why)
        return _refusal(handler, f"{why} (expected 'authorization: Bearer <token>')")


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that fails with UNAUTHENTICATED."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    kwargs = {"request_deserializer": handler.request_deserializer,
              "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse, **kwargs)
    return grpc.unary_unary_rpc_method_handler(refuse, **kwargs)


def server_credentials(config: BrokerConfig) -> grpc.ServerCredentials | None:
    if config.tls is None:
        return None
    tls = config.tls
    ca = tls.ca.read_bytes() if tls.ca is not None else None
    return grpc.ssl_server_credentials(
        [(tls.key.read_bytes(), tls.cert.read_bytes())],
        root_certificates=ca,
        require_client_auth=ca is not None,
    )


# ---- the service ----------------------------------------------------------------------------


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(self, target: AdminTarget) -> None:
        self.t = target

    async def Snapshot(
        self, request: admin_pb2.SnapshotRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.SnapshotReply:
        t = self.t
        counters = dict(t.metrics.counters)
        return admin_pb2.SnapshotReply(
            broker_id=t.config.broker_id,
            core_json=json.dumps(t.core_snapshot(), default=str),
            links=[link_status(link) for link in t.links.values()],
            counters=uint64_counters(counters),
            now=t.now,
            client_streams=t.client_streams(),
        )

    async def SetLink(
        self, request: admin_pb2.SetLinkRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.LinkReply:
        link = await self._link(request.neighbor, context)
        changes = {f: getattr(request, f) for f in SHAPE_FIELDS if request.HasField(f)}
        shape: LinkShape | None = None
        error = ""
        try:
            shape = link.shape.updated(**changes)
        except ValueError as e:
            error = f"link {link.neighbor!r}: {e}"
        if shape is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            raise AssertionError("unreachable")
        link.set_shape(shape)
        return admin_pb2.LinkReply(link=link_status(link))

    async def CutLink(
        self, request: admin_pb2.LinkRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.LinkReply:
        link = await self._link(request.neighbor, context)
        link.set_cut(True)
        return admin_pb2.LinkReply(link=link_status(link))

    async def HealLink(
        self, request: admin_pb2.LinkRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.LinkReply:
        link = await self._link(request.neighbor, context)
        link.set_cut(False)
        return admin_pb2.LinkReply(link=link_status(link))

    async def Corrupt(
        self, request: admin_pb2.CorruptRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CorruptReply:
        t = self.t
        if not request.target:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "target: must not be empty")
        value, args, error = _decode_fault(request)
        if error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
        fault_id = request.fault_id or uuid.uuid4().hex[:12]
        before = json.dumps(t.core_snapshot(), default=str)
        # the trace schema's names: `field` is the RAM field, `target` the broker it hits
        me = t.config.broker_id
        t.trace.record("fault_begin", fault_id=fault_id, type="corrupt", field=request.target,
                       target=me, value=value, args=args, source="admin")
        code, error = grpc.StatusCode.OK, ""
        try:
            t.step_checked(Corrupt(request.target, value, args))
        except CorruptionError as e:
            code, error = grpc.StatusCode.INVALID_ARGUMENT, str(e)
        except Exception as e:  # the core failed otherwise; the broker itself goes on
            log.exception("admin Corrupt %s failed", request.target)
            code, error = grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"
        t.trace.record("fault_end", fault_id=fault_id, type="corrupt", field=request.target,
                       target=me, ok=code is grpc.StatusCode.OK, error=error or None)
        if code is not grpc.StatusCode.OK:
            await context.abort(code, error)
        t.metrics.fault(request.target)
        return admin_pb2.CorruptReply(
            fault_id=fault_id,
            before_json=before,
            after_json=json.dumps(t.core_snapshot(), default=str),
        )

    async def Inject(
        self, request: admin_pb2.InjectRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.InjectReply:
        """A message that nobody sent, handed to the core as a Receive from `neighbor`. It
        does not pass the link (no shaping, no cut): it appears inside the broker's end."""
        t = self.t
        link = await self._link(request.neighbor, context)
        kind = request.envelope.WhichOneof("kind")
        error = ""
        message = None
        if kind in (None, "hello", "batch"):
            error = f"envelope: must hold one message (sub, unsub, notify, switch), got {kind}"
        else:
            try:
                message = envelope_to_message(request.envelope, t.config.limits())
            except WireError as e:
                error = f"envelope: {e}"
        if message is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            raise AssertionError("unreachable")
        fault_id = request.fault_id or uuid.uuid4().hex[:12]
        before = json.dumps(t.core_snapshot(), default=str)
        ids = message_ids(message)
        me = t.config.broker_id
        t.trace.record("fault_begin", ids, fault_id=fault_id, type="inject", target=me,
                       peer=link.neighbor, source="admin")
        try:
            effects = t.step_checked(Receive(link.neighbor, message))
        except Exception as e:  # the core failed on it; the broker itself goes on
            log.exception("admin Inject from %s failed", link.neighbor)
            t.trace.record("fault_end", fault_id=fault_id, type="inject", target=me, ok=False,
                           error=f"{type(e).__name__}: {e}")
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            raise AssertionError("unreachable") from None
        t.trace.record("fault_end", fault_id=fault_id, type="inject", target=me,
                       peer=link.neighbor, ok=True)
        t.metrics.fault("inject")
        tally: dict[str, int] = {}
        for effect in effects:
            name = _EFFECT_NAMES.get(type(effect).__name__, type(effect).__name__.lower())
            tally[name] = tally.get(name, 0) + 1
        return admin_pb2.InjectReply(
            fault_id=fault_id, before_json=before,
            after_json=json.dumps(t.core_snapshot(), default=str), effects=tally,
        )

    async def Manage(
        self, request: admin_pb2.ManageRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ManageReply:
        """A management event (a reconfiguration step the manager asks of this broker)."""
        t = self.t
        try:
            event = management_event(request.event, json.loads(request.args_json or "{}"))
        except (ValueError, TypeError) as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise AssertionError("unreachable") from None
        t.trace.record("manage", event=request.event, args=json.loads(request.args_json or "{}"))
        try:
            effects = t.step_checked(event)
        except Exception as e:  # the core failed on it; the broker itself goes on
            log.exception("admin Manage %s failed", request.event)
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            raise AssertionError("unreachable") from None
        tally: dict[str, int] = {}
        traces: list[str] = []
        for effect in effects:
            name = _EFFECT_NAMES.get(type(effect).__name__, type(effect).__name__.lower())
            tally[name] = tally.get(name, 0) + 1
            if type(effect) is Trace:
                traces.append(json.dumps({"kind": effect.kind, **effect.fields}, default=str))
        return admin_pb2.ManageReply(effects=tally, traces_json=traces)

    async def SetPeers(
        self, request: admin_pb2.SetPeersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.SetPeersReply:
        peers = dict(request.peers)
        for peer, address in peers.items():
            try:
                split_address(address)
            except ValueError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"peers[{peer!r}]: {e}")
        self.t.set_peers(peers)
        return admin_pb2.SetPeersReply()

    async def Shutdown(
        self, request: admin_pb2.ShutdownRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ShutdownReply:
        drain = request.drain_s if request.drain_s > 0 else None
        # after this reply has gone out
        asyncio.get_running_loop().call_later(0.05, self.t.request_stop, drain)
        return admin_pb2.ShutdownReply()

    async def _link(self, neighbor: str, context: grpc.aio.ServicerContext) -> Link:
        link = self.t.links.get(neighbor)
        if link is None:
            known = ", ".join(sorted(self.t.links)) or "none"
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"unknown link {neighbor!r} at {self.t.config.broker_id} (neighbours: {known})",
            )
            raise AssertionError("unreachable")
        return link


_EFFECT_NAMES = {"Send": "send", "Deliver": "deliver", "SetTimer": "timer", "Trace": "trace"}


def _decode_fault(request: admin_pb2.CorruptRequest) -> tuple[Any, dict[str, Any], str]:
    """(value, args, error message or '')."""
    try:
        value = json.loads(request.value_json) if request.value_json else None
    except json.JSONDecodeError as e:
        return None, {}, f"value_json: not JSON: {e}"
    try:
        args = json.loads(request.args_json) if request.args_json else {}
    except json.JSONDecodeError as e:
        return None, {}, f"args_json: not JSON: {e}"
    if not isinstance(args, dict):
        return None, {}, f"args_json: must be a JSON object, got {type(args).__name__}"
    return value, args, ""


def uint64_counters(counters: Mapping[str, int]) -> dict[str, int]:
    """Counters as Snapshot's map<string, uint64> can carry them: negative ones left out,
    larger ones at the maximum (one value out of range fails the whole reply)."""
    return {k: min(int(v), UINT64_MAX) for k, v in counters.items() if v >= 0}


def link_status(link: Link) -> admin_pb2.LinkStatus:
    s = link.status()
    return admin_pb2.LinkStatus(
        neighbor=s["neighbor"],
        address=s["address"],
        state=s["state"],
        dialer=s["dialer"],
        shape=admin_pb2.LinkShape(**s["shape"]),
        queued=s["queued"],
        counters=uint64_counters(s["counters"]),
    )


def management_event(name: str, args: Any) -> Event:
    """The core event a Manage request names; ValueError naming what is wrong."""
    if not isinstance(args, dict):
        raise ValueError("args_json: must be a JSON object")
    try:
        if name == "start_exchange":
            remove = tuple(args["remove"])
            if len(remove) != 2:
                raise ValueError("remove: must be a link [a, b]")
            return StartExchange(str(args["rid"]), tuple(str(b) for b in args["path"]),
                                 (str(remove[0]), str(remove[1])), int(args.get("seed", 0)))
        if name == "add_neighbor":
            return AddNeighbor(str(args["neighbor"]), bool(args.get("bootstrap", True)))
        if name == "remove_neighbor":
            return RemoveNeighbor(str(args["neighbor"]), bool(args.get("withdraw", True)))
        if name == "leave":
            return Leave()
        if name == "set_parent":
            parent = args.get("parent")
            return SetParent(None if parent is None else str(parent))
        if name == "submit_reconfig":
            moves = tuple((str(b), None if p is None else str(p)) for b, p in args["moves"])
            return SubmitReconfig(str(args["rid"]), moves)
    except KeyError as e:
        raise ValueError(f"{name}: missing argument {e.args[0]!r}") from None
    raise ValueError(f"event: unknown management event {name!r} (start_exchange, add_neighbor,"
                     " remove_neighbor, leave, set_parent, submit_reconfig)")
