"""Issue 12: property-based fuzzing of a live broker (real gRPC on 127.0.0.x) as a hostile
neighbour and a careless client would: arbitrary link frames and envelopes, arbitrary client
requests. Afterwards the broker must be up, its link must still be up, no request may have
failed with anything but a clear status, the core must not have raised, and routing must still
be correct: a notification from the neighbour and one published locally both reach a
subscriber whose filter matches them."""

from __future__ import annotations

import string
from collections.abc import Callable

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runtime.helpers import address, dial_as, next_host, run, wait_until
from weeble.codec.wire import FILTERS, hello
from weeble.proto.v1 import client_pb2, client_pb2_grpc, link_pb2
from weeble.runtime.client import Publisher, Subscriber
from weeble.runtime.config import BrokerConfig
from weeble.runtime.server import BrokerServer

Configs = Callable[..., BrokerConfig]

# statuses a bad request may get: each names the problem; UNKNOWN or INTERNAL would be a crash
CLEAR = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
         grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}

names = st.text(alphabet=string.ascii_letters + "_.", min_size=1, max_size=6)
texts = st.text(max_size=12)
values = st.one_of(
    st.builds(client_pb2.Value, s=texts),
    st.builds(client_pb2.Value, i=st.integers(-2**63, 2**63 - 1)),
    st.builds(client_pb2.Value, d=st.floats(allow_nan=True)),
    st.builds(client_pb2.Value, b=st.booleans()),
    st.just(client_pb2.Value()))  # no member set: invalid
ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "prefix", "range", "is", "exists", "&&",
                       ">>", "[", "]", ","])
# filter texts: mostly grammatical pieces in random order (valid, contradictory or broken)
filters = st.one_of(texts, st.lists(st.one_of(names, ops, st.integers(-5, 5).map(str),
                                              texts.map(lambda s: f'"{s}"')),
                                    max_size=9).map(" ".join))
notifications = st.builds(client_pb2.Notification, publisher=texts,
                          seq=st.integers(0, 2**64 - 1), published_at=st.floats(allow_nan=True),
                          attributes=st.dictionaries(names, values, max_size=3))


def envelopes(depth: int = 1) -> st.SearchStrategy[link_pb2.Envelope]:
    seq = st.integers(0, 2**64 - 1)
    tag = st.integers(0, 2**32 - 1)
    kinds = [
        st.builds(lambda s, i, f, t: link_pb2.Envelope(seq=s, sub=link_pb2.SubMsg(
            sub_id=i, filter=f, tag=t)), seq, texts, filters, tag),
        st.builds(lambda s, i, f, t: link_pb2.Envelope(seq=s, unsub=link_pb2.UnsubMsg(
            sub_id=i, filter=f, tag=t)), seq, texts, filters, tag),
        st.builds(lambda s, n: link_pb2.Envelope(seq=s, notify=link_pb2.NotifyMsg(
            notification=n)), seq, notifications),
        st.builds(lambda s, t: link_pb2.Envelope(seq=s, switch=link_pb2.SwitchMsg(tag=t)),
                  seq, tag),
        st.builds(lambda i: hello(i, "wrong"), texts),
    ]
    if depth:
        kinds.append(st.builds(lambda s, es: link_pb2.Envelope(seq=s, batch=link_pb2.Batch(
            envelopes=es)), seq, st.lists(envelopes(depth - 1), max_size=4)))
    return st.one_of(kinds)


frames = st.one_of(st.binary(max_size=48), envelopes().map(lambda e: e.SerializeToString()))
requests = st.one_of(
    st.tuples(st.just("Refresh"), st.builds(client_pb2.SubscribeRequest, client=texts,
                                            sub_id=texts, filter=filters)),
    st.tuples(st.just("Unsubscribe"), st.builds(client_pb2.UnsubscribeRequest, client=texts,
                                                sub_id=texts, filter=filters)),
    st.tuples(st.just("Publish"), st.builds(client_pb2.PublishRequest, client=texts,
                                            notifications=st.lists(notifications, max_size=3))),
)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(link_frames=st.lists(frames, min_size=1, max_size=40),
       client_requests=st.lists(requests, max_size=12))
def test_fuzzed_frames_and_requests_leave_the_broker_routing(
        configs: Configs, link_frames: list[bytes],
        client_requests: list[tuple[str, object]]) -> None:
    cfg = configs("b1", neighbors={"b0": address(next_host())}, trace=False)

    async def scenario() -> None:
        async with BrokerServer(cfg) as server:
            channel, call = await dial_as(cfg, "b0")
            await call.read()
            await wait_until(lambda: server.links["b0"].connected)
            for data in link_frames:
                await call.write(data)
            async with grpc.aio.insecure_channel(cfg.listen_address) as client_channel:
                stub = client_pb2_grpc.ClientStub(client_channel)
                for method, request in client_requests:
                    try:
                        await getattr(stub, method)(request, timeout=10)
                    except grpc.aio.AioRpcError as e:
                        assert e.code() in CLEAR, (method, request, e.code(), e.details())
            # routing is still correct, both ways
            async with Subscriber(cfg.listen_address, "probe-alice", rho=1) as sub, \
                    Publisher(cfg.listen_address, "probe-pub") as pub:
                await sub.subscribe("probe_class == 1")
                await call.write(link_pb2.Envelope(seq=1, notify=link_pb2.NotifyMsg(
                    notification=client_pb2.Notification(
                        publisher="probe-remote", seq=1,
                        attributes={"probe_class": client_pb2.Value(i=1)}))
                ).SerializeToString())
                got = await sub.get(timeout=5)
                assert got.notification.id == "probe-remote#1"
                await pub.publish({"probe_class": 1})
                assert (await sub.get(timeout=5)).notification.publisher == "probe-pub"
            assert server.links["b0"].connected
            assert server.metrics.counters["core_errors"] == 0
            assert len(FILTERS) <= FILTERS.max_entries
            call.cancel()
            await channel.close()

    run(scenario(), timeout=30)
