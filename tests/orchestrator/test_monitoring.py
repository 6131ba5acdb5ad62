"""The `monitoring` overlay and its Grafana dashboard (issue 26 item 6): the overlay admits the
monitoring namespace to the metrics port and asks Prometheus to scrape the brokers, and every
panel's and annotation's query of the dashboard returns data from a real Prometheus (Debian's
`prometheus`, as tests/runtime/test_prometheus.py runs it) scraping a live local run that
has traffic, a reconfiguration under the colour scheme, a state fault, a link cut and a broker
leaving. The overlay's offline validation (kubernetes-validate, checkov, yamllint) is
tests/orchestrator/test_k8s_validate.py's, over every overlay."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from tests.orchestrator.test_kubernetes import kustomize
from tests.runtime.livebed import REPO, scenario, start, under_load
from tests.runtime.prometheus import prometheus_server, query, query_range
from weeble.core.reconfig.plan import ExchangeLink, RemoveLeaf
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.orchestrator.backends import monitoring
from weeble.orchestrator.workload import LiveWorkload


def test_the_overlay_scrapes_the_brokers_and_admits_only_the_monitoring_namespace() -> None:
    objects = kustomize(monitoring.NAME)
    small = kustomize(monitoring.ON)
    # the same deployment as `small`, plus one policy and the dashboard
    assert sorted(o["kind"] for o in objects) == sorted(
        [o["kind"] for o in small] + ["NetworkPolicy", "ConfigMap"])
    statefulset = next(o for o in objects if o["kind"] == "StatefulSet")
    template = statefulset["spec"]["template"]
    port = next(p["containerPort"] for p in template["spec"]["containers"][0]["ports"]
                if p["name"] == "metrics")
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true", "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics", "prometheus.io/scheme": "http"}
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    broker = template["metadata"]["labels"]
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    monitoring_ns = {"kubernetes.io/metadata.name": "monitoring"}
    assert k8s.admits(policies, broker, prometheus, port, source_namespace=monitoring_ns)
    # only the metrics port, only from that namespace
    for other in (7000, 7001):
        assert not k8s.admits(policies, broker, prometheus, other,
                              source_namespace=monitoring_ns)
    assert not k8s.admits(policies, broker, prometheus, port,
                          source_namespace={"kubernetes.io/metadata.name": "default"})
    without = [p for p in policies if p["metadata"]["name"] != "broker-monitoring"]
    assert not k8s.admits(without, broker, prometheus, port, source_namespace=monitoring_ns)
    # the dashboard, provisioned by Grafana's sidecar label, is the code's
    (dashboard,) = [o for o in objects if o["kind"] == "ConfigMap"
                    and o["metadata"]["name"] == "weeble-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"][monitoring.DASHBOARD_FILE]) == monitoring.dashboard()
    committed = REPO / "k8s" / "overlays" / monitoring.NAME / monitoring.DASHBOARD_FILE
    assert json.loads(committed.read_text()) == monitoring.dashboard()


def test_the_dashboard_has_every_view_and_its_queries_are_the_ones_checked() -> None:
    board = monitoring.dashboard()
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for view in ("traffic per broker", "traffic per link", "routing-table", "lease renewals",
                 "lease expiries", "link state", "reconfiguration phases", "colour phases",
                 "queued bytes"):
        assert view in titles, view
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in board["annotations"]["list"]]
    assert exprs == [expr for _what, expr in monitoring.queries()]
    assert {a["name"] for a in board["annotations"]["list"]} >= {"State faults", "Link cuts"}


def test_every_panel_query_returns_data_from_a_live_run(tmp_path: Path) -> None:
    # the colour scheme reshapes the tree (recolors, its phases at the root), a table fault,
    # a link cut and healed, a leaf leaving (its scrape then fails), under a steady load
    s = scenario(
        duration=10, timing={"pi": 1.2, "rho": 0.6, "delta_min": 0.0, "delta_max": 0.05,
                             "d": 8},
        overlay={"kind": "coloured", "xi": 1.2, "height": 4},
        workload={"filter_classes": 3, "subscriptions": 8, "mean_lifetime": 1000,
                  "publish_rate": 30},
        live={"metrics_port": 9100})
    bed = start(s, tmp_path / "runs")
    try:
        targets = {b: bed.address(b).metrics for b in bed.brokers}
        with prometheus_server(tmp_path, targets) as url:
            t0 = time.time()

            async def seen(promql: str) -> None:
                deadline = time.monotonic() + 60
                while not await asyncio.to_thread(query, url, promql):
                    assert time.monotonic() < deadline, f"Prometheus never saw {promql}"
                    await asyncio.sleep(0.5)

            async def steps(manager: Any, _workload: LiveWorkload) -> list[Any]:
                await asyncio.sleep(2.5)  # the first recolors have made every broker a member
                async with bed.admin("b3") as admin:
                    await admin.corrupt("table.clear")
                async with bed.admin("b2") as admin:
                    await admin.cut_link("b5")
                    await seen('weeble_link_state{broker="b2",neighbor="b5",'
                               'weeble_link_state="cut"} == 1')  # a scrape saw the window
                    await admin.heal_link("b5")
                return [await manager.reconfigure(op) for op in (
                    ExchangeLink(remove=("b1", "b3"), add=("b2", "b3")), RemoveLeaf("b6"))]

            records, _ = asyncio.run(under_load(bed, s, steps))
            assert [r.outcome for r in records] == ["done", "done"], [r.why for r in records]
            empty = monitoring.queries()
            deadline = time.monotonic() + 60  # the last scrapes land, b6's fails
            while empty:
                empty = [(what, expr) for what, expr in empty
                         if not query_range(url, expr, t0, time.time())]
                assert not empty or time.monotonic() < deadline, \
                    f"no data from {len(empty)} queries: {empty}"
                time.sleep(1)
    finally:
        bed.close()
