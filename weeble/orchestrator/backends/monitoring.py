"""The `monitoring` overlay of k8s/ and its Grafana dashboard (issue 26 item 6).

k8s/overlays/monitoring deploys the `small` overlay's brokers with what a cluster's Prometheus
and Grafana need to watch them:

- Prometheus scrape annotations on the broker pods (`prometheus.io/scrape`, `/port`, `/path`:
  the convention of the `kubernetes-pods` job of Prometheus's example configuration and of the
  prometheus-community chart), so no operator CRD is needed;
- a NetworkPolicy admitting the namespace `monitoring` (by its `kubernetes.io/metadata.name`
  label) to the brokers' metrics port, beside the base's default deny;
- the dashboard below as a ConfigMap labelled `grafana_dashboard: "1"`, the label Grafana's
  dashboard sidecar (kube-prometheus-stack, the Grafana chart) provisions from.

The dashboard is data: `PANELS` and `ANNOTATIONS` hold every query, in the metric names
weeble/runtime/metrics.py exports; tests/orchestrator/test_monitoring.py runs each against a
real Prometheus scraping a live run and requires data from every one. Series are grouped by
`broker` (a label a static scrape configuration gives each target, as the local runs and the
test do) and `pod` (what Kubernetes service discovery gives): whichever the scrape sets.
"""

from __future__ import annotations

import json
from typing import Any

from weeble.orchestrator.backends.kubemanifest import (
    _HEADER,
    DEFAULT_METRICS,
    STATEFULSET,
    _selector,
    _yaml,
    labels,
)

NAME = "monitoring"
ON = "small"  # the overlay whose brokers it watches
MONITORING_NAMESPACE = "monitoring"  # where Prometheus (and Grafana) run
DASHBOARD_UID = "weeble-brokers"
DASHBOARD_FILE = "weeble-dashboard.json"
WHO = "broker, pod"  # the scrape's name for a broker (see the module's doc)
LEGEND = "{{broker}}{{pod}}"

# title, unit, description, [(PromQL, legend)], panel type
Panel = tuple[str, str, str, list[tuple[str, str]], str]
PANELS: list[Panel] = [
    ("Link traffic per broker", "msg/s", "Link messages received (in) and sent (out) per"
     " second, every kind.", [(f"sum by ({WHO}, direction) (rate(weeble_messages_total[1m]))",
                               f"{LEGEND} {{{{direction}}}}")], "timeseries"),
    ("Traffic per link", "msg/s", "Link messages each broker sends to each neighbour.",
     [(f"sum by ({WHO}, neighbor) (rate(weeble_messages_total{{direction=\"out\"}}[1m]))",
       f"{LEGEND} → {{{{neighbor}}}}")], "timeseries"),
    ("Notifications published and delivered", "msg/s", "Publications of local clients, and"
     " deliveries to local subscribers.",
     [(f"sum by ({WHO}) (rate(weeble_publishes_total[1m]))", f"{LEGEND} published"),
      (f"sum by ({WHO}) (rate(weeble_deliveries_total[1m]))", f"{LEGEND} delivered")],
     "timeseries"),
    ("Routing-table sizes", "short", "Entries in each broker's routing table(s).",
     [(f"sum by ({WHO}) (weeble_routing_table_size)", LEGEND)], "timeseries"),
    ("Lease renewals", "ops/s", "Subscriptions renewed by neighbours (sub messages received)"
     " and by local clients (Refresh).",
     [(f"sum by ({WHO}) (rate(weeble_messages_total{{direction=\"in\",kind=\"sub\"}}[1m]))",
       f"{LEGEND} from neighbours"),
      (f"sum by ({WHO}) (rate(weeble_client_requests_total{{op=\"refresh\"}}[1m]))",
       f"{LEGEND} from clients")], "timeseries"),
    ("Lease expiries", "short", "Routing entries removed by lease expiry, per minute.",
     [(f"sum by ({WHO}) (increase(weeble_lease_expiries_total[1m]))", LEGEND)],
     "timeseries"),
    ("Link state", "short", "1: the link's session is up; 0: down, connecting or cut.",
     [(f"sum by ({WHO}, neighbor) (weeble_link_state{{weeble_link_state=\"up\"}})",
       f"{LEGEND} – {{{{neighbor}}}}")], "state-timeline"),
    ("Reconfiguration phases", "short", "Link exchange phases (lock, begin, end, ...), and"
     " the 3-colour scheme's at the root (submitted, ...), per minute.",
     [(f"sum by ({WHO}, phase) (increase(weeble_reconfig_phases_total[1m]))",
       f"{LEGEND} {{{{phase}}}}")], "timeseries"),
    ("Colour phases", "short", "3-colour scheme: each broker's current colour (c_cur) and its"
     " recolors per minute.",
     [(f"max by ({WHO}) (weeble_colour)", f"{LEGEND} colour"),
      (f"sum by ({WHO}) (increase(weeble_recolors_total[1m]))", f"{LEGEND} recolors")],
     "timeseries"),
    ("Queued bytes", "bytes", "Bytes waiting in each link's outgoing queue, and in the local"
     " subscribers' stream queues.",
     [(f"sum by ({WHO}, neighbor) (weeble_link_queued_bytes)", f"{LEGEND} → {{{{neighbor}}}}"),
      (f"sum by ({WHO}) (weeble_client_queued_bytes)", f"{LEGEND} clients")], "timeseries"),
]

