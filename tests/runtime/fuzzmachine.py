"""A stateful, Hypothesis-driven live fuzz of one broker process (issue 24): sequences of link
envelopes, client requests, stream tricks and publications, with the broker's promises checked
after every step:

* admin Snapshot answers (whatever a peer sent: finding 3),
* the health service answers (its latency is recorded: the benchmark holds it under 200 ms,
  benchmarks/fuzz_live.py; a test asserts no time),
* RSS stays within a bound of its start,
* the log does not grow with the input (no unthrottled lines: finding 1),
* and at the end every publication the broker accepted for the watching subscriber is in
  the trace as delivered or as let go with a reason (findings 6, 7).

tests/runtime/test_fuzz_stateful.py runs it with a short budget in CI; the benchmark with a
long one. Everything talks to the broker over real gRPC on 127.0.0.x (sync stubs: the machine's
rules are plain functions).
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.runtime.helpers import ADMIN_TOKEN, LINK_TOKEN, address, make_config, next_host
from tests.runtime.test_fuzz import CLEAR, frames, requests
from weeble.codec.wire import MAX_BATCH, hello, publish_request
from weeble.core.sketch.bloom import MAX_BITS, MAX_HASHES
from weeble.proto.v1 import admin_pb2, admin_pb2_grpc, client_pb2, client_pb2_grpc, link_pb2
from weeble.runtime.links import CONNECT_METHOD
from weeble.runtime.process import BrokerProcess
from weeble.trace.reader import read_trace

MIB = 1024 * 1024
RSS_BOUND = 256 * MIB  # growth over the start: queues are bounded far below this
LOG_BOUND = 256 * 1024  # bytes of log a whole run may write (the probe: 70 KB for 38 calls)
PUBLISH_STREAM = "/weeble.v1.Client/PublishStream"
SUBSCRIBE = "/weeble.v1.Client/Subscribe"
U64 = 2**64 - 1


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class _LinkPeer:
    """Plays neighbour b0 over one Connect stream: frames in from a queue, replies drained."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.out: queue.Queue[bytes | None] = queue.Queue()
        self.out.put(hello("b0", LINK_TOKEN).SerializeToString())
        self.call = channel.stream_stream(CONNECT_METHOD)(iter(self.out.get, None))
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        try:
            for _ in self.call:
                pass
        except grpc.RpcError:
            pass  # the broker ended it (a Bye, a refused session): the machine redials
        finally:
            self.ended.set()

    def send(self, data: bytes) -> None:
        self.out.put(data)

    def close(self) -> None:
        self.out.put(None)
        self.call.cancel()
        self._reader.join(timeout=10)


