"""The synchronous client wrappers (for command-line use) against a broker process."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import grpc
import pytest

from tests.runtime.helpers import ADMIN_TOKEN
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.client import Delivery, publish_sync, subscribe_sync
from weeble.runtime.config import BrokerConfig
from weeble.runtime.process import BrokerProcess


def test_sync_publish_and_subscribe(
    configs: Callable[..., BrokerConfig], processes: Callable[[BrokerConfig], BrokerProcess]
) -> None:
    cfg = configs("b1")
    processes(cfg).wait_ready(timeout=20)
    target = cfg.listen_address
    got: list[Delivery] = []

    def consume() -> None:
        got.extend(subscribe_sync(target, "alice", "temp > 30", rho=0.5, max_count=2,
                                  timeout=15))

    consumer = threading.Thread(target=consume)
    consumer.start()
    # publish once the subscription is in the broker's table (a wait, not a fixed sleep: the
    # thread's subscribe takes longer on a loaded machine)
    deadline = time.monotonic() + 15
    while not asyncio.run(_subscribed(cfg)):
        assert time.monotonic() < deadline, "alice's subscription never reached the broker"
        time.sleep(0.05)
    sent = publish_sync(target, "sensor", [{"temp": 31}, {"temp": 12}, {"temp": 40.5}])
    assert [n.seq for n in sent] == [1, 2, 3]
    consumer.join(timeout=20)
    assert [d.notification.attributes["temp"] for d in got] == [31, 40.5]

    with pytest.raises(grpc.RpcError) as err:
        list(subscribe_sync(target, "bob", "temp >", rho=1, timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]


async def _subscribed(cfg: BrokerConfig) -> bool:
    admin = AdminClient(cfg.admin_address, ADMIN_TOKEN, timeout=5)
    try:
        snap = await admin.snapshot()
    finally:
        await admin.close()
    return any(e["filter"] for t in snap["core"]["tables"] for e in t)
