"""The live workload: the seed-000 clients of a scenario, against live brokers, in real time.

The same workload as the simulator's (broker/sim/workload.py), drawn from the same random
streams in the same order, so a live run and its simulated replay have the same subscription
and publication history (up to timing):
- N_s subscriptions at the start, then Poisson arrivals at rate N_s / mean_lifetime, each living
  an exponential time; filter `class == k`, k uniform over the filter classes; subscriber at a
  uniformly random leaf (or any broker); a fraction `subscribers_crash` ends by crashing;
- Poisson publications at rate ω over the publisher brokers, attributes {class: k};
- plus the scenario's explicit subscriptions and publications.

Every subscription is a `Subscriber` of the client library (its own stream, a Refresh every ρ);
workload client `c<n>` holds subscription `c<n>/0`, publisher `p<broker>` publishes at its
broker. A crash is a Subscriber closed without unsubscribing: its refreshes stop and the brokers
must forget it within 2π. The run is bounded in time (the duration) and in count
(live.max_subscriptions, live.max_publications).

Each client writes its own trace, `<trace_dir>/<client>.jsonl` (node = client id): client_start
(its broker), client_subscribe, client_unsubscribe, crash, client_error, and, from the
library, client_publish and client_deliver. With the brokers' traces these join on sub_id, nid
(publisher, seq) and node.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from weeble.broker.client import Publisher, Subscriber
from weeble.broker.core.filters import Filter, Value
from weeble.model.scenario import Scenario
from weeble.trace.writer import LiveSink

log = logging.getLogger(__name__)


@dataclass
class WorkloadStats:
    subscriptions: int = 0
    unsubscriptions: int = 0
    crashes: int = 0
    publications: int = 0
    deliveries: int = 0
    errors: int = 0
    live: int = 0  # subscriptions active now
    last_error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "last_error"}


@dataclass(eq=False)
class _Client:
    """One client node: a Subscriber and/or Publisher at one broker, and its trace."""

    name: str
    broker: str
    trace: LiveSink
    subscriber: Subscriber | None = None
    publisher: Publisher | None = None
    consumer: asyncio.Task[None] | None = None
    outbox: asyncio.Queue[dict[str, Value]] | None = None
    sender: asyncio.Task[None] | None = None
    subs: set[str] = field(default_factory=set)


class LiveWorkload:
    def __init__(self, scenario: Scenario, addresses: dict[str, str],
                 trace_dir: Path | None) -> None:
        """`addresses`: broker id -> its listen address (links + clients)."""
        self.scenario = scenario
        self.addresses = addresses
        self.trace_dir = trace_dir
        self.rho = scenario.timing.rho
        self.stats = WorkloadStats()
        topology = scenario.build_topology()
        leaves = topology.leaves(scenario.root_broker)
        w = scenario.workload
        self.workload = w
        self._sub_brokers = list(topology.brokers)
        self._pub_brokers = list(topology.brokers)
        if w is not None:
            if w.subscriber_placement == "leaves":
                self._sub_brokers = leaves
            self._pub_brokers = {"leaves": leaves, "all": list(topology.brokers),
                                 "root": [scenario.root_broker]}[w.publisher_placement]
        # The simulator's streams, drawn in the simulator's order (see the module docstring).
        self._sub_rng = random.Random(f"{scenario.seed}:subscriptions")
        self._pub_rng = random.Random(f"{scenario.seed}:publications")
        self._next_client = 0
        self._clients: dict[tuple[str, str], _Client] = {}
        self._seqs: dict[str, int] = {}  # next seq per publisher, across its brokers
        self._heap: list[tuple[float, int, Callable[[float], Awaitable[None] | None]]] = []
        self._order = itertools.count()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._max_subs = scenario.live.max_subscriptions
        self._max_pubs = scenario.live.max_publications

    # ---- the schedule -----------------------------------------------------------------------

    def _at(self, t: float, action: Callable[[float], Awaitable[None] | None]) -> None:
        heapq.heappush(self._heap, (t, next(self._order), action))

    def _plan_start(self) -> None:
        s, w = self.scenario, self.workload
        counts: dict[str, int] = {}
        for spec in s.subscriptions:
            k = counts.get(spec.client, 0)
            counts[spec.client] = k + 1
            sub_id, f, end = f"{spec.client}/{k}", spec.filter, spec.end
            client, broker = spec.client, spec.broker
            self._at(spec.start, lambda t, c=client, b=broker, i=sub_id, f=f:
                     self._subscribe(c, b, i, f))
            if end is not None:
                self._at(end, lambda t, c=client, b=broker, i=sub_id:
                         self._end(c, b, i, crash=False))
        for pub in s.publications:
            publisher = pub.client or f"p{pub.broker}"
            attrs: dict[str, Value] = dict(pub.attributes)
            self._at(pub.at, lambda t, p=publisher, b=pub.broker, a=attrs: self._publish(p, b, a))
        if w is None:
            return
        for _ in range(w.subscriptions):
            self._workload_sub(0.0, warm=True)
        if w.subscriptions > 0:
            self._at(self._sub_rng.expovariate(w.subscriptions / w.mean_lifetime), self._arrival)
        if w.publish_rate > 0:
            self._at(self._pub_rng.expovariate(w.publish_rate), self._workload_publish)

    def _workload_sub(self, t: float, warm: bool) -> None:
        w, rng = self.workload, self._sub_rng
        assert w is not None
        n = self._next_client
        self._next_client += 1
        cls = rng.randrange(w.filter_classes)
        broker = self._sub_brokers[rng.randrange(len(self._sub_brokers))]
        end = t + rng.expovariate(1.0 / w.mean_lifetime)
        crashes = w.subscribers_crash > 0 and rng.random() < w.subscribers_crash
        if warm:
            rng.uniform(0.0, self.rho)  # the simulator's refresh phase: keeps the streams aligned
        if n >= self._max_subs:
            return  # bounded in count: the history is drawn on, but no client is started
        client, sub_id = f"c{n}", f"c{n}/0"
        self._at(t, lambda _t: self._subscribe(client, broker, sub_id,
                                               str(Filter.equals("class", cls))))
        self._at(end, lambda _t: self._end(client, broker, sub_id, crash=crashes))

    def _arrival(self, t: float) -> None:
        w = self.workload
        assert w is not None
        self._workload_sub(t, warm=False)
        self._at(t + self._sub_rng.expovariate(w.subscriptions / w.mean_lifetime), self._arrival)

    def _workload_publish(self, t: float) -> None:
        w, rng = self.workload, self._pub_rng
        assert w is not None
        broker = self._pub_brokers[rng.randrange(len(self._pub_brokers))]
        cls = rng.randrange(w.filter_classes)
        self._publish(f"p{broker}", broker, {"class": cls})
        self._at(t + rng.expovariate(w.publish_rate), self._workload_publish)

    # ---- running ----------------------------------------------------------------------------

    async def run(self, duration: float | None = None,
                  on_tick: Callable[[float, WorkloadStats], None] | None = None,
                  tick: float = 0.25) -> WorkloadStats:
        """Drive the clients for `duration` seconds (default: the scenario's), then stop them
        (without unsubscribing: the run ends, the subscriptions were alive until then)."""
        duration = self.scenario.duration if duration is None else duration
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        self._plan_start()
        ticker = None
        if on_tick is not None:
            ticker = asyncio.create_task(self._tick(on_tick, t0, tick))
        try:
            while self._heap and self._heap[0][0] <= duration:
                t, _, action = heapq.heappop(self._heap)
                delay = t0 + t - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                result = action(t)
                if result is not None:
                    self._spawn(result)
            remaining = t0 + duration - loop.time()
            if remaining > 0:
                await asyncio.sleep(remaining)
        finally:
            if ticker is not None:
                ticker.cancel()
            await self._shutdown()
        if on_tick is not None:
            on_tick(loop.time() - t0, self.stats)
        return self.stats

    async def _tick(self, on_tick: Callable[[float, WorkloadStats], None], t0: float,
                    every: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            on_tick(loop.time() - t0, self.stats)
            await asyncio.sleep(every)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shutdown(self) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
            for task in list(self._tasks):
                task.cancel()
        for c in self._clients.values():
            if c.outbox is not None and c.sender is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5):
                        await c.outbox.join()  # what was scheduled is published
                c.sender.cancel()
            if c.consumer is not None:
                c.consumer.cancel()
                if c.subscriber is not None:  # arrived, not yet counted
                    self.stats.deliveries += len(c.subscriber.pending())
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                if c.subscriber is not None:
                    await c.subscriber.close()
                if c.publisher is not None:
                    await c.publisher.close()
            await c.trace.aclose()

    # ---- clients ----------------------------------------------------------------------------

    def _client(self, name: str, broker: str) -> _Client:
        c = self._clients.get((name, broker))
        if c is None:
            path = self.trace_dir / f"{name}.jsonl" if self.trace_dir is not None else None
            trace = LiveSink(path, name)
            trace.start()
            trace.record("client_start", broker=broker, address=self.addresses[broker])
            c = self._clients[name, broker] = _Client(name, broker, trace)
        return c

    def _error(self, c: _Client, what: str, error: BaseException, **ids: Any) -> None:
        if isinstance(error, grpc.aio.AioRpcError):
            why = f"{error.code().name}: {error.details()}"
        else:
            why = f"{type(error).__name__}: {error}"
        self.stats.errors += 1
        self.stats.last_error = f"{c.name}@{c.broker} {what}: {why}"
        c.trace.record("client_error", op=what, error=why, **ids)
        log.warning("%s", self.stats.last_error)

    async def _subscribe(self, name: str, broker: str, sub_id: str, filter_text: str) -> None:
        c = self._client(name, broker)
        if c.subscriber is None:
            c.subscriber = Subscriber(self.addresses[broker], name, rho=self.rho, trace=c.trace)
            c.consumer = asyncio.create_task(self._consume(c.subscriber))
        c.trace.record("client_subscribe", client=name, sub_id=sub_id, broker=broker,
                       filter=filter_text)
        c.subs.add(sub_id)
        self.stats.subscriptions += 1
        self.stats.live += 1
        try:
            await c.subscriber.subscribe(filter_text, sub_id)
        except (grpc.aio.AioRpcError, TimeoutError, ValueError) as e:
            # the Subscriber keeps retrying the stream; a permanent error means the broker
            # refused it, and the client then is not subscribed at all
            self._error(c, "subscribe", e, sub_id=sub_id)

    async def _consume(self, sub: Subscriber) -> None:
        async for _delivery in sub:
            self.stats.deliveries += 1

    async def _end(self, name: str, broker: str, sub_id: str, *, crash: bool) -> None:
        c = self._clients.get((name, broker))
        if c is None or sub_id not in c.subs or c.subscriber is None:
            return
        c.subs.discard(sub_id)
        self.stats.live -= 1
        if crash:
            # a crash: no unsubscription, refreshes stop (F12); the leases run out within 2π
            c.trace.record("crash", client=name, sub_id=sub_id, broker=broker)
            self.stats.crashes += 1
            if not c.subs:
                await c.subscriber.close()
            return
        c.trace.record("client_unsubscribe", client=name, sub_id=sub_id, broker=broker)
        self.stats.unsubscriptions += 1
        try:
            await c.subscriber.unsubscribe(sub_id)
        except (grpc.aio.AioRpcError, KeyError) as e:
            self._error(c, "unsubscribe", e, sub_id=sub_id)

    def _publish(self, name: str, broker: str, attributes: dict[str, Value]) -> None:
        if self.stats.publications >= self._max_pubs:
            return
        self.stats.publications += 1
        c = self._client(name, broker)
        if c.outbox is None:
            # one sender per publisher: its notifications reach the broker in order (FIFO)
            c.publisher = Publisher(self.addresses[broker], name, trace=c.trace)
            c.outbox = asyncio.Queue()
            c.sender = asyncio.create_task(self._send(c))
        c.outbox.put_nowait(attributes)

    async def _send(self, c: _Client) -> None:
        assert c.outbox is not None and c.publisher is not None
        while True:
            attributes = await c.outbox.get()
            c.publisher.next_seq = self._seqs.get(c.name, 1)
            try:
                await c.publisher.publish(attributes)
            except (grpc.aio.AioRpcError, TimeoutError) as e:
                self._error(c, "publish", e)
            finally:
                # a failed publish may still have reached the broker: never reuse its seq
                self._seqs[c.name] = c.publisher.next_seq
                c.outbox.task_done()
