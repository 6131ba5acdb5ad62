"""What watches a simulation: the trace sink and the reference checker (`weeble.check`), online.

`Observers` is the clients' listener (subscriptions, ends, publications), the engine's observer
of Deliver effects, the sink of every other record the simulation writes (`write`, the
`SimSink` interface), and the legitimacy monitor's clock. It feeds the checker the same history
the trace holds, so the summary it makes (`finish`) equals what `weeble.check.history.check_run`
finds in the trace (the tests hold them equal), without reading the trace back: a large run
writes no trace at all.

In the simulator only one part of the timing model can break: end-to-end delivery delays (a
delay fault); hop delays come from the engine's delay model, and client refreshes and broker
timers are exact. So the online timing check is the path rule R13(d).

An untraced run (seed000: 10^5 deliveries per simulated second) can judge in a second process
(`WEEBLE_CHECKER=auto` or `process`):
the checker's input is recorded (`Recorder`) and shipped in batches to `CheckerProcess`, which
feeds the same `Deliveries` there, on the other core, with the same `Replay`. The first batch
(`SPAWN_AFTER` deliveries) decides: a process if a core is free then (`_core_free`), else the
checker here is fed what was recorded, then each record as it comes (as inline); a run too
small to fill it is replayed here at the end. `WEEBLE_CHECKER` chooses: `auto` (that),
`process` (a process from the first `BATCH` deliveries on, whatever the size or load) or
`inline`, the default (judge each record as it comes, as a traced run does: it names the
subscription of each delivery in the trace from the checker's state).

Why inline by default: measured on seed000 compiled (benchmarks/sim_seed000.py --checker
inline,process), the process raised the simulator's own simulated s per CPU s by 4.5 % on
20 s runs and not at all on 120 s runs (-3.5 %, within the noise of a machine at load 12-15),
while the checker's process used 3.5 times the inline checker's CPU: handing a delivery
over (five appends, then packing and the pipe) costs about half of judging it, the compiled
checker being cheap per delivery, and the two processes share the caches. Under load a second
process only takes CPU from the first (the kernel's autogroups: 1.4 vs 2.3 simulated s per
wall s at load 9). `auto` is there for a machine with a core to spare.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any

from weeble.check.deliveries import INF, Columns, Deliveries, Recorder, Replay
from weeble.check.episodes import faults_of
from weeble.check.history import assess, deliveries_for
from weeble.check.offload import CheckerProcess
from weeble.check.reconfig import Reconfigurations
from weeble.check.rules import TIMING_TOLERANCE
from weeble.check.state import Interval, Legitimacy
from weeble.check.timing import KINDS, Violation, summarize
from weeble.core.events import Deliver
from weeble.core.legitimacy import Broker
from weeble.core.messages import Notification
from weeble.sim.engine import Engine, Node
from weeble.trace.header import RunHeader
from weeble.trace.writer import SimSink

SIM = "sim"  # the node of the simulator's own records (legitimacy checks, link faults)
CHECKER = "WEEBLE_CHECKER"  # inline (the default), auto or process (see the module's doc)
MODES = ("auto", "process", "inline")
BATCH = 16384  # deliveries (or other records) per frame to the checker process (~0.15 sim s)
SPAWN_AFTER = 250_000  # deliveries: fewer are judged here at the end (a process
# costs ~0.3 CPU s to start; the checker ~0.5 µs per delivery)


def _core_free() -> bool:
    """Whether the machine has a core to spare for the checker's process: the load average
    (which counts this process, busy) leaves one. On a loaded machine (other runs, a sweep's
    parallel points) a second process only takes CPU from this one."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return os.getloadavg()[0] < (cpus or 1) - 0.5


