"""Kubernetes, validated offline (no cluster can run on this machine; docs/guide/backends.md says
what was not exercised). The committed k8s/ tree is what the code generates; `kubectl kustomize`
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

from tests.runtime.livebed import REPO
from weeble.model.scenario import load_scenario
from weeble.orchestrator.backend import AdminAccess, BackendError, Ports
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.orchestrator.testbed import broker_configs

K8S_VERSION = "1.32.0"  # the schemas of kubernetes-validate (pinned in pyproject) for this
MODELS = {"Namespace": "V1Namespace", "ConfigMap": "V1ConfigMap", "Secret": "V1Secret",
          "Service": "V1Service", "StatefulSet": "V1StatefulSet",
          "PodDisruptionBudget": "V1PodDisruptionBudget", "NetworkPolicy": "V1NetworkPolicy"}
TOKENS = ("a" * 32, "l" * 32, "c" * 32)


def kustomize(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "k8s" / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return list(yaml.safe_load_all(out.stdout))


def test_committed_k8s_tree_is_what_the_code_generates(tmp_path: Path) -> None:
    k8s.write_tree(tmp_path)
    generated = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*")
                 if p.suffix in (".yaml", ".json")}  # the dashboard (overlays/monitoring)
    committed = {p.relative_to(REPO / "k8s"): p.read_text()
                 for p in (REPO / "k8s").rglob("*") if p.suffix in (".yaml", ".json")
                 and not p.name.startswith(".")}  # the linters' configs (.checkov.yaml)
    assert generated == committed, ("k8s/ is stale: python -m weeble.orchestrator.backends"
                                    ".kubernetes")


@pytest.mark.parametrize("overlay", sorted(k8s.OVERLAYS))
def test_overlay_renders_valid_objects_equal_to_the_backends(overlay: str) -> None:
    rendered = kustomize(overlay)
    scenario = load_scenario(REPO / k8s.OVERLAYS[overlay])
    n = len(scenario.build_topology().brokers)
    kinds = [o["kind"] for o in rendered]
    assert kinds.count("NetworkPolicy") == n + 2  # one per broker, default deny, orchestrator
    for kind in ("Namespace", "Service", "StatefulSet", "PodDisruptionBudget"):
        assert kinds.count(kind) == 1, kinds
    # the configs: as many ConfigMaps as fit the client-side apply annotation, all mounted
    shards = [o for o in rendered if o["kind"] == "ConfigMap"]
    assert sum(len(o["data"]) for o in shards) == n + 1  # and topology.json
    assert all(len(json.dumps(o)) < 262_144 for o in shards)
    assert "Secret" not in kinds  # each deployment makes its own (weeble k8s secrets)
    for obj in rendered:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)  # raises if invalid
        model = client.ApiClient()._ApiClient__deserialize(obj, MODELS[obj["kind"]])
        assert client.ApiClient().sanitize_for_serialization(model) == obj  # no unknown field
    statefulset = next(o for o in rendered if o["kind"] == "StatefulSet")
    assert statefulset["spec"]["replicas"] == n
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["grpc"] and container["livenessProbe"]["grpc"]
    # sized from measurement for this topology's queues, the trace cap inside its volume
    resources, volume = k8s.sizing([c.model_copy(update={"tuning": c.tuning.model_copy(
        update=k8s.K8S_TUNING)}) for c in _configs(scenario)])
    assert container["resources"] == resources
    limit = _bytes(resources["limits"]["memory"])
    assert limit >= k8s.BASE_RSS + 1.28 * (2 * 16 * k8s.MIB)  # measured: 122 MiB at 2 x 16
    traces = next(v for v in statefulset["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "traces")
    assert traces["emptyDir"]["sizeLimit"] == volume
    assert _bytes(volume) > k8s.K8S_TUNING["trace_max_bytes"]
    assert container["startupProbe"]["grpc"]["port"] == 7000
    for key, text in ((k, v) for o in shards for k, v in o["data"].items()):
        if key != "topology.json":
            tuning = json.loads(text)["tuning"]
            assert {k: tuning[k] for k in k8s.K8S_TUNING} == k8s.K8S_TUNING, key
    # the image by kustomize's `images:` (a user's overlay points it at their registry)
    assert container["image"] == k8s.RELEASE_IMAGE and not k8s.RELEASE_IMAGE.endswith("latest")
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/instance"] == overlay
    # the backend applies the same objects, and the run's own Secret
    ours = [o for o in k8s.scenario_manifests(
        scenario, instance=overlay, namespace=f"weeble-{overlay}", image=k8s.RELEASE_IMAGE,
        tokens=TOKENS) if o["kind"] != "Secret"]
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(map(json.dumps, (_sorted(o) for o in rendered))) == \
        sorted(map(json.dumps, (_sorted(o) for o in ours)))
    assert {key(o) for o in rendered} == {key(o) for o in ours}


def _bytes(quantity: str) -> int:
    assert quantity.endswith("Mi"), quantity
    return int(quantity[:-2]) * k8s.MIB


def _configs(scenario: Any) -> list[Any]:
    objects = k8s.scenario_manifests(scenario, instance="x", namespace="weeble-x",
                                     image=k8s.RELEASE_IMAGE, tokens=TOKENS)
    from weeble.runtime.config import BrokerConfig

    return [BrokerConfig.model_validate_json(v) for o in objects if o["kind"] == "ConfigMap"
            for k, v in o["data"].items() if k != "topology.json"]


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


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class _Api(BaseHTTPRequestHandler):
    """An API endpoint on loopback that keeps what it is sent and answers like an API server
    for the calls the backend makes (pods are Running; a deleted pod comes back with a new
    uid, as the StatefulSet would make it)."""

    store: dict[str, Any]
    log: list[tuple[str, str, Any]]
    patch_types: list[str | None]

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
        if self.path.endswith("/scale"):
            self._reply(200, {"kind": "Scale", "apiVersion": "autoscaling/v1",
                              "spec": body["spec"]})
            return
        # a merge patch (RFC 7386: null deletes a key), as the API server applies it to data
        self.patch_types.append(self.headers.get("Content-Type"))
        self.store[self.path] = _merge(self.store.get(self.path, {}), body)
        self._reply(200, self.store[self.path])

    def do_DELETE(self) -> None:
        body = self._body()
        self.log.append(("DELETE", self.path, body))
        gone = self.store.pop(self.path, None)
        name = self.path.rsplit("/", 1)[1]
        if "/pods/" in self.path or self.path.count("/") == 4:  # a pod, a namespace
            kind = "Pod" if "/pods/" in self.path else "Namespace"
            self._reply(200, {"kind": kind, "apiVersion": "v1", "metadata": {
                "name": name, **({"uid": gone["uid"]} if gone and "uid" in gone else {})}})
        elif gone is None:
            self._reply(404, {"kind": "Status", "apiVersion": "v1", "code": 404})
        elif "/services/" in self.path:  # the API server answers with the deleted Service
            self._reply(200, gone)
        else:
            self._reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

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
    handler = type("Api", (_Api,), {"store": {}, "log": [], "patch_types": []})
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

    backend.stop_all()
    assert recorder.log[-1][:2] == ("PATCH",
                                    f"/apis/apps/v1/namespaces/{ns}/statefulsets/broker/scale")
    backend.teardown()
    assert recorder.log[-1][:2] == ("DELETE", f"/api/v1/namespaces/{ns}")
    backend.close()


# ---- a run that reshapes its tree ---------------------------------------------------------------

LINK, ADMIN = 7000, 7001
RUN_NS = "weeble-run-1"
CM = f"/api/v1/namespaces/{RUN_NS}/configmaps/broker-configs"
NP = f"/apis/networking.k8s.io/v1/namespaces/{RUN_NS}/networkpolicies"
STS = f"/apis/apps/v1/namespaces/{RUN_NS}/statefulsets"


def _dns(pod_name: str) -> str:
    return f"{pod_name}.brokers.{RUN_NS}.svc.cluster.local:{LINK}"


def _changes(recorder: type[_Api], since: int) -> list[tuple[str, str, Any]]:
    """What the backend asked the API server to change (reads left out)."""
    return [(m, p.split("?")[0], b) for m, p, b in recorder.log[since:] if m != "GET"]


def _policies(recorder: type[_Api]) -> list[dict[str, Any]]:
    return [o for p, o in recorder.store.items() if p.startswith(NP + "/")]


def _admitted(recorder: type[_Api], backend: k8s.KubernetesBackend, port: int
              ) -> set[tuple[str, str]]:
    """Every (from, to) pair of the run's brokers the stored policies admit on `port`."""
    brokers = backend.brokers()
    return {(y, x) for x in brokers for y in brokers if x != y and k8s.admits(
        _policies(recorder), backend.pod_labels(x), backend.pod_labels(y), port)}


