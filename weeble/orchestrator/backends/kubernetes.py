"""KubernetesBackend and the manifests of `k8s/`: brokers as a StatefulSet, driven through the
official Kubernetes Python client.

One function, `manifests`, turns a scenario's broker configs into every object of a
deployment; the backend applies exactly those, and `render_overlay` writes them as the files of
a kustomize overlay (k8s/overlays/<name>, beside the shared k8s/base), so `kubectl kustomize`
and the backend deploy the same thing (tests/backends/test_kubernetes.py checks it).

    StatefulSet broker      pods broker-0..N-1, stable names; pod i runs the scenario's i-th
                            broker from ConfigMap key broker-i.json; Parallel start
    Service brokers         headless: broker-i.brokers.<ns>.svc.cluster.local, the address
                            every neighbour dials (published before ready: peers dial early)
    ConfigMap broker-configs  the topology: each broker's config (its ROM), and topology.json
    Secret broker-tokens    the admin and link tokens and the client secret, given to the
                            broker as environment (`--tokens-from-env`): configs in a
                            ConfigMap hold no secret
    PodDisruptionBudget     at most one broker down by a voluntary disruption
    NetworkPolicies         default deny; the orchestrator (pods labelled component
                            orchestrator) to the client, admin and metrics ports; per broker,
                            its overlay neighbours to its link port, and no one else
    probes                  gRPC health (readiness and liveness) on the link port

Faults: a crash deletes the pod (the StatefulSet starts a fresh one: empty RAM); a cut takes
each end out of the other's link NetworkPolicy; a pause SIGSTOPs the broker through exec
(the pod shares its process namespace, so the broker is not pid 1, which ignores SIGSTOP).
Traces are read from the pods (exec), logs from the API.

No cluster runs on the machines this project is built on: the manifests are validated offline
(kubectl kustomize, the Kubernetes JSON schemas of a pinned version, the client's models) and
the backend's calls run against the client; what was not exercised is said in the README.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from weeble.broker.runtime.config import BrokerConfig
from weeble.orchestrator.backend import (
    AdminAccess,
    BackendError,
    BrokerAddress,
    BrokerState,
    LinkShapeChange,
    LinkState,
    Placement,
    Ports,
)
from weeble.orchestrator.backends.image import PYTHON
from weeble.orchestrator.local import LocalBackend, wait_serving

VERSION = "0.1.0"
STATEFULSET, SERVICE = "broker", "brokers"
CONFIGS, TOKENS = "broker-configs", "broker-tokens"
CONFIG_DIR, TRACE_DIR = "/etc/weeble/brokers", "/var/lib/weeble/traces"
TOKEN_PLACEHOLDER = "from-secret-broker-tokens"  # the config's token: the Secret's wins
DEFAULT_LISTEN, DEFAULT_ADMIN, DEFAULT_METRICS = 7000, 7001, 9100


def pod(i: int) -> str:
    return f"{STATEFULSET}-{i}"


def labels(instance: str, component: str = "broker") -> dict[str, str]:
    return {"app.kubernetes.io/name": "weeble", "app.kubernetes.io/instance": instance,
            "app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "weeble",
            "app.kubernetes.io/version": VERSION}


def _selector(instance: str) -> dict[str, str]:
    return {k: v for k, v in labels(instance).items()
            if k in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                     "app.kubernetes.io/component")}


def dns(i: int, namespace: str) -> str:
    return f"{pod(i)}.{SERVICE}.{namespace}.svc.cluster.local"


def link_policy(instance: str, i: int, neighbours: list[int], listen: int) -> dict[str, Any]:
    """Who may open broker i's link port: its overlay neighbours, no one else."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": f"link-{pod(i)}", "labels": labels(instance, "link")},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/instance": instance,
                                            "statefulset.kubernetes.io/pod-name": pod(i)}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"podSelector": {"matchExpressions": [{
                    "key": "statefulset.kubernetes.io/pod-name", "operator": "In",
                    "values": [pod(j) for j in sorted(neighbours)]}]}}],
                "ports": [{"protocol": "TCP", "port": listen}]}] if neighbours else []}}