class Observers:
    def __init__(self, header: RunHeader, sink: SimSink | None, *, retention: float) -> None:
        self.header, self.sink = header, sink
        self.deliveries = deliveries_for(header, retention=retention)
        self.intervals: dict[tuple[str, str], Interval] = {}  # running subscriptions
        self.adverts: dict[tuple[str, str], Interval] = {}  # advertisements (routing.adverts)
        self._ended: deque[Interval] = deque()  # ended ones, for the legitimacy monitor
        self.fault_records: list[tuple[float, dict[str, Any]]] = []
        self.monitor: Legitimacy | None = None
        self.reconfigurations = Reconfigurations(header)  # R15
        # more observers(t, node, kind, fields) of the manager's `reconfiguration` records
        self.listeners: list[Callable[[float, str, str, dict[str, Any]], None]] = []
        self.deliveries.timed(header.path_hops(), header.params.delta_max,
                              TIMING_TOLERANCE, history=header.skip_ring is not None)
        # what the checker's input goes to: the checker itself, or a Recorder for the process
        mode = os.environ.get(CHECKER, "inline")
        if mode not in MODES:
            raise ValueError(f"{CHECKER}={mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.checker: Deliveries | Recorder = self.deliveries
        self.process: CheckerProcess | None = None
        if sink is None and mode != "inline":
            self.checker = Recorder(BATCH if mode == "process" else SPAWN_AFTER, self._ship)
        if sink is not None:
            sink.header(0.0, SIM, header.fields())

    # ---- records: the SimSink interface ----

    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink.write(file, t, node, kind, fields)
        if kind == "fault_begin" or kind == "fault_end":
            self.fault_records.append((t, {"kind": kind, "node": node, **fields}))
        elif kind == "reconfiguration":
            self.reconfigurations.record(t, fields)
            for listener in self.listeners:
                listener(t, node, kind, fields)
        elif kind == "overlay_legitimacy":
            self.reconfigurations.overlay_check(t, fields)

    # ---- clients (the workload's Listener) ----

    def started(self, t: float, sub: Any) -> None:
        self.checker.subscribe(t, sub.client, sub.broker, sub.sub_id, sub.filter)
        if self.monitor is not None:  # the intervals are the legitimacy monitor's
            key = (sub.client, sub.sub_id)
            if key not in self.intervals:
                self.intervals[key] = Interval(sub.client, sub.sub_id, sub.broker, sub.filter, t)

    def ended(self, t: float, sub: Any) -> None:
        self.checker.end(t, sub.client, sub.sub_id, sub.crashed)
        iv = self.intervals.pop((sub.client, sub.sub_id), None)
        if iv is not None:
            iv.end = t
            if self.monitor is not None:
                self._ended.append(iv)

    def advertised(self, t: float, adv: Any) -> None:
        self.adverts[(adv.publisher, adv.adv_id)] = Interval(adv.publisher, adv.adv_id,
                                                             adv.broker, adv.filter, t)

    def unadvertised(self, t: float, adv: Any) -> None:
        iv = self.adverts.get((adv.publisher, adv.adv_id))
        if iv is not None:
            iv.end = t

    def published(self, t: float, n: Notification, broker: str) -> None:
        # The publishing client is the publisher (the simulator's clients publish under their
        # own name), as in the `publish` record.
        self.checker.publish(t, n.publisher, n.publisher, n.seq, n.attributes, broker)
        if self.reconfigurations.causal is not None:  # only under ordering: causal (R15)
            self.reconfigurations.publish(n.publisher, n.publisher, n.seq)

    # ---- deliveries (engine observer, hot) ----

    def deliver_observer(self) -> Any:
        judge = self._deliver_observer()
        causal = self.reconfigurations.causal
        if causal is None:
            return judge

        def judge_causal(now: float, node: Node, effect: Deliver) -> None:
            judge(now, node, effect)
            n = effect.notification
            causal.deliver(now, effect.client, (n.publisher, n.seq))

        return judge_causal

    def _deliver_observer(self) -> Any:
        sink = self.sink
        if sink is None:
            return self.checker.observe
        deliver = self.deliveries.deliver
        by_client = self.deliveries.by_client

        def judge_and_record(now: float, node: Node, effect: Deliver) -> None:
            n = effect.notification
            client = effect.client
            deliver(now, client, n.publisher, n.seq, node.id)
            # the subscription it matched: the client's first running one whose filter
            # matches (the live broker picks the same); none when a wrong table sent it
            sub_id = None
            for s in by_client.get(client, ()):
                if s.end == INF and s.matches(n.attributes):
                    sub_id = s.sub_id
                    break
            sink.deliver(now, node.id, client, sub_id, n)

        return judge_and_record

    # ---- the legitimacy monitor ----

    def watch(self, engine: Engine, brokers: Mapping[str, Broker], *, period: float,
              until: float) -> None:
        """Check the brokers' tables every `period` s (R8a), recording each check."""
        h = self.header

        def record(t: float, fields: dict[str, Any]) -> None:
            self.write(SIM, t, SIM, "legitimacy", fields)

        self.monitor = Legitimacy(brokers, self._subs, settle=h.settle, linger=h.linger,
                                  record=record,
                                  adverts=(lambda: self.adverts.values()) if h.adverts else None)

        def tick(t: float, _a: object, _b: object) -> None:
            ended, linger = self._ended, h.linger
            while ended and ended[0].end + linger < t:
                ended.popleft()
            assert self.monitor is not None
            self.monitor(t)
            if t + period <= until:
                engine.schedule(t + period, tick)

        engine.schedule(period, tick)

    def _subs(self) -> Iterable[Interval]:
        return chain(self.intervals.values(), self._ended)

    # ---- the checker's process ----

    def _ship(self, columns: Columns) -> None:
        """A full batch of the Recorder's: to the checker process, or to the checker here. The
        first decides which, once: a process when a core is free for it (`_core_free`)."""
        if self.process is None:
            assert isinstance(self.checker, Recorder)
            self.checker.batch = BATCH
            if self.mode == "process" or _core_free():
                self.process = CheckerProcess(self.deliveries.settings())
            else:  # judged here: what was recorded, then each record as it comes
                Replay(self.deliveries)(columns)
                self.checker.judge_here(self.deliveries)
                return
        assert self.process is not None
        self.process.ship(columns)

    def _judge(self, end: float) -> None:
        """Close the checker at `end`: wherever it ran, `self.deliveries` has its outcome."""
        checker = self.checker
        if not isinstance(checker, Recorder):
            self.deliveries.finish(end)
        elif self.process is not None:
            self.deliveries.adopt(self.process.finish(checker.take(), end))
        else:
            Replay(self.deliveries)(checker.take())  # nothing left, if judged here already
            self.deliveries.finish(end)

    # ---- the end ----

    def finish(self, end: float) -> dict[str, Any]:
        self._judge(end)
        checks = self.monitor.checks if self.monitor is not None else []
        d = self.deliveries
        c = d.counts
        measured = dict.fromkeys(KINDS, 0)
        measured["path"] = c.delivered + c.window + c.spurious  # the first deliveries
        worst = dict.fromkeys(KINDS, 0.0)
        worst["path"] = d.worst_path
        violations = [Violation("path", tp, td, at, delay, limit)
                      for tp, td, at, delay, limit in d.path_violations]
        timing = summarize(violations, measured, worst, TIMING_TOLERANCE)
        if self.sink is not None:
            self.sink.end(end, SIM, "the simulation reached its duration")
        return assess(self.header, end, d, checks, faults_of(self.fault_records), violations,
                      timing, self.reconfigurations)
