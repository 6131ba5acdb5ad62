"""The live workload: a scenario's workload plan (weeble/model/workload.py), against live brokers,
in real time.

The simulator drives its clients from the same plan, so a live run and its simulated replay
have the same subscription and publication history (up to timing). Every subscription is a
`Subscriber` of the client library (its own stream, a Refresh every ρ); workload client `c<n>`
holds subscription `c<n>/0`, publisher `p<broker>` publishes at its broker with the plan's
sequence numbers. A crash is a Subscriber closed without unsubscribing: its refreshes stop and
the brokers must forget it within 2π. The run is bounded in time (the duration) and in count
(live.max_subscriptions workload subscriptions, live.max_publications publications): the plan
goes on, but no client is started for what is over the bound.

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
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from weeble.core.filters import Value
from weeble.model.scenario import Scenario
from weeble.model.workload import Action, Publish, Subscribe, workload_plan
from weeble.runtime.client import ClientTls, Publisher, Subscriber
from weeble.trace.header import RunHeader
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
    # the warm start carried out before the run's origin (LiveWorkload.warm_start): how many
    # subscriptions, and the seconds it took (paced, acknowledged, then d·δmax)
    warm_start: int = 0
    warm_start_s: float = 0.0
    # planned publications still in a publisher's outbox when the run ended: the clients fell
    # behind the plan (counted in `publications`, never sent; said at the end, not hidden)
    unpublished: int = 0
    last_error: str = ""
    # what a live limit cut from the scenario's plan: limit name -> actions not carried out
    capped: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "last_error"}


class Repeats:
    """Identical messages said once: the first time as it comes, then counted; `summary` gives
    one line per message said more than once (11 identical `publish: UNAVAILABLE` lines while
    a broker is down for a planned crash become two)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def first(self, message: str) -> bool:
        """Count `message`; True the first time it is seen (say it then)."""
        self.counts[message] = self.counts.get(message, 0) + 1
        return self.counts[message] == 1

    def summary(self) -> list[str]:
        return [f"{m} (repeated: {n:,} times in all)" for m, n in self.counts.items() if n > 1]


@dataclass(eq=False)
class _Client:
    """One client node: a Subscriber and/or Publisher at one broker, and its trace."""

    name: str
    broker: str
    trace: LiveSink
    subscriber: Subscriber | None = None
    publisher: Publisher | None = None
    consumer: asyncio.Task[None] | None = None
    outbox: asyncio.Queue[tuple[int, dict[str, Value]]] | None = None  # (seq, attributes)
    sender: asyncio.Task[None] | None = None
    subs: set[str] = field(default_factory=set)


IN_FLIGHT_SLACK = 0.25  # s beyond D that the subscribers wait for the last deliveries
SUBSCRIBE_TIMEOUT = 10.0  # s a subscribe waits for its broker's answer (then it is traced as
# an error while the Subscriber goes on trying); the warm start waits live.startup_timeout


