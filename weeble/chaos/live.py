"""The live Target: a running Testbed, reached only through the orchestrator's Backend interface
(processes and links: kill, restart, pause, resume, cut, heal, shape, and their states) and the
brokers' admin API (core state, corruption, injected messages). No signals, no /proc: a backend
that runs brokers elsewhere (containers, pods) serves the same fault actions.

Evidence comes from what the system reports after each call: admin snapshots before and after a
state fault, the link shaping the brokers report, the backend's BrokerState and LinkState.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.chaos.evidence import ChaosTrace
from weeble.chaos.target import TargetError
from weeble.codec.wire import message_to_envelope
from weeble.core.events import network_id
from weeble.core.messages import Message
from weeble.core.rom import Rom
from weeble.model.selectors import Tree
from weeble.orchestrator.backend import BackendError
from weeble.orchestrator.testbed import Testbed, read_state


class PhaseWatch:
    """The reconfiguration phases of a live run, from its trace (the contract, the same as in
    the simulator): the manager's `reconfiguration` records and the brokers' `reconfig` ones,
    read as the nodes flush them into RUN/trace/ (a broker has its `reconfig` records written
    at once, the manager flushes its own; other nodes every `trace_flush_interval_s`), looked
    at every POLL s. Faults waiting for a phase are woken with its time (wall-clock ns)."""

    POLL = 0.02  # s between two looks at the trace files

    def __init__(self, trace_dir: Path, skip: str) -> None:
        self.trace_dir, self.skip = trace_dir, skip
        self.seen: list[tuple[int, str, str, str]] = []  # (t_ns, rid, phase, node)
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._waiters: list[tuple[str, str, str | None, asyncio.Future[int]]] = []
        self._task: asyncio.Task[None] | None = None

    async def wait(self, rid: str, phase: str, broker: str | None, since: int) -> int:
        """The time (ns) reconfiguration `rid` reached `phase` (at `broker`, if given), not
        before `since` (the experiment's start)."""
        self.poll()
        for t, r, ph, node in self.seen:
            if r == rid and ph == phase and broker in (None, node) and t >= since:
                return t
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((rid, phase, broker, future))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        try:
            return await future
        finally:
            self._waiters = [w for w in self._waiters if w[3] is not future]

    async def _run(self) -> None:
        while self._waiters:
            await asyncio.sleep(self.POLL)
            self.poll()

    def poll(self) -> None:
        for path in sorted(self.trace_dir.glob("*.jsonl")):
            if path.name == self.skip:
                continue
            try:
                with path.open("rb") as f:
                    f.seek(self._offsets.get(path, 0))
                    data = f.read()
            except OSError:
                continue
            if not data:
                continue
            self._offsets[path] = self._offsets.get(path, 0) + len(data)
            data = self._partial.pop(path, b"") + data
            lines = data.split(b"\n")
            if lines[-1]:
                self._partial[path] = lines[-1]  # not flushed whole yet
            for line in lines[:-1]:
                if b'"reconfig' in line:  # reconfig and reconfiguration records only
                    self._record(line)

    def _record(self, line: bytes) -> None:
        try:
            r = json.loads(line)
        except ValueError:
            return
        if r.get("kind") not in ("reconfig", "reconfiguration"):
            return
        t, rid, phase, node = int(r["t"]), str(r.get("rid")), str(r.get("phase")), r["node"]
        self.seen.append((t, rid, phase, node))
        for want_rid, want_phase, broker, future in self._waiters:
            if (want_rid, want_phase) == (rid, phase) and broker in (None, node) and \
                    not future.done():
                future.set_result(t)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


@dataclass
class _ChaosClient:
    client: str
    sub_id: str
    broker: str
    subscriber: Any
    trace: Any


class LiveTarget:
    def __init__(self, bed: Testbed, trace: ChaosTrace, *, clients: Any = None) -> None:
        """`clients`: the run's live workload (orchestrator/workload.py), whose subscribers a
        client_crash with `clients:` crashes; None: there are none (`weeble chaos`)."""
        self.bed = bed
        self.kind = bed.backend.name
        self._tree = Tree(bed.brokers, bed.edges, bed.root)
        self.params = next(iter(bed.configs.values())).params_obj()
        self.trace = trace
        self.workload = clients
        self._lock = asyncio.Lock()
        self._stop: asyncio.Event | None = None
        self._t0 = 0.0  # loop time of the experiment's start
        self._t0_ns = 0  # wall clock at the same instant
        self._paused: set[str] = set()
        self.until: float | None = None  # s from the start: `during` waits end there
        self._spawned: set[asyncio.Task[None]] = set()
        self._phases = PhaseWatch(bed.trace_dir, skip=trace.path.name)

    @property
    def tree(self) -> Tree:
        """The testbed's tree as it is now: a reconfiguration's manager records each tree it
        makes in the testbed (`Testbed.tree_changed`: its brokers and edges, and the run's
        state file, which a manager in another process, `weeble reconfigure`, writes too), so
        a fault's selector is resolved against the overlay it strikes (as the simulator's
        target does, the same `Tree.follow`)."""
        brokers, edges = self.bed.brokers, self.bed.edges
        try:
            state = read_state(self.bed.run_dir)
            brokers, edges = list(state["brokers"]), [tuple(e) for e in state["edges"]]
        except (BackendError, KeyError, TypeError):
            pass  # (no state file written yet: this process's testbed is all there is)
        self._tree = self._tree.follow(brokers, edges)
        return self._tree

    # ---- the clock --------------------------------------------------------------------------

    def begin(self) -> None:
        self._stop = asyncio.Event()
        self._t0 = asyncio.get_running_loop().time()
        self._t0_ns = time.time_ns()

    def elapsed(self) -> float:
        return asyncio.get_running_loop().time() - self._t0

    async def sleep_until(self, t: float) -> bool:
        assert self._stop is not None, "begin() first"
        delay = self._t0 + t - asyncio.get_running_loop().time()
        if delay > 0 and not self._stop.is_set():
            try:
                async with asyncio.timeout(delay):
                    await self._stop.wait()
            except TimeoutError:
                pass
        return not self._stop.is_set()

    def stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    def record(self, kind: str, at: float, fields: dict[str, Any]) -> None:
        self.trace.write(kind, self._t0_ns + int(at * 1e9), fields)

    async def wait_phase(self, rid: str, phase: str, broker: str | None) -> float | None:
        assert self._stop is not None, "begin() first"
        stop = asyncio.ensure_future(self._stop.wait())
        seen = asyncio.ensure_future(self._phases.wait(rid, phase, broker, self._t0_ns))
        # `weeble chaos --until S` on a testbed nobody reconfigures: the phase never comes
        timeout = None if self.until is None else max(0.0, self.until - self.elapsed())
        try:
            await asyncio.wait({stop, seen}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not seen.done():
                seen.cancel()
        if not seen.done() or seen.cancelled():
            return None
        return (seen.result() - self._t0_ns) / 1e9

    async def close(self) -> None:
        """After the experiment: the side tasks end, and no broker stays paused."""
        self._phases.close()
        if self._spawned:
            await asyncio.wait(list(self._spawned))
        for b in list(self._paused):
            await self.resume(b)

    # ---- helpers ----------------------------------------------------------------------------

    async def _backend(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A blocking backend call, off the loop, one at a time (the backend is synchronous
        and keeps state, such as the set of cut links, that two calls must not race on)."""
        async with self._lock:
            return await asyncio.to_thread(fn, *args)

    async def _admin(self, broker: str, method: str, *args: Any) -> Any:
        async with self.bed.admin(broker, timeout=5.0) as admin:
            return await getattr(admin, method)(*args)

    # ---- brokers ----------------------------------------------------------------------------

    def rom(self, broker: str) -> Rom:
        return self.bed.configs[broker].to_rom()

    async def snapshot(self, broker: str) -> dict[str, Any]:
        core: dict[str, Any] = (await self._admin(broker, "snapshot"))["core"]
        return core

    async def corrupt(self, broker: str, *, field: str, value: Any, args: dict[str, Any],
                      fault_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        reply = await self._admin(broker, "corrupt", field, value, args, fault_id)
        return reply["before"], reply["after"]

    async def inject(self, src: str, dst: str, message: Message,
                     fault_id: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        reply = await self._admin(dst, "inject", src, message_to_envelope(message, 0), fault_id)
        return reply["before"], reply["after"], reply["effects"]

    async def kill(self, broker: str) -> dict[str, Any]:
        before = self.bed.backend.broker_state(broker)
        if not before.running:
            raise TargetError("not running")
        await self._backend(self.bed.kill, broker)
        after = self.bed.backend.broker_state(broker)
        if after.running:
            raise TargetError("still running after the kill")
        return {**after.evidence(), "killed": before.handle}

    async def restart(self, broker: str) -> dict[str, Any]:
        old = self.bed.backend.handle(broker)
        await self._backend(self.bed.restart, broker)
        snap = await self._admin(broker, "snapshot")
        return {"old_pid": old, "pid": self.bed.backend.handle(broker),
                "uptime": round(snap["now"], 3),  # a fresh process: RAM started empty
                "entries": sum(len(t) for t in snap["core"]["tables"])}

    async def pause(self, broker: str, duration: float | None) -> dict[str, Any]:
        if not self.bed.backend.alive(broker):
            raise TargetError("not running")
        state = await self._backend(self.bed.backend.pause_broker, broker)
        self._paused.add(broker)
        if not state.paused:
            raise TargetError(f"not paused ({state.detail})")
        evidence: dict[str, Any] = state.evidence()
        return evidence

    async def resume(self, broker: str) -> dict[str, Any]:
        state = await self._backend(self.bed.backend.resume_broker, broker)
        self._paused.discard(broker)
        if state.paused:
            raise TargetError(f"still paused ({state.detail})")
        evidence: dict[str, Any] = state.evidence()
        return evidence

    def is_paused(self, broker: str) -> bool:
        return broker in self._paused

    # ---- links ------------------------------------------------------------------------------

    async def link_shape(self, a: str, b: str) -> dict[str, float]:
        if not self.bed.backend.alive(a):
            raise TargetError(f"{a}: not running")
        snap = await self._admin(a, "snapshot")
        for link in snap["links"]:
            if link["neighbor"] == b:
                shape: dict[str, float] = link["shape"]
                return shape
        raise LookupError(f"{a}: no link status for {b}")

    async def shape(self, a: str, b: str, change: dict[str, float]) -> dict[str, float]:
        await self._backend(lambda: self.bed.shape(a, b, both_ways=False, **change))
        return await self.link_shape(a, b)

    async def cut(self, a: str, b: str, cut: bool) -> tuple[bool, dict[str, Any]]:
        await self._backend(self.bed.cut if cut else self.bed.heal, a, b)
        state = await self._backend(self.bed.backend.link_state, a, b)
        return state.cut, state.evidence()

    # ---- clients ----------------------------------------------------------------------------

    async def subscribe_client(self, client: str, broker: str, filter_text: str) -> _ChaosClient:
        from weeble.runtime.client import Subscriber
        from weeble.trace.writer import LiveSink

        sub_id = f"{client}/0"
        trace = LiveSink(self.bed.trace_dir / f"{client}.jsonl", client)
        trace.record("client_start", broker=broker, address=self.bed.address(broker).listen)
        sub = Subscriber(self.bed.address(broker).listen, client, rho=self.params.rho,
                         trace=trace, token=self.bed.client_token(client),
                         tls=self.bed.client_tls())
        trace.record("client_subscribe", client=client, sub_id=sub_id, broker=broker,
                     filter=filter_text)
        try:
            await sub.subscribe(filter_text, sub_id)
        except BaseException:
            await sub.close()
            trace.close()
            raise
        return _ChaosClient(client, sub_id, broker, sub, trace)

    async def crash_client(self, handle: _ChaosClient) -> dict[str, Any]:
        c, stream = handle, f"{handle.client}/{handle.sub_id}"
        try:
            before = await self._admin(c.broker, "snapshot")
            c.trace.record("crash", client=c.client, sub_id=c.sub_id, broker=c.broker)
            await c.subscriber.close()  # no unsubscription: the refreshes just stop (F12)
            after = await self._until_closed(c.broker, stream)
        finally:
            await c.subscriber.close()
            c.trace.close()
        had = stream in before["client_streams"]
        gone = stream not in after["client_streams"]
        if not (had and gone):
            raise TargetError(f"the client's stream was {'not open' if not had else 'kept'}")
        held = network_id(c.client, c.sub_id)  # the id its broker's tables hold
        entries = [e for t in after["core"]["tables"] for e in t if e["sub_id"] == held]
        return {"client": c.client, "sub_id": c.sub_id, "stream_before": had,
                "stream_after": not gone, "entries_left": entries}

    async def _until_closed(self, broker: str, stream: str,
                            timeout: float = 3.0) -> dict[str, Any]:
        """The broker's snapshot once it saw the client's stream close (it learns of it a
        moment after the client), or the last one at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            snap: dict[str, Any] = await self._admin(broker, "snapshot")
            if stream not in snap["client_streams"] or loop.time() > deadline:
                return snap
            await asyncio.sleep(0.05)

    def subscribers(self) -> list[str]:
        return self.workload.subscribers() if self.workload is not None else []

    async def crash_subscriber(self, client: str) -> dict[str, Any]:
        if self.workload is None:
            raise TargetError("no workload clients in this run")
        evidence: dict[str, Any] = await self.workload.crash(client)
        return evidence
