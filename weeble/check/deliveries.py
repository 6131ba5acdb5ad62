"""Service-level correctness: expected, missing, spurious, duplicate, phantom and FIFO.

`Deliveries` is fed the client side of a history in time order (subscribe, unsubscribe, crash,
publish, deliver) and judges it by the rules of `weeble.check.rules` (R1-R7). It is the one
implementation of those rules: the simulator feeds it online (its observer of Deliver
effects), `weeble.check.history` feeds it the records of a trace.

Online, a publication is held until `retention` seconds after it was published (then its
expected pairs are final and its deliveries counted); a delivery of a publication already
retired is counted as `late` (no verdict). Offline, retention is unbounded and `late` is 0.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from weeble.broker.core.filters import Filter, FilterSyntaxError, notification_index_keys

INF = math.inf
EPS = 1e-9  # s: an event at the same instant as a window's edge is inside it


class Sub:
    """One subscription interval of a client (R1)."""

    __slots__ = ("broker", "client", "crashed", "end", "exact", "filter", "key", "start",
                 "sub_id")

    def __init__(self, client: str, sub_id: str, broker: str, f: Filter | None,
                 start: float) -> None:
        self.client, self.sub_id, self.broker, self.filter = client, sub_id, broker, f
        self.start = start
        self.end = INF  # unsubscribed or crashed at
        self.crashed = False
        # index key and whether the key alone decides a match (as the core's tables do)
        self.key = f.index_key() if f is not None else None
        self.exact = self.key is not None and len(f.constraints) == 1  # type: ignore[union-attr]

    def matches(self, attrs: Mapping[str, Any]) -> bool:
        f = self.filter
        return f is not None and f.matches(attrs)

    def allows(self, t: float, deactivation: float, crash_linger: float) -> bool:
        """R4: a delivery at t is inside this subscription's life, grey zones included."""
        grace = crash_linger if self.crashed else deactivation
        return self.start - EPS <= t <= self.end + grace + EPS


class _Pub:
    __slots__ = ("attrs", "candidates", "client", "delivered", "duplicate", "spurious", "t",
                 "window")

    def __init__(self, t: float, client: str, attrs: Mapping[str, Any],
                 candidates: list[Sub]) -> None:
        self.t, self.client, self.attrs = t, client, attrs
        self.candidates = candidates  # subs old enough at t (R2); their end decides at close
        self.delivered: dict[str, bool] = {}  # client -> first delivery was expected-eligible
        self.duplicate = self.spurious = self.window = 0