class LiveWorkload:
    def __init__(self, scenario: Scenario, addresses: dict[str, str],
                 trace_dir: Path | None, *,
                 tokens: Callable[[str], str | None] = lambda _client: None,
                 tls: ClientTls | None = None) -> None:
        """`addresses`: broker id -> its listen address (links + clients); `tokens`: client
        id -> the token that proves it to the brokers (Testbed.client_token; None: open);
        `tls`: the run's client TLS (Testbed.client_tls; None: plain)."""
        self.scenario = scenario
        self.addresses = addresses
        # D (d·δmax, + 2ξ): the last publications are still on their way this long after the
        # publishers are done, and R2 judges them; the subscribers stay open for it (+ slack)
        self.deactivation = RunHeader.of_scenario(scenario, backend="live",
                                                  clock="wall").deactivation
        self.in_flight = self.deactivation + IN_FLIGHT_SLACK
        self.tokens = tokens
        self.tls = tls
        self.trace_dir = trace_dir
        self.rho = scenario.timing.rho
        self.stats = WorkloadStats()
        self._repeats = Repeats()  # client errors, each said once and then counted
        self._plan: Iterator[Action] = iter(())
        self._workload_subs = 0  # workload subscriptions planned so far (bounded in count)
        self._clients: dict[tuple[str, str], _Client] = {}
        # subscription ends, in time order (the plan gives each with its subscription)
        self._heap: list[tuple[float, int, Callable[[float], Awaitable[None] | None]]] = []
        self._order = itertools.count()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._max_subs = scenario.live.max_subscriptions
        self._max_pubs = scenario.live.max_publications
        self.gone: set[str] = set()  # brokers that left the tree (nothing more planned there)
        # after warm_start: the plan's first action it left for run() (None: the plan is over)
        self._after_warm_start: Action | None = None
        self._warm_started = False
        self._ack_timeout = SUBSCRIBE_TIMEOUT  # s a subscribe waits for its broker's answer

    # ---- the schedule -----------------------------------------------------------------------

    def _at(self, t: float, action: Callable[[float], Awaitable[None] | None]) -> None:
        heapq.heappush(self._heap, (t, next(self._order), action))

    def _due(self, action: Action) -> Callable[[float], Awaitable[None] | None] | None:
        """What to do for a planned action (None: over the count bounds, or at a broker that
        left); schedules its end."""
        if action.broker in self.gone:
            return None
        if type(action) is Publish:  # bounded in count by _publish
            return lambda _t, p=action: self._publish(p.publisher, p.broker, p.seq, p.attributes)
        if action.cls is not None:  # a workload subscription
            self._workload_subs += 1
            if self._workload_subs > self._max_subs:
                self._cut("live.max_subscriptions", self._max_subs, "subscriptions")
                return None
        client, broker, sub_id = action.client, action.broker, action.sub_id
        if action.end < float("inf"):
            self._at(action.end, lambda _t, crash=action.crashes:
                     self._end(client, broker, sub_id, crash=crash))
        phase = min(max(action.first_refresh - action.t, 0.0), self.rho)
        return lambda _t, f=str(action.filter): self._subscribe(client, broker, sub_id, f,
                                                                first_refresh=phase)

    # ---- running ----------------------------------------------------------------------------

    async def warm_start(self, rate: float, duration: float | None = None,
                         on_progress: Callable[[int], None] | None = None) -> int:
        """The plan's warm start, carried out before the run's origin; returns how many
        subscriptions it established.

        The papers' simulations start in equilibrium: N_s subscriptions created at t = 0
        (thesis §4.1), in place when the measurement begins. The simulator injects them at
        t = 0 at no cost (a client request is free, every link takes δ). Live, all of them at
        once are a storm: hops took 0.28 s against δmax = 25 ms in the first 10 s of the
        paper workload. So here they are subscribed at most `rate` per second (at most one
        second's worth waiting for an answer), each until its broker has acknowledged it (up
        to live.startup_timeout: the warm start is part of the start), and then D = d·δmax
        passes, within which the timing model brings a subscription to every
        broker. The caller then moves the run's origin to now (Testbed.origin) and calls
        `run`, which carries out the rest of the plan on its own clock from 0: the
        publications, the arrivals and the warm-start subscriptions' ends, as planned. Each
        subscription's first refresh keeps its planned phase after its own subscribe (the
        refresh gaps stay within ρ). Only the workload's warm start (its subscriptions at
        t = 0) is taken, not a scenario's explicit subscriptions at 0."""
        if not rate > 0:
            raise ValueError(f"warm start rate: must be > 0 subscriptions/s, got {rate}")
        if self._warm_started:
            raise RuntimeError("the warm start was carried out already")
        self._warm_started = True
        duration = self.scenario.duration if duration is None else duration
        loop = asyncio.get_running_loop()
        began = loop.time()
        self._plan = workload_plan(self.scenario, until=duration)
        window = asyncio.Semaphore(max(1, math.ceil(rate)))  # waiting for their answer
        pending: list[asyncio.Task[None]] = []
        self._ack_timeout = max(SUBSCRIBE_TIMEOUT, self.scenario.live.startup_timeout)

        async def established(subscribing: Awaitable[None]) -> None:
            try:
                await subscribing
            finally:
                window.release()
                self.stats.warm_start += 1
                if on_progress is not None:
                    on_progress(self.stats.warm_start)

        try:
            action = next(self._plan, None)
            sent = 0
            while (type(action) is Subscribe and action.t <= 0 and action.cls is not None):
                act = self._due(action)  # schedules its planned end (on run()'s clock)
                action = next(self._plan, None)
                if act is None:
                    continue
                delay = began + sent / rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await window.acquire()
                result = act(0.0)
                assert result is not None  # a subscription is a coroutine
                pending.append(asyncio.ensure_future(established(result)))
                sent += 1
            self._after_warm_start = action
            await asyncio.gather(*pending)  # each acknowledged (or its error traced)
            await asyncio.sleep(self.deactivation)  # and then at every broker
        except BaseException:
            for task in pending:
                task.cancel()
            await self._shutdown(unsubscribe=False, linger=False)
            raise
        finally:
            self._ack_timeout = SUBSCRIBE_TIMEOUT
        self.stats.warm_start_s = loop.time() - began
        return self.stats.warm_start

    async def run(self, duration: float | None = None,
                  on_tick: Callable[[float, WorkloadStats], None] | None = None,
                  tick: float = 0.25, *, unsubscribe_at_end: bool = False) -> WorkloadStats:
        """Drive the clients for `duration` seconds (default: the scenario's), then stop them:
        without unsubscribing when the run ends with them (`weeble run`: the subscriptions were
        alive until then), or, with `unsubscribe_at_end`, each live subscription unsubscribed
        and traced as ended, for a run whose brokers go on (`weeble up --workload`): a
        subscription without an end lives forever (R1), and the brokers' leases would run out
        under a checker still requiring it."""
        duration = self.scenario.duration if duration is None else duration
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if self._warm_started:  # the plan goes on after its warm start (warm_start)
            planned = self._after_warm_start
        else:
            self._plan = workload_plan(self.scenario, until=duration)
            planned = next(self._plan, None)
        ticker = None
        if on_tick is not None:
            ticker = asyncio.create_task(self._tick(on_tick, t0, tick))
        try:
            while True:
                # the next planned action or the next subscription end, whichever comes first
                if planned is not None and (not self._heap or planned.t <= self._heap[0][0]):
                    t, act, planned = planned.t, self._due(planned), next(self._plan, None)
                elif self._heap:
                    t, _, act = heapq.heappop(self._heap)
                else:
                    break
                if t > duration:
                    break
                if act is None:
                    continue
                delay = t0 + t - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                result = act(t)
                if result is not None:
                    self._spawn(result)
            remaining = t0 + duration - loop.time()
            if remaining > 0:
                await asyncio.sleep(remaining)
        finally:
            if ticker is not None:
                ticker.cancel()
            await self._shutdown(unsubscribe=unsubscribe_at_end)
            for line in self._repeats.summary():
                log.warning("%s", line)
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

    async def _shutdown(self, *, unsubscribe: bool, linger: bool = True) -> None:
        """Stop the clients; `linger`: the subscribers first wait for what is in flight."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
            for task in list(self._tasks):
                task.cancel()
        if unsubscribe:
            await asyncio.gather(*(self._end(c.name, c.broker, sub_id, crash=False)
                                   for c in self._clients.values() for sub_id in sorted(c.subs)))
        # what was scheduled is published: every publisher's outbox within one 5 s, together
        # (one after the other, 81 publishers that could not reach their brokers took 81 × 5 s)
        senders = [(c.outbox, c.sender) for c in self._clients.values()
                   if c.outbox is not None and c.sender is not None]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await asyncio.gather(*(outbox.join() for outbox, _ in senders))
        for outbox, sender in senders:
            sender.cancel()
            self.stats.unpublished += outbox.qsize()
        # and what their brokers never acknowledged (closing the publishers drops it)
        self.stats.unpublished += sum(c.publisher.pending for c in self._clients.values()
                                      if c.publisher is not None)
        if self.stats.unpublished:
            log.warning("%d planned publications were never published (acknowledged by their"
                        " broker): the clients or the brokers fell behind the plan",
                        self.stats.unpublished)
        # closed at once, the subscribers missed what their brokers had in flight: 3 judged
        # deliveries of the paper workload's last 0.03 s, undeliverable for want of a stream
        if linger:
            await asyncio.sleep(self.in_flight)
        for c in self._clients.values():
            if c.consumer is not None:
                c.consumer.cancel()
                if c.subscriber is not None:  # arrived, not yet counted
                    self.stats.deliveries += len(c.subscriber.pending())
        await asyncio.gather(*(self._close(c) for c in self._clients.values()))

    @staticmethod
    async def _close(c: _Client) -> None:
        """A client's streams and trace, closed (all clients' together: 10,000 of them one
        after the other took minutes)."""
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
        if self._repeats.first(self.stats.last_error):
            log.warning("%s", self.stats.last_error)

    async def _subscribe(self, name: str, broker: str, sub_id: str, filter_text: str,
                         first_refresh: float | None = None) -> None:
        c = self._client(name, broker)
        if c.subscriber is None:  # its refresh rounds from the plan's phase (default ρ)
            c.subscriber = Subscriber(self.addresses[broker], name, rho=self.rho, trace=c.trace,
                                      token=self.tokens(name), tls=self.tls,
                                      first_refresh=first_refresh)
            c.consumer = asyncio.create_task(self._consume(c.subscriber))
        c.trace.record("client_subscribe", client=name, sub_id=sub_id, broker=broker,
                       filter=filter_text)
        c.subs.add(sub_id)
        self.stats.subscriptions += 1
        self.stats.live += 1
        try:
            await c.subscriber.subscribe(filter_text, sub_id, timeout=self._ack_timeout)
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

    def joined(self, broker: str, address: str) -> None:
        """A broker joined the tree (AddLeaf): clients may now be started there."""
        self.addresses[broker] = address
        self.gone.discard(broker)

    async def subscribe(self, client: str, broker: str, filter_text: str,
                        sub_id: str | None = None) -> str:
        """Start a subscription now, beside the plan's (traced like theirs); its sub_id."""
        sub_id = sub_id or f"{client}/0"
        await self._subscribe(client, broker, sub_id, filter_text)
        return sub_id

    async def leave(self, broker: str) -> None:
        """`broker` leaves the tree (RemoveLeaf): its subscribers unsubscribe now, its
        publishers stop, and nothing more is planned there (as in the simulator)."""
        self.gone.add(broker)
        for c in [c for c in self._clients.values() if c.broker == broker]:
            for sub_id in sorted(c.subs):
                await self._end(c.name, c.broker, sub_id, crash=False)
            if c.outbox is not None and c.sender is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2):
                        await c.outbox.join()  # what was published before reaches the broker

    # ---- client crash faults (chaos: client_crash with `clients:`) ---------------------------

    def subscribers(self) -> list[str]:
        """The clients with a live subscription, in the order they first came."""
        return list(dict.fromkeys(name for (name, _), c in self._clients.items() if c.subs))

    async def crash(self, client: str) -> dict[str, Any]:
        """The client crashes now: its refreshes stop, it never unsubscribes (F12)."""
        hit = [c for (name, _), c in self._clients.items() if name == client and c.subs]
        if not hit:
            raise LookupError(f"{client} has no live subscription")
        sub_ids = []
        for c in hit:
            for sub_id in sorted(c.subs):  # the last one closes the client's subscriber
                sub_ids.append(sub_id)
                await self._end(c.name, c.broker, sub_id, crash=True)
        return {"sub_ids": sub_ids, "brokers": sorted({c.broker for c in hit})}

    def _cut(self, limit: str, value: int, what: str) -> None:
        """A live limit cut the scenario's workload: said once (naming the limit), counted in
        the stats (`capped`), never silent (issue 25: 10,000 subscriptions asked for, 1,000
        run, no message)."""
        cut = self.stats.capped
        if limit not in cut:
            log.warning("%s = %d cuts this scenario's workload: its %s beyond it are not run"
                        " (raise %s in the scenario to run them all)", limit, value, what,
                        limit)
        cut[limit] = cut.get(limit, 0) + 1

    def _publish(self, name: str, broker: str, seq: int, attributes: dict[str, Value]) -> None:
        if broker in self.gone:
            return
        if self.stats.publications >= self._max_pubs:
            self._cut("live.max_publications", self._max_pubs, "publications")
            return
        self.stats.publications += 1
        c = self._client(name, broker)
        if c.outbox is None:
            # one sender per publisher: its notifications reach the broker in order (FIFO)
            c.publisher = Publisher(self.addresses[broker], name, trace=c.trace,
                                    token=self.tokens(name), tls=self.tls)
            c.outbox = asyncio.Queue()
            c.sender = asyncio.create_task(self._send(c))
        c.outbox.put_nowait((seq, attributes))

    async def _send(self, c: _Client) -> None:
        """Publish what the plan queued, in order: everything waiting goes out together and
        is then waited for, so a round trip costs one wait per batch, not per notification
        (one at a time, 27 publishers kept up ~40/s of a planned 1,000/s at 10,000
        subscriptions)."""
        assert c.outbox is not None and c.publisher is not None
        while True:
            batch = [await c.outbox.get()]
            while not c.outbox.empty():
                batch.append(c.outbox.get_nowait())
            lost = c.publisher.unacknowledged
            try:
                for seq, attributes in batch:
                    # the plan's seq: a publisher's seqs run on across brokers
                    c.publisher.next_seq = seq
                    await c.publisher.send(attributes)
                await c.publisher.flush()
            except (grpc.aio.AioRpcError, TimeoutError, RuntimeError) as e:
                self._error(c, "publish", e)
            else:  # a stream that broke before the flush fails nothing the flush waits for
                if c.publisher.unacknowledged > lost and c.publisher.last_error is not None:
                    self._error(c, "publish", c.publisher.last_error)
            finally:
                for _ in batch:
                    c.outbox.task_done()
