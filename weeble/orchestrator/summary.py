"""The short summary of a live run, read back from its traces (`weeble run` prints it).

Counts only: publications and deliveries as the clients saw them (and as the brokers did),
duplicate deliveries, link messages by kind, drops (link messages) and undeliverable
deliveries (notifications a broker let go for a local client), each by reason, and errors.
Whether the run was *correct* is the analytics' verdict, not this module's; this is what a
person glances at after a run.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from weeble.trace.reader import TraceError, read_trace


def summarize(trace_dir: Path, brokers: list[str]) -> dict[str, Any]:
    """Counts over every trace file in `trace_dir` (brokers' and clients')."""
    kinds: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    let_go: Counter[str] = Counter()  # undeliverable records by reason
    seen: Counter[tuple[str, str]] = Counter()  # (client, notification id) -> deliveries
    unreadable: list[str] = []
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
    }
