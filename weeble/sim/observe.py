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

The checker judges each record as it comes, in this process. (A second process for it, fed
recorded batches, was measured and removed: on seed000 compiled it raised the simulator's own
simulated s per CPU s by 4.5 % on 20 s runs and not at all on 120 s runs, while it used 3.5
times the inline checker's CPU; under load it halved the wall rate.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any

from weeble.check.deliveries import INF
from weeble.check.episodes import faults_of
from weeble.check.history import assess, deliveries_for
from weeble.check.reconfig import Reconfigurations
from weeble.check.rules import TIMING_TOLERANCE
from weeble.check.state import Check, Interval, Legitimacy, snapshot_checks
from weeble.check.timing import KINDS, Violation, summarize
from weeble.core.events import Deliver
from weeble.core.legitimacy import Broker
from weeble.core.messages import Notification
from weeble.sim.engine import Engine, Node
from weeble.trace.header import RunHeader
from weeble.trace.writer import SimSink

SIM = "sim"  # the node of the simulator's own records (legitimacy checks, link faults)


class Observers:
    def __init__(self, header: RunHeader, sink: SimSink | None, *, retention: float) -> None:
        self.header, self.sink = header, sink
        self.deliveries = deliveries_for(header, retention=retention)
        self.intervals: dict[tuple[str, str], Interval] = {}  # running subscriptions
        self.adverts: dict[tuple[str, str], Interval] = {}  # advertisements (routing.adverts)
        self._ended: deque[Interval] = deque()  # ended ones, for the legitimacy monitor
        self.fault_records: list[tuple[float, dict[str, Any]]] = []
        self.monitor: Legitimacy | None = None
        # R8(b): the checks of the snapshot rounds the run writes (`snapshot_round`)
        self.snapshot_checks: list[Check] = []
        self.rounds = False  # snapshot rounds are written (and checked)
        self.reconfigurations = Reconfigurations(header)  # R15
        # more observers(t, node, kind, fields) of the manager's `reconfiguration` records
        self.listeners: list[Callable[[float, str, str, dict[str, Any]], None]] = []
        self.deliveries.timed(header.path_hops(), header.params.delta_max,
                              TIMING_TOLERANCE, history=header.skip_ring is not None)
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
        self.deliveries.subscribe(t, sub.client, sub.broker, sub.sub_id, sub.filter)
        if self.monitor is not None or self.rounds:  # the state checks' intervals
            key = (sub.client, sub.sub_id)
            if key not in self.intervals:
                self.intervals[key] = Interval(sub.client, sub.sub_id, sub.broker, sub.filter, t)

    def ended(self, t: float, sub: Any) -> None:
        self.deliveries.end(t, sub.client, sub.sub_id, sub.crashed)
        iv = self.intervals.pop((sub.client, sub.sub_id), None)
        if iv is not None:
            iv.end = t
            if self.monitor is not None or self.rounds:
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
        self.deliveries.publish(t, n.publisher, n.publisher, n.seq, n.attributes, broker)
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
            return self.deliveries.observe
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
            self._forget(t)
            assert self.monitor is not None
            self.monitor(t)
            if t + period <= until:
                engine.schedule(t + period, tick)

        engine.schedule(period, tick)

    def snapshot_round(self, t: float, records: Iterable[dict[str, Any]]) -> None:
        """R8(b) online: check one round of snapshot records (all taken at t) as `weeble check`
        checks it in the trace, so the summary counts the same checks as the contract."""
        self._forget(t)
        h = self.header
        self.snapshot_checks += snapshot_checks(((t, r) for r in records),
                                                h.topology.brokers, list(self._subs()),
                                                settle=h.settle, linger=h.linger,
                                                adverts=h.adverts)

    def _forget(self, t: float) -> None:
        """Drop the ended subscriptions no check at t or later can allow (R9)."""
        ended, linger = self._ended, self.header.linger
        while ended and ended[0].end + linger < t:
            ended.popleft()

    def _subs(self) -> Iterable[Interval]:
        return chain(self.intervals.values(), self._ended)

    # ---- the end ----

    def finish(self, end: float) -> dict[str, Any]:
        self.deliveries.finish(end)
        # in time order, the simulator's own checks before a round at the same instant (as
        # check_run orders the records it reads back)
        checks = sorted([*(self.monitor.checks if self.monitor is not None else []),
                         *self.snapshot_checks], key=lambda c: c.t)
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