class _Watcher:
    """The subscriber every valid publication is for: reads its stream in a thread, unless
    paused (a slow consumer); the broker may let notifications go then, with a record."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.go = threading.Event()
        self.go.set()
        self.call = channel.unary_stream(SUBSCRIBE, request_serializer=None,
                                         response_deserializer=client_pb2.SubscriptionEvent
                                         .FromString)(
            client_pb2.SubscribeRequest(client="watch", sub_id="w", filter="fz >= 0",
                                        max_batch=4).SerializeToString())
        self.events = 0
        self.subscribed = threading.Event()
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # the lease must outlive the run: a refresh every 0.5 s (pi is 30 s here)
        self._refresher = threading.Thread(target=self._refresh, args=(channel,), daemon=True)
        self._refresher.start()
        if not self.subscribed.wait(timeout=20):
            raise AssertionError("the watcher's subscription was not confirmed")

    def _read(self) -> None:
        try:
            for _ in self.call:
                self.events += 1
                self.subscribed.set()
                self.go.wait()
        except grpc.RpcError:
            pass

    def _refresh(self, channel: grpc.Channel) -> None:
        stub = client_pb2_grpc.ClientStub(channel)
        while not self.closed.wait(0.5):
            with contextlib.suppress(grpc.RpcError):  # the channel is closing
                stub.Refresh(client_pb2.SubscribeRequest(client="watch", sub_id="w",
                                                         filter="fz >= 0"), timeout=10)

    def close(self) -> None:
        self.closed.set()
        self.go.set()
        self.call.cancel()
        self._reader.join(timeout=10)
        self._refresher.join(timeout=15)


class LiveBrokerMachine(RuleBasedStateMachine):
    """One broker process per run of the machine; rules are what a hostile neighbour and
    careless clients may do."""

    # seconds, over every run (the benchmark reads them)
    health_latencies: ClassVar[list[float]] = []

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="weeble-fuzz-"))
        self.cfg = make_config(
            "b1", self.tmp, neighbors={"b0": address(next_host())}, mode="anti_entropy",
            params={"pi": 30.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.05, "d": 2},
            tuning={"hello_timeout_s": 0.5, "client_queue_limit": 64,
                    "max_streams_per_peer": 64})
        self.proc = BrokerProcess(self.cfg, self.tmp, log_level="INFO")
        self.proc.start()
        try:
            self.proc.wait_ready(timeout=30)
        except BaseException:
            self.proc.stop(timeout=5)
            raise
        assert self.proc.pid is not None
        self.base_rss = rss(self.proc.pid)
        self.base_log = self.proc.log_path.stat().st_size
        self.channel = grpc.insecure_channel(self.cfg.listen_address)
        self.admin_channel = grpc.insecure_channel(self.cfg.admin_address)
        self.admin = admin_pb2_grpc.AdminStub(self.admin_channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.client = client_pb2_grpc.ClientStub(self.channel)
        self.peer = _LinkPeer(self.channel)
        self.watch = _Watcher(self.channel)
        self.silent: list[Any] = []  # PublishStreams opened and never written to
        self.accepted: list[str] = []  # nids the broker accepted for the watcher
        self.seq = 0

    def _link(self, data: bytes) -> None:
        """Send on the link session, dialling a new one when the broker ended the last (a
        Bye among the fuzzed frames ends it): later link rules must reach a live session."""
        if self.peer.ended.is_set():
            self.redial()
        self.peer.send(data)

    # ---- rules ------------------------------------------------------------------------------

    @rule(data=st.lists(frames, min_size=1, max_size=8))
    def link_frames(self, data: list[bytes]) -> None:
        for frame in data:
            self._link(frame)

    @rule(seqs=st.lists(st.sampled_from([0, 1, 2, U64 - 1, U64]), min_size=2, max_size=6))
    def link_sequence_extremes(self, seqs: list[int]) -> None:
        for seq in seqs:
            self._link(link_pb2.Envelope(seq=seq, sub=link_pb2.SubMsg(
                sub_id="s", filter="fz == 1")).SerializeToString())

    @rule(m=st.sampled_from([0, 8, 64, MAX_BITS, MAX_BITS + 1, 2**27]),
          k=st.sampled_from([0, 1, 7, MAX_HASHES, MAX_HASHES + 1, 1000]))
    def ask_for_a_sketch(self, m: int, k: int) -> None:
        self._link(link_pb2.Envelope(seq=0, ae_observe=link_pb2.AeObserveMsg(
            round=1, m=m, k=k, seed=7)).SerializeToString())

    @rule(n=st.sampled_from([MAX_BATCH, MAX_BATCH + 1]))
    def a_large_batch(self, n: int) -> None:
        self._link(link_pb2.Envelope(batch=link_pb2.Batch(envelopes=[
            link_pb2.Envelope(seq=0, sub=link_pb2.SubMsg(sub_id="b", filter="fz == 2"))
            for _ in range(n)]))
            .SerializeToString())

    @rule()
    def redial(self) -> None:
        self.peer.close()
        self.peer = _LinkPeer(self.channel)

    @rule(batch=st.lists(requests, min_size=1, max_size=4))
    def client_requests(self, batch: list[tuple[str, Any]]) -> None:
        for method, request in batch:
            try:
                getattr(self.client, method)(request, timeout=10)
            except grpc.RpcError as e:
                assert e.code() in CLEAR | {grpc.StatusCode.RESOURCE_EXHAUSTED}, (
                    method, request, e.code(), e.details())

    @rule(n=st.integers(1, 40), size=st.sampled_from([10, 2000, 60_000]))
    def publish(self, n: int, size: int) -> None:
        notes = []
        for _ in range(n):
            self.seq += 1
            pb = client_pb2.Notification(publisher="pub", seq=self.seq)
            pb.attributes["fz"].i = self.seq
            pb.attributes["pad"].s = "x" * size
            notes.append(pb)
        reply = self.client.Publish(client_pb2.PublishRequest(client="pub", notifications=notes),
                                    timeout=10)
        assert reply.accepted == n
        self.accepted += [f"pub#{pb.seq}" for pb in notes]

    @rule()
    def a_refused_publish_stream(self) -> None:
        bad = client_pb2.Notification(publisher="other", seq=1)
        bad.attributes["y"].CopyFrom(client_pb2.Value())  # no member set

        def requests_() -> Iterator[bytes]:
            self.seq += 1
            good = client_pb2.Notification(publisher="pub", seq=self.seq)
            good.attributes["fz"].i = self.seq
            self.accepted.append(f"pub#{self.seq}")
            yield publish_request("pub", [good.SerializeToString()])
            yield publish_request("", [bad.SerializeToString()])

        call = self.channel.stream_stream(PUBLISH_STREAM)(requests_(), timeout=30)
        try:
            for _ in call:
                pass
            raise AssertionError("a refused PublishStream ended without an error status")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.code(), e.details())

    @rule(n=st.integers(1, 20))
    def silent_publish_streams(self, n: int) -> None:
        for _ in range(n):
            self.silent.append(self.channel.stream_stream(PUBLISH_STREAM)(iter(())))

    @rule()
    def stall_the_watcher(self) -> None:
        self.watch.go.clear()

    @rule()
    def resume_the_watcher(self) -> None:
        self.watch.go.set()

    @rule()
    def the_watcher_reconnects(self) -> None:
        self.watch.close()
        self.watch = _Watcher(self.channel)

    # ---- invariants -------------------------------------------------------------------------

    @invariant()
    def snapshot_answers(self) -> None:
        reply = self.admin.Snapshot(admin_pb2.SnapshotRequest(), timeout=20,
                                    metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))
        assert reply.broker_id == "b1"
        assert reply.counters.get("core_errors", 0) == 0

    @invariant()
    def health_answers(self) -> None:
        start = time.monotonic()
        reply = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=20)
        LiveBrokerMachine.health_latencies.append(time.monotonic() - start)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    @invariant()
    def rss_is_bounded(self) -> None:
        assert self.proc.pid is not None and self.proc.alive, self.proc.log_tail()
        grown = rss(self.proc.pid) - self.base_rss
        assert grown <= RSS_BOUND, f"RSS grew by {grown / MIB:.0f} MiB"

    @invariant()
    def the_log_is_throttled(self) -> None:
        written = self.proc.log_path.stat().st_size - self.base_log
        assert written <= LOG_BOUND, self.proc.log_tail()
        # an exception a handler let out is a bug, throttled or not
        assert "Traceback" not in self.proc.log_path.read_text(errors="replace"), \
            self.proc.log_tail(60)

    # ---- the end: every accepted publication is accounted for --------------------------------

    def teardown(self) -> None:
        try:
            self.watch.close()
            self.peer.close()
            for call in self.silent:
                call.cancel()
            self.channel.close()
            self.admin_channel.close()
        finally:
            self.proc.stop(timeout=10)
        try:
            assert self.cfg.trace_path is not None
            fates: dict[str, list[str]] = {}
            for r in read_trace(self.cfg.trace_path):
                if r["kind"] in ("deliver", "undeliverable") and r.get("client") == "watch":
                    fates.setdefault(r["nid"], []).append(r["kind"])
            missing = [nid for nid in self.accepted if nid not in fates]
            # published before the watcher's stream reopened, a notification may have found
            # no stream: that too is an undeliverable record (no_stream), so none is missing
            assert not missing, f"{len(missing)} accepted notifications without a record:" \
                                f" {missing[:5]}"
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
