"""Kubernetes, validated offline (no cluster can run on this machine; the README says what was
not exercised). The committed k8s/ tree is what the code generates; `kubectl kustomize`
renders each overlay into exactly the objects the backend applies; every object validates
against the Kubernetes JSON schemas of a pinned version and round-trips through the official
client's models; the backend's calls go through the official client to an API endpoint that
records them, and say what a cluster would be asked."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from tests.live.livebed import REPO
from weeble.model.scenario import load_scenario
from weeble.orchestrator.backend import AdminAccess, BackendError, Ports
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.orchestrator.testbed import broker_configs

K8S_VERSION = "1.32.0"  # the schemas of kubernetes-validate (pinned in pyproject) for this
MODELS = {"Namespace": "V1Namespace", "ConfigMap": "V1ConfigMap", "Secret": "V1Secret",
          "Service": "V1Service", "StatefulSet": "V1StatefulSet",
          "PodDisruptionBudget": "V1PodDisruptionBudget", "NetworkPolicy": "V1NetworkPolicy"}
TOKENS = ("change-me-admin-token-0123456789", "change-me-link-token",
          "change-me-client-secret-0123456789")


def kustomize(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "k8s" / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return list(yaml.safe_load_all(out.stdout))


def test_committed_k8s_tree_is_what_the_code_generates(tmp_path: Path) -> None:
    k8s.write_tree(tmp_path)
    generated = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*.yaml")}
    committed = {p.relative_to(REPO / "k8s"): p.read_text()
                 for p in (REPO / "k8s").rglob("*.yaml")}
    assert generated == committed, ("k8s/ is stale: python -m weeble.orchestrator.backends"
                                    ".kubernetes")


@pytest.mark.parametrize("overlay", sorted(k8s.OVERLAYS))
def test_overlay_renders_valid_objects_equal_to_the_backends(overlay: str) -> None:
    rendered = kustomize(overlay)
    scenario = load_scenario(REPO / k8s.OVERLAYS[overlay])
    n = len(scenario.build_topology().brokers)
    kinds = [o["kind"] for o in rendered]
    assert kinds.count("NetworkPolicy") == n + 2  # one per broker, default deny, orchestrator
    for kind in ("Namespace", "ConfigMap", "Secret", "Service", "StatefulSet",
                 "PodDisruptionBudget"):
        assert kinds.count(kind) == 1, kinds
    for obj in rendered:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)  # raises if invalid
        model = client.ApiClient()._ApiClient__deserialize(obj, MODELS[obj["kind"]])
        assert client.ApiClient().sanitize_for_serialization(model) == obj  # no unknown field
    statefulset = next(o for o in rendered if o["kind"] == "StatefulSet")
    assert statefulset["spec"]["replicas"] == n
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["grpc"] and container["livenessProbe"]["grpc"]
    assert container["resources"]["limits"]["memory"]
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/instance"] == overlay
    # the backend applies the same objects (the tokens are the run's there)
    ours = k8s.scenario_manifests(scenario, instance=overlay, namespace=f"weeble-{overlay}",
                                  image="weeble-broker:latest", tokens=TOKENS)
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(map(json.dumps, (_sorted(o) for o in rendered))) == \
        sorted(map(json.dumps, (_sorted(o) for o in ours)))
    assert {key(o) for o in rendered} == {key(o) for o in ours}


def _sorted(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _sorted(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [_sorted(v) for v in obj]
    return obj


def test_link_policies_admit_exactly_the_overlay_links() -> None:
    rendered = kustomize("small")
    scenario = load_scenario(REPO / k8s.OVERLAYS["small"])
    topology = scenario.build_topology()
    pods = {b: k8s.pod(i) for i, b in enumerate(topology.brokers)}
    admitted = set()
    for policy in (o for o in rendered if o["metadata"]["name"].startswith("link-")):
        target = policy["spec"]["podSelector"]["matchLabels"][
            "statefulset.kubernetes.io/pod-name"]
        for rule in policy["spec"]["ingress"]:
            assert rule["ports"] == [{"protocol": "TCP", "port": 7000}]
            for source in rule["from"]:
                for expr in source["podSelector"]["matchExpressions"]:
                    admitted |= {frozenset((target, v)) for v in expr["values"]}
    assert admitted == {frozenset((pods[a], pods[b])) for a, b in topology.links}


# ---- the backend's calls, through the official client ------------------------------------------


class _Api(BaseHTTPRequestHandler):
    """An API endpoint on loopback that keeps what it is sent and answers like an API server
    for the calls the backend makes (pods are Running; a deleted pod comes back with a new
    uid, as the StatefulSet would make it)."""

    store: dict[str, Any]
    log: list[tuple[str, str, Any]]

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def do_POST(self) -> None:
        body = self._body()
        self.log.append(("POST", self.path, body))
        self.store[f"{self.path}/{body['metadata']['name']}"] = body
        self._reply(201, body)

    def do_PUT(self) -> None:
        body = self._body()
        self.log.append(("PUT", self.path, body))
        self.store[self.path] = body
        self._reply(200, body)

    def do_PATCH(self) -> None:
        body = self._body()
        self.log.append(("PATCH", self.path, body))
        self._reply(200, {"kind": "Scale", "apiVersion": "autoscaling/v1", "spec": body["spec"]})

    def do_DELETE(self) -> None:
        body = self._body()
        self.log.append(("DELETE", self.path, body))
        gone = self.store.pop(self.path, None)
        name = self.path.rsplit("/", 1)[1]
        kind = "Pod" if "/pods/" in self.path else "Namespace"  # what the backend deletes
        self._reply(200, {"kind": kind, "apiVersion": "v1", "metadata": {
            "name": name, **({"uid": gone["uid"]} if gone and "uid" in gone else {})}})

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.log.append(("GET", path, None))
        if "/pods/" in path and path.rsplit("/", 1)[1].startswith("broker-"):
            uid = self.store.setdefault(path, {"uid": str(uuid.uuid4())})["uid"]
            self._reply(200, {"kind": "Pod", "apiVersion": "v1",
                              "metadata": {"name": path.rsplit("/", 1)[1], "uid": uid},
                              "status": {"phase": "Running"}})
        elif path in self.store:
            self._reply(200, self.store[path])
        else:
            self._reply(404, {"kind": "Status", "apiVersion": "v1", "code": 404})

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def api() -> Iterator[tuple[Any, _Api]]:
    handler = type("Api", (_Api,), {"store": {}, "log": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    conf = client.Configuration()
    conf.host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield client.ApiClient(conf), handler  # type: ignore[misc]
    finally:
        server.shutdown()
        server.server_close()


def test_backend_applies_cuts_and_crashes_through_the_client(
        api: tuple[Any, type[_Api]], tmp_path: Path) -> None:
    api_client, recorder = api
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    topology = scenario.build_topology()
    brokers = list(topology.brokers)
    backend = k8s.KubernetesBackend(tmp_path, AdminAccess("t" * 32), run_id="Run_1",
                                    api=api_client)
    places = backend.plan(brokers, list(topology.links), Ports(listen=7000, admin=7001))
    ns = backend.namespace
    assert ns == "weeble-run-1"
    assert places["b1"].reach.listen == f"broker-1.brokers.{ns}.svc.cluster.local:7000"
    assert backend.peer_address("b1", "b0") == places["b1"].reach.listen
    configs = broker_configs(scenario, places, backend.peer_address, admin_token="t" * 32,
                             link_token="link", client_secret="c" * 32, tls=None,
                             trace_path=lambda b: backend.trace_path(tmp_path, b))
    for config in configs.values():
        backend.start_broker(config)
    posts = [(path, body["kind"]) for method, path, body in recorder.log if method == "POST"]
    assert posts[0] == ("/api/v1/namespaces", "Namespace")
    assert (f"/apis/apps/v1/namespaces/{ns}/statefulsets", "StatefulSet") in posts
    assert len([p for p in posts if p[1] == "NetworkPolicy"]) == len(brokers) + 2
    secret = recorder.store[f"/api/v1/namespaces/{ns}/secrets/broker-tokens"]
    assert secret["stringData"]["admin-token"] == "t" * 32
    configmap = recorder.store[f"/api/v1/namespaces/{ns}/configmaps/broker-configs"]
    assert secret["stringData"]["client-secret"] == "c" * 32
    assert "t" * 32 not in json.dumps(configmap)  # no secret in the ConfigMap
    assert "c" * 32 not in json.dumps(configmap)

    # a cut: each end's link policy no longer admits the other; heal admits it again
    assert not backend.link_state("b0", "b1").cut
    backend.cut_link("b0", "b1")
    state = backend.link_state("b0", "b1")
    assert state.cut and state.mechanism == "network-policy"
    assert state.ends == {"b0": "denies b1", "b1": "denies b0"}
    policy = recorder.store[f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/"
                            "link-broker-0"]
    values = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0][
        "values"]
    assert values == ["broker-2"]  # b0's other neighbour only
    backend.heal_link("b0", "b1")
    assert not backend.link_state("b0", "b1").cut

    # a crash deletes the pod at once; the StatefulSet's new pod has a new uid
    old = backend.handle("b3")
    backend.kill_broker("b3")
    deletes = [(p, b) for m, p, b in recorder.log if m == "DELETE"]
    assert deletes[-1][0] == f"/api/v1/namespaces/{ns}/pods/broker-3"
    assert deletes[-1][1]["gracePeriodSeconds"] == 0
    assert backend.handle("b3") != old

    with pytest.raises(BackendError, match="not supported"):
        backend.add_link("b3", "b4")
    backend.stop_all()
    assert recorder.log[-1][:2] == ("PATCH",
                                    f"/apis/apps/v1/namespaces/{ns}/statefulsets/broker/scale")
    backend.teardown()
    assert recorder.log[-1][:2] == ("DELETE", f"/api/v1/namespaces/{ns}")
    backend.close()
