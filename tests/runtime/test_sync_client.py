"""The synchronous client wrappers (for command-line use) against a broker process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import pytest

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
    time.sleep(1.0)  # let the subscription reach the broker
    sent = publish_sync(target, "sensor", [{"temp": 31}, {"temp": 12}, {"temp": 40.5}])
    assert [n.seq for n in sent] == [1, 2, 3]
    consumer.join(timeout=20)
    assert [d.notification.attributes["temp"] for d in got] == [31, 40.5]

    with pytest.raises(grpc.RpcError) as err:
        list(subscribe_sync(target, "bob", "temp >", rho=1, timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
