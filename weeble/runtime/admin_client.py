"""AdminClient: the orchestrator's and chaos module's handle on one broker's admin service.

Adds the bearer token to every call and speaks TLS when given the run's CA (and, for servers
that require it, the client certificate). Replies are plain dicts/lists, JSON decoded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from weeble.core.events import (
    AddNeighbor,
    Event,
    Leave,
    RemoveNeighbor,
    SetParent,
    StartExchange,
    SubmitReconfig,
)
from weeble.proto.v1 import admin_pb2, admin_pb2_grpc, link_pb2


class AdminClient:
    def __init__(self, address: str, token: str, *, ca: Path | None = None,
                 client_cert: Path | None = None, client_key: Path | None = None,
                 server_name: str | None = None, timeout: float = 10.0) -> None:
        self.address = address
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),)
        options: list[tuple[str, Any]] = []
        if ca is not None:
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            creds = grpc.ssl_channel_credentials(
                root_certificates=ca.read_bytes(),
                private_key=client_key.read_bytes() if client_key else None,
                certificate_chain=client_cert.read_bytes() if client_cert else None,
            )
            self._channel = grpc.aio.secure_channel(address, creds, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        self.stub = admin_pb2_grpc.AdminStub(self._channel)

    def _kw(self) -> dict[str, Any]:
        return {"metadata": self._metadata, "timeout": self.timeout}

    async def snapshot(self) -> dict[str, Any]:
        """{'broker_id', 'core': <core snapshot>, 'links': [...], 'counters', 'now', ...}"""
        reply = await self.stub.Snapshot(admin_pb2.SnapshotRequest(), **self._kw())
        out = MessageToDict(reply, preserving_proto_field_name=True,
                            always_print_fields_with_no_presence=True)
        out["core"] = json.loads(out.pop("core_json") or "null")
        return out

    async def set_link(self, neighbor: str, **shape: float) -> dict[str, Any]:
        reply = await self.stub.SetLink(admin_pb2.SetLinkRequest(neighbor=neighbor, **shape),
                                        **self._kw())
        return _link(reply)

    async def cut_link(self, neighbor: str) -> dict[str, Any]:
        return _link(await self.stub.CutLink(admin_pb2.LinkRequest(neighbor=neighbor),
                                             **self._kw()))

    async def heal_link(self, neighbor: str) -> dict[str, Any]:
        return _link(await self.stub.HealLink(admin_pb2.LinkRequest(neighbor=neighbor),
                                              **self._kw()))

    async def corrupt(self, target: str, value: Any = None, args: dict[str, Any] | None = None,
                      fault_id: str = "") -> dict[str, Any]:
        """Inject a state fault; returns {'fault_id', 'before', 'after'} (core snapshots)."""
        reply = await self.stub.Corrupt(admin_pb2.CorruptRequest(
            target=target, value_json=json.dumps(value), args_json=json.dumps(args or {}),
            fault_id=fault_id), **self._kw())
        return {"fault_id": reply.fault_id, "before": json.loads(reply.before_json),
                "after": json.loads(reply.after_json)}

    async def inject(self, neighbor: str, envelope: link_pb2.Envelope,
                     fault_id: str = "") -> dict[str, Any]:
        """Hand a link message to the broker as if `neighbor` had sent it; returns
        {'fault_id', 'before', 'after', 'effects': {effect type: count}}."""
        reply = await self.stub.Inject(admin_pb2.InjectRequest(
            neighbor=neighbor, envelope=envelope, fault_id=fault_id), **self._kw())
        return {"fault_id": reply.fault_id, "before": json.loads(reply.before_json),
                "after": json.loads(reply.after_json), "effects": dict(reply.effects)}

    async def manage(self, event: str, **args: Any) -> dict[str, Any]:
        """A management event for the core (a reconfiguration step): start_exchange,
        add_neighbor, remove_neighbor, leave, set_parent, submit_reconfig. Returns
        {'effects': {effect type: count}, 'traces': [the core's trace records]}."""
        reply = await self.stub.Manage(admin_pb2.ManageRequest(
            event=event, args_json=json.dumps(args)), **self._kw())
        return {"effects": dict(reply.effects),
                "traces": [json.loads(t) for t in reply.traces_json]}

    async def manage_event(self, event: Event) -> dict[str, Any]:
        """`manage` for a core management event (the inverse of admin.management_event)."""
        if isinstance(event, StartExchange):
            return await self.manage("start_exchange", rid=event.rid, path=list(event.path),
                                     remove=list(event.remove), seed=event.seed)
        if isinstance(event, AddNeighbor):
            return await self.manage("add_neighbor", neighbor=event.neighbor,
                                     bootstrap=event.bootstrap)
        if isinstance(event, RemoveNeighbor):
            return await self.manage("remove_neighbor", neighbor=event.neighbor,
                                     withdraw=event.withdraw)
        if isinstance(event, Leave):
            return await self.manage("leave")
        if isinstance(event, SetParent):
            return await self.manage("set_parent", parent=event.parent)
        if isinstance(event, SubmitReconfig):
            return await self.manage("submit_reconfig", rid=event.rid,
                                     moves=[list(m) for m in event.moves])
        raise TypeError(f"not a management event: {event!r}")

    async def set_peers(self, peers: dict[str, str]) -> None:
        """Update the broker's address book (peer id -> the address it dials)."""
        await self.stub.SetPeers(admin_pb2.SetPeersRequest(peers=peers), **self._kw())

    async def shutdown(self, drain_s: float = 0.0) -> None:
        await self.stub.Shutdown(admin_pb2.ShutdownRequest(drain_s=drain_s), **self._kw())

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _link(reply: admin_pb2.LinkReply) -> dict[str, Any]:
    return MessageToDict(reply.link, preserving_proto_field_name=True,
                         always_print_fields_with_no_presence=True)
