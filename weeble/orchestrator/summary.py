"""The short summary of a live run, read back from its traces (`weeble run` prints it).

Counts only: publications and deliveries as the clients saw them (and as the brokers did),
duplicate deliveries, link messages by kind, drops (link messages) and undeliverable
deliveries (notifications a broker let go for a local client), each by reason, and errors;
and every live limit the run hit (`limits`: a limit's name -> what it cut), so that no limit
cuts a run's workload unsaid (issue 25).
Whether the run was *correct* is the analytics' verdict, not this module's; this is what a
person glances at after a run.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from weeble.trace.reader import TraceError, read_trace

# what a broker's trace says when one of its live limits cut something, -> the limit's name
# (docs/guide/live-limits.md): a link's queue full, a subscriber's stream queue full, a message
# over the size a peer accepts, the trace file's cap
DROP_LIMITS = {"overflow": "tuning.link_queue_limit/link_queue_bytes",
               "oversize": "tuning.max_message_bytes"}
UNDELIVERABLE_LIMITS = {"stream_full": "tuning.client_queue_limit/client_queue_bytes",
                        "oversize": "the client's max message size"}
# a decoded envelope over one of the wire's bounds (codec/wire.py check_count: MAX_BATCH,
# MAX_ITEMS, ...), dropped by the receiver with a `garbage` record naming it
OVER_BOUND = re.compile(r"over the bound (\w+) = (\d+)")
# a client's stream ended by a broker limit, as the client's error names it: the peer cap
# (runtime/peercap.py), a PublishStream whose first request came later than hello_timeout_s
CLIENT_LIMITS = ("max_streams_per_peer", "hello_timeout_s")


def summarize(trace_dir: Path, brokers: list[str]) -> dict[str, Any]:
    """Counts over every trace file in `trace_dir` (brokers' and clients')."""
    kinds: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    let_go: Counter[str] = Counter()  # undeliverable records by reason
    seen: Counter[tuple[str, str]] = Counter()  # (client, notification id) -> deliveries
    unreadable: list[str] = []
    limits: Counter[str] = Counter()
    broker_set = set(brokers)
    for path in sorted(Path(trace_dir).glob("*.jsonl")):
        is_broker = path.stem in broker_set
        try:
            for rec in read_trace(path):
                kind = rec.get("kind", "?")
                kinds[kind] += 1
                if not is_broker:
                    if kind == "client_deliver":
                        seen[rec.get("client", rec.get("node")), rec.get("nid")] += 1
                    elif kind == "client_error":
                        error = str(rec.get("error", ""))
                        limits.update(f"tuning.{name}" for name in CLIENT_LIMITS
                                      if name in error)
                    continue
                if kind == "send":
                    fate = rec.get("fate", "sent")
                    if fate in ("queued", "sent", "duplicated"):
                        sent[rec.get("msg", "?")] += 2 if fate == "duplicated" else 1
                    else:
                        dropped[fate] += 1
                elif kind == "drop":
                    dropped[rec.get("reason", "?")] += 1
                elif kind == "undeliverable":
                    let_go[rec.get("reason", "?")] += 1
                elif kind == "garbage":
                    bound = OVER_BOUND.search(str(rec.get("why", "")))
                    if bound is not None:
                        limits[f"{bound.group(1)} = {bound.group(2)}"] += 1
                elif kind == "trace_capped":
                    limits["tuning.trace_max_bytes"] += 1
        except (OSError, TraceError) as e:
            unreadable.append(f"{path.name}: {e}")
    return {
        "publications": kinds["client_publish"],
        "deliveries": kinds["client_deliver"],
        "duplicate_deliveries": sum(n - 1 for n in seen.values() if n > 1),
        "broker_publishes": kinds["publish"],
        "broker_deliveries": kinds["deliver"],
        "undeliverable": kinds["undeliverable"],
        "undeliverable_by_reason": dict(sorted(let_go.items())),
        "subscriptions": kinds["client_subscribe"],
        "unsubscriptions": kinds["client_unsubscribe"],
        "crashes": kinds["crash"],
        "client_errors": kinds["client_error"],
        "lease_expiries": kinds["expire"],
        "messages": dict(sorted(sent.items())) | {"total": sum(sent.values())},
        "dropped": dict(sorted(dropped.items())),
        "broker_errors": kinds["error"],
        "unreadable_traces": unreadable,
        "limits": dict(sorted((limits + Counter(
            {DROP_LIMITS[r]: n for r, n in dropped.items() if r in DROP_LIMITS}) + Counter(
            {UNDELIVERABLE_LIMITS[r]: n for r, n in let_go.items()
             if r in UNDELIVERABLE_LIMITS})).items())),
    }