def manifests(configs: list[BrokerConfig], *, instance: str, namespace: str, image: str,
              ports: tuple[int, int, int | None], tokens: tuple[str, str, str],
              edges: list[tuple[str, str]], root: str) -> list[dict[str, Any]]:
    """Every object of a deployment of these brokers (pod i runs configs[i])."""
    listen, admin, metrics = ports
    index = {c.broker_id: i for i, c in enumerate(configs)}
    n = len(configs)
    lab, sel = labels(instance), _selector(instance)
    container_ports = [{"name": "link", "containerPort": listen, "protocol": "TCP"},
                       {"name": "admin", "containerPort": admin, "protocol": "TCP"}]
    if metrics is not None:
        container_ports.append({"name": "metrics", "containerPort": metrics, "protocol": "TCP"})
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": labels(instance, "namespace")}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": CONFIGS, "labels": labels(instance, "topology")},
         "data": {**{f"{pod(i)}.json": c.model_copy(update={
             "admin_token": TOKEN_PLACEHOLDER, "link_token": TOKEN_PLACEHOLDER,
             "client_secret": None if c.client_secret is None else TOKEN_PLACEHOLDER}).to_json()
             for i, c in enumerate(configs)},
             "topology.json": json.dumps({"root": root, "brokers": {
                 c.broker_id: pod(i) for i, c in enumerate(configs)},
                 "edges": [list(e) for e in edges]}, indent=2)}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": TOKENS, "labels": labels(instance, "tokens")},
         "stringData": {"admin-token": tokens[0], "link-token": tokens[1],
                        "client-secret": tokens[2]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "labels": lab},
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": sel,
                  "ports": [{"name": p["name"], "port": p["containerPort"],
                             "targetPort": p["name"], "protocol": "TCP"}
                            for p in container_ports]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": STATEFULSET, "labels": lab},
         "spec": {
             "serviceName": SERVICE, "replicas": n, "podManagementPolicy": "Parallel",
             "selector": {"matchLabels": sel},
             "template": {
                 "metadata": {"labels": lab},
                 "spec": {
                     # the broker must not be pid 1 (which ignores SIGSTOP): a pause works
                     "shareProcessNamespace": True,
                     "terminationGracePeriodSeconds": 15,
                     "containers": [{
                         "name": "broker", "image": image, "imagePullPolicy": "IfNotPresent",
                         "command": [PYTHON],
                         "args": ["-m", "weeble.broker.runtime", "--tokens-from-env",
                                  "--config", f"{CONFIG_DIR}/$(POD_NAME).json"],
                         "env": [
                             {"name": "POD_NAME",
                              "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                             {"name": "WEEBLE_ADMIN_TOKEN", "valueFrom": {"secretKeyRef": {
                                 "name": TOKENS, "key": "admin-token"}}},
                             {"name": "WEEBLE_LINK_TOKEN", "valueFrom": {"secretKeyRef": {
                                 "name": TOKENS, "key": "link-token"}}},
                             {"name": "WEEBLE_CLIENT_SECRET", "valueFrom": {"secretKeyRef": {
                                 "name": TOKENS, "key": "client-secret"}}},
                             {"name": "PYTHONUNBUFFERED", "value": "1"}],
                         "ports": container_ports,
                         "readinessProbe": {"grpc": {"port": listen}, "periodSeconds": 2,
                                            "failureThreshold": 3},
                         "livenessProbe": {"grpc": {"port": listen}, "periodSeconds": 10,
                                           "initialDelaySeconds": 10, "failureThreshold": 6},
                         "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                       "limits": {"cpu": "500m", "memory": "128Mi"}},
                         "volumeMounts": [{"name": "configs", "mountPath": CONFIG_DIR,
                                           "readOnly": True},
                                          {"name": "traces", "mountPath": TRACE_DIR}]}],
                     "volumes": [{"name": "configs", "configMap": {"name": CONFIGS}},
                                 {"name": "traces", "emptyDir": {}}]}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": STATEFULSET, "labels": lab},
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": sel}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "broker-default-deny", "labels": labels(instance, "policy")},
         "spec": {"podSelector": {"matchLabels": sel}, "policyTypes": ["Ingress"],
                  "ingress": []}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "broker-orchestrator", "labels": labels(instance, "policy")},
         "spec": {"podSelector": {"matchLabels": sel}, "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": {"matchLabels": {
                      "app.kubernetes.io/instance": instance,
                      "app.kubernetes.io/component": "orchestrator"}}}],
                      "ports": [{"protocol": "TCP", "port": p["containerPort"]}
                                for p in container_ports]}]}},
    ]
    for c in configs:
        objects.append(link_policy(instance, index[c.broker_id],
                                   [index[m] for m in c.neighbors], listen))
    for obj in objects[1:]:
        obj["metadata"]["namespace"] = namespace
    return objects


