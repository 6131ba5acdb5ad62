"""Reconfigurations in the simulator (thesis 4.2, 4.4): plans as data become management events.

The `Reconfigurator` plays the manager of the thesis's managed reconfigurations: it knows the
tree, turns each operation of a plan (`core.reconfig.plan`) into the events the brokers need,
and learns from their trace records when an exchange is done:
- ExchangeLink, coordinated (4.4.2): StartExchange at the initiator with the cycle path of the
  tree of that moment; done when the initiator says so ("done"), given up on "failed".
- ExchangeLink, strawman (4.4.1): RemoveNeighbor at both ends of r and AddNeighbor at both ends
  of a at the same instant, SetParent where the parent changes; no coordination at all.
- AddLeaf: a new broker joins (booted with `attach` as its only neighbour and parent), and
  `attach` gets AddNeighbor. RemoveLeaf: the leaf gets Leave, its clients leave with it.
- Each operation that is done changes the manager's tree, and the Network learns it
  (`tree_changed`): a broker that crashes and restarts boots with its neighbours and parent in
  the tree as it is now (the administrator's word), not with the tree the run was configured
  with. The simulator keeps them as the ROM a restart uses, a live testbed in the backend's
  configs.
- The 3-colour scheme (4.5, `colours=True`): every operation is a reconfiguration for the root,
  carried in its next recolor as per-broker parent pointers (`plan.moves`); done when the root
  says it is active (two recolors later). A whole target tree is one request (`move_to`). AddLeaf
  boots the new broker first (it waits, joining, for the recolor that activates it); a removed
  leaf leaves with its clients once its removal is active.
Operations run one after the other (`run_plan`), or are started as they come (`start`), in which
case overlapping exchanges meet the locks.

The same Reconfigurator manages a live testbed (weeble/orchestrator/reconfigure.py): there the
Network's engine injects through the brokers' admin API, boots and stops broker processes, and
feeds the brokers' `reconfig` trace records back to `_observe`. A live network has `then(fn)`:
an operation that is done once its steps are carried out (a leaf add or removal, the strawman)
finishes only when they are, not at the instant they were asked for.

As the manager it writes a `reconfiguration` record when it starts an operation and when it
learns how it ended (with the coordination messages that carried its rid, counted on the
engine's sends): the records rule R15 of the checker judges each reconfiguration by.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from weeble.core.events import (
    AddNeighbor,
    Event,
    Leave,
    RemoveNeighbor,
    SetParent,
    StartExchange,
    SubmitReconfig,
)
from weeble.core.messages import COORDINATION, Bye, Recolor, Reconfigure
from weeble.core.reconfig.plan import (
    AddLeaf,
    ExchangeLink,
    Op,
    PlanError,
    RemoveLeaf,
    Tree,
    apply,
    cycle,
    moves,
)


class Network(Protocol):
    """What the reconfigurator needs of a simulation."""

    engine: Any
    brokers: dict[str, Any]
    root: str
    trace_observers: list[Any]
    observers: Any  # the trace sink and the checker: `write(file, t, node, kind, fields)`

    def add_broker(self, t: float, broker: str, attach: str) -> Any: ...

    def retire_broker(self, t: float, broker: str) -> None: ...

    def tree_changed(self, t: float, tree: Tree) -> None: ...


@dataclass(slots=True)
class Record:
    """One operation: when it was asked for, started and finished, and how it ended."""

    op: Op | Tree  # a Tree: move to it in one request (the 3-colour scheme only)
    rid: str
    requested: float
    started: float | None = None
    finished: float | None = None
    outcome: str = "pending"  # pending, running, done, failed
    path: tuple[str, ...] = ()
    why: str = ""
    target: Tree | None = None  # the 3-colour scheme: the tree the root was asked to move to
    coordination: Counter[str] = field(default_factory=Counter)  # messages carrying rid, by kind

    @property
    def duration(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started


@dataclass
class Reconfigurator:
    net: Network
    tree: Tree
    strawman: bool = False
    colours: bool = False  # the 3-colour scheme (4.5): requests for the root
    gap: float = 0.0  # between one operation's end and the next one's start (run_plan)
    seed: int = 0
    records: list[Record] = field(default_factory=list)
    _queue: deque[Record] = field(default_factory=deque)
    _running: dict[str, Record] = field(default_factory=dict)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _current: Record | None = None  # the plan's operation under way
    _rids: dict[str, Record] = field(default_factory=dict)
    _leaving: dict[str, Record] = field(default_factory=dict)  # leaf -> its RemoveLeaf
    # rid -> the brokers it took away: operations whose tree was adopted before they finished
    _adopted: dict[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.net.trace_observers.append(self._observe)
        self.net.engine.observe_sends(self._sent)

    # ---- what a scenario asks for -----------------------------------------------------------

    def schedule(self, plan: list[tuple[float | None, Op | Tree]], start: float) -> list[Record]:
        """A scenario's plan (`Scenario.reconfiguration_plan()`): the steps without a time one
        after the other from `start`, the others at their time."""
        sequential = [op for at, op in plan if at is None]
        records = self.run_plan(start, sequential) if sequential else []  # type: ignore[arg-type]
        for at, op in plan:
            if at is not None:
                records.append(self.move_to(at, op) if isinstance(op, Tree)
                               else self.start(at, op))
        return records

    def run_plan(self, t: float, ops: list[Op]) -> list[Record]:
        """Run `ops` one after the other from time t."""
        records = [self._record(t, op) for op in ops]
        self._queue.extend(records)
        self.net.engine.schedule(t, self._next, None, None)
        return records

    def start(self, t: float, op: Op) -> Record:
        """Start `op` at time t whatever else runs (its cycle path is taken at t)."""
        record = self._record(t, op)
        self.net.engine.schedule(t, self._begin, record, None)
        return record

    def move_to(self, t: float, target: Tree) -> Record:
        """The 3-colour scheme: one request that turns the tree into `target` at once."""
        if not self.colours:
            raise PlanError("move_to: only the 3-colour scheme moves to a tree in one step")
        record = self._record(t, target)
        self.net.engine.schedule(t, self._begin, record, None)
        return record

    def adopt(self, now: float, rid: str, op: ExchangeLink, path: tuple[str, ...]) -> Record:
        """A link exchange a broker started on its own (the tree optimizer's decision, ch. 5):
        followed, counted and reported like the manager's own (R15), and applied to the tree
        when it is done."""
        record = Record(op, rid, now, started=now, outcome="running", path=path)
        self.records.append(record)
        self._rids[rid] = record
        self._running[rid] = record
        self._write(now, record, "started")
        return record

    def _record(self, t: float, op: Op | Tree) -> Record:
        record = Record(op, f"r{next(self._ids)}", t)
        self.records.append(record)
        self._rids[record.rid] = record
        return record

    # ---- carrying operations out ------------------------------------------------------------

    def _next(self, now: float, _a: Any, _b: Any) -> None:
        if self._current is not None or not self._queue:
            return
        self._current = self._queue.popleft()
        self._begin(now, self._current, None)

    def _begin(self, now: float, record: Record, _: Any) -> None:
        record.started = now
        record.outcome = "running"
        op = record.op
        self._write(now, record, "started")
        try:
            if self.colours:
                self._request(now, record)
            elif isinstance(op, ExchangeLink):
                self._exchange(now, record)
            elif isinstance(op, AddLeaf):
                apply(self.tree, op)  # check it before anything happens
                self.net.add_broker(now, op.new, op.attach)
                self._inject(now, op.attach, AddNeighbor(op.new))
                self._applied(now, record)
            else:
                if op.leaf == self.net.root:
                    raise PlanError(f"remove leaf: {op.leaf!r} is the root")
                apply(self.tree, op)
                self._leaving[op.leaf] = record
                self._inject(now, op.leaf, Leave())
                self.net.retire_broker(now, op.leaf)
                self._applied(now, record)
        except PlanError as e:
            self._finish(now, record, "failed", str(e))
        if record is self._current and record.outcome != "running":
            self._continue(now)

    def _exchange(self, now: float, record: Record) -> None:
        op = record.op
        assert isinstance(op, ExchangeLink)
        record.path = cycle(self.tree, op)
        if not self.strawman:
            self._running[record.rid] = record
            self._inject(now, record.path[0],
                         StartExchange(record.rid, record.path, op.remove, self.seed))
            return
        (r1, r2), (a1, a2) = op.remove, op.add
        for b, n in ((r1, r2), (r2, r1)):
            self._inject(now, b, RemoveNeighbor(n))
        for b, n in ((a1, a2), (a2, a1)):
            self._inject(now, b, AddNeighbor(n))
        after = apply(self.tree, op)
        old, new = self.tree.parents(self.net.root), after.parents(self.net.root)
        for b in sorted(new):
            if old.get(b) != new[b]:
                self._inject(now, b, SetParent(new[b]))
        self._applied(now, record)

    def _applied(self, now: float, record: Record) -> None:
        """The operation's steps are asked for: done now (the simulator), or once a live
        network has carried them out (`then`; `why` says what failed, if anything)."""
        then = getattr(self.net, "then", None)
        if then is None:
            self._finish(now, record, "done")
            return

        def carried_out(t: float, why: str) -> None:
            self._finish(t, record, "failed" if why else "done", why)
            if record is self._current:
                self._continue(t)

        then(carried_out)

    def _request(self, now: float, record: Record) -> None:
        """4.5.3: the operation as per-broker parent pointers, for the root."""
        op = record.op
        after = op if isinstance(op, Tree) else apply(self.tree, op)
        if self.net.root not in after.nodes:
            raise PlanError(f"the root {self.net.root!r} cannot leave")
        for new in sorted(after.nodes - self.tree.nodes):
            parent = after.parents(self.net.root)[new]
            assert parent is not None
            self.net.add_broker(now, new, parent)  # boots joining, under its future parent
        record.target = after
        self._running[record.rid] = record
        request = SubmitReconfig(record.rid, moves(self.tree, after, self.net.root))
        self._inject(now, self.net.root, request)
        self._watch(now, record, request)

    def _watch(self, now: float, record: Record, request: SubmitReconfig) -> None:
        """The root's set of pending requests is RAM: a fault may empty it (found: the colour
        property lost r2 to `recolor.pending.clear` and the manager waited for ever). A request
        the root has not activated within 2ξ + ξ′ (R's next recolor carries it, the one after
        activates it, plus a round of slack) is sent again; the moves are parent pointers, so
        a copy that is carried twice changes nothing. Only where the manager knows ξ (the
        simulator); live, `reconfigure(timeout=...)` bounds the wait."""
        rom = getattr(self.net.brokers.get(self.net.root), "rom", None)
        colours = getattr(rom, "colours", None)
        if colours is None:
            return
        patience = colours.join_wait(rom.params)

        def check(t: float, _a: Any, _b: Any) -> None:
            if self._running.get(record.rid) is not record:
                return
            self._inject(t, self.net.root, request)
            self.net.engine.schedule(t + patience, check, None, None)

        self.net.engine.schedule(now + patience, check, None, None)

    def _inject(self, now: float, broker: str, event: Event) -> None:
        self.net.engine.inject(now, broker, event)

    def _finish(self, now: float, record: Record, outcome: str, why: str = "") -> None:
        record.finished = now
        record.outcome = outcome
        record.why = why
        self._write(now, record, "finished")
        if outcome == "done":
            gone = self._adopted.pop(record.rid, None)
            if gone is None:
                gone = self._adopt(now, record)
            if self.colours:  # the leaves that left stop with their clients now
                for leaf in sorted(gone):
                    self.net.retire_broker(now, leaf)

    def _adopt(self, now: float, record: Record) -> frozenset[str]:
        """The tree `record` made becomes the manager's; the brokers it took away."""
        op = record.op
        try:
            after = op if isinstance(op, Tree) else apply(self.tree, op)
        except PlanError:  # requests overlapped: the root moved to what it was asked for
            assert record.target is not None
            after = record.target
        gone = frozenset(self.tree.nodes - after.nodes)
        self.tree = after
        # the tree as it is now is what a broker that restarts boots with (not the
        # configured one: issue 28, a crash after an exchange), and what a fault's selector
        # is resolved against
        self.net.tree_changed(now, after)
        return gone

    def ended(self, now: float, rid: str) -> None:
        """A broker's word that `rid` is done (the initiator's `done`, R's `activated`), read
        before the manager finishes it: live, its `finished` record waits a little for the
        other brokers' sends that count for it (LiveNetwork.hold), but the tree it made is the
        tree from now on (issue 28: learnt at the finish, up to ~0.7 s late, a broker that
        crashed in between restarted with the tree from before the exchange)."""
        record = self._running.get(rid)
        if record is not None and rid not in self._adopted:
            self._adopted[rid] = self._adopt(now, record)

    def _continue(self, now: float) -> None:
        self._current = None
        if self._queue:
            self.net.engine.schedule(now + self.gap, self._next, None, None)

    def _observe(self, now: float, node: Any, trace: Any) -> None:
        if trace.kind != "reconfig":
            return
        record = self._running.get(trace.fields["rid"])
        if record is None:
            return
        phase = trace.fields["phase"]
        if phase == "activated":  # the 3-colour scheme: the root's word
            phase = "done"
        if phase in ("done", "failed", "refused"):
            del self._running[record.rid]
            self._finish(now, record, "done" if phase == "done" else "failed",
                         trace.fields.get("why", ""))
            if record is self._current:
                self._continue(now)

    def _sent(self, now: float, kind: str, src: str, dst: str, msg: Any) -> None:
        """Count the coordination messages of each reconfiguration (by the rid they carry; a
        leaving leaf's Bye, which has none, by the leaf)."""
        if kind != "send":
            return
        t = type(msg)
        if t in COORDINATION:
            record = (self._leaving.get(src) if t is Bye
                      else self._rids.get(getattr(msg, "rid", "")))
            if record is not None:
                record.coordination[t.__name__.lower()] += 1
        elif t is Recolor:
            for rid in msg.rids:
                record = self._rids.get(rid)
                if record is not None:
                    record.coordination["recolor"] += 1
        elif t is Reconfigure:
            record = self._rids.get(msg.rid)
            if record is not None:
                record.coordination["reconfigure"] += 1

    def _write(self, now: float, record: Record, phase: str) -> None:
        observers = getattr(self.net, "observers", None)
        if observers is None:
            return
        fields: dict[str, Any] = {"rid": record.rid, "op": describe(record.op), "phase": phase}
        if phase == "finished":
            fields.update(outcome=record.outcome, coordination=dict(record.coordination))
            if record.why:
                fields["why"] = record.why
            if record.path:
                fields["path"] = list(record.path)
        observers.write("sim", now, "sim", "reconfiguration", fields)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._running and self._current is None


def describe(op: Op | Tree) -> str:
    """An operation in words (the `op` of a reconfiguration record)."""
    if isinstance(op, ExchangeLink):
        return f"exchange {'-'.join(op.remove)} for {'-'.join(op.add)}"
    if isinstance(op, AddLeaf):
        return f"add_leaf {op.new} at {op.attach}"
    if isinstance(op, RemoveLeaf):
        return f"remove_leaf {op.leaf}"
    return f"move_to a tree of {len(op.nodes)} brokers"
