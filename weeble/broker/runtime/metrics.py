"""Prometheus metrics of one broker, plus the same counters as a plain dict for admin snapshots.

Each broker has its own CollectorRegistry (several brokers may share a process in tests) and
serves it on its own port. Every counter increment goes through one method here, so the
Prometheus view and the admin-snapshot view cannot disagree.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, start_http_server

from weeble.broker.runtime.config import split_address

LINK_STATES = ["down", "connecting", "up", "cut"]

log = logging.getLogger(__name__)


class Metrics:
    def __init__(self, broker_id: str) -> None:
        self.broker_id = broker_id
        self.registry = CollectorRegistry(auto_describe=True)
        self.counters: Tally[str] = Tally()
        reg = self.registry
        self._messages = Counter(
            "weeble_messages", "Link messages by direction (in/out), kind and neighbour.",
            ["direction", "kind", "neighbor"], registry=reg,
        )
        self._dropped = Counter(
            "weeble_messages_dropped",
            "Link messages dropped, by neighbour and reason (loss, overflow, cut, malformed, "
            "unknown_kind, oversize, in_flight, not_connected).",
            ["neighbor", "reason"], registry=reg,
        )
        self._deliveries = Counter(
            "weeble_deliveries", "Notifications delivered to local clients.", registry=reg
        )
        self._undeliverable = Counter(
            "weeble_undeliverable",
            "Deliveries with no open subscribe stream, or a full one.", ["reason"], registry=reg,
        )
        self._publishes = Counter(
            "weeble_publishes", "Notifications published by local clients.", registry=reg
        )
        self._client_ops = Counter(
            "weeble_client_requests", "Subscribe, refresh and unsubscribe requests.", ["op"],
            registry=reg,
        )
        self._expiries = Counter(
            "weeble_lease_expiries", "Routing entries removed by lease expiry (SC-2).",
            registry=reg,
        )
        self._errors = Counter(
            "weeble_core_errors", "Exceptions raised by the broker core while handling an event.",
            ["event"], registry=reg,
        )
        self._faults = Counter(
            "weeble_faults", "State faults injected through admin Corrupt.", ["target"],
            registry=reg,
        )
        self._table_size = Gauge(
            "weeble_routing_table_size", "Entries in the routing table(s).", ["table"],
            registry=reg,
        )
        self._link_state = Enum(
            "weeble_link_state", "State of the link to a neighbour.", ["neighbor"],
            states=LINK_STATES, registry=reg,
        )
        self._queued = Gauge(
            "weeble_link_queued", "Messages waiting in a link's outgoing queue.", ["neighbor"],
            registry=reg,
        )
        self._http: Any = None

    # ---- events -----------------------------------------------------------------------------

    def message(self, direction: str, kind: str, neighbor: str, n: int = 1) -> None:
        self._messages.labels(direction, kind, neighbor).inc(n)
        self.counters[f"messages_{direction}_{kind}"] += n

    def dropped(self, neighbor: str, reason: str, n: int = 1) -> None:
        self._dropped.labels(neighbor, reason).inc(n)
        self.counters[f"dropped_{reason}"] += n

    def delivery(self) -> None:
        self._deliveries.inc()
        self.counters["deliveries"] += 1

    def undeliverable(self, reason: str) -> None:
        self._undeliverable.labels(reason).inc()
        self.counters[f"undeliverable_{reason}"] += 1

    def publish(self) -> None:
        self._publishes.inc()
        self.counters["publishes"] += 1

    def client_request(self, op: str) -> None:
        self._client_ops.labels(op).inc()
        self.counters[f"client_{op}"] += 1

    def expiries(self, n: int) -> None:
        self._expiries.inc(n)
        self.counters["lease_expiries"] += n

    def core_error(self, event: str) -> None:
        self._errors.labels(event).inc()
        self.counters["core_errors"] += 1

    def fault(self, target: str) -> None:
        self._faults.labels(target).inc()
        self.counters["faults"] += 1

    def link_state(self, neighbor: str, state: str) -> None:
        self._link_state.labels(neighbor).state(state)

    def link_queued(self, neighbor: str, n: int) -> None:
        self._queued.labels(neighbor).set(n)

    def table_sizes(self, sizes: list[int]) -> None:
        for i, size in enumerate(sizes):
            self._table_size.labels(str(i)).set(size)

    # ---- serving ----------------------------------------------------------------------------

    def serve(self, address: str) -> None:
        """Serve /metrics on host:port from a daemon thread (prometheus-client is thread-safe)."""
        host, port = split_address(address)
        self._http, _thread = start_http_server(port, host, registry=self.registry)
        log.info("metrics on http://%s/metrics", address)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