def scenario_manifests(scenario: Any, *, instance: str, namespace: str, image: str,
                       tokens: tuple[str, str, str]) -> list[dict[str, Any]]:
    """`manifests` for a scenario, as `weeble up --backend k8s` would lay it out."""
    from weeble.orchestrator.testbed import broker_configs

    topology = scenario.build_topology()
    brokers = list(topology.brokers)
    edges = [(a, b) for a, b in topology.links]
    layout = _Layout(brokers, namespace, _ports(scenario.live))
    configs = broker_configs(scenario, layout.places, layout.peer_address,
                             admin_token=TOKEN_PLACEHOLDER, link_token=TOKEN_PLACEHOLDER,
                             client_secret=None if scenario.live.open_clients
                             else TOKEN_PLACEHOLDER,
                             tls=None, trace_path=lambda b: Path(TRACE_DIR) / f"{b}.jsonl")
    return manifests(list(configs.values()), instance=instance, namespace=namespace,
                     image=image, ports=layout.ports, tokens=tokens, edges=edges,
                     root=scenario.root_broker)


def _ports(live: Any) -> tuple[int, int, int | None]:
    return (live.listen_port or DEFAULT_LISTEN, live.admin_port or DEFAULT_ADMIN,
            live.metrics_port)


class _Layout:
    """Where brokers are in a namespace: pod i of the StatefulSet, its stable DNS name."""

    def __init__(self, brokers: list[str], namespace: str,
                 ports: tuple[int, int, int | None]) -> None:
        self.index = {b: i for i, b in enumerate(brokers)}
        self.namespace = namespace
        self.ports = ports
        listen, admin, metrics = ports
        self.places: dict[str, Placement] = {}
        for b, i in self.index.items():
            host = dns(i, namespace)
            reach = BrokerAddress(b, f"{host}:{listen}", f"{host}:{admin}",
                                  None if metrics is None else f"{host}:{metrics}")
            # a pod's address is not known before it runs: bind every interface (the
            # NetworkPolicies say who may connect)
            self.places[b] = Placement(f"0.0.0.0:{listen}", f"0.0.0.0:{admin}",
                                       None if metrics is None else f"0.0.0.0:{metrics}",
                                       reach)

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        return self.places[broker_id].reach.listen


def render_overlay(scenario: Any, name: str, *, image: str = "weeble-broker:latest") -> dict[
        str, str]:
    """The files of k8s/overlays/<name>: the scenario's topology and link policies, over the
    shared base. Tokens are placeholders: set real ones before deploying (README)."""
    namespace = f"weeble-{name}"
    objects = scenario_manifests(scenario, instance=name, namespace=namespace, image=image,
                                 tokens=("change-me-admin-token-0123456789",
                                         "change-me-link-token",
                                         "change-me-client-secret-0123456789"))
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    base_policies = ("broker-default-deny", "broker-orchestrator")
    files = {
        "namespace.yaml": _yaml(by_kind["Namespace"]),
        "topology.yaml": _yaml(by_kind["ConfigMap"]),
        "tokens.yaml": _yaml(by_kind["Secret"]),
        "link-policies.yaml": _yaml([o for o in by_kind["NetworkPolicy"]
                                     if o["metadata"]["name"] not in base_policies]),
    }
    statefulset = by_kind["StatefulSet"][0]
    files["kustomization.yaml"] = yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": namespace,
        "labels": [{"pairs": {"app.kubernetes.io/instance": name}, "includeSelectors": True,
                    "includeTemplates": True}],
        "resources": ["../../base", *sorted(f for f in files if f != "kustomization.yaml")],
        "replicas": [{"name": STATEFULSET, "count": statefulset["spec"]["replicas"]}],
        "images": [{"name": "weeble-broker", "newName": image.split(":")[0],
                    "newTag": image.split(":")[1]}],
    }, sort_keys=False)
    return {k: _HEADER.format(name=name) + v for k, v in files.items()}