def _kubeconfig(api_client: Any, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "rec",
        "clusters": [{"name": "rec", "cluster": {"server": api_client.configuration.host}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "rec", "context": {"cluster": "rec", "user": "u"}}]}))
    return path


@pytest.fixture
def kubeconfig(api: tuple[Any, type[_Api]], tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """KUBECONFIG naming the recording endpoint: the backend finds it as it would a cluster."""
    path = _kubeconfig(api[0], tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    default = client.Configuration.get_default_copy()
    try:
        yield path
    finally:
        client.Configuration.set_default(default)


def _bed(tmp_path: Path, *, reconfigurable: bool = True, **extra: Any) -> Any:
    from tests.runtime.livebed import scenario
    from weeble.orchestrator.testbed import Testbed

    # the live tests' 7-broker binary tree: b0; b1, b2; b3, b4 under b1; b5, b6 under b2
    s = scenario(live={"startup_timeout": 1, "listen_port": LINK, "admin_port": ADMIN},
                 **extra)
    bed = Testbed.plan(s, runs_dir=tmp_path / "runs", run_id="Run_1", backend="k8s",
                       reconfigurable=reconfigurable)
    for config in bed.configs.values():  # what `up` does before it waits for the pods
        bed.backend.start_broker(config)
    bed.state = "up"
    bed.backend.detach()
    bed.save_state()
    return bed


def test_a_run_that_reshapes_its_tree_admits_every_broker_and_follows_the_tree(
        api: tuple[Any, type[_Api]], kubeconfig: Path, tmp_path: Path) -> None:
    from weeble.core.reconfig.plan import Tree

    _, recorder = api
    bed = _bed(tmp_path)
    backend = bed.backend
    assert isinstance(backend, k8s.KubernetesBackend) and bed.reconfigures
    brokers = [f"b{i}" for i in range(7)]
    # the address book: every other broker's stable DNS name (the headless Service)
    assert bed.configs["b3"].peers == {b: _dns(f"broker-{b[1:]}") for b in brokers
                                       if b not in ("b3", "b1")}
    assert bed.configs["b3"].neighbors == {"b1": _dns("broker-1")}
    cm = recorder.store[CM]
    assert json.loads(cm["data"]["broker-3.json"])["peers"]["b6"] == _dns("broker-6")
    # each link port admits any other broker of the run (the address book's reach), the
    # admin port none of them; the orchestrator reaches both; a pod of another run neither
    every = {(x, y) for x in brokers for y in brokers if x != y}
    assert _admitted(recorder, backend, LINK) == every
    assert _admitted(recorder, backend, ADMIN) == set()
    orchestrator = k8s.labels("run-1", "orchestrator")
    stranger = {**backend.pod_labels("b1"), "app.kubernetes.io/instance": "other"}
    for port in (LINK, ADMIN):
        assert k8s.admits(_policies(recorder), backend.pod_labels("b0"), orchestrator, port)
        assert not k8s.admits(_policies(recorder), backend.pod_labels("b0"), stranger, port)
    for obj in _policies(recorder):  # what the API server would take
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)

    # an exchange (b3's subtree from b1 to b2), as the manager or the optimizer makes it:
    # the ends' configs in the ConfigMap follow (a restarted pod boots with its neighbours
    # and parent of now); no policy changes, since every broker is admitted already
    mark = len(recorder.log)
    bed.tree_changed(Tree.of([e for e in bed.edges if e != ("b1", "b3")] + [("b2", "b3")],
                             ["b0"]))
    changes = _changes(recorder, mark)
    assert [(m, p, sorted(b["data"])) for m, p, b in changes] == [
        ("PATCH", CM, ["broker-1.json", "broker-3.json", "topology.json"]),
        ("PATCH", CM, ["broker-2.json", "broker-3.json", "topology.json"]),
        ("PATCH", CM, ["broker-3.json", "topology.json"])]  # b3's parent: b2 now
    data = recorder.store[CM]["data"]
    assert json.loads(data["broker-3.json"])["neighbors"] == {"b2": _dns("broker-2")}
    assert json.loads(data["broker-3.json"])["parent"] == "b2"
    assert "b3" not in json.loads(data["broker-1.json"])["neighbors"]
    edges = json.loads(data["topology.json"])["edges"]
    assert ["b2", "b3"] in edges and ["b1", "b3"] not in edges
    assert "merge-patch" in str(recorder.patch_types[-1])  # null deletes a key below

    # a cut is each end's policy, for a planned link and a link made at run time alike
    for a, b in (("b0", "b1"), ("b2", "b3")):
        mark = len(recorder.log)
        backend.cut_link(a, b)
        changes = _changes(recorder, mark)
        assert [(m, p) for m, p, _ in changes] == [
            ("PUT", f"{NP}/link-broker-{a[1:]}"), ("PUT", f"{NP}/link-broker-{b[1:]}")]
        assert changes[0][2]["spec"]["ingress"][0]["from"][0]["podSelector"][
            "matchExpressions"] == [{"key": k8s.POD_LABEL, "operator": "NotIn",
                                     "values": sorted([f"broker-{a[1:]}", f"broker-{b[1:]}"])}]
        assert _admitted(recorder, backend, LINK) == every - {(a, b), (b, a)}
        state = backend.link_state(a, b)
        assert state.cut and state.ends == {a: f"denies {b}", b: f"denies {a}"}
        backend.heal_link(a, b)
        assert _admitted(recorder, backend, LINK) == every
        assert not backend.link_state(a, b).cut


def test_leaf_add_and_remove_from_another_process(
        api: tuple[Any, type[_Api]], kubeconfig: Path, tmp_path: Path) -> None:
    from weeble.orchestrator.testbed import Testbed

    _, recorder = api
    _bed(tmp_path)
    # `weeble reconfigure` attaches to the run as any other process would (KUBECONFIG)
    bed = Testbed.attach("Run_1", runs_dir=tmp_path / "runs")
    backend = bed.backend
    assert isinstance(backend, k8s.KubernetesBackend) and bed.reconfigures
    brokers = [f"b{i}" for i in range(7)]

    mark = len(recorder.log)
    with pytest.raises(BackendError, match=r"b7 not serving after 1s at leaf-b7-0\.brokers\."
                                           r"weeble-run-1\.svc\.cluster\.local:7000"):
        bed.add_broker("b7", "b5")  # no pod runs here: its DNS name answers nothing
    changes = _changes(recorder, mark)
    # its config and its parent's (which now names it) first, then its link policy and its
    # StatefulSet of one; then every other broker's config learns its address
    assert [(m, p) for m, p, _ in changes[:3]] == [
        ("PATCH", CM), ("POST", NP), ("POST", STS)]
    assert sorted(changes[0][2]["data"]) == ["broker-5.json", "leaf-b7-0.json",
                                             "topology.json"]
    assert [sorted(b["data"]) for _, _, b in changes[3:]] == [
        [f"broker-{i}.json", "topology.json"] for i in (0, 1, 2, 3, 4, 6)]
    leaf = json.loads(recorder.store[CM]["data"]["leaf-b7-0.json"])
    assert leaf["neighbors"] == {"b5": _dns("broker-5")} and leaf["parent"] == "b5"
    assert leaf["listen_address"] == f"0.0.0.0:{LINK}"
    assert leaf["peers"] == {b: _dns(f"broker-{b[1:]}") for b in brokers if b != "b5"}
    assert leaf["admin_token"] == k8s.TOKEN_PLACEHOLDER  # the Secret's, as every pod's
    data = recorder.store[CM]["data"]
    assert json.loads(data["broker-5.json"])["neighbors"]["b7"] == _dns("leaf-b7-0")
    assert json.loads(data["broker-0.json"])["peers"]["b7"] == _dns("leaf-b7-0")
    sset = changes[2][2]
    main = recorder.store[f"{STS}/broker"]
    assert sset["metadata"]["name"] == "leaf-b7" and sset["spec"]["replicas"] == 1
    assert sset["spec"]["selector"]["matchLabels"]["weeble/set"] == "leaf-b7"
    assert main["spec"]["selector"]["matchLabels"]["weeble/set"] == "broker"  # no overlap
    assert sset["spec"]["template"]["spec"] == main["spec"]["template"]["spec"]
    assert sset["spec"]["serviceName"] == "brokers"  # its DNS name
    for obj in (sset, changes[1][2]):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    every = {(x, y) for x in [*brokers, "b7"] for y in [*brokers, "b7"] if x != y}
    assert _admitted(recorder, backend, LINK) == every
    assert Testbed.attach("Run_1", runs_dir=tmp_path / "runs").backend.pod_labels("b7")[
        k8s.POD_LABEL] == "leaf-b7-0"  # the state file knows its pod

    # removals: a planned broker leaves only from the top of its StatefulSet
    with pytest.raises(BackendError, match="removes only its highest ordinal \\(now b6"):
        bed.check_remove("b3")
    mark = len(recorder.log)
    bed.remove_broker("b7")
    changes = _changes(recorder, mark)
    assert [(m, p) for m, p, _ in changes] == [
        ("DELETE", f"{STS}/leaf-b7"), ("DELETE", f"{NP}/link-leaf-b7-0"), ("PATCH", CM)]
    assert changes[2][2]["data"]["leaf-b7-0.json"] is None  # dropped
    assert "leaf-b7-0.json" not in recorder.store[CM]["data"]
    assert "b7" not in json.loads(recorder.store[CM]["data"]["broker-5.json"])["neighbors"]
    mark = len(recorder.log)
    bed.remove_broker("b6")
    changes = _changes(recorder, mark)
    assert [(m, p, b) for m, p, b in changes[:2]] == [
        ("PATCH", f"{STS}/broker/scale", {"spec": {"replicas": 6}}),
        ("DELETE", f"{NP}/link-broker-6", None)]
    assert sorted(changes[2][2]["data"]) == ["broker-2.json", "broker-6.json", "topology.json"]
    bed.check_remove("b5")  # the top now
    assert _admitted(recorder, backend, LINK) == {
        (x, y) for x in brokers[:6] for y in brokers[:6] if x != y}


def test_weeble_reconfigure_reaches_the_pods_by_their_dns_names(
        api: tuple[Any, type[_Api]], kubeconfig: Path, tmp_path: Path) -> None:
    import os
    import sys

    _bed(tmp_path)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "weeble.cli", "reconfigure", "--run", "Run_1",
                               "--runs-dir", str(tmp_path / "runs"), *args],
                              # the CLI's own --timeout (120 s): 20 s ran out at load 30
                              capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
                              check=False)

    out = cli("remove-leaf", "b3")  # refused before b3 leaves the tree
    assert out.returncode == 2, out
    assert "b3 is pod broker-3 of StatefulSet broker" in out.stderr
    out = cli("add-leaf", "b7", "b5")  # its pod is asked for; no cluster answers its name
    assert out.returncode == 1, out
    assert "b7 not serving after 1s at leaf-b7-0.brokers.weeble-run-1.svc.cluster.local:7000" \
        in out.stdout
    posted = [p.split("?")[0] for m, p, _ in api[1].log if m == "POST"]
    assert posted[-2:] == [f"{NP}", f"{STS}"]  # by the other process, through KUBECONFIG
    assert api[1].store[f"{STS}/leaf-b7"]["spec"]["replicas"] == 1


def test_the_optimizer_plans_on_k8s_with_an_address_book(
        api: tuple[Any, type[_Api]], kubeconfig: Path, tmp_path: Path) -> None:
    # the optimizer's exchanges are decided by the brokers: every broker must reach every
    # other (before, planning refused: "this backend gives the brokers no address book")
    bed = _bed(tmp_path, reconfigurable=False, topology={"kind": "chain", "brokers": 4},
               algorithm="simple",
               optimizer={"heuristic": "ci", "link_costs": {"model": "uniform", "max": 1.0},
                          "processing_costs": {"model": "constant", "max": 1.0}})
    assert bed.reconfigures
    assert bed.configs["b0"].peers == {f"b{i}": _dns(f"broker-{i}") for i in (2, 3)}
    brokers = [f"b{i}" for i in range(4)]
    assert _admitted(api[1], bed.backend, LINK) == {
        (x, y) for x in brokers for y in brokers if x != y}
