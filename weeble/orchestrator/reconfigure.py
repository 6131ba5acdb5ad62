"""Reconfiguring a live testbed while traffic flows (thesis ch. 4): the simulator's manager, live.

There is one manager: `weeble.sim.reconfigure.Reconfigurator` turns each operation (a
link exchange by the coordinated protocol of 4.4.2 or the strawman, a leaf add or removal, a
request of the 3-colour scheme of 4.5) into management events for the brokers and learns from
their `reconfig` trace records how it ended. `LiveNetwork` is the Network it drives here:

- an event for a broker becomes an admin `Manage` call (the brokers' coordination messages then
  travel over their own link streams, never through the orchestrator);
- a new broker is a new process of the backend (its address pushed into every broker's address
  book first, admin `SetPeers`), a leaving one is stopped once it has left the tree;
- the brokers' trace files are tailed for `reconfig` records (the initiator's `done`, R's
  `activated`), which finish the operation (its record waits `hold` s for the other brokers'
  sends that count for it);
- an operation that is done changes the manager's tree as soon as its `done` is read (not
  after the hold: `Reconfigurator.ended`), and the testbed records it at once
  (`Bed.tree_changed`: its state file, and the backend's configs, so a broker that restarts
  boots with its neighbours and parent in the tree as it is now; and its edges, which a
  fault's selector is resolved against);
- the manager's `reconfiguration` records (started, finished: the ones rule R15 judges each
  reconfiguration by) go to `RUN/trace/reconfigure.jsonl`.

Steps run in the order the manager asks for them, one at a time (one admin call after the
other), on the event loop of the caller, beside the workload's clients.

    async with LiveReconfigurator(bed) as manager:        # the API (Testbed.reconfigure too)
        record = await manager.reconfigure(ExchangeLink(remove=("b0", "b2"), add=("b2", "b3")))
        record.outcome, record.duration                      # 'done', 0.21
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from weeble.core.events import Event, Leave, StartExchange, SubmitReconfig
from weeble.core.messages import COORDINATION, Bye, Notification, Notify, Recolor, Reconfigure
from weeble.core.optimize.messages import Broadcast, Propose
from weeble.core.reconfig.plan import Op, PlanError, RemoveLeaf, Tree, apply, edge
from weeble.orchestrator.backend import BackendError
from weeble.runtime.admin_client import AdminClient
from weeble.sim.optimize import CostMonitor
from weeble.sim.reconfigure import Reconfigurator, Record, describe
from weeble.trace.writer import LiveSink

log = logging.getLogger(__name__)

NODE = "reconfigure"  # the node (and trace file) of the live manager's records
_COORDINATION = {cls.__name__.lower(): cls for cls in (*COORDINATION, Reconfigure, Recolor)}
# what the tree's cost is priced from (CostMonitor): the notifications and the optimizer's own
_PRICED = {"notify": Notify, "broadcast": Broadcast, "propose": Propose}


class Bed(Protocol):
    """What the live manager needs of a testbed (weeble/orchestrator/testbed.py)."""

    root: str
    trace_dir: Path

    @property
    def brokers(self) -> list[str]: ...

    def tree(self) -> Tree: ...

    def admin(self, broker_id: str, timeout: float = 10.0) -> AdminClient: ...

    def trace_file(self, broker_id: str) -> Path | None: ...

    def add_broker(self, broker_id: str, attach: str) -> Any: ...  # its BrokerConfig

    def book_address(self, broker_id: str) -> str: ...  # where other brokers reach it

    def address(self, broker_id: str) -> Any: ...  # where the orchestrator reaches it

    def remove_broker(self, broker_id: str) -> None: ...

    def check_remove(self, broker_id: str) -> None: ...  # BackendError: it cannot go

    def tree_changed(self, tree: Tree) -> None: ...

    def settings(self) -> dict[str, Any]: ...


class Clients(Protocol):
    """The live workload, told when a broker leaves (its clients leave with it)."""

    async def leave(self, broker: str) -> None: ...


@dataclass(slots=True)
class _TraceRecord:
    kind: str
    fields: dict[str, Any]


class _Sink:
    """The manager's `reconfiguration` records, in the run's trace (node `reconfigure`)."""

    def __init__(self, path: Path | None, wall0: float,
                 say: Callable[[str], None] = lambda _msg: None) -> None:
        self.sink = LiveSink(path, NODE)
        self.sink.start()
        self.wall0 = wall0  # the wall clock at the manager's t = 0
        self.say = say  # progress: each operation as it starts and ends

    def write(self, _file: str, t: float, _node: str, kind: str, fields: dict[str, Any]) -> None:
        self.sink.record_at(int((self.wall0 + t) * 1e9), kind, dict(fields))
        if kind == "reconfiguration":
            self.sink.flush_soon()  # a chaos fault `during` its start or end waits for it
            if fields["phase"] == "started":
                self.say(f"{fields['rid']} {fields['op']}: started at {t:.2f} s")
            else:
                why = f" ({fields['why']})" if fields.get("why") else ""
                self.say(f"{fields['rid']} {fields['op']}: {fields.get('outcome')} at {t:.2f} s"
                         f"{why}")


class _Engine:
    """What the Reconfigurator asks of the simulator's engine, on an asyncio loop."""

    def __init__(self, net: LiveNetwork) -> None:
        self.net = net

    def schedule(self, t: float, fn: Callable[[float, Any, Any], None], a: Any, b: Any) -> None:
        delay = max(0.0, t - self.net.now())
        self.net.loop.call_later(delay, lambda: fn(max(t, self.net.now()), a, b))

    def inject(self, _now: float, broker: str, event: Event) -> None:
        self.net.steps.put_nowait(("inject", broker, event))

    def observe_sends(self, observer: Any) -> None:
        """No central view of the brokers' sends live: the coordination messages are counted
        from the brokers' `send` records (their rid, `trace.writer.message_ids`)."""
        self.net.send_observers.append(observer)