def render_base() -> dict[str, str]:
    """The files of k8s/base: what every deployment shares (the objects of `manifests` that do
    not depend on the topology), with instance `base` and namespace left to the overlay."""
    from weeble.model.scenario import parse_scenario

    one = parse_scenario({"name": "base", "duration": 1,
                          "topology": {"kind": "chain", "brokers": 1},
                          "routing": {"algorithm": "identity"},
                          "timing": {"pi": 2, "rho": 1, "delta_min": 0, "delta_max": 0.1}},
                         source="<k8s base>")
    objects = scenario_manifests(one, instance="base", namespace="default",
                                 image="weeble-broker:latest",
                                 tokens=("x" * 16, "x", "x" * 16))
    keep = [o for o in objects if o["kind"] in ("Service", "StatefulSet", "PodDisruptionBudget")
            or o["metadata"]["name"] in ("broker-default-deny", "broker-orchestrator")]
    for obj in keep:
        del obj["metadata"]["namespace"]
        _strip_instance(obj)
    files = {f"{o['kind'].lower()}-{o['metadata']['name']}.yaml": _yaml([o]) for o in keep}
    files["kustomization.yaml"] = yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": sorted(files)}, sort_keys=False)
    return {k: _HEADER.format(name="base") + v for k, v in files.items()}


def _strip_instance(obj: Any) -> None:
    """The base carries no instance label: each overlay adds its own (kustomize `labels`)."""
    if isinstance(obj, dict):
        for key in ("labels", "matchLabels"):
            if isinstance(obj.get(key), dict):
                obj[key].pop("app.kubernetes.io/instance", None)
        for value in obj.values():
            _strip_instance(value)
    elif isinstance(obj, list):
        for value in obj:
            _strip_instance(value)


_HEADER = ("# Generated by `python -m weeble.orchestrator.backends.kubernetes` ({name});"
           " do not edit:\n# tests/backends/test_kubernetes.py fails when it is stale.\n")