@dataclass(slots=True)
class Counts:
    """The totals of R2-R7 (see rules.py for each)."""

    publications: int = 0
    judged: int = 0
    correct: int = 0
    expected: int = 0
    delivered: int = 0
    missing: int = 0
    window: int = 0
    spurious: int = 0
    duplicate: int = 0
    phantom: int = 0
    deliveries: int = 0
    fifo: int = 0
    late: int = 0  # online only: a delivery after its publication was retired
    unfinished: int = 0  # publications too recent to judge (t + D after the run's end)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Deliveries:
    def __init__(self, *, activation: float, deactivation: float, crash_linger: float,
                 retention: float = INF) -> None:
        self.A, self.D, self.L = activation, deactivation, crash_linger
        self.retention = max(retention, deactivation)
        self.live: dict[tuple[str, str], Sub] = {}  # (client, sub_id) -> live subscription
        self.by_client: dict[str, list[Sub]] = {}  # live, and ended ones still allowing (R4)
        self.by_key: dict[Any, dict[int, Sub]] = {}  # index key -> live subs (id(sub) -> sub)
        self.residual: dict[int, Sub] = {}  # live subs without an index key
        self.pending: dict[tuple[str, int], _Pub] = {}
        self.order: deque[tuple[tuple[str, int], _Pub]] = deque()
        self.published: dict[str, int] = {}  # publisher -> highest seq published
        self.fifo_seen: dict[tuple[str, str], int] = {}  # (client, publisher) -> max seq
        self.counts = Counts()
        # per judged publication, in close order: time and whether it was correct (R5)
        self.pub_times = array("d")
        self.pub_ok = bytearray()
        self.bad: list[tuple[float, int, int, int]] = []  # (t_p, missing, spurious, duplicate)
        self.fifo_times = array("d")  # delivery times of FIFO violations
        self.phantom_times = array("d")
        self._filters: dict[str, Filter | None] = {}

    # ---- the subscription history (R1) ----

    def subscribe(self, t: float, client: str, broker: str, sub_id: str,
                  f: Filter | str) -> None:
        key = (client, sub_id)
        if key in self.live:
            return  # a repeated subscribe of a live subscription is a refresh
        sub = Sub(client, sub_id, broker, self._filter(f), t)
        self.live[key] = sub
        subs = self.by_client.get(client)
        if subs is None:
            self.by_client[client] = [sub]
        else:
            self._prune(subs, t)
            subs.append(sub)
        if sub.key is not None:
            self.by_key.setdefault(sub.key, {})[id(sub)] = sub
        else:
            self.residual[id(sub)] = sub

    def end(self, t: float, client: str, sub_id: str | None, crashed: bool) -> None:
        """An unsubscription (R1), or a crash: of one subscription, or (sub_id None) of every
        live subscription of the client."""
        if sub_id is None:
            ended = [s for (c, _), s in self.live.items() if c == client]
        else:
            sub = self.live.get((client, sub_id))
            ended = [sub] if sub is not None else []
        for sub in ended:
            del self.live[(client, sub.sub_id)]
            sub.end, sub.crashed = t, crashed
            if sub.key is not None:
                bucket = self.by_key[sub.key]
                del bucket[id(sub)]
                if not bucket:
                    del self.by_key[sub.key]
            else:
                del self.residual[id(sub)]

    def _prune(self, subs: list[Sub], t: float) -> None:
        """Forget ended subscriptions that can no longer allow a delivery at t or later."""
        if len(subs) > 4:
            subs[:] = [s for s in subs if s.end == INF or t <= s.end + self.L + self.retention]

    def _filter(self, f: Filter | str) -> Filter | None:
        if isinstance(f, Filter):
            return f
        known = self._filters.get(f, self)
        if known is self:
            try:
                known = Filter.parse(f)
            except FilterSyntaxError:
                known = None  # no broker could have accepted it: it matches nothing
            self._filters[f] = known
        return known  # type: ignore[return-value]

    # ---- publications (R2, R3) ----

    def publish(self, t: float, client: str, publisher: str, seq: int,
                attrs: Mapping[str, Any]) -> None:
        self._retire(t)
        key = (publisher, seq)
        top = self.published.get(publisher, 0)
        if key in self.pending or (seq <= top and self.retention < INF):
            return  # a repeated publish record of the same notification: the first counts
        if seq > top:
            self.published[publisher] = seq
        lo = t - self.A + EPS
        candidates: list[Sub] = []
        for k in notification_index_keys(attrs):
            bucket = self.by_key.get(k)
            if bucket:
                for s in bucket.values():
                    if s.start <= lo and s.client != client and (s.exact or s.matches(attrs)):
                        candidates.append(s)
        for s in self.residual.values():
            if s.start <= lo and s.client != client and s.matches(attrs):
                candidates.append(s)
        pub = _Pub(t, client, attrs, candidates)
        self.pending[key] = pub
        self.order.append((key, pub))
        self.counts.publications += 1

    # ---- deliveries (R3-R6) ----

    def deliver(self, t: float, client: str, publisher: str, seq: int) -> None:
        c = self.counts
        c.deliveries += 1
        pub = self.pending.get((publisher, seq))
        if pub is None:
            if self.retention < INF and 1 <= seq <= self.published.get(publisher, 0):
                c.late += 1  # published (publishers number 1, 2, ...), but retired: no verdict
            else:
                c.phantom += 1  # R6: never published
                self.phantom_times.append(t)
            return
        delivered = pub.delivered
        if client in delivered:
            pub.duplicate += 1  # R6
            return
        # R4 and R7 are decided at the first delivery; R3's "expected" at close
        delivered[client] = self._allowed(t, client, pub.attrs)
        fifo_key = (client, publisher)
        seen = self.fifo_seen.get(fifo_key, 0)
        if seq < seen:
            c.fifo += 1
            self.fifo_times.append(t)
        else:
            self.fifo_seen[fifo_key] = seq

    def _allowed(self, t: float, client: str, attrs: Mapping[str, Any]) -> bool:
        for s in self.by_client.get(client, ()):
            if s.allows(t, self.D, self.L) and s.matches(attrs):
                return True
        return False

    # ---- closing publications ----

    def _retire(self, now: float) -> None:
        order = self.order
        while order and order[0][1].t + self.retention < now:
            key, pub = order.popleft()
            del self.pending[key]
            self._close(pub, judged=True)

    def _close(self, pub: _Pub, judged: bool) -> None:
        c = self.counts
        expected = set()
        if judged:
            hi = pub.t + self.D - EPS
            expected = {s.client for s in pub.candidates if s.end >= hi}
        hits = 0
        for client, allowed in pub.delivered.items():
            if client in expected:
                hits += 1
            elif allowed:
                pub.window += 1
            else:
                pub.spurious += 1
        missing = len(expected) - hits
        c.window += pub.window
        c.spurious += pub.spurious
        c.duplicate += pub.duplicate
        if judged:
            c.judged += 1
            c.expected += len(expected)
            c.delivered += hits
            c.missing += missing
            ok = missing == 0 and pub.spurious == 0 and pub.duplicate == 0
            c.correct += ok
            self.pub_times.append(pub.t)
            self.pub_ok.append(ok)
            if not ok:
                self.bad.append((pub.t, missing, pub.spurious, pub.duplicate))
        else:
            c.unfinished += 1

    def finish(self, end: float) -> Counts:
        """Close every publication; those with t + D after `end` are not judged (R2)."""
        while self.order:
            key, pub = self.order.popleft()
            del self.pending[key]
            self._close(pub, judged=pub.t + self.D <= end + EPS)
        return self.counts

    def before(self, t: float) -> dict[str, int]:
        """Missing, spurious and duplicate deliveries of the judged publications made before t
        (R5), and the FIFO violations before t (R7)."""
        bad = [b for b in self.bad if b[0] < t]
        return {"missing": sum(b[1] for b in bad), "spurious": sum(b[2] for b in bad),
                "duplicate": sum(b[3] for b in bad),
                "fifo": sum(1 for x in self.fifo_times if x < t)}