class LiveNetwork:
    """The Network of the Reconfigurator (sim/reconfigure.py) over a live testbed."""

    def __init__(self, bed: Bed, clients: Clients | None, t0: float | None = None,
                 say: Callable[[str], None] = lambda _msg: None) -> None:
        self.bed = bed
        self.clients = clients
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time() if t0 is None else t0
        self.engine = _Engine(self)
        self.root = bed.root
        self.brokers: dict[str, Any] = dict.fromkeys(bed.brokers)
        self.trace_observers: list[Callable[[float, Any, Any], None]] = []
        self.wall0 = time.time() - (self.loop.time() - self.t0)
        self.observers = _Sink(bed.trace_dir / f"{NODE}.jsonl", self.wall0, say)
        self.steps: asyncio.Queue[tuple[str, Any, Any]] = asyncio.Queue()
        self.error = ""  # what the last step that failed said ("" while none did)
        self._admins: dict[str, AdminClient] = {}
        self._offsets: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.settle = 0.5  # s between a leaving leaf's clients leaving and its Leave
        self.on_tick: list[Callable[[], None]] = []
        self.send_observers: list[Callable[[float, str, str, str, Any], None]] = []
        self._held: collections.deque[tuple[float, str, dict[str, Any]]] = collections.deque()
        self.hold = 0.5  # s, > the brokers' trace flush interval (0.2 s)
        self.priced = False  # a cost monitor watches: notification sends and optimize records
        # fn(now, rid) as soon as a broker's record says reconfiguration rid is done (the
        # manager's `ended`: the tree changes then, not after the hold)
        self.on_done: list[Callable[[float, str], None]] = []

    def now(self) -> float:
        return self.loop.time() - self.t0

    # ---- the Network protocol ----------------------------------------------------------------

    def add_broker(self, _t: float, broker: str, attach: str) -> None:
        self.brokers[broker] = None
        self.steps.put_nowait(("add", broker, attach))

    def retire_broker(self, _t: float, broker: str) -> None:
        self.brokers.pop(broker, None)
        self.steps.put_nowait(("retire", broker, None))

    def tree_changed(self, _t: float, tree: Tree) -> None:
        """The manager's tree after an operation that is done: the testbed records it (its
        state file, and the backend's configs a restarted broker boots with), at once, so a
        crash right after the operation restarts the broker with the tree as it is now."""
        try:
            self.bed.tree_changed(tree)
        except Exception:  # the manager must go on with the next operation
            log.exception("recording the new tree failed")

    def then(self, fn: Callable[[float, str], None]) -> None:
        """Call fn(now, why) once every step asked for so far is carried out."""
        self.steps.put_nowait(("then", fn, None))

    # ---- running -----------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [self.loop.create_task(self._carry_out(), name="reconfigure-steps"),
                       self.loop.create_task(self._tail(), name="reconfigure-tail")]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for admin in self._admins.values():
            with contextlib.suppress(Exception):
                await admin.close()
        self._admins.clear()
        await self.observers.sink.aclose()

    def _admin(self, broker: str) -> AdminClient:
        admin = self._admins.get(broker)
        if admin is None:
            admin = self._admins[broker] = self.bed.admin(broker)
        return admin

    async def _carry_out(self) -> None:
        while True:
            what, a, b = await self.steps.get()
            try:
                await self._step(what, a, b)
            finally:
                self.steps.task_done()

    async def _step(self, what: str, a: Any, b: Any) -> None:
        """One step of a reconfiguration, in the order the manager asked for them."""
        if what == "then":
            why, self.error = self.error, ""
            try:
                a(self.now(), why)
            except Exception:  # the manager must go on with the next operation
                log.exception("reconfiguration bookkeeping failed")
            return
        observed = what == "inject" and isinstance(b, StartExchange | SubmitReconfig)
        if self.error:  # a step of this operation failed: the rest of it is not carried out
            if observed:  # an operation the brokers would have ended: it ends here, failed
                self._feed(a, {"rid": b.rid, "phase": "failed", "why": self.error})
                self.error = ""
            return
        try:
            if what == "inject":
                if isinstance(b, Leave) and self.clients is not None:
                    # its clients leave first (as in the simulator), then the leaf itself,
                    # once what they published or unsubscribed has gone out
                    await self.clients.leave(a)
                    await asyncio.sleep(self.settle)
                elif isinstance(b, SubmitReconfig) and self.clients is not None:
                    # the colour scheme: a leaf that the request removes detaches itself at a
                    # recolor, which the orchestrator learns of later; its clients leave now,
                    # two recolors before. (Left at the retire step, a publisher there published
                    # 0.15 s after its leaf had detached, and 3 deliveries went missing.)
                    for leaf in sorted(x for x, parent in b.moves if parent is None):
                        await self.clients.leave(leaf)
                reply = await self._admin(a).manage_event(b)
                refused = [t for t in reply["traces"] if t.get("phase") == "refused"]
                for t in refused:  # as the simulator learns it: from the broker's record
                    self._feed(a, t)
            elif what == "add":
                await asyncio.to_thread(self.bed.add_broker, a, b)
                book = self.bed.book_address(a)
                for other in self.bed.brokers:  # everyone may need to reach it
                    if other != a:
                        await self._admin(other).set_peers({a: book})
                joined = getattr(self.clients, "joined", None)
                if joined is not None:  # the clients: where the orchestrator's side reaches it
                    joined(a, self.bed.address(a).listen)
            elif what == "retire":
                if self.clients is not None:  # (the colour scheme: they go now)
                    await self.clients.leave(a)
                await asyncio.sleep(self.settle)  # the Bye is on its way
                admin = self._admins.pop(a, None)
                if admin is not None:
                    with contextlib.suppress(Exception):
                        await admin.close()
                await asyncio.to_thread(self.bed.remove_broker, a)
        except Exception as e:
            why = f"{what} {a}: {type(e).__name__}: {e}"
            log.warning("reconfiguration step failed: %s", why)
            if observed:  # no broker will say how it ended: say it here
                self._feed(a, {"rid": b.rid, "phase": "failed", "why": why})
            else:
                self.error = why

    def skip_to_end(self) -> None:
        """Records written before now are not this manager's (`weeble reconfigure` attached to
        a run with reconfigurations before it)."""
        for broker in self.brokers:
            path = self.bed.trace_file(broker)
            with contextlib.suppress(OSError):
                if path is not None:
                    self._offsets[str(path)] = path.stat().st_size

    async def _tail(self) -> None:
        """Feed the brokers' `reconfig` records to the manager, as the simulator does."""
        while True:
            for broker in list(self.brokers):
                self._read(broker)
            now = self.loop.time()
            while self._held and self._held[0][0] <= now:
                _, broker, record = self._held.popleft()
                self._feed(broker, record)
            for tick in self.on_tick:
                tick()
            await asyncio.sleep(0.05)

    def _read(self, broker: str) -> None:
        path = self.bed.trace_file(broker)
        if path is None:
            return
        try:
            with path.open("rb") as f:
                f.seek(self._offsets.get(str(path), 0))
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a torn last line is read next time
        self._offsets[str(path)] = self._offsets.get(str(path), 0) + end
        priced = self.priced
        for line in data[:end].splitlines():
            if b'"reconfig"' in line:
                kind = "reconfig"
            elif b'"send"' in line and (b'"rid' in line or b'"msg":"bye"' in line or (
                    priced and (b'"msg":"notify"' in line or b'"msg":"broadcast"' in line))):
                kind = "send"
            elif priced and b'"optimize"' in line:
                kind = "optimize"
            else:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("kind") != kind:
                continue
            if kind != "send":
                if kind == "reconfig" and record.get("phase") in ("done", "activated"):
                    for done in self.on_done:
                        done(self.now(), str(record.get("rid")))
                # held a little: the other brokers' sends of this reconfiguration may still be
                # in their trace buffers (a flush interval), and they count for it
                self._held.append((self.loop.time() + self.hold, broker, record))
            else:
                self._sent(record)

    def _sent(self, record: dict[str, Any]) -> None:
        """A broker's `send` record of a coordination message, as the manager counts it (and,
        with a cost monitor, of a notification or the optimizer's own messages)."""
        name = str(record.get("msg"))
        cls = _COORDINATION.get(name) or (_PRICED.get(name) if self.priced else None)
        if cls is None:
            return
        msg: Any
        if cls is Notify:
            # a real Notification with the traced one's id (the monitor reads only that), built
            # by the constructors: compiled (scripts/compile.py), Notify checks the declared
            # type of its attribute, and a class with an __init__ of its own runs it in __new__
            msg = Notify(Notification(str(record.get("publisher")),
                                      int(record.get("seq") or 0), {}))
        else:
            msg = cls.__new__(cls)  # only its type and rid(s) are read
            if cls is Recolor:
                msg.rids = tuple(record.get("rids") or ())
            elif cls is not Bye and cls is not Broadcast:
                msg.rid = record.get("rid", "")
        for observer in self.send_observers:
            observer(self.now(), "send", str(record.get("from")), str(record.get("to")), msg)

    def _feed(self, broker: str, record: dict[str, Any]) -> None:
        fields = {k: v for k, v in record.items() if k not in ("v", "t", "node", "kind")}
        # when the broker wrote it (it is read up to a flush interval later)
        t = record["t"] / 1e9 - self.wall0 if isinstance(record.get("t"), int) else self.now()
        kind = str(record.get("kind") or "reconfig")
        for observer in list(self.trace_observers):
            observer(min(t, self.now()), broker, _TraceRecord(kind, fields))