# name, PromQL (a series while the fault lasts), colour: Grafana shades each as a window
ANNOTATIONS: list[tuple[str, str, str]] = [
    # a target's first fault makes its series (increase() needs a sample before it): new
    # series count too
    ("State faults", f"sum by ({WHO}, target) ((weeble_faults_total unless weeble_faults_total"
     " offset 30s) or increase(weeble_faults_total[30s]) > 0)", "red"),
    ("Link cuts", f"sum by ({WHO}, neighbor) (weeble_link_state{{weeble_link_state=\"cut\"}})"
     " > 0", "orange"),
    # a crashed, paused or removed broker: its scrape fails (a broker it was, within 10 min)
    ("Broker unreachable", "up == 0 and on (job, instance)"
     " last_over_time(weeble_publishes_total[10m])", "purple"),
]


def queries() -> list[tuple[str, str]]:
    """(what, PromQL) of every panel target and annotation of the dashboard."""
    out = [(f"panel {title!r}", expr) for title, _u, _d, targets, _k in PANELS
           for expr, _legend in targets]
    return out + [(f"annotation {name!r}", expr) for name, expr, _c in ANNOTATIONS]


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard (schema 39), on a Prometheus data source chosen by variable."""
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels = []
    for i, (title, unit, description, targets, kind) in enumerate(PANELS):
        panel: dict[str, Any] = {
            "id": i + 1, "type": kind, "title": title, "description": description,
            "datasource": ds,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + j), "datasource": ds, "expr": expr,
                         "legendFormat": legend, "range": True}
                        for j, (expr, legend) in enumerate(targets)],
        }
        if kind == "state-timeline":
            panel["fieldConfig"]["defaults"]["mappings"] = [{"type": "value", "options": {
                "0": {"text": "not up", "color": "red"}, "1": {"text": "up", "color": "green"}}}]
        panels.append(panel)
    annotations = [{"name": name, "datasource": ds, "enable": True, "iconColor": colour,
                    "expr": expr, "step": "5s", "titleFormat": name,
                    "textFormat": LEGEND + " {{target}}{{neighbor}}",
                    "useValueForTime": False}
                   for name, expr, colour in ANNOTATIONS]
    return {
        "uid": DASHBOARD_UID, "title": "Weeble brokers", "tags": ["weeble"],
        "description": "Traffic, routing tables, leases, links, reconfigurations and queues of"
                       " a Weeble broker network; fault windows as annotations.",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "annotations": {"list": annotations},
        "panels": panels,
    }


def render_monitoring(metrics_port: int = DEFAULT_METRICS) -> dict[str, str]:
    """The files of k8s/overlays/monitoring."""
    namespace = f"weeble-{ON}"
    policy = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "broker-monitoring", "labels": labels(ON, "policy")},
        "spec": {"podSelector": {"matchLabels": _selector(ON)}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": MONITORING_NAMESPACE}}}],
                     "ports": [{"protocol": "TCP", "port": metrics_port}]}]}}
    scrape = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STATEFULSET},
        "spec": {"template": {"metadata": {"annotations": {
            "prometheus.io/scrape": "true", "prometheus.io/port": str(metrics_port),
            "prometheus.io/path": "/metrics", "prometheus.io/scheme": "http"}}}}}
    files = {
        "networkpolicy-broker-monitoring.yaml": _yaml([policy]),
        "scrape.yaml": _yaml([scrape]),
        "kustomization.yaml": _yaml([{
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "namespace": namespace,
            "resources": [f"../{ON}", "networkpolicy-broker-monitoring.yaml"],
            "patches": [{"path": "scrape.yaml"}],
            # Grafana's dashboard sidecar provisions every ConfigMap with this label
            "configMapGenerator": [{
                "name": "weeble-dashboard", "files": [DASHBOARD_FILE],
                "options": {"labels": {**labels(ON, "dashboard"), "grafana_dashboard": "1"},
                            "disableNameSuffixHash": True}}]}]),
    }
    out = {k: _HEADER.format(name=NAME) + v for k, v in files.items()}
    out[DASHBOARD_FILE] = json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
    return out