def _yaml(objects: list[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(o, sort_keys=False) for o in objects)


OVERLAYS = {"small": "scenarios/quickstart.yaml", "paper121": "scenarios/seed000.yaml"}


def write_tree(root: Path) -> list[Path]:
    """(Re)write k8s/base and k8s/overlays/* from the code; returns the files written."""
    from weeble.model.scenario import load_scenario

    repo = Path(__file__).resolve().parents[3]
    written = []
    trees = {root / "base": render_base()}
    for name, scenario in OVERLAYS.items():
        trees[root / "overlays" / name] = render_overlay(load_scenario(repo / scenario), name)
    for folder, files in trees.items():
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.yaml"):
            if old.name not in files:
                old.unlink()
        for fname, text in files.items():
            (folder / fname).write_text(text)
            written.append(folder / fname)
    return written


# ---- the backend ------------------------------------------------------------------------------


class KubernetesBackend(LocalBackend):
    """Brokers as the pods of a StatefulSet in a namespace of their own, per run.

    The orchestrator must reach the pods' DNS names (it runs in the cluster, labelled
    app.kubernetes.io/component=orchestrator); admin calls and the user-space link shaper are
    the local backend's, over those names."""

    name = "k8s"
    links_at_run_time = False
    assigns_addresses = True
    links_at_run_time_why = (
        "each pod's NetworkPolicy admits only its planned neighbours (the manifests are"
        " generated from the tree), and no cluster runs here to test a policy change under"
        " traffic; redeploy an overlay with the new tree instead")

    @property
    def reconfigurable(self) -> bool:
        return False

    def book_address(self, broker_id: str) -> str:
        raise BackendError(f"the k8s backend cannot link brokers at run time: "
                           f"{self.links_at_run_time_why}")

    def __init__(self, workdir: Path | str, access: AdminAccess, *, run_id: str,
                 log_level: str = "INFO", api: Any = None,
                 image: str = "weeble-broker:latest") -> None:
        super().__init__(workdir, access, log_level=log_level)
        self.instance = run_id.lower().replace("_", "-")[:40].strip("-")
        self.namespace = f"weeble-{self.instance}"[:63].strip("-")
        self.image = image
        self._api = api  # the kubernetes.client.ApiClient to use
        self._layout: _Layout | None = None
        self._edges: list[tuple[str, str]] = []
        self._root = ""
        self._applied = False
        self._cut: set[frozenset[str]] = set()

    @classmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> KubernetesBackend:
        return cls(Path(run_dir) / "brokers", access, run_id=run_id, log_level=log_level,
                   api=api_client())

    @classmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any]) -> KubernetesBackend:
        backend = cls(Path(run_dir) / "brokers", access, run_id=state.get("instance", "run"),
                      api=api_client())
        backend.namespace = state.get("namespace", backend.namespace)
        backend._detached = True
        backend._applied = True
        backend._configs.update(configs)
        backend._layout = _Layout(list(configs), backend.namespace,
                                  tuple(state.get("ports", (DEFAULT_LISTEN, DEFAULT_ADMIN,
                                                            None))))  # type: ignore[arg-type]
        backend._reach = {b: p.reach for b, p in backend._layout.places.items()}
        return backend

    def state(self) -> dict[str, Any]:
        return {"instance": self.instance, "namespace": self.namespace,
                "ports": list(self._layout.ports) if self._layout else None}

    # the client's API groups
    def _core(self) -> Any:
        from kubernetes import client
        return client.CoreV1Api(self._api)

    def _apps(self) -> Any:
        from kubernetes import client
        return client.AppsV1Api(self._api)

    def _net(self) -> Any:
        from kubernetes import client
        return client.NetworkingV1Api(self._api)

    def _policy(self) -> Any:
        from kubernetes import client
        return client.PolicyV1Api(self._api)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, **kw)
        except ApiException as e:
            raise BackendError(f"k8s: {what}: {e.status} {e.reason}") from None
        except Exception as e:  # no cluster: connection refused, no config
            raise BackendError(f"k8s: {what}: {e}") from None

    # ---- the network --------------------------------------------------------------------------

    def plan(self, brokers: list[str], edges: list[tuple[str, str]],
             ports: Ports) -> dict[str, Placement]:
        self._layout = _Layout(brokers, self.namespace,
                               (ports.listen or DEFAULT_LISTEN, ports.admin or DEFAULT_ADMIN,
                                (ports.metrics or DEFAULT_METRICS) if ports.metrics_enabled
                                else None))
        self._edges = list(edges)
        self._root = brokers[0] if brokers else ""
        self._reach = {b: p.reach for b, p in self._layout.places.items()}
        return dict(self._layout.places)

    def trace_path(self, run_trace_dir: Path, broker_id: str) -> Path:
        return Path(TRACE_DIR) / f"{broker_id}.jsonl"

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        if self._layout is None:
            raise BackendError("k8s: no plan yet")
        return self._layout.peer_address(broker_id, neighbor)

    def _index(self, broker_id: str) -> int:
        assert self._layout is not None
        try:
            return self._layout.index[broker_id]
        except KeyError:
            raise BackendError(f"unknown broker {broker_id!r}") from None

    def objects(self) -> list[dict[str, Any]]:
        """What this run applies: `manifests` of its configs, in pod order."""
        assert self._layout is not None
        ordered = sorted(self._configs.values(), key=lambda c: self._index(c.broker_id))
        root = next((c.root for c in ordered), self._root)
        return manifests(ordered, instance=self.instance, namespace=self.namespace,
                         image=self.image, ports=self._layout.ports,
                         tokens=(self.access.token, ordered[0].link_token if ordered else "",
                                 (ordered[0].client_secret or "") if ordered else ""),
                         edges=self._edges, root=root)

    def apply(self) -> None:
        """Create every object (the namespace first); the run's configs must all be there."""
        creators = {
            "Namespace": lambda o: self._core().create_namespace(o),
            "ConfigMap": lambda o: self._core().create_namespaced_config_map(self.namespace, o),
            "Secret": lambda o: self._core().create_namespaced_secret(self.namespace, o),
            "Service": lambda o: self._core().create_namespaced_service(self.namespace, o),
            "StatefulSet": lambda o: self._apps().create_namespaced_stateful_set(
                self.namespace, o),
            "PodDisruptionBudget": lambda o: self._policy()
                .create_namespaced_pod_disruption_budget(self.namespace, o),
            "NetworkPolicy": lambda o: self._net().create_namespaced_network_policy(
                self.namespace, o),
        }
        for obj in self.objects():
            self._call(f"create {obj['kind']} {obj['metadata']['name']}",
                       creators[obj["kind"]], obj)
        self._applied = True

    # ---- brokers ----------------------------------------------------------------------------

    def preflight(self, configs: list[BrokerConfig]) -> None:
        return

    def start_broker(self, config: BrokerConfig) -> None:
        """Record the config; the StatefulSet starts every pod once all configs are in (the
        ConfigMap holds them all), and a started pod restarts on its own after a crash."""
        self._configs[config.broker_id] = config
        assert self._layout is not None
        if not self._applied and len(self._configs) == len(self._layout.index):
            self.apply()

    def _pod(self, broker_id: str) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._core().read_namespaced_pod(pod(self._index(broker_id)),
                                                    self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise BackendError(f"k8s: pod of {broker_id}: {e.status} {e.reason}") from None
        except Exception as e:
            raise BackendError(f"k8s: pod of {broker_id}: {e}") from None

    def _exec(self, broker_id: str, code: str) -> str:
        """Run Python in the broker's container (exec); its stdout."""
        from kubernetes.stream import stream

        return str(self._call(
            f"exec in {pod(self._index(broker_id))}", stream,
            self._core().connect_get_namespaced_pod_exec, pod(self._index(broker_id)),
            self.namespace, container="broker", command=[PYTHON, "-c", code], stderr=True,
            stdin=False, stdout=True, tty=False))

    _SIGNAL = ("import os, signal\n"
               "for p in os.listdir('/proc'):\n"
               "    if p.isdigit() and int(p) != os.getpid():\n"
               "        try: cmd = open(f'/proc/{p}/cmdline', 'rb').read()\n"
               "        except OSError: continue\n"
               "        if cmd.startswith(b'" + PYTHON + "\\0-m\\0weeble.broker.runtime'):\n"
               "            {action}\n")

    def broker_state(self, broker_id: str) -> BrokerState:
        self._config(broker_id)
        p = self._pod(broker_id)
        if p is None:
            return BrokerState(broker_id, running=False, paused=False, handle=None,
                               detail="absent")
        phase = p.status.phase or "Unknown"
        running = phase == "Running"
        letter = ""
        if running:
            letter = self._exec(broker_id, self._SIGNAL.replace("{action}", (
                "print(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0])"))).strip()
        return BrokerState(broker_id, running=running, paused=letter == "T",
                           handle=p.metadata.uid, detail=f"{phase} {letter}".strip())

    def alive(self, broker_id: str) -> bool:
        p = self._pod(broker_id)
        return p is not None and p.status.phase == "Running" and \
            p.metadata.deletion_timestamp is None

    def handle(self, broker_id: str) -> str | None:
        p = self._pod(broker_id)
        return None if p is None else str(p.metadata.uid)

    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool = False) -> None:
        wait_serving(self.address(broker_id).listen, timeout, links=links, name=broker_id,
                     access=self.access,
                     alive=lambda: True)  # a pod that is not up yet is coming

    def pause_broker(self, broker_id: str) -> BrokerState:
        self._exec(broker_id, self._SIGNAL.replace("{action}",
                                                   "os.kill(int(p), signal.SIGSTOP)"))
        self._paused.add(broker_id)
        return self.broker_state(broker_id)

    def resume_broker(self, broker_id: str) -> BrokerState:
        self._exec(broker_id, self._SIGNAL.replace("{action}",
                                                   "os.kill(int(p), signal.SIGCONT)"))
        self._paused.discard(broker_id)
        return self.broker_state(broker_id)

    def kill_broker(self, broker_id: str) -> None:
        """Delete the pod at once (no grace): its RAM is gone; the StatefulSet makes anew."""
        from kubernetes import client

        uid = self.handle(broker_id)
        self._call(f"delete pod of {broker_id}", self._core().delete_namespaced_pod,
                   pod(self._index(broker_id)), self.namespace,
                   body=client.V1DeleteOptions(grace_period_seconds=0))
        deadline = time.monotonic() + 30
        while self.handle(broker_id) == uid and time.monotonic() < deadline:
            time.sleep(0.2)
        self._drop_admins([broker_id])

    def restart_broker(self, broker_id: str, timeout: float = 30.0) -> None:
        if self.alive(broker_id):
            self.kill_broker(broker_id)
        self.wait_healthy(broker_id, timeout)

    def stop_all(self, timeout: float = 10.0, *,
                 only: list[str] | None = None) -> dict[str, int | None]:
        """Scale the StatefulSet to zero: every pod gets SIGTERM and its grace period."""
        if only and set(only) != set(self._configs):
            raise BackendError("k8s: a StatefulSet stops all its brokers or none")
        self._call("scale to 0", self._apps().patch_namespaced_stateful_set_scale,
                   STATEFULSET, self.namespace, {"spec": {"replicas": 0}})
        self._drop_admins(list(self._configs))
        return dict.fromkeys(self._configs)

    def add_broker(self, config: BrokerConfig, *,
                   prepare: Callable[[BrokerConfig], BrokerConfig] | None = None
                   ) -> BrokerConfig:
        raise BackendError("k8s: adding a broker at run time is not supported (it needs the"
                           " ConfigMap, the link policies and the StatefulSet's replicas"
                           " changed together); redeploy the overlay")

    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        raise BackendError("k8s: removing a broker at run time is not supported; redeploy")

    def add_link(self, a: str, b: str) -> None:
        raise BackendError("k8s: adding a link at run time is not supported; redeploy")

    def remove_link(self, a: str, b: str) -> None:
        raise BackendError("k8s: removing a link at run time is not supported; redeploy")

    # ---- links ------------------------------------------------------------------------------

    def _policy_of(self, broker_id: str, allowed: list[str]) -> dict[str, Any]:
        assert self._layout is not None
        return link_policy(self.instance, self._index(broker_id),
                           [self._index(n) for n in allowed], self._layout.ports[0])

    def _set_allowed(self, a: str, b: str, cut: bool) -> None:
        key = frozenset((a, b))
        (self._cut.add if cut else self._cut.discard)(key)
        for x in (a, b):
            allowed = [n for n in self._config(x).neighbors
                       if frozenset((x, n)) not in self._cut]
            obj = self._policy_of(x, allowed)
            obj["metadata"]["namespace"] = self.namespace
            self._call(f"replace link policy of {x}",
                       self._net().replace_namespaced_network_policy,
                       obj["metadata"]["name"], self.namespace, obj)

    def cut_link(self, a: str, b: str) -> None:
        self._ends(a, b)
        self._set_allowed(a, b, cut=True)

    def heal_link(self, a: str, b: str) -> None:
        self._ends(a, b)
        self._set_allowed(a, b, cut=False)

    def link_state(self, a: str, b: str) -> LinkState:
        ends = {}
        for x, y in ((a, b), (b, a)):
            policy = self._call(f"read link policy of {x}",
                                self._net().read_namespaced_network_policy,
                                f"link-{pod(self._index(x))}", self.namespace)
            peers = [v for rule in policy.spec.ingress or [] for f in rule._from or []
                     for e in f.pod_selector.match_expressions or [] for v in e.values]
            ends[x] = f"admits {y}" if pod(self._index(y)) in peers else f"denies {y}"
        cut = all(v.startswith("denies") for v in ends.values())
        return LinkState(a, b, cut=cut, mechanism="network-policy", ends=ends)

    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        # everything in the brokers' user-space shaper: a pod's qdisc is the CNI's
        super().shape_link(a, b, change, both_ways=both_ways)

    # ---- results and the end ----------------------------------------------------------------

    def collect_traces(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for b, config in self._configs.items():
            if config.trace_path is None or not self.alive(b):
                continue
            text = self._exec(b, f"print(open({str(config.trace_path)!r}).read(), end='')")
            target = dest / f"{b}.jsonl"
            target.write_text(text)
            out.append(target)
        return out

    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        try:
            return str(self._call("logs", self._core().read_namespaced_pod_log,
                                  pod(self._index(broker_id)), self.namespace,
                                  container="broker", tail_lines=lines))
        except BackendError as e:
            return f"(no log: {e})"

    def collect_logs(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for b in self._configs:
            target = dest / f"{b}.log"
            target.write_text(self.log_tail(b, lines=100_000))
            out.append(target)
        return out

    def teardown(self) -> None:
        """Delete the run's namespace: every object of the run goes with it."""
        if self._applied:
            self._call("delete namespace", self._core().delete_namespace, self.namespace)
            self._applied = False
        self._drop_admins(list(self._admins))


def api_client() -> Any:
    """A client for the cluster of the kubeconfig (or the pod's service account)."""
    try:
        from kubernetes import client, config
    except ImportError as e:
        raise BackendError(f"k8s backend: the kubernetes client is missing ({e})") from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except Exception as e:
            raise BackendError(f"k8s backend: no cluster configured ({e}); run inside a"
                               " cluster or point KUBECONFIG at one") from None
    return client.ApiClient()


def main(argv: list[str] | None = None) -> int:
    """Write k8s/ (or the folder given) from the code."""
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[3] / "k8s"
    for path in write_tree(root):
        print(path)
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