class LiveReconfigurator:
    """The manager of a live testbed: `reconfigure(op)` returns when op has ended."""

    def __init__(self, bed: Bed, *, clients: Clients | None = None, t0: float | None = None,
                 on_event: Callable[[str], None] | None = None) -> None:
        self.bed = bed
        self.clients = clients
        self.t0 = t0
        self.say = on_event or (lambda _msg: None)
        self.net: LiveNetwork | None = None
        self.manager: Reconfigurator | None = None
        self._costs: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveReconfigurator:
        settings = self.bed.settings()
        self.net = LiveNetwork(self.bed, self.clients, self.t0, self.say)
        self.manager = Reconfigurator(self.net, self.bed.tree(),  # type: ignore[arg-type]
                                      strawman=settings.get("strawman", False),
                                      colours=settings.get("colours", False),
                                      gap=settings.get("gap", 0.0),
                                      seed=settings.get("seed", 0))
        self.net.on_done.append(self.manager.ended)
        # rids stay unique across every manager of the run (r1, r2, ...)
        self.manager._ids = itertools.count(1 + _started(self.bed.trace_dir / f"{NODE}.jsonl"))
        self.net.skip_to_end()
        self.net.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._costs is not None:
            self._costs.cancel()
            await asyncio.gather(self._costs, return_exceptions=True)
        if self.net is not None:
            await self.net.close()

    def monitor_costs(self, scenario: Any, until: float) -> CostMonitor:
        """Follow the tree optimizer of a live run as the simulator does: adopt each exchange
        a broker decides on (a `reconfiguration` record, judged by R15 like the manager's own)
        and write a `tree_cost` record every `optimizer.cost_every` s (the simulator's
        CostMonitor, pricing the brokers' `send` records of notifications and of the
        optimizer's messages). With measured link costs, the prices are what the brokers
        measured (their admin snapshots, read every cost period)."""
        assert self.manager is not None and self.net is not None
        o = scenario.optimizer
        p, c = o.costs(self.bed.brokers, scenario.seed)
        monitor = CostMonitor(self.manager, p, c, o.heuristic, o.cost_every, until)
        self.net.priced = True
        if o.link_costs.model == "measured":
            self._costs = asyncio.get_running_loop().create_task(
                self._measured(c, o.cost_every), name="measured-costs")
        return monitor

    async def _measured(self, c: dict[tuple[str, str], float], every: float) -> None:
        """The brokers' measured link costs into the monitor's prices (both ends' mean)."""
        while True:
            await asyncio.sleep(min(every, 1.0))
            seen: dict[tuple[str, str], list[float]] = {}
            for b in list(self.bed.brokers):
                with contextlib.suppress(Exception):
                    snap = await self.net._admin(b).snapshot() if self.net else {}
                    for x, cost in ((snap.get("core") or {}).get("optimize") or {}).get(
                            "measured", {}).items():
                        seen.setdefault(edge(b, x), []).append(float(cost))
            for e, costs in seen.items():
                c[e] = sum(costs) / len(costs)

    def now(self) -> float:
        assert self.net is not None, "use `async with LiveReconfigurator(bed)`"
        return self.net.now()

    def check(self, op: Op | Tree) -> None:
        """PlanError if op's precondition does not hold on the tree as it is now."""
        assert self.manager is not None
        if isinstance(op, Tree):
            if not self.manager.colours:
                raise PlanError("move_to: only the 3-colour scheme moves to a tree in one step")
            return
        apply(self.manager.tree, op)
        if isinstance(op, RemoveLeaf):  # before it leaves: a backend that cannot remove it
            try:
                self.bed.check_remove(op.leaf)
            except BackendError as e:
                raise PlanError(f"remove-leaf {op.leaf}: {e}") from None

    def schedule(self, plan: list[tuple[float | None, Op | Tree]], start: float) -> list[Record]:
        """A scenario's reconfigurations, on the run's clock (as the simulator schedules them)."""
        assert self.manager is not None
        return self.manager.schedule(plan, start)

    async def reconfigure(self, op: Op | Tree, *, timeout: float = 120.0) -> Record:
        """Carry out one operation now; returns its record once it has ended (done or failed).
        PlanError at once if it does not fit the tree; TimeoutError after `timeout` s."""
        assert self.manager is not None, "use `async with LiveReconfigurator(bed)`"
        self.check(op)
        now = self.now()
        record = (self.manager.move_to(now, op) if isinstance(op, Tree)
                  else self.manager.start(now, op))
        return await self.wait(record, timeout)

    async def wait(self, record: Record, timeout: float = 120.0) -> Record:
        deadline = time.monotonic() + timeout
        while record.outcome in ("pending", "running"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{record.rid} {describe(record.op)}: not ended after "
                                   f"{timeout:g} s")
            await asyncio.sleep(0.05)
        # and what its end set off is carried out too (the 3-colour scheme stops a leaf that
        # left when its removal is active)
        assert self.net is not None
        await asyncio.wait_for(self.net.steps.join(), max(0.1, deadline - time.monotonic()))
        return record

    async def wait_all(self, timeout: float = 120.0) -> list[Record]:
        """Every operation scheduled so far, once ended."""
        assert self.manager is not None
        deadline = time.monotonic() + timeout
        for record in list(self.manager.records):
            await self.wait(record, max(0.1, deadline - time.monotonic()))
        return list(self.manager.records)

    @property
    def records(self) -> list[Record]:
        return list(self.manager.records) if self.manager is not None else []


def _started(path: Path) -> int:
    """How many reconfigurations the run's manager records have started so far."""
    try:
        text = path.read_text()
    except OSError:
        return 0
    return text.count('"phase":"started"') + text.count('"phase": "started"')
