"""One or two brokers in this process, driven over real gRPC sockets on 127.0.0.x."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.runtime.helpers import (
    ADMIN_TOKEN,
    LINK_TOKEN,
    address,
    dial_as,
    next_host,
    run,
    wait_until,
)
from weeble.codec.wire import hello
from weeble.core.broker import Broker
from weeble.core.events import ClientPublish, Effect, Event, network_id
from weeble.orchestrator.backend import AdminAccess
from weeble.proto.v1 import client_pb2, client_pb2_grpc, link_pb2
from weeble.runtime.admin_client import AdminClient
from weeble.runtime.certs import generate_run_certs
from weeble.runtime.client import Publisher, Subscriber
from weeble.runtime.config import BrokerConfig
from weeble.runtime.links import CONNECT_METHOD
from weeble.runtime.server import BrokerServer
from weeble.trace.reader import read_trace

Configs = Callable[..., BrokerConfig]


def kinds(path: Path | None) -> list[str]:
    assert path is not None
    return [r["kind"] for r in read_trace(path)]


# ---- clients --------------------------------------------------------------------------------


def test_publish_subscribe_roundtrip(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> dict[str, int]:
        async with BrokerServer(cfg) as server:
            target = cfg.listen_address
            async with Subscriber(target, "alice", rho=0.3) as sub, \
                    Publisher(target, "pub1") as pub:
                sub_id = await sub.subscribe("x > 3")
                await pub.publish({"x": 5, "s": "hello"})
                await pub.publish({"x": 1})
                await pub.publish({"x": 7.5, "ok": True})
                got = [await sub.get(timeout=5), await sub.get(timeout=5)]
                assert [d.notification.seq for d in got] == [1, 3]
                assert {d.sub_id for d in got} == {sub_id}
                assert got[0].notification.attributes == {"x": 5, "s": "hello"}
                assert got[1].notification.attributes == {"x": 7.5, "ok": True}
                await asyncio.sleep(0.8)  # a few refresh periods
                assert sub.pending() == []
                assert server.client_streams() == [f"alice/{sub_id}"]
            return dict(server.metrics.counters)

    counters = run(scenario())
    assert counters["publishes"] == 3 and counters["deliveries"] == 2
    assert counters["client_refresh"] >= 2
    recorded = kinds(cfg.trace_path)
    assert recorded[0] == "start" and recorded[-1] == "stop"
    for kind in ("subscribe", "refresh", "publish", "deliver"):
        assert kind in recorded, kind


def test_malformed_filter_is_invalid_argument(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        async with BrokerServer(cfg) as server:
            async with Subscriber(cfg.listen_address, "alice", rho=1) as sub:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await sub.subscribe("x >> 3")
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "position 3" in (err.value.details() or "")
            async with grpc.aio.insecure_channel(cfg.listen_address) as channel:
                stub = client_pb2_grpc.ClientStub(channel)
                for call in (
                    stub.Refresh(client_pb2.SubscribeRequest(client="a", sub_id="s",
                                                             filter='name prefix "x')),
                    stub.Publish(client_pb2.PublishRequest(
                        client="p", notifications=[client_pb2.Notification(
                            attributes={"x": client_pb2.Value()})])),
                    stub.Publish(client_pb2.PublishRequest(client="", notifications=[])),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await call
                    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                    assert err.value.details()
            # still serving
            async with Subscriber(cfg.listen_address, "bob", rho=1) as sub:
                await sub.subscribe("x == 1")
            assert server.metrics.counters["core_errors"] == 0

    run(scenario())


def test_oversized_publish_is_refused_clearly(configs: Configs) -> None:
    cfg = configs("b1", tuning={"max_message_bytes": 65536})

    async def scenario() -> None:
        async with BrokerServer(cfg), Publisher(cfg.listen_address, "pub1") as pub:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await pub.publish({"blob": "x" * 200_000})
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in (err.value.details() or "")
            await pub.publish({"blob": "small"})  # the broker is fine

    run(scenario())


# ---- links ----------------------------------------------------------------------------------


def test_garbage_on_a_link_leaves_the_broker_routing(configs: Configs) -> None:
    # b0 < b1, so b1 accepts the link from b0: the test plays b0.
    cfg = configs("b1", neighbors={"b0": address(next_host())})

    async def scenario() -> None:
        async with BrokerServer(cfg) as server:
            channel, call = await dial_as(cfg, "b0")
            reply = link_pb2.Envelope.FromString(await call.read())
            assert reply.hello.broker_id == "b1"
            await wait_until(lambda: server.links["b0"].connected)
            async with Subscriber(cfg.listen_address, "alice", rho=1) as sub:
                await sub.subscribe("x > 0")
                garbage = [
                    b"\xff\xff\xff\xff",  # not protobuf
                    b"\x92\x03\x00",  # field 50: a kind this version does not know
                    link_pb2.Envelope(seq=2, sub=link_pb2.SubMsg(sub_id="s", filter="x >>")
                                      ).SerializeToString(),  # unparsable filter
                    link_pb2.Envelope(seq=3, notify=link_pb2.NotifyMsg(
                        notification=client_pb2.Notification(
                            publisher="p", seq=1, attributes={"x": client_pb2.Value()}))
                    ).SerializeToString(),  # a value with no member set
                    hello("b0", LINK_TOKEN).SerializeToString(),  # a second hello
                ]
                for data in garbage:
                    await call.write(data)
                good = link_pb2.Envelope(seq=4, notify=link_pb2.NotifyMsg(
                    notification=client_pb2.Notification(
                        publisher="remote", seq=9, attributes={"x": client_pb2.Value(i=5)})))
                await call.write(good.SerializeToString())
                delivery = await sub.get(timeout=30)  # at once, unless the machine is loaded
                assert delivery.notification.id == "remote#9"
                # and it still routes outwards: flooding sends a local publication to b0 (after
                # the acks of what b0 wrote, which may come alone or carry it in a batch)
                async with Publisher(cfg.listen_address, "pub1") as pub:
                    await pub.publish({"x": 1})
                seen: list[str] = []
                async with asyncio.timeout(30):
                    while "pub1" not in seen:
                        out = link_pb2.Envelope.FromString(await call.read())
                        for e in out.batch.envelopes if out.HasField("batch") else [out]:
                            if e.HasField("notify"):
                                seen.append(e.notify.notification.publisher)
                assert seen == ["pub1"]  # nothing else went out to b0
            counters = server.metrics.counters
            assert counters["dropped_malformed"] == 3
            assert counters["dropped_unknown_kind"] == 1
            assert counters["dropped_unexpected_hello"] == 1
            assert counters["core_errors"] == 0
            assert server.links["b0"].connected
            call.cancel()
            await channel.close()

    run(scenario())


def test_link_refuses_strangers(configs: Configs) -> None:
    cfg = configs("b1", neighbors={"b0": address(next_host())}, tuning={"hello_timeout_s": 0.5})

    async def scenario() -> None:
        async with BrokerServer(cfg) as server:
            cases = [("b0", "wrong-token", grpc.StatusCode.UNAUTHENTICATED, "token"),
                     ("zz", LINK_TOKEN, grpc.StatusCode.NOT_FOUND, "'zz'"),
                     ("b2", LINK_TOKEN, grpc.StatusCode.NOT_FOUND, "'b2'")]
            for me, token, code, text in cases:
                channel, call = await dial_as(cfg, me, token)
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call.read()
                assert err.value.code() == code and text in (err.value.details() or "")
                await channel.close()
            # garbage and then silence: the hello timeout ends the stream
            channel = grpc.aio.insecure_channel(cfg.listen_address)
            call = channel.stream_stream(CONNECT_METHOD)()
            await call.write(b"\x00garbage")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call.read()
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            await channel.close()
            assert server.metrics.counters["dropped_before_hello"] == 1

    run(scenario())


def test_two_brokers_link_cut_heal_shape_and_reconnect(configs: Configs) -> None:
    a_addr, b_addr = address(next_host()), address(next_host())
    cfg_a = configs("a", listen=a_addr, neighbors={"b": b_addr})
    cfg_b = configs("b", listen=b_addr, neighbors={"a": a_addr})

    async def scenario() -> None:
        async with BrokerServer(cfg_a) as a:
            b = BrokerServer(cfg_b)
            await b.start()
            try:
                await wait_until(lambda: a.links["b"].connected and b.links["a"].connected)
                assert a.links["b"].dialer and not b.links["a"].dialer
                async with Subscriber(b_addr, "alice", rho=0.5) as sub, \
                        Publisher(a_addr, "pub") as pub, \
                        AdminClient(cfg_a.admin_address, ADMIN_TOKEN) as admin:
                    await sub.subscribe("n >= 0")
                    await pub.publish({"n": 1})
                    assert (await sub.get(timeout=5)).notification.seq == 1

                    await admin.cut_link("b")
                    await pub.publish({"n": 2})  # lost on the cut link
                    await admin.heal_link("b")
                    await pub.publish({"n": 3})
                    assert (await sub.get(timeout=5)).notification.seq == 3

                    status = await admin.set_link("b", delay_ms=150)
                    assert status["shape"]["delay_ms"] == 150
                    loop = asyncio.get_running_loop()
                    t = loop.time()
                    await pub.publish({"n": 4})
                    assert (await sub.get(timeout=5)).notification.seq == 4
                    assert loop.time() - t >= 0.14
                    await admin.set_link("b", delay_ms=0)

                    # restart the accepting broker: the dialer reconnects by itself
                    await b.stop(drain_s=0)
                    await wait_until(lambda: not a.links["b"].connected)
                    b = BrokerServer(cfg_b)
                    await b.start()
                    await wait_until(lambda: a.links["b"].connected, timeout=10)
                    snap = await admin.snapshot()
                    link = snap["links"][0]
                    assert link["state"] == "up" and int(link["counters"]["sessions"]) == 2
                    # the publication, and any refresh that crossed the cut either way
                    assert int(snap["counters"]["dropped_cut"]) >= 1
            finally:
                await b.stop(drain_s=0)

    run(scenario())
    cut = [r for r in read_trace(cfg_a.trace_path)
           if r["kind"] == "drop" and r.get("reason") == "cut"]
    assert [(r["publisher"], r["seq"]) for r in cut if r["msg"] == "notify"] == [("pub", 2)]


def test_a_cut_link_traces_every_message_it_drops(configs: Configs) -> None:
    """Whether the cut end is the receiver (b drops what a sent) or the sender (a's queue
    flushed at the cut), each dropped message gets a `drop` record that pairs with its `send`
    record by (from, to, lseq), and the cut counters count exactly those records. A link's
    round-trip probe (Ping) dropped with them is no message: neither counted nor traced."""
    a_addr, b_addr = address(next_host()), address(next_host())
    cfg_a = configs("a", listen=a_addr, neighbors={"b": b_addr})
    cfg_b = configs("b", listen=b_addr, neighbors={"a": a_addr})

    async def scenario() -> tuple[int, list[int]]:
        async with BrokerServer(cfg_a) as a, BrokerServer(cfg_b) as b:
            await wait_until(lambda: a.links["b"].connected and b.links["a"].connected)
            link = a.links["b"]
            async with Subscriber(b_addr, "alice", rho=0.5) as sub, \
                    Publisher(a_addr, "pub") as pub, \
                    AdminClient(cfg_a.admin_address, ADMIN_TOKEN) as admin_a, \
                    AdminClient(cfg_b.admin_address, ADMIN_TOKEN) as admin_b:
                await sub.subscribe("n >= 0")
                await pub.publish({"n": 1})
                got = [(await sub.get(timeout=5)).notification.seq]

                await admin_b.cut_link("a")  # the receiving end is cut
                sent = link.counters["sent"]
                await pub.publish({"n": 2})
                assert link.ping()
                # written to b, and acknowledged by b: b has dropped them
                await wait_until(lambda: link.counters["sent"] > sent and link.unacked == 0)
                await admin_b.heal_link("a")

                await admin_a.set_link("b", delay_ms=2000)  # held in a's queue
                await pub.publish({"n": 3})
                assert link.ping()
                await wait_until(lambda: len(link.queue) == 2)
                await admin_a.cut_link("b")  # the sending end is cut: its queue is flushed
                await admin_a.set_link("b", delay_ms=0)
                await admin_a.heal_link("b")

                await pub.publish({"n": 4})
                got.append((await sub.get(timeout=5)).notification.seq)
                counted = (int(a.metrics.counters["dropped_cut"])
                           + int(b.metrics.counters["dropped_cut"]))
        return counted, got

    counted, got = run(scenario())
    assert got == [1, 4]
    records = {n: list(read_trace(c.trace_path)) for n, c in (("a", cfg_a), ("b", cfg_b))}
    sends = {(r["from"], r["to"], r["lseq"]): r for r in records["a"] + records["b"]
             if r["kind"] == "send"}
    drops = {node: [r for r in rs if r["kind"] == "drop" and r.get("reason") == "cut"]
             for node, rs in records.items()}
    assert [r["seq"] for r in drops["b"] if r["msg"] == "notify"] == [2]  # at the receiver
    assert [r["seq"] for r in drops["a"] if r["msg"] == "notify"] == [3]  # flushed at a
    for r in drops["a"] + drops["b"]:
        send = sends[r["from"], r["to"], r["lseq"]]
        assert send["msg"] == r["msg"] and send.get("nid") == r.get("nid")
    assert counted == len(drops["a"]) + len(drops["b"])


# ---- admin ----------------------------------------------------------------------------------


def test_admin_requires_the_token(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        async with BrokerServer(cfg):
            for token in ("wrong-token-1234567890", ""):
                async with AdminClient(cfg.admin_address, token) as admin:
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await admin.snapshot()
                    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await admin.corrupt("clock", 0.5)
                    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            async with AdminClient(cfg.admin_address, ADMIN_TOKEN) as admin:
                snap = await admin.snapshot()
                assert snap["broker_id"] == "b1" and snap["core"]["broker"] == "b1"
            # admin is not on the client/link address
            async with AdminClient(cfg.listen_address, ADMIN_TOKEN) as admin:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await admin.snapshot()
                assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED

    run(scenario())


def test_admin_errors_name_what_is_wrong(configs: Configs) -> None:
    cfg = configs("b1", neighbors={"b2": address(next_host())}, algorithm="simple")

    async def scenario() -> None:
        async with BrokerServer(cfg) as server, \
                AdminClient(cfg.admin_address, ADMIN_TOKEN) as admin:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await admin.corrupt("no.such.target", 1)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "no.such.target" in (err.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await admin.corrupt("clock", "not a number")
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "clock" in (err.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await admin.set_link("b9", delay_ms=1)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert "'b9'" in (err.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await admin.set_link("b2", loss=2.0)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "loss" in (err.value.details() or "")

            fault = await admin.corrupt(
                "entry.insert",
                {"sub_id": "ghost", "filter": "x == 1", "dest": "b2", "flag": 1},
            )
            assert not fault["before"]["tables"][0]
            assert fault["after"]["tables"][0][0]["sub_id"] == "ghost"
            assert server.metrics.counters["core_errors"] == 0

    run(scenario())
    recorded = kinds(cfg.trace_path)
    assert recorded.count("fault_begin") == 3 and recorded.count("fault_end") == 3
    assert "fault" in recorded  # the core's evidence record


def test_admin_over_tls_answers_with_the_certificate_of_its_broker(
        configs: Configs, tmp_path: Path) -> None:
    # Issue 24: every admin port presented one certificate naming every broker's admin host,
    # so any broker's key could answer as any other broker's admin. Now each broker's own
    # certificate names it, and a client asking for b1's admin refuses b2's certificate.
    host, other = next_host(), next_host()
    certs = generate_run_certs(tmp_path / "tls", {"b1": [host, "localhost"], "b2": [other]})

    def tls(b: str) -> dict[str, str]:
        cert, key = certs.brokers[b]
        return {"cert": str(cert), "key": str(key), "ca": str(certs.ca)}

    cfg = configs("b1", host=host, tls=tls("b1"))
    # an impostor on b1's host, holding b2's certificate and key
    impostor = configs("b1", host=host, tls=tls("b2"))
    access = AdminAccess(ADMIN_TOKEN, certs.ca, certs.client_cert, certs.client_key)

    async def scenario() -> None:
        async with BrokerServer(impostor), \
                access.client(impostor.admin_address, timeout=3, broker="b1") as admin:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await admin.snapshot()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake failed
        async with BrokerServer(cfg):
            async with access.client(cfg.admin_address, broker="b1") as admin:
                assert (await admin.snapshot())["broker_id"] == "b1"
            async with access.client(cfg.admin_address, timeout=3, broker="b2") as admin:
                with pytest.raises(grpc.aio.AioRpcError):  # b1 cannot answer as b2
                    await admin.snapshot()
            async with AdminClient(cfg.admin_address, ADMIN_TOKEN, ca=certs.ca,
                                   timeout=2) as admin:  # no client certificate
                with pytest.raises(grpc.aio.AioRpcError):
                    await admin.snapshot()
            async with AdminClient(cfg.admin_address, ADMIN_TOKEN, timeout=2) as admin:
                with pytest.raises(grpc.aio.AioRpcError):  # plaintext
                    await admin.snapshot()

    run(scenario())


def test_metrics_endpoint(configs: Configs) -> None:
    host = next_host()
    cfg = configs("b1", host=host, metrics_address=address(host),
                  tuning={"metrics_interval_s": 0.1})

    async def scenario() -> str:
        async with BrokerServer(cfg), \
                Subscriber(cfg.listen_address, "alice", rho=1) as sub, \
                Publisher(cfg.listen_address, "pub") as pub:
            await sub.subscribe("x > 0")
            await pub.publish({"x": 1})
            await sub.get(timeout=5)
            await asyncio.sleep(0.3)
            url = f"http://{cfg.metrics_address}/metrics"
            return await asyncio.to_thread(
                lambda: urllib.request.urlopen(url, timeout=5).read().decode()
            )

    text = run(scenario())
    assert "weeble_publishes_total 1.0" in text
    assert "weeble_deliveries_total 1.0" in text
    assert 'weeble_routing_table_size{table="0"} 1.0' in text
    assert "weeble_lease_expiries_total" in text


def test_metrics_over_tls_in_a_tls_run(configs: Configs, tmp_path: Path) -> None:
    # Issue 24: with live.tls, /metrics stayed plain HTTP. Now it is HTTPS with the broker's
    # own certificate, for clients with a certificate of the run's CA, like admin.
    host = next_host()
    certs = generate_run_certs(tmp_path / "tls", {"b1": [host]})
    cert, key = certs.brokers["b1"]
    cfg = configs("b1", host=host, metrics_address=address(host),
                  tls={"cert": str(cert), "key": str(key), "ca": str(certs.ca)})

    def fetch(url: str, context: ssl.SSLContext | None = None) -> str:
        return urllib.request.urlopen(url, timeout=5, context=context).read().decode()

    async def scenario() -> str:
        async with BrokerServer(cfg):
            with pytest.raises((OSError, http.client.HTTPException)):  # plain HTTP: refused
                await asyncio.to_thread(fetch, f"http://{cfg.metrics_address}/metrics")
            url = f"https://{cfg.metrics_address}/metrics"
            bare = ssl.create_default_context(cafile=str(certs.ca))
            with pytest.raises(OSError):  # no client certificate: refused
                await asyncio.to_thread(fetch, url, bare)
            run_client = ssl.create_default_context(cafile=str(certs.ca))
            run_client.load_cert_chain(str(certs.client_cert), str(certs.client_key))
            return await asyncio.to_thread(fetch, url, run_client)  # verifies host's SAN

    assert "weeble_publishes_total" in run(scenario())


def test_config_errors_name_the_field(tmp_path: Path) -> None:
    from weeble.core.rom import ConfigError

    good = json.loads(
        BrokerConfig.model_validate({
            "broker_id": "b1", "algorithm": "identity",
            "params": {"pi": 4, "rho": 1, "delta_max": 0.1, "d": 2},
            "root": "b1", "listen_address": "127.0.0.2:7000",
            "admin_address": "127.0.0.2:7001", "admin_token": "x" * 16, "link_token": "t",
            "client_secret": "c" * 16,
        }).to_json()
    )
    for change, field in [
        ({"algorithm": "bogus"}, "algorithm"),
        ({"params": {"pi": 1, "rho": 1, "delta_max": 0.1, "d": 2}}, "params.pi"),
        ({"listen_address": "nowhere"}, "listen_address"),
        ({"parent": "b7"}, "parent"),
        ({"links": {"b7": {"delay_ms": 1}}}, "links"),
        ({"neighbors": {"b2": "127.0.0.3:1"}, "links": {"b2": {"loss": 3}}}, "loss"),
        ({"surprise": 1}, "surprise"),
        ({"client_secret": None}, "client_secret"),  # open_clients must be explicit
        ({"open_clients": True}, "open_clients"),  # ... and not beside a secret
    ]:
        path = tmp_path / "c.json"
        path.write_text(json.dumps(good | change))
        with pytest.raises(ConfigError, match=field):
            BrokerConfig.load(path)


# ---- robustness -----------------------------------------------------------------------------


class _FragileBroker:
    """A core that fails on one particular notification, as a buggy core might. It wraps the
    core rather than subclass it: the core's Broker is compiled by default (scripts/compile.py),
    and a compiled class takes no interpreted subclass."""

    def __init__(self, core: Broker) -> None:
        self._core = core

    @staticmethod
    def _boom(event: Event) -> bool:
        return isinstance(event, ClientPublish) and bool(event.notification.attributes.get("boom"))

    def step(self, now: float, event: Event) -> list[Effect]:
        if self._boom(event):
            raise RuntimeError("core bug")
        return self._core.step(now, event)

    def step_many(self, now: float, events: list[Event],
                  out: list[list[Effect]]) -> list[list[Effect]]:
        # as the core's: when one raises, `out` holds the effects of those before it
        for i, event in enumerate(events):
            if self._boom(event):
                self._core.step_many(now, events[:i], out)
                raise RuntimeError("core bug")
        return self._core.step_many(now, events, out)

    def __getattr__(self, name: str) -> Any:  # the server's reads: ram, rom, snapshot()
        return getattr(self._core, name)


def test_core_exception_is_contained(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        async with BrokerServer(cfg, broker=_FragileBroker(Broker(cfg.to_rom()))) as server, \
                Subscriber(cfg.listen_address, "alice", rho=1) as sub, \
                Publisher(cfg.listen_address, "pub") as pub:
            await sub.subscribe("x > 0")
            await pub.publish({"x": 1, "boom": True})
            await pub.publish({"x": 2})
            assert (await sub.get(timeout=5)).notification.attributes["x"] == 2
            assert server.metrics.counters["core_errors"] == 1
            # within one request: those before and after the failing one are delivered
            await pub.publish_many([{"x": 3}, {"x": 4, "boom": True}, {"x": 5}, {"x": 6}])
            got = [(await sub.get(timeout=5)).notification.attributes["x"] for _ in range(3)]
            assert got == [3, 5, 6]
            assert server.metrics.counters["core_errors"] == 2

    run(scenario())
    errors = [r for r in read_trace(cfg.trace_path) if r["kind"] == "error"]  # type: ignore[arg-type]
    assert len(errors) == 2 and all("core bug" in e["error"] for e in errors)


def test_batched_link_preserves_order(configs: Configs) -> None:
    a_addr, b_addr = address(next_host()), address(next_host())
    tuning = {"link_batch_max": 64, "seed": 3}
    cfg_a = configs("a", listen=a_addr, neighbors={"b": b_addr}, tuning=tuning,
                    links={"b": {"delay_ms": 20}})  # lets messages pile up into batches
    cfg_b = configs("b", listen=b_addr, neighbors={"a": a_addr}, tuning=tuning)

    async def scenario() -> None:
        async with BrokerServer(cfg_a) as a, BrokerServer(cfg_b) as b:
            await wait_until(lambda: a.links["b"].connected and b.links["a"].connected)
            async with Subscriber(b_addr, "alice", rho=1) as sub, \
                    Publisher(a_addr, "pub") as pub:
                await sub.subscribe("n >= 0")
                await pub.publish_many({"n": i} for i in range(500))
                got = [(await sub.get(timeout=5)).notification.seq for _ in range(500)]
                assert got == list(range(1, 501))
            assert a.metrics.counters["messages_out_notify"] == 500
            assert b.metrics.counters["messages_in_notify"] == 500

    run(scenario())


# ---- subscription lifecycle -----------------------------------------------------------------


def test_unsubscribe_stops_delivery(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        async with BrokerServer(cfg) as server, \
                Subscriber(cfg.listen_address, "alice", rho=0.5) as sub, \
                Publisher(cfg.listen_address, "pub") as pub:
            keep = await sub.subscribe("x > 0")
            drop = await sub.subscribe("y > 0")
            await pub.publish({"x": 1, "y": 1})
            assert (await sub.get(timeout=5)).notification.seq == 1  # once per client
            await sub.unsubscribe(drop)
            await wait_until(lambda: server.client_streams() == [f"alice/{keep}"])
            await pub.publish({"y": 2})
            await pub.publish({"x": 3})
            assert (await sub.get(timeout=5)).notification.seq == 3
            assert sub.pending() == []
            held = [e["sub_id"] for e in server.core_snapshot()["tables"][0]]
            assert held == [network_id("alice", keep)]

    run(scenario())
    assert "unsubscribe" in kinds(cfg.trace_path)


def test_a_refresh_in_flight_never_outlives_the_unsubscribe(configs: Configs) -> None:
    """A refresh round that starts as the client unsubscribes must not reach the broker after
    the unsubscribe: a refresh re-creates an unknown subscription (SC-4), so one served late
    left a subscription nobody wanted in the tables until its lease ran out (the main job
    failed on it once under load: c8's deliveries were 'missing' for 26 s)."""
    cfg = configs("b1")
    rounds = 30

    async def scenario() -> None:
        async with BrokerServer(cfg) as server, \
                Subscriber(cfg.listen_address, "alice", rho=30.0) as sub:
            for i in range(rounds):
                sub_id = await sub.subscribe("x > 0", f"s{i}")
                s = sub._subs[sub_id]
                # the refresher's round (its list taken before the unsubscribe) gets its turn
                # while the unsubscribe is in flight
                await asyncio.gather(sub.unsubscribe(sub_id), sub._refresh(s))
            await wait_until(lambda: server.client_streams() == [])
            assert server.core_snapshot()["tables"][0] == []

    run(scenario())
    last: dict[str, str] = {}
    for r in read_trace(cfg.trace_path):
        if r["kind"] in ("subscribe", "refresh", "unsubscribe") and r.get("client") == "alice":
            last[r["sub_id"]] = r["kind"]
    assert last == {f"s{i}": "unsubscribe" for i in range(rounds)}


def test_subscriber_resubscribes_after_broker_restart(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        async with Subscriber(cfg.listen_address, "alice", rho=0.5) as sub:
            async with BrokerServer(cfg), Publisher(cfg.listen_address, "pub") as pub:
                sub_id = await sub.subscribe("x > 0")
                await pub.publish({"x": 1})
                assert (await sub.get(timeout=5)).notification.seq == 1
            # the broker is gone (its state with it); a new one starts on the same address
            async with BrokerServer(cfg) as server, \
                    Publisher(cfg.listen_address, "pub", start_seq=2) as pub:
                await wait_until(lambda: server.client_streams() == [f"alice/{sub_id}"], 10)
                await pub.publish({"x": 2})
                assert (await sub.get(timeout=5)).notification.seq == 2

    run(scenario())


def test_crashed_subscriber_lease_expires(configs: Configs) -> None:
    pi = 0.8
    # π = 0.8 s against refreshes every 0.2 s: a loaded machine runs the client's refresh
    # timer late, and at π = 0.4 s a refresh 0.4 s late would let the lease expire while alice
    # lives
    cfg = configs("b1", params={"pi": pi, "rho": 0.2, "delta_max": 0.01, "d": 1})

    async def scenario() -> float:
        async with BrokerServer(cfg) as server:
            sub = Subscriber(cfg.listen_address, "alice", rho=0.2)
            await sub.subscribe("x > 0")
            await asyncio.sleep(2.5 * pi)  # refreshed across several overruns: still there
            assert len(server.core_snapshot()["tables"][0]) == 1
            await sub.close()  # a crash: no unsubscribe, no more refreshes
            loop = asyncio.get_running_loop()
            start = loop.time()
            await wait_until(lambda: not server.core_snapshot()["tables"][0], timeout=5)
            return loop.time() - start

    gone_after = run(scenario())
    assert gone_after <= 3 * pi  # within 2π, plus scheduling slack (a loaded machine's)
    assert "expire" in kinds(cfg.trace_path)


def test_admin_shutdown(configs: Configs) -> None:
    cfg = configs("b1")

    async def scenario() -> None:
        server = BrokerServer(cfg)
        await server.start()
        async with AdminClient(cfg.admin_address, ADMIN_TOKEN) as admin:
            await admin.shutdown(drain_s=0.1)
        await asyncio.wait_for(server.wait_stopped(), 10)

    run(scenario())
    assert kinds(cfg.trace_path)[-1] == "stop"
