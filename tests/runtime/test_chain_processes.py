"""Three broker processes in a chain b1 - b2 - b3 (`python -m weeble.runtime`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from tests.runtime.helpers import ADMIN_TOKEN, address, next_host, run
from weeble.core.events import network_id
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.client import Publisher, Subscriber
from weeble.runtime.config import BrokerConfig
from weeble.runtime.process import BrokerProcess
from weeble.trace.reader import read_trace

N = 60


def test_chain_delivers_exactly_once_and_stops_cleanly(
    configs: Callable[..., BrokerConfig], processes: Callable[[BrokerConfig], BrokerProcess]
) -> None:
    addrs = {b: address(next_host()) for b in ("b1", "b2", "b3")}
    edges = {"b1": ["b2"], "b2": ["b1", "b3"], "b3": ["b2"]}
    cfgs = {
        b: configs(b, listen=addrs[b], algorithm="simple", root="b1",
                   neighbors={n: addrs[n] for n in edges[b]})
        for b in addrs
    }
    procs = {b: processes(cfg) for b, cfg in cfgs.items()}
    for proc in procs.values():
        proc.wait_ready(timeout=20, links=True)

    async def scenario() -> tuple[Counter[int], Counter[int]]:
        async with Subscriber(addrs["b3"], "far", rho=0.5) as far, \
                Subscriber(addrs["b2"], "mid", rho=0.5) as mid, \
                Publisher(addrs["b1"], "pub") as pub, \
                AdminClient(cfgs["b1"].admin_address, ADMIN_TOKEN) as admin:
            far_id = await far.subscribe("n >= 0 && even == true")
            mid_id = await mid.subscribe("n >= 30")
            # wait until both subscriptions have reached the publisher's broker
            async with asyncio.timeout(10):
                while True:
                    table = (await admin.snapshot())["core"]["tables"][0]
                    if {network_id("far", far_id), network_id("mid", mid_id)} <= {
                            e["sub_id"] for e in table}:
                        break
                    await asyncio.sleep(0.05)
            for i in range(N):
                await pub.publish({"n": i, "even": i % 2 == 0})
            got_far: Counter[int] = Counter()
            got_mid: Counter[int] = Counter()
            async with asyncio.timeout(10):
                while sum(got_far.values()) < N // 2 or sum(got_mid.values()) < N - 30:
                    for sub, got in ((far, got_far), (mid, got_mid)):
                        for d in sub.pending():
                            got[d.notification.attributes["n"]] += 1
                    await asyncio.sleep(0.02)
            await asyncio.sleep(1.5)  # a few refresh periods: nothing more may arrive
            for sub, got in ((far, got_far), (mid, got_mid)):
                for d in sub.pending():
                    got[d.notification.attributes["n"]] += 1
            return got_far, got_mid

    got_far, got_mid = run(scenario())
    assert got_far == Counter(range(0, N, 2)), "b3's subscriber: each even n exactly once"
    assert got_mid == Counter(range(30, N)), "b2's subscriber: each n >= 30 exactly once"

    for proc in procs.values():
        assert proc.stop(timeout=10) == 0, proc.log_tail()
    for b, cfg in cfgs.items():
        assert cfg.trace_path is not None
        records = list(read_trace(cfg.trace_path))
        assert records[0]["kind"] == "start" and records[-1]["kind"] == "stop", b
        assert all(r["node"] == b for r in records)
    b3 = list(read_trace(cfgs["b3"].trace_path))  # type: ignore[arg-type]
    delivered = Counter(r["seq"] for r in b3 if r["kind"] == "deliver")
    assert delivered == Counter(range(1, N + 1, 2))  # seq = n + 1
    received = [r for r in b3 if r["kind"] == "receive" and r["msg"] == "notify"]
    assert [r["seq"] for r in received] == sorted(r["seq"] for r in received)  # FIFO


def test_sigkill_leaves_a_readable_trace_and_a_restart_appends(
    configs: Callable[..., BrokerConfig], processes: Callable[[BrokerConfig], BrokerProcess]
) -> None:
    cfg = configs("b1", tuning={"trace_flush_interval_s": 0.05})
    proc = processes(cfg)
    proc.wait_ready(timeout=20)

    async def publish() -> None:
        async with Publisher(cfg.listen_address, "pub") as pub:
            for i in range(20):
                await pub.publish({"n": i})
        await asyncio.sleep(0.3)

    run(publish())
    assert proc.kill() != 0
    proc.start()
    proc.wait_ready(timeout=20)
    assert proc.stop() == 0
    assert cfg.trace_path is not None
    recorded = [r["kind"] for r in read_trace(cfg.trace_path)]
    assert recorded.count("start") == 2 and recorded[-1] == "stop"
    assert recorded.count("publish") == 20
