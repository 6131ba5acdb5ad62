"""Helpers of the live tests: loopback addresses, free ports, broker configs, bounded runs."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from pathlib import Path
from typing import Any

import grpc

from weeble.codec.wire import hello
from weeble.orchestrator.local import free_port, free_ports
from weeble.runtime.config import BrokerConfig
from weeble.runtime.links import CONNECT_METHOD

# Each test session draws its loopback addresses from 127.0.0.10 upwards, so brokers of one test
# get distinct addresses (as on the local backend) without colliding with 127.0.0.1 services.
_hosts = itertools.count(10)


def next_host() -> str:
    return f"127.0.0.{next(_hosts) % 240 + 10}"




def address(host: str) -> str:
    return f"{host}:{free_port(host)}"


ADMIN_TOKEN = "test-admin-token-" + secrets.token_hex(8)
LINK_TOKEN = "test-link-token-" + secrets.token_hex(8)


def make_config(
    broker_id: str,
    tmp: Path,
    *,
    neighbors: dict[str, str] | None = None,
    host: str | None = None,
    listen: str | None = None,
    algorithm: str = "flooding",
    root: str | None = None,
    parent: str | None = None,
    trace: bool = True,
    **extra: Any,
) -> BrokerConfig:
    if host is None:  # admin next to the listen address, as the local backend does
        host = listen.rsplit(":", 1)[0] if listen else next_host()
    ports = free_ports(host, 3)
    data: dict[str, Any] = {
        "broker_id": broker_id,
        "algorithm": algorithm,
        "params": {"pi": 2.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.05, "d": 2},
        "root": root or broker_id,
        "parent": parent,
        "neighbors": neighbors or {},
        # two ports picked together (one released at once may be picked again), the admin
        # port never the listen port
        "listen_address": listen or f"{host}:{ports[0]}",
        "admin_address": next(f"{host}:{p}" for p in ports[1:] if f"{host}:{p}" != listen),
        "admin_token": ADMIN_TOKEN,
        "link_token": LINK_TOKEN,
        # in-process brokers of these tests take any client; tests/runtime/test_hardening.py
        # and the orchestrated runs authenticate theirs
        "open_clients": True,
        "trace_path": str(tmp / f"{broker_id}.jsonl") if trace else None,
        "tuning": {"reconnect_min_s": 0.05, "reconnect_max_s": 0.5, "seed": 7},
    }
    data.update(extra)
    return BrokerConfig.model_validate(data)


def run(coro: Any, timeout: float = 60) -> Any:
    """Run one test scenario on a fresh event loop, bounded in time."""

    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    """Poll `predicate()` until it is true, within `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def dial_as(cfg: BrokerConfig, me: str, token: str = LINK_TOKEN
                  ) -> tuple[grpc.aio.Channel, grpc.aio.StreamStreamCall]:
    """Open a link stream to `cfg`'s broker and say hello as broker `me` (a test playing a
    neighbour, or an impostor)."""
    channel = grpc.aio.insecure_channel(cfg.listen_address)
    call = channel.stream_stream(CONNECT_METHOD)()
    await call.write(hello(me, token).SerializeToString())
    return channel, call
