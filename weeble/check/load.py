"""Load per node and seed 002's overhead metric, from `send` and `unwanted` records.

Spec seed23 §D.4 asks every mode for "messages and bytes per interval (maximum and average per
node)"; seed 002 §5 measures a mode by its *reconfiguration overhead*: the hops of unsubscribe and
re-subscribe messages plus the unwanted events (an event that reached a broker which had nowhere
to send it: impossible in a legal state).

- The interval is the mode's own period: an anti-entropy round (`anti_entropy.period`) in that
  mode, the client refresh period ρ under leasing (a lease's refresh wave). A node's figure is
  what it sent over the run divided by the number of intervals in the run; `max` and `mean` are
  over every broker of the tree (a broker that sent nothing counts as 0).
- Control traffic is every message but notifications.
- Without `send` records (a run without `trace.sends`) there is nothing to count: `source` says so.

The PySpark twin is `weeble.analytics.jobs.overhead` (the differential test keeps them equal).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from weeble.trace.header import RunHeader

NOTIFY = "notify"
OVERHEAD_KINDS = ("sub", "unsub")  # what seed 002 counts, with the unwanted events


def interval_of(header: RunHeader) -> float:
    """The mode's interval (see the module docstring)."""
    if header.anti_entropy is not None:
        return header.anti_entropy.period
    return header.params.rho


class Load:
    def __init__(self, header: RunHeader) -> None:
        self.header = header
        self.messages: defaultdict[str, int] = defaultdict(int)  # node -> sent
        self.bytes: defaultdict[str, int] = defaultdict(int)
        self.control: defaultdict[str, int] = defaultdict(int)
        self.control_bytes: defaultdict[str, int] = defaultdict(int)
        self.by_kind: defaultdict[str, int] = defaultdict(int)
        self.unwanted = 0

    def feed(self, r: dict[str, Any]) -> None:
        kind = r["kind"]
        if kind == "send":
            node, msg, size = r["node"], r.get("msg") or "?", int(r.get("bytes") or 0)
            self.messages[node] += 1
            self.bytes[node] += size
            self.by_kind[msg] += 1
            if msg != NOTIFY:
                self.control[node] += 1
                self.control_bytes[node] += size
        elif kind == "unwanted":
            self.unwanted += 1

    def report(self, end: float) -> dict[str, Any]:
        return report(self.header, end, per_node={
            "messages": self.messages, "bytes": self.bytes, "control_messages": self.control,
            "control_bytes": self.control_bytes}, by_kind=self.by_kind, unwanted=self.unwanted)


def report(header: RunHeader, end: float, *, per_node: dict[str, dict[str, int]],
           by_kind: dict[str, int], unwanted: int) -> dict[str, Any]:
    """The load report from the totals per node (`messages`, `bytes`, `control_messages`,
    `control_bytes`, each node -> sent over the run), the sends by kind and the unwanted
    events: the reference checker counts them record by record, the Spark job by aggregation."""
    interval = interval_of(header)
    intervals = end / interval if end > 0 else 0.0
    brokers = header.topology.brokers

    def stat(counts: dict[str, int]) -> dict[str, float | None]:
        if not intervals or not brokers:
            return {"max": None, "mean": None}
        per = [counts.get(b, 0) / intervals for b in brokers]
        return {"max": max(per), "mean": sum(per) / len(per)}

    overhead = {k: by_kind.get(k, 0) for k in OVERHEAD_KINDS}
    overhead["unwanted"] = unwanted
    overhead["total"] = sum(overhead.values())
    return {
        "source": "send records" if by_kind else "none (run without send tracing)",
        "interval": interval,
        "intervals": intervals,
        **{name: stat(per_node.get(name, {})) for name in
           ("messages", "bytes", "control_messages", "control_bytes")},
        "by_kind": dict(sorted(by_kind.items())),
        "overhead": overhead,
    }
