"""Prometheus metrics of one broker, plus the same counters as a plain dict for admin snapshots.

Each broker has its own CollectorRegistry (several brokers may share a process in tests) and
serves it on its own port. Every counter increment goes through one method here, so the
Prometheus view and the admin-snapshot view cannot disagree.

Counting is off the hot path: an increment is a dict update on the event loop (a Prometheus
labelled counter costs a lock and a label lookup, about 2 µs, which per message was a large
share of a broker's time); the Prometheus counters are computed from those tallies when
Prometheus scrapes, in the HTTP server's thread. A dict copy is atomic under the GIL, so the
scrape sees a consistent view.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Enum, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from weeble.runtime.config import TlsConfig, split_address
from weeble.runtime.quiet import LIMIT

LINK_STATES = ["down", "connecting", "up", "cut"]

log = logging.getLogger(__name__)

# name, help, label names: the labelled counters, each fed by one tally keyed by label values
_LABELLED: dict[str, tuple[str, tuple[str, ...]]] = {
    "weeble_messages": ("Link messages by direction (in: received; out: entered the link's "
                        "queue), kind and neighbour.", ("direction", "kind", "neighbor")),
    "weeble_messages_written": ("Link messages gRPC took for the neighbour (written to the "
                                "stream; out minus these: queued, or dropped).", ("neighbor",)),
    "weeble_messages_dropped": (
        "Link messages dropped, by neighbour and reason (loss, overflow, cut, malformed, "
        "unknown_kind, oversize, in_flight, not_connected).", ("neighbor", "reason")),
    "weeble_undeliverable": ("Deliveries with no open subscribe stream, a full one, or one "
                             "whose write failed.", ("reason",)),
    "weeble_client_requests": ("Subscribe, refresh and unsubscribe requests.", ("op",)),
    "weeble_core_errors": ("Exceptions raised by the broker core while handling an event.",
                           ("event",)),
    "weeble_faults": ("State faults injected through admin Corrupt.", ("target",)),
    "weeble_reconfig_phases": (
        "Reconfiguration phases at this broker (trace kind `reconfig`): the coordinated link "
        "exchange's (lock, begin, end, unlocked, ...) and the 3-colour scheme's at the root "
        "(submitted, disseminated, activated, refused).", ("phase",)),
}
_PLAIN: dict[str, str] = {
    "weeble_deliveries": "Notifications delivered to local clients (written to their stream).",
    "weeble_publishes": "Notifications published by local clients.",
    "weeble_lease_expiries": "Routing entries removed by lease expiry (SC-2).",
    "weeble_streams_refused": "Streams refused: their peer had max_streams_per_peer open.",
    "weeble_recolors": "Recolors this broker took (3-colour scheme, trace kind `recolor`).",
    "weeble_memory_trims": "Times freed memory was handed back to the system (malloc_trim).",
}


class Metrics:
    def __init__(self, broker_id: str) -> None:
        self.broker_id = broker_id
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters: Tally[str] = Tally()
        # label values -> count, per labelled counter
        self.labelled: dict[str, Tally[tuple[str, ...]]] = {name: Tally() for name in _LABELLED}
        self.plain: Tally[str] = Tally()
        self._messages = self.labelled["weeble_messages"]
        self._dropped = self.labelled["weeble_messages_dropped"]
        self.registry.register(_TallyCollector(self))
        reg = self.registry
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
        self._queued_bytes = Gauge(
            "weeble_link_queued_bytes", "Bytes waiting in a link's outgoing queue.",
            ["neighbor"], registry=reg,
        )
        self._client_bytes = Gauge(
            "weeble_client_queued_bytes",
            "Bytes waiting in the queues of the local clients' subscribe streams.", registry=reg,
        )
        self._colour = Gauge(
            "weeble_colour", "The broker's current colour (3-colour scheme: c_cur, after its "
            "last recolor).", registry=reg,
        )
        self._http: Any = None

    # ---- events -----------------------------------------------------------------------------

    @property
    def counters(self) -> Tally[str]:
        """Every counter by name (a copy): messages_<direction>_<kind>, dropped_<reason>,
        deliveries, publishes, ... -- what admin snapshots report."""
        out = self._counters.copy()
        for (direction, kind, _neighbor), n in self._messages.copy().items():
            out[f"messages_{direction}_{kind}"] += n
        if LIMIT.suppressed:  # warnings this process held back (one count per process)
            out["log_suppressed"] = LIMIT.suppressed
        return out

    def message(self, direction: str, kind: str, neighbor: str, n: int = 1) -> None:
        # per message on every link: one update; the by-name total is derived when read
        self._messages[direction, kind, neighbor] += n

    def written(self, neighbor: str, n: int) -> None:
        self.labelled["weeble_messages_written"][(neighbor,)] += n

    def dropped(self, neighbor: str, reason: str, n: int = 1) -> None:
        self._dropped[neighbor, reason] += n
        self._counters[f"dropped_{reason}"] += n

    def delivery(self, n: int = 1) -> None:
        self.plain["weeble_deliveries"] += n
        self._counters["deliveries"] += n

    def undeliverable(self, reason: str, n: int = 1) -> None:
        self.labelled["weeble_undeliverable"][(reason,)] += n
        self._counters[f"undeliverable_{reason}"] += n

    def publish(self, n: int = 1) -> None:
        self.plain["weeble_publishes"] += n
        self._counters["publishes"] += n

    def client_request(self, op: str) -> None:
        self.labelled["weeble_client_requests"][(op,)] += 1
        self._counters[f"client_{op}"] += 1

    def stream_refused(self) -> None:
        self.plain["weeble_streams_refused"] += 1
        self._counters["streams_refused"] += 1

    def expiries(self, n: int) -> None:
        self.plain["weeble_lease_expiries"] += n
        self._counters["lease_expiries"] += n

    def core_error(self, event: str) -> None:
        self.labelled["weeble_core_errors"][(event,)] += 1
        self._counters["core_errors"] += 1

    def fault(self, target: str) -> None:
        self.labelled["weeble_faults"][(target,)] += 1
        self._counters["faults"] += 1

    def reconfig_phase(self, phase: str) -> None:
        self.labelled["weeble_reconfig_phases"][(phase,)] += 1

    def memory_trim(self) -> None:
        self.plain["weeble_memory_trims"] += 1
        self._counters["memory_trims"] += 1

    def recolor(self, colour: int | None) -> None:
        self.plain["weeble_recolors"] += 1
        self._counters["recolors"] += 1
        if colour is not None:
            self._colour.set(colour)

    def link_state(self, neighbor: str, state: str) -> None:
        self._link_state.labels(neighbor).state(state)

    def link_queued(self, neighbor: str, n: int, nbytes: int) -> None:
        self._queued.labels(neighbor).set(n)
        self._queued_bytes.labels(neighbor).set(nbytes)

    def client_queued(self, nbytes: int) -> None:
        self._client_bytes.set(nbytes)

    def table_sizes(self, sizes: list[int]) -> None:
        for i, size in enumerate(sizes):
            self._table_size.labels(str(i)).set(size)

    # ---- serving ----------------------------------------------------------------------------

    def serve(self, address: str, tls: TlsConfig | None = None) -> None:
        """Serve /metrics on host:port from a daemon thread (prometheus-client is thread-safe).

        With `tls` (the broker's admin TLS, a run with live.tls): HTTPS with the broker's own
        certificate, and, when it names a CA, only for clients presenting a certificate of
        that CA, as admin (the probe found /metrics plain HTTP in a TLS run)."""
        host, port = split_address(address)
        if tls is None:
            self._http, _thread = start_http_server(port, host, registry=self.registry)
            log.info("metrics on http://%s/metrics", address)
            return
        self._http, _thread = start_http_server(
            port, host, registry=self.registry, certfile=str(tls.cert), keyfile=str(tls.key),
            client_cafile=str(tls.ca) if tls.ca is not None else None,
            client_auth_required=tls.ca is not None)
        log.info("metrics on https://%s/metrics", address)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


class _TallyCollector(Collector):
    """Renders the tallies as Prometheus counters at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily]:
        m = self._metrics
        plain = m.plain.copy()
        for name, help_text in _PLAIN.items():
            family = CounterMetricFamily(name, help_text)
            family.add_metric([], plain.get(name, 0))
            yield family
        family = CounterMetricFamily("weeble_log_suppressed",
                                     "Warnings held back by the log rate limit (quiet.py).")
        family.add_metric([], LIMIT.suppressed)
        yield family
        for name, (help_text, labels) in _LABELLED.items():
            family = CounterMetricFamily(name, help_text, labels=list(labels))
            for values, count in sorted(m.labelled[name].copy().items()):
                family.add_metric(list(values), count)
            yield family
