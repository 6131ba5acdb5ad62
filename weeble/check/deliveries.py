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

from weeble.core.filters import Filter, FilterSyntaxError, notification_index_keys

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


class _Pub:
    __slots__ = (
        "attrs",
        "broker",
        "candidates",
        "client",
        "delivered",
        "denied",
        "duplicate",
        "dups",
        "extra",
        "hops",
        "keys",
        "later",
        "oldest",
        "seq",
        "slack",
        "t",
    )
    t: float

    def __init__(self, t: float, client: str, attrs: Mapping[str, Any],
                 candidates: dict[str, Sub], broker: str | None, seq: int,
                 later: list[_Pub]) -> None:
        self.t, self.client, self.attrs, self.broker, self.seq = t, client, attrs, broker, seq
        self.dups: set[str] | None = None  # clients delivered more than once (detail mode)
        self.extra: list[Sub] | None = None  # a client's second, third... candidate
        self.keys: list[Any] = []  # the notification's index keys
        # hops from its broker (R13d, online; a float in the skip-ring mode)
        self.hops: Mapping[str, float] | None = None
        self.slack: dict[str, float] | None = None  # at -> hops·δmax + τ, beside `hops`
        self.candidates = candidates  # client -> a running matching subscription at t
        # its publisher's pending publications in seq order, itself among them (R7)
        self.later = later
        # no candidate started before this (a lower bound; -inf: not known at a glance)
        self.oldest = -INF
        # The clients it was first-delivered to, and those of them whose first delivery no
        # subscription allowed (R4) when it came: the rest were allowed. Judged at close (R3).
        self.delivered: set[str] = set()
        self.denied: list[str] = []
        self.duplicate = 0


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
                 retention: float = INF, detail: bool = False) -> None:
        """`detail`: keep, per incorrect judged publication, which clients were missing,
        spurious and duplicated (`errors`)."""
        self.A, self.D, self.L = activation, deactivation, crash_linger
        self.detail = detail
        self.errors: list[tuple[tuple[str, int], float, set[str], set[str], set[str]]] = []
        self.retention = max(retention, deactivation)
        self.live: dict[tuple[str, str], Sub] = {}  # (client, sub_id) -> live subscription
        self.by_client: dict[str, list[Sub]] = {}  # live, and ended ones still allowing (R4)
        self.ended: deque[Sub] = deque()  # in end order: forgotten once they allow nothing
        # The running subscriptions indexed as the core's tables index entries: by the key of
        # their point constraint. `exact`: a client's first subscription whose key decides the
        # match, by key and client; `keyed`: every other one with a key; `residual`: the rest.
        self.exact: dict[Any, dict[str, Sub]] = {}
        self.keyed: dict[Any, list[Sub]] = {}
        self.residual: dict[int, Sub] = {}
        self.pending: dict[tuple[str, int], _Pub] = {}
        # Subscriptions came in time order so far: then a bucket of `exact` holds them in
        # start order, and its first one is the oldest (see `_Pub.oldest`).
        self.in_order = True
        self.latest_start = -INF
        self.order: deque[tuple[tuple[str, int], _Pub]] = deque()
        self.published: dict[str, int] = {}  # publisher -> highest seq published
        # publisher -> its pending publications in seq order (R7). A first delivery breaks FIFO
        # when the client had a first delivery of a higher-numbered notification of the same
        # publisher before: that one is pending still (a publisher numbers its notifications
        # in publication order, and they retire in that order), so R7 is judged against the
        # few pending publications numbered above it, with no state per (client, publisher).
        self.pubs_of: dict[str, list[_Pub]] = {}
        self.counts = Counts()
        # per judged publication, in close order: time and whether it was correct (R5)
        self.pub_times = array("d")
        self.pub_ok = bytearray()
        self.bad: list[tuple[float, int, int, int]] = []  # (t_p, missing, spurious, duplicate)
        self.fifo_times = array("d")  # delivery times of FIFO violations
        self.phantom_times = array("d")
        self._filters: dict[str, Filter | None] = {}
        # R13(d), online: `timed(hops, delta_max, tolerance)` turns it on
        self.hops: Mapping[str, Mapping[str, float]] | None = None
        self.slack: dict[str, dict[str, float]] = {}  # broker -> at -> hops·δmax + τ
        self.slack_default = 0.0  # the slack of an `at` no hop count names (0·δmax + τ)
        self.dmax = self.tau = self.worst_path = 0.0
        self.history = False  # mode skip_ring: see `timed`
        self.path_violations: list[tuple[float, float, str, float, float]] = []

    def timed(self, hops: Mapping[str, Mapping[str, float]], delta_max: float,
              tolerance: float, history: bool = False) -> None:
        """Also check the path rule R13(d) on every first delivery (publish with `broker`,
        deliver with `at`). `history` (mode skip_ring, where a newcomer catches up on the
        topic's earlier publications): only deliveries to clients subscribed by the
        publication's t − A are held to the path rule; the others are history."""
        self.hops, self.dmax, self.tau = hops, delta_max, tolerance
        self.history = history
        # the threshold of each (broker, at), computed as the rule does, once
        self.slack = {b: {at: n * delta_max + tolerance for at, n in by.items()}
                      for b, by in hops.items()}
        self.slack_default = 0 * delta_max + tolerance

    # ---- the subscription history (R1) ----

    def subscribe(self, t: float, client: str, broker: str, sub_id: str,
                  f: Filter | str) -> None:
        key = (client, sub_id)
        if key in self.live:
            return  # a repeated subscribe of a live subscription is a refresh
        sub = Sub(client, sub_id, broker, self._filter(f), t)
        if t < self.latest_start:
            self.in_order = False
        else:
            self.latest_start = t
        self.live[key] = sub
        subs = self.by_client.get(client)
        if subs is None:
            self.by_client[client] = [sub]
        else:
            subs.append(sub)
        k = sub.key
        if k is None:
            self.residual[id(sub)] = sub
        elif sub.exact and client not in self.exact.get(k, ()):
            self.exact.setdefault(k, {})[client] = sub
        else:
            self.keyed.setdefault(k, []).append(sub)

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
            self.ended.append(sub)
            k = sub.key
            if k is None:
                del self.residual[id(sub)]
                continue
            bucket = self.exact.get(k)
            if bucket is not None and bucket.get(client) is sub:
                del bucket[client]
                if not bucket:
                    del self.exact[k]
            else:
                others = self.keyed[k]
                others.remove(sub)
                if not others:
                    del self.keyed[k]

    def _forget(self, now: float) -> None:
        """Drop ended subscriptions that can allow no delivery at `now` or later (R4)."""
        ended, horizon = self.ended, now - self.L - EPS
        while ended and ended[0].end < horizon:
            sub = ended.popleft()
            subs = self.by_client.get(sub.client)
            if subs is not None:
                subs.remove(sub)
                if not subs:
                    del self.by_client[sub.client]

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
                attrs: Mapping[str, Any], broker: str | None = None) -> None:
        self._retire(t)
        key = (publisher, seq)
        top = self.published.get(publisher, 0)
        if key in self.pending or (seq <= top and self.retention < INF):
            return  # a repeated publish record of the same notification: the first counts
        if seq > top:
            self.published[publisher] = seq
        # Every running subscription that matches, by client (the publisher's own excluded: it
        # is never expected, R3). At close, those old enough at t and living to t + D make the
        # expected pairs; meanwhile a delivery to one of them is allowed at a glance (R4).
        candidates: dict[str, Sub] = {}
        extra: list[Sub] = []  # a client's second, third... matching subscription
        keys = notification_index_keys(attrs)
        exact, keyed = self.exact, self.keyed
        only: dict[str, Sub] | None = None  # the one bucket all candidates came from
        mixed = False
        for k in keys:
            bucket = exact.get(k)
            if bucket:
                if candidates:
                    mixed = True
                    for c, s in bucket.items():
                        if candidates.setdefault(c, s) is not s:
                            extra.append(s)
                else:
                    candidates = dict(bucket)
                    only = bucket
            others = keyed.get(k)
            if others:
                for s in others:
                    if s.exact or s.matches(attrs):
                        mixed = True
                        if candidates.setdefault(s.client, s) is not s:
                            extra.append(s)
        for s in self.residual.values():
            if s.matches(attrs):
                mixed = True
                if candidates.setdefault(s.client, s) is not s:
                    extra.append(s)
        candidates.pop(client, None)  # the publisher's own subscriptions
        if extra:
            extra = [s for s in extra if s.client != client]
        chain = self.pubs_of.get(publisher)
        if chain is None:
            chain = self.pubs_of[publisher] = []
        pub = _Pub(t, client, attrs, candidates, broker, seq, chain)
        if not chain or chain[-1].seq < seq:
            chain.append(pub)
        else:  # numbered out of publication order (a programmatic publisher): keep seq order
            chain.insert(next(i for i, q in enumerate(chain) if q.seq > seq), pub)
        pub.keys = keys
        if only is not None and not mixed and self.in_order:
            pub.oldest = next(iter(only.values())).start
        if self.hops is not None and broker is not None:
            pub.hops = self.hops.get(broker)
            if pub.hops is not None:
                pub.slack = self.slack[broker]
        if extra:
            pub.extra = extra
        self.pending[key] = pub
        self.order.append((key, pub))
        self.counts.publications += 1

    # ---- deliveries (R3-R6) ----

    def deliver(self, t: float, client: str, publisher: str, seq: int,
                at: str | None = None) -> _Pub | None:
        """Judge one delivery (by broker `at`, for the path rule R13d when `timed`); return its
        publication if this is the pair's first delivery.

        This runs for every delivery (10^5 per simulated second in seed000): it only records
        what the delivery's moment alone decides (R4, R5's duplicates, R7, R13d); the counts
        are made when the publication closes (`_close`)."""
        pub = self.pending.get((publisher, seq))
        if pub is None:
            c = self.counts
            c.deliveries += 1
            if self.retention < INF and 1 <= seq <= self.published.get(publisher, 0):
                c.late += 1  # published (publishers number 1, 2, ...), but retired: no verdict
            else:
                c.phantom += 1  # R6: never published
                self.phantom_times.append(t)
            return None
        delivered = pub.delivered
        if client in delivered:
            pub.duplicate += 1  # R5
            if self.detail:
                if pub.dups is None:
                    pub.dups = set()
                pub.dups.add(client)
            return None
        delivered.add(client)
        # R4 and R7 are decided at the first delivery; R3's "expected" at close. The common
        # case: a running subscription that matched at publication allows it (R4), no matching.
        s = pub.candidates.get(client)
        if (s is None or s.end != INF) and not self._allowed(t, client, pub):
            pub.denied.append(client)
        slack = pub.slack
        if slack is not None and at is not None and (  # R13(d)
                not self.history or (s is not None and s.start <= pub.t - self.A + EPS)):
            delay = t - pub.t
            if delay > self.worst_path:
                self.worst_path = delay
            if delay > slack.get(at, self.slack_default):
                limit = pub.hops.get(at, 0) * self.dmax  # type: ignore[union-attr]
                self.path_violations.append((pub.t, t, at, delay, limit))
        later = pub.later
        if later[-1] is not pub:  # R7: the pending ones numbered above it, usually 0-2
            for q in reversed(later):
                if q is pub:
                    break
                if client in q.delivered:
                    self.counts.fifo += 1
                    self.fifo_times.append(t)
                    break
        return pub

    def observe(self, now: float, node: Any, effect: Any) -> None:
        """The simulator's observer of a Deliver effect (the engine's signature: broker
        `node`, effect with `client` and `notification`): `deliver` at `node.id`. A method
        here rather than a closure of the simulator's, so a compiled build runs it natively."""
        n = effect.notification
        self.deliver(now, effect.client, n.publisher, n.seq, node.id)

    def _allowed(self, t: float, client: str, pub: _Pub) -> bool:
        """R4: a subscription of the client matching the publication lives at t (grey zones
        included)."""
        D, L, keys = self.D, self.L, pub.keys
        for s in self.by_client.get(client, ()):
            if (s.start - EPS <= t <= s.end + (L if s.crashed else D) + EPS
                    and (s.key in keys if s.exact else s.matches(pub.attrs))):
                return True
        return False

    # ---- closing publications ----

    def _retire(self, now: float) -> None:
        order = self.order
        horizon = now - self.retention
        while order and order[0][1].t < horizon:
            key, pub = order.popleft()
            del self.pending[key]
            self._close(key, pub, judged=True)
        self._forget(now)

    def _close(self, key: tuple[str, int], pub: _Pub, judged: bool) -> None:
        chain = pub.later
        if chain[0] is pub:
            del chain[0]
        else:
            chain.remove(pub)
        if not chain:
            del self.pubs_of[key[0]]
        c = self.counts
        delivered = pub.delivered
        expected: set[str] = set()
        if judged:
            lo, hi = pub.t - self.A + EPS, pub.t + self.D - EPS
            if pub.oldest <= lo:  # else none subscribed early enough (a run's first A s)
                expected = {c for c, s in pub.candidates.items()
                            if s.start <= lo and s.end >= hi}
            if pub.extra:
                expected.update(s.client for s in pub.extra if s.start <= lo and s.end >= hi)
        # a first delivery to an expected client is a hit; one to another client is in a grey
        # zone (`window`) if a subscription allowed it, else spurious
        hits = len(expected & delivered) if expected else 0
        spurious = [client for client in pub.denied if client not in expected]
        window = len(delivered) - hits - len(spurious)
        missing = len(expected) - hits
        c.deliveries += len(delivered) + pub.duplicate
        c.window += window
        c.spurious += len(spurious)
        c.duplicate += pub.duplicate
        if judged:
            c.judged += 1
            c.expected += len(expected)
            c.delivered += hits
            c.missing += missing
            ok = missing == 0 and not spurious and pub.duplicate == 0
            c.correct += ok
            self.pub_times.append(pub.t)
            self.pub_ok.append(ok)
            if not ok:
                self.bad.append((pub.t, missing, len(spurious), pub.duplicate))
                if self.detail:
                    self.errors.append((key, pub.t, expected - delivered, set(spurious),
                                        pub.dups or set()))
        else:
            c.unfinished += 1

    def finish(self, end: float) -> Counts:
        """Close every publication; those with t + D after `end` are not judged (R2)."""
        while self.order:
            key, pub = self.order.popleft()
            del self.pending[key]
            self._close(key, pub, judged=pub.t + self.D <= end + EPS)
        return self.counts

    def between(self, lo: float, hi: float) -> dict[str, int]:
        """Missing, spurious and duplicate deliveries of the judged publications made in
        [lo, hi) (R5), and the FIFO violations in [lo, hi) (R7)."""
        bad = [b for b in self.bad if lo - EPS <= b[0] < hi]
        return {"missing": sum(b[1] for b in bad), "spurious": sum(b[2] for b in bad),
                "duplicate": sum(b[3] for b in bad),
                "fifo": sum(1 for x in self.fifo_times if lo - EPS <= x < hi)}
