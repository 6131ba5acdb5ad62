"""Causal order of notifications (thesis 4.3.3, spec ch4 §2.3), by vector clocks.

n1 → n2 (n1 happened before n2) is the transitive closure of: the same client published n1
before n2; the client that published n2 had received n1 before publishing it. Causal order: a
client that receives both receives n1 first. FIFO-publisher order is the special case of one
publisher, and is counted by `deliveries.py` (R7); this module counts the causal violations
that are not also FIFO violations, so that R15's "reordered" (FIFO + causal) counts each
reordering once.

Feed the events of every client in the order that client saw them (a publication, a delivery);
events of different clients may interleave in any way consistent with that. Each client keeps a
vector clock over clients (publications only, sparse); a publication is stamped with its
publisher's clock; a delivery merges the stamp in. A delivery of n, the k-th publication of
client p, violates causal order iff this client already received a notification whose stamp
counts p's k-th publication or a later one: that notification causally follows n. It is a FIFO
violation too (not counted here) when that client already received a later publication of p
itself.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field

NotificationId = tuple[str, int]  # (publisher, seq)


@dataclass(slots=True)
class Violation:
    t: float
    client: str
    nid: NotificationId  # the notification delivered too late
    after: NotificationId  # one it causally precedes, delivered earlier


@dataclass(slots=True)
class Causal:
    clocks: dict[str, dict[str, int]] = field(default_factory=dict)  # client -> its clock
    stamps: dict[NotificationId, tuple[str, int, Mapping[str, int]]] = field(default_factory=dict)
    seen: dict[str, dict[str, tuple[int, NotificationId]]] = field(default_factory=dict)
    received: set[tuple[str, NotificationId]] = field(default_factory=set)  # (client, nid)
    # client -> publisher client -> the highest publication count received from it directly
    direct: dict[str, dict[str, int]] = field(default_factory=dict)
    count: int = 0
    times: array = field(default_factory=lambda: array("d"))
    sample: list[Violation] = field(default_factory=list)

    def publish(self, client: str, nid: NotificationId) -> None:
        """`client` published notification `nid` (later publications of one id are ignored)."""
        if nid in self.stamps:
            return
        clock = self.clocks.setdefault(client, {})
        clock[client] = clock.get(client, 0) + 1
        self.stamps[nid] = (client, clock[client], dict(clock))

    def deliver(self, t: float, client: str, nid: NotificationId) -> bool:
        """`client` received `nid`; True if that breaks causal order beyond FIFO order."""
        stamp = self.stamps.get(nid)
        if stamp is None or (client, nid) in self.received:
            return False  # unknown, or a duplicate (counted as such elsewhere)
        self.received.add((client, nid))
        origin, k, vc = stamp
        seen = self.seen.setdefault(client, {})
        late = seen.get(origin)
        direct = self.direct.setdefault(client, {})
        fifo = direct.get(origin, 0) >= k  # a later one of p itself came first: R7 counts it
        violated = late is not None and late[0] >= k and not fifo
        if direct.get(origin, 0) < k:
            direct[origin] = k
        if violated:
            self.count += 1
            self.times.append(t)
            if len(self.sample) < 20:
                self.sample.append(Violation(t, client, nid, late[1]))  # type: ignore[index]
        clock = self.clocks.setdefault(client, {})
        for q, n in vc.items():
            if clock.get(q, 0) < n:
                clock[q] = n
            if seen.get(q, (0, nid))[0] < n:
                seen[q] = (n, nid)
        return violated
