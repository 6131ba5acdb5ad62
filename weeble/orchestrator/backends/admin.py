"""Admin access, a part every backend composes: blocking calls to a broker's admin service
(Snapshot, CutLink, SetLink, ...) and its gRPC health, over the run's token and TLS.

A backend's control calls are synchronous (backend.py), so these stubs are too; the async
`AdminClient` (weeble/runtime/admin_client.py) is the testbed's and chaos's. Where a broker
is reached is the backend's answer (`reach`): the part asks it once per broker and keeps the
channel until the broker stops (`drop`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from weeble.orchestrator.backend import AdminAccess, BackendError
from weeble.proto.v1 import admin_pb2_grpc
from weeble.runtime.links import LINK_SERVICE


class AdminStub:
    """A blocking admin stub for one broker: the backend's control calls are synchronous."""

    def __init__(self, broker_id: str, address: str, access: AdminAccess,
                 timeout: float = 5.0) -> None:
        self.broker_id = broker_id
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {access.token}"),)
        if access.ca is not None:
            creds = grpc.ssl_channel_credentials(
                root_certificates=access.ca.read_bytes(),
                private_key=access.client_key.read_bytes() if access.client_key else None,
                certificate_chain=access.client_cert.read_bytes() if access.client_cert else None,
            )
            self._channel = grpc.secure_channel(address, creds)
        else:
            self._channel = grpc.insecure_channel(address)
        self._stub = admin_pb2_grpc.AdminStub(self._channel)

    def call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, metadata=self._metadata,
                                               timeout=self.timeout)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") else "ERROR"
            details = e.details() if hasattr(e, "details") else str(e)
            raise BackendError(f"{self.broker_id}: admin {method}: {code}: {details}") from None

    def close(self) -> None:
        self._channel.close()


class AdminCalls:
    """The run's admin stubs, one per broker, made on first use at the broker's admin address
    (`reach(broker_id)`), dropped when the broker stops (its channel would dial a dead
    process, or a restarted one under the old connection)."""

    def __init__(self, access: Callable[[], AdminAccess], reach: Callable[[str], str]) -> None:
        self._access = access
        self._reach = reach
        self._stubs: dict[str, AdminStub] = {}

    def stub(self, broker_id: str) -> AdminStub:
        stub = self._stubs.get(broker_id)
        if stub is None:
            stub = self._stubs[broker_id] = AdminStub(broker_id, self._reach(broker_id),
                                                      self._access())
        return stub

    def call(self, broker_id: str, method: str, request: Any) -> Any:
        """Admin `method` on the broker; BackendError naming the broker if it fails."""
        return self.stub(broker_id).call(method, request)

    def drop(self, brokers: list[str] | None = None) -> None:
        """Close the stubs of these brokers (None: all)."""
        for b in list(self._stubs) if brokers is None else brokers:
            stub = self._stubs.pop(b, None)
            if stub is not None:
                stub.close()


def wait_serving(address: str, timeout: float, *, links: bool, alive: Any,
                 name: str, access: AdminAccess | None = None) -> None:
    """Poll gRPC health at `address` until SERVING (the link service: all links up). With
    `access` holding the run's TLS material, over TLS (a run with `live.tls`)."""
    deadline = time.monotonic() + timeout
    service = LINK_SERVICE if links else ""
    tls = access.client_tls() if access is not None else None
    creds = tls.credentials() if tls is not None else None
    channel = (grpc.insecure_channel(address) if creds is None else
               grpc.secure_channel(address, creds,
                                   options=[("grpc.ssl_target_name_override", name)]))
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if not alive():
                raise BackendError(f"broker {name} is not running")
            with contextlib.suppress(grpc.RpcError):
                reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            if time.monotonic() > deadline:
                raise BackendError(f"broker {name} not {'linked' if links else 'serving'}"
                                   f" after {timeout:g}s")
            time.sleep(0.05)
