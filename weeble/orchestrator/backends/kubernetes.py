"""KubernetesBackend and the manifests of `k8s/`: brokers as a StatefulSet, driven through the
official Kubernetes Python client.

One function, `manifests`, turns a scenario's broker configs into every object of a
deployment; the backend applies exactly those, and `render_overlay` writes them as the files of
a kustomize overlay (k8s/overlays/<name>, beside the shared k8s/base), so `kubectl kustomize`
and the backend deploy the same thing (tests/orchestrator/test_kubernetes.py checks it).

    StatefulSet broker      pods broker-0..N-1, stable names; pod i runs the scenario's i-th
                            broker from ConfigMap key broker-i.json; Parallel start
    Service brokers         headless: broker-i.brokers.<ns>.svc.cluster.local, the address
                            every neighbour dials (published before ready: peers dial early)
    ConfigMap broker-configs  the topology: each broker's config (its ROM), and topology.json
    Secret broker-tokens    the admin and link tokens and the client secret, given to the
                            broker as environment (`--tokens-from-env`): configs in a
                            ConfigMap hold no secret. Made per deployment: the run's own
                            tokens, or `weeble k8s secrets` for an overlay (k8s/ holds none;
                            a broker refuses a placeholder or empty token)
    PodDisruptionBudget     at most one broker down by a voluntary disruption
    NetworkPolicies         default deny; the orchestrator (pods labelled component
                            orchestrator) to the client, admin and metrics ports; per broker,
                            its overlay neighbours to its link port, and no one else (a run
                            that reshapes its tree: any other broker of the run, `link_policy`)
    StatefulSet leaf-<id>   a broker added at run time: a set of one pod of its own
    probes                  gRPC health (readiness and liveness) on the link port

Faults: a crash deletes the pod at once (SIGKILL; the StatefulSet starts a fresh one: empty
RAM); a cut takes each end out of the other's link NetworkPolicy; a pause SIGSTOPs the broker
through exec, as the pod's own non-root user: the broker is the child of a tiny init
(podinit.py), not pid 1, which SIGSTOP cannot stop; no shared process namespace, no root, no
capability. The pods run as the image's user weeble (10001), read-only root file system,
every capability dropped, seccomp RuntimeDefault, no service-account token: the Pod Security
"restricted" profile, which the namespace enforces.
Traces are read from the pods (exec), logs from the API.

No cluster runs on the machines this project is built on: the manifests are validated offline
(kubectl kustomize, the Kubernetes JSON schemas of a pinned version, the client's models) and
the backend's calls run against the client; what was not exercised is said in
docs/guide/backends.md.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from weeble.orchestrator.backend import (
    AdminAccess,
    BackendError,
    BrokerAddress,
    BrokerState,
    LinkControl,
    LinkShapeChange,
    LinkState,
    Placement,
    Ports,
    ProcessControl,
)
from weeble.orchestrator.backends.admin import wait_serving
from weeble.orchestrator.backends.assembly import Assembly
from weeble.orchestrator.backends.image import NAME, PYTHON, UID
from weeble.orchestrator.backends.kubemanifest import (
    _HEADER,
    DEFAULT_ADMIN,
    DEFAULT_LISTEN,
    DEFAULT_METRICS,
    SERVICE,
    STATEFULSET,
    VERSION,
    _selector,
    _yaml,
    labels,
)
from weeble.orchestrator.backends.monitoring import NAME as MONITORING
from weeble.orchestrator.backends.monitoring import render_monitoring
from weeble.runtime.__main__ import TOKEN_PLACEHOLDER  # the config's token: the Secret's wins
from weeble.runtime.config import BrokerConfig
from weeble.trace.schema import TRACE_DIR as RUN_TRACE_DIR

log = logging.getLogger(__name__)

IMAGE_NAME = NAME  # the image kustomize's `images:` sets (never `latest`)
RELEASE_IMAGE = f"{IMAGE_NAME}:{VERSION}"  # what the committed overlays deploy
CONFIGS, TOKENS = "broker-configs", "broker-tokens"
# A ConfigMap of broker configs holds at most this many bytes: client-side `kubectl apply` keeps
# a copy of each object in an annotation of at most 262,144 bytes, and a ConfigMap holds at most
# 1 MiB. Past it the configs go on in broker-configs-1, -2, ... (`config_shards`), which every
# broker pod mounts as one folder (a projected volume).
SHARD_BYTES = 200_000
CONFIG_DIR, TRACE_DIR = "/etc/weeble/brokers", "/var/lib/weeble/traces"
# the namespace enforces the Pod Security "restricted" profile: a pod that is not is refused
PSS_LABELS = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}
POD_LABEL = "statefulset.kubernetes.io/pod-name"  # set on each pod by its StatefulSet
SET_LABEL = "weeble/set"  # which StatefulSet a broker pod is of (the selectors must not overlap)


def pod(i: int) -> str:
    return f"{STATEFULSET}-{i}"


def leaf_set(broker_id: str) -> str:
    """The StatefulSet of one replica of a broker added at run time (its pod: `<set>-0`).
    A StatefulSet removes only its highest ordinal, so a leaf that may leave on its own gets a
    set of its own; it restarts a crashed pod like the brokers' set does."""
    slug = re.sub(r"[^a-z0-9-]+", "-", broker_id.lower()).strip("-")
    name = f"leaf-{slug}"
    if not slug or len(name) > 52 or name != f"leaf-{broker_id}":
        raise BackendError(f"k8s: broker id {broker_id!r}: a broker added at run time needs an"
                           " id that is a DNS label (lower-case letters, digits, '-'; at most"
                           " 47 characters): its pod and DNS name carry it")
    return name


def leaf_pod(broker_id: str) -> str:
    return f"{leaf_set(broker_id)}-0"


def dns_of(pod_name: str, namespace: str) -> str:
    """A broker pod's stable name (the headless Service's record of it)."""
    return f"{pod_name}.{SERVICE}.{namespace}.svc.cluster.local"


def dns(i: int, namespace: str) -> str:
    return dns_of(pod(i), namespace)


def link_policy(instance: str, target: str, neighbours: list[str], listen: int, *,
                run_wide: bool = False, denied: list[str] | tuple[str, ...] = ()
                ) -> dict[str, Any]:
    """Who may open the link port of broker pod `target`.

    A run that does not reshape its tree: its overlay neighbours (pods), no one else. A run
    that does (`run_wide`): any other broker of the run, a leaf added later included, since a
    reconfiguration's new link and out-of-band channels, and the optimizer's exchanges (which
    the brokers decide among themselves), dial any broker of the address book. `denied`: the
    neighbours it is cut from (a cut is this policy in either case)."""
    if run_wide:
        source: dict[str, Any] = {"podSelector": {
            "matchLabels": {"app.kubernetes.io/instance": instance,
                            "app.kubernetes.io/component": "broker"},
            "matchExpressions": [{"key": POD_LABEL, "operator": "NotIn",
                                  "values": sorted({target, *denied})}]}}
        ingress = [{"from": [source], "ports": [{"protocol": "TCP", "port": listen}]}]
    else:
        allowed = sorted(set(neighbours) - set(denied), key=lambda p: (len(p), p))
        ingress = [{
            "from": [{"podSelector": {"matchExpressions": [{
                "key": POD_LABEL, "operator": "In", "values": allowed}]}}],
            "ports": [{"protocol": "TCP", "port": listen}]}] if allowed else []
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": f"link-{target}", "labels": labels(instance, "link")},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/instance": instance,
                                            POD_LABEL: target}},
            "policyTypes": ["Ingress"],
            "ingress": ingress}}


def _matches(selector: dict[str, Any] | None, pod_labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels and matchExpressions)."""
    selector = selector or {}
    if any(pod_labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and pod_labels.get(key) not in values:
            return False
        if op == "NotIn" and key in pod_labels and pod_labels[key] in values:
            return False
        if op == "Exists" and key not in pod_labels:
            return False
        if op == "DoesNotExist" and key in pod_labels:
            return False
    return True


def admits(policies: list[dict[str, Any]], target: dict[str, str], source: dict[str, str],
           port: int, source_namespace: dict[str, str] | None = None) -> bool:
    """Would these NetworkPolicies (of one namespace) let a pod labelled `source` open TCP
    `port` on a pod labelled `target` there? Ingress as Kubernetes defines it: a pod no policy
    selects admits everything; a selected pod admits what any rule of any of them admits.
    `source_namespace`: the labels of the source pod's namespace when it is another one."""
    selecting = [p for p in policies if "Ingress" in (p["spec"].get("policyTypes") or [])
                 and _matches(p["spec"].get("podSelector"), target)]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports") or []
            if ports and not any(p.get("port") in (None, port) and
                                 p.get("protocol", "TCP") == "TCP" for p in ports):
                continue
            sources = rule.get("from") or []
            if not sources or any(_peer(f, source, source_namespace) for f in sources):
                return True
    return False


def _peer(rule: dict[str, Any], source: dict[str, str],
          source_namespace: dict[str, str] | None) -> bool:
    """Does one `from` entry admit this pod (of this other namespace, or of the policy's)?"""
    if "namespaceSelector" in rule:  # pods of the namespaces it selects (another one here)
        return source_namespace is not None and \
            _matches(rule["namespaceSelector"], source_namespace) and \
            _matches(rule.get("podSelector"), source)
    return "podSelector" in rule and source_namespace is None and \
        _matches(rule["podSelector"], source)


def stored_config(config: BrokerConfig) -> str:
    """A broker's config as the ConfigMap holds it: no secret (the pod reads them from the
    Secret broker-tokens, `--tokens-from-env`)."""
    return config.model_copy(update={
        "admin_token": TOKEN_PLACEHOLDER, "link_token": TOKEN_PLACEHOLDER,
        "client_secret": None if config.client_secret is None else TOKEN_PLACEHOLDER}).to_json()


def fresh_tokens() -> tuple[str, str, str]:
    """A deployment's own admin token, link token and client secret (random, 256 bits)."""
    return (secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(32))


def secret_object(instance: str, tokens: tuple[str, str, str]) -> dict[str, Any]:
    """The Secret broker-tokens the pods take their tokens from (`--tokens-from-env`)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": TOKENS, "labels": labels(instance, "tokens")},
            "stringData": {"admin-token": tokens[0], "link-token": tokens[1],
                           "client-secret": tokens[2]}}


def secret_manifest(namespace: str, tokens: tuple[str, str, str]) -> str:
    """`weeble k8s secrets`: the Secret of one deployment, as a manifest to apply (never to
    commit: the overlays hold none, and a broker refuses a placeholder token)."""
    instance = namespace.removeprefix("weeble-")
    obj = secret_object(instance, tokens)
    obj["metadata"]["namespace"] = namespace
    return ("# Generated by `weeble k8s secrets`: this deployment's tokens. Do not commit it.\n"
            + _yaml([obj]))


def topology_json(root: str, pods: dict[str, str], edges: list[tuple[str, str]]) -> str:
    """The ConfigMap's topology.json: the tree as the orchestrator knows it now."""
    return json.dumps({"root": root, "brokers": pods, "edges": [list(e) for e in edges]},
                      indent=2)


# Secure by default: what the Pod Security "restricted" profile asks (the tests check every pod
# template against its rules), as the image's fixed non-root user.
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
    "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
    "privileged": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"}}


MIB = 1024 * 1024
# Sizing, from measurement (local backend, docs/guide/kubernetes.md): under the quickstart
# load a broker's RSS peaked at 82 MiB (VmHWM, 7 brokers); with one link queue and one client
# queue full at 16 MiB each it peaked at 122 MiB (+41 MiB for 32 MiB queued: x1.28).
BASE_RSS = 96 * MIB  # the request: 82 MiB measured, and a margin
QUEUE_OVERHEAD = 1.3  # RSS per queued byte (1.28 measured)
CLIENT_STREAMS = 2  # subscribers per broker the limit allows to be full at once
# What the overlays deploy (a run's configs keep the scenario's own tuning; its limits are
# computed from them): queues and the trace cap the limits below are made for.
K8S_TUNING = {"link_queue_bytes": 16 * MIB, "client_queue_bytes": 16 * MIB,
              "trace_max_bytes": 512 * MIB}
TMP_SIZE = "16Mi"


def _mib(n: float) -> str:
    return f"{-(-int(n) // (16 * MIB)) * 16}Mi"  # rounded up to 16 MiB


def sizing(configs: list[BrokerConfig]) -> tuple[dict[str, Any], str]:
    """(container resources, the trace volume's sizeLimit) for pods running these configs:
    memory limit = base RSS + overhead x (each link's queue full + CLIENT_STREAMS full
    subscriber queues) of the worst broker; the trace volume holds the trace cap and a margin
    (the cap is hard: the writer stops there and says so)."""
    worst, trace = 0, 0
    for c in configs:
        t = c.tuning
        if t.trace_max_bytes is None:
            raise BackendError(f"k8s: broker {c.broker_id}: tuning.trace_max_bytes must be set"
                               " on k8s (the trace volume has a sizeLimit)")
        worst = max(worst, len(c.neighbors) * t.link_queue_bytes
                    + CLIENT_STREAMS * t.client_queue_bytes)
        trace = max(trace, t.trace_max_bytes)
    volume = _mib(trace * 1.1 + MIB)
    storage = _mib(trace * 1.1 + MIB + 64 * MIB)  # + /tmp and the container's log
    # the request: what a run usually writes (a quickstart trace is a few MiB); the limit and
    # the volume's sizeLimit hold the cap (a request of the cap would reserve 121 x that)
    return ({"requests": {"cpu": "50m", "memory": _mib(BASE_RSS),
                          "ephemeral-storage": "64Mi"},
             "limits": {"cpu": "500m", "memory": _mib(BASE_RSS + QUEUE_OVERHEAD * worst),
                        "ephemeral-storage": storage}}, volume)


def shard_name(k: int) -> str:
    return CONFIGS if k == 0 else f"{CONFIGS}-{k}"


def config_shards(data: dict[str, str]) -> list[dict[str, str]]:
    """The ConfigMaps' data: `data` in order, a new shard where the next entry would take one
    past SHARD_BYTES (topology.json stays in the first: the orchestrator's)."""
    shards: list[dict[str, str]] = [{}]
    size = 0
    for key, value in data.items():
        n = len(key) + len(value.encode())
        if shards[-1] and size + n > SHARD_BYTES and key != "topology.json":
            shards.append({})
            size = 0
        shards[-1][key] = value
        size += n
    return shards


def broker_set(instance: str, name: str, *, replicas: int, image: str,
               container_ports: list[dict[str, Any]], listen: int,
               configs: list[BrokerConfig], shards: int = 1) -> dict[str, Any]:
    """A StatefulSet of broker pods (`name`-0, -1, ...); pod P runs the ConfigMap's P.json;
    sized for `configs` (`sizing`)."""
    resources, trace_volume = sizing(configs)
    lab = {**labels(instance), SET_LABEL: name}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": lab, "annotations": {
            # checkov's skips, each with its reason (k8s/.checkov.yaml: those of every object)
            "checkov.io/skip1": "CKV_K8S_35=the broker takes its tokens from its environment"
                                " (--tokens-from-env), from the deployment's own Secret"}},
        "spec": {
            "serviceName": SERVICE, "replicas": replicas, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {**_selector(instance), SET_LABEL: name}},
            "template": {
                "metadata": {"labels": lab},
                "spec": {
                    "terminationGracePeriodSeconds": 15,
                    # a broker needs no API access; no Service environment (names by DNS)
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": POD_SECURITY,
                    "containers": [{
                        "name": "broker", "image": image, "imagePullPolicy": "IfNotPresent",
                        # podinit as pid 1, the broker its child: a pause can stop it (podinit)
                        "command": [PYTHON],
                        "args": ["-m", "weeble.orchestrator.backends.podinit",
                                 PYTHON, "-m", "weeble.runtime", "--tokens-from-env",
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
                        # up to 60 s to start (imports on a busy node); then liveness
                        "startupProbe": {"grpc": {"port": listen}, "periodSeconds": 1,
                                         "failureThreshold": 60},
                        "readinessProbe": {"grpc": {"port": listen}, "periodSeconds": 2,
                                           "failureThreshold": 3},
                        "livenessProbe": {"grpc": {"port": listen}, "periodSeconds": 10,
                                          "failureThreshold": 6},
                        "resources": resources,
                        "securityContext": CONTAINER_SECURITY,
                        # the root file system is read-only: the traces and /tmp are not
                        "volumeMounts": [{"name": "configs", "mountPath": CONFIG_DIR,
                                          "readOnly": True},
                                         {"name": "traces", "mountPath": TRACE_DIR},
                                         {"name": "tmp", "mountPath": "/tmp"}]}],
                    # (traces first: the order an overlay's sizing patch leaves them in)
                    "volumes": [{"name": "traces", "emptyDir": {"sizeLimit": trace_volume}},
                                {"name": "configs", "projected": {"sources": [
                                    {"configMap": {"name": shard_name(k)}}
                                    for k in range(shards)]}},
                                {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}]}}}}


def _container_ports(ports: tuple[int, int, int | None]) -> list[dict[str, Any]]:
    listen, admin, metrics = ports
    out = [{"name": "link", "containerPort": listen, "protocol": "TCP"},
           {"name": "admin", "containerPort": admin, "protocol": "TCP"}]
    if metrics is not None:
        out.append({"name": "metrics", "containerPort": metrics, "protocol": "TCP"})
    return out


def manifests(configs: list[BrokerConfig], *, instance: str, namespace: str, image: str,
              ports: tuple[int, int, int | None], tokens: tuple[str, str, str],
              edges: list[tuple[str, str]], root: str,
              run_wide: bool = False) -> list[dict[str, Any]]:
    """Every object of a deployment of these brokers (pod i runs configs[i]); `run_wide`: the
    run reshapes its tree (`link_policy`)."""
    listen = ports[0]
    index = {c.broker_id: i for i, c in enumerate(configs)}
    n = len(configs)
    shards = config_shards({
        "topology.json": topology_json(root, {c.broker_id: pod(i) for i, c in
                                              enumerate(configs)}, edges),
        **{f"{pod(i)}.json": stored_config(c) for i, c in enumerate(configs)}})
    lab, sel = labels(instance), _selector(instance)
    container_ports = _container_ports(ports)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {**labels(instance, "namespace"),
                                                     **PSS_LABELS}}},
        *({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": shard_name(k), "labels": labels(instance, "topology")},
           "data": data} for k, data in enumerate(shards)),
        secret_object(instance, tokens),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "labels": lab},
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": sel,
                  "ports": [{"name": p["name"], "port": p["containerPort"],
                             "targetPort": p["name"], "protocol": "TCP"}
                            for p in container_ports]}},
        broker_set(instance, STATEFULSET, replicas=n, image=image,
                   container_ports=container_ports, listen=listen, configs=configs,
                   shards=len(shards)),
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
        objects.append(link_policy(instance, pod(index[c.broker_id]),
                                   [pod(index[m]) for m in c.neighbors], listen,
                                   run_wide=run_wide))
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
    configs = {b: c.model_copy(update={"tuning": c.tuning.model_copy(update=K8S_TUNING)})
               for b, c in configs.items()}
    return manifests(list(configs.values()), instance=instance, namespace=namespace,
                     image=image, ports=layout.ports, tokens=tokens, edges=edges,
                     root=scenario.root_broker)


def _ports(live: Any) -> tuple[int, int, int | None]:
    return (live.listen_port or DEFAULT_LISTEN, live.admin_port or DEFAULT_ADMIN,
            live.metrics_port)


def _place(pod_name: str, broker_id: str, namespace: str,
           ports: tuple[int, int, int | None]) -> Placement:
    """Where a broker pod binds and where the orchestrator and its peers reach it: its stable
    DNS name."""
    listen, admin, metrics = ports
    host = dns_of(pod_name, namespace)
    reach = BrokerAddress(broker_id, f"{host}:{listen}", f"{host}:{admin}",
                          None if metrics is None else f"{host}:{metrics}")
    # a pod's address is not known before it runs: bind every interface (the
    # NetworkPolicies say who may connect)
    return Placement(f"0.0.0.0:{listen}", f"0.0.0.0:{admin}",
                     None if metrics is None else f"0.0.0.0:{metrics}", reach)


class _Layout:
    """Where brokers are in a namespace: pod i of the StatefulSet, its stable DNS name."""

    def __init__(self, brokers: list[str], namespace: str,
                 ports: tuple[int, int, int | None]) -> None:
        self.namespace = namespace
        self.ports = ports
        self.places = {b: _place(pod(i), b, namespace, ports) for i, b in enumerate(brokers)}

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        return self.places[broker_id].reach.listen


def render_overlay(scenario: Any, name: str, *, image: str = RELEASE_IMAGE,
                   base: str = "../../base") -> dict[str, str]:
    """The files of k8s/overlays/<name>: the scenario's topology and link policies, over the
    shared base. No Secret: each deployment makes its own (`weeble k8s secrets`)."""
    namespace = f"weeble-{name}"
    objects = scenario_manifests(scenario, instance=name, namespace=namespace, image=image,
                                 tokens=("", "", ""))
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    base_policies = ("broker-default-deny", "broker-orchestrator")
    files = {
        "namespace.yaml": _yaml(by_kind["Namespace"]),
        "topology.yaml": _yaml(by_kind["ConfigMap"]),
        "link-policies.yaml": _yaml([o for o in by_kind["NetworkPolicy"]
                                     if o["metadata"]["name"] not in base_policies]),
    }
    statefulset = by_kind["StatefulSet"][0]
    pod_spec = statefulset["spec"]["template"]["spec"]
    # the base's StatefulSet, sized for this topology (a strategic merge by container and
    # volume name)
    files["sizing.yaml"] = _yaml([{
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": STATEFULSET},
        "spec": {"template": {"spec": {
            "containers": [{"name": "broker",
                            "resources": pod_spec["containers"][0]["resources"]}],
            "volumes": [v for v in pod_spec["volumes"] if v["name"] in ("traces", "configs")]
        }}}}])
    files["kustomization.yaml"] = yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": namespace,
        "labels": [{"pairs": {"app.kubernetes.io/instance": name}, "includeSelectors": True,
                    "includeTemplates": True}],
        "resources": [base, *sorted(f for f in files
                                    if f not in ("kustomization.yaml", "sizing.yaml"))],
        "patches": [{"path": "sizing.yaml"}],
        "replicas": [{"name": STATEFULSET, "count": statefulset["spec"]["replicas"]}],
        # the image by kustomize's transformer: a user points it at their registry's copy
        # (`weeble image push`) in an overlay of their own (docs/guide/kubernetes.md)
        "images": [{"name": IMAGE_NAME, "newName": image.rsplit(":", 1)[0],
                    "newTag": image.rsplit(":", 1)[1]}],
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
                                 image=RELEASE_IMAGE,
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


OVERLAYS = {"small": "scenarios/quickstart.yaml", "paper121": "scenarios/seed000.yaml"}
TESTBED = ("testbed", "scenarios/quickstart.yaml")  # the orchestrator's overlay, its scenario

# What the orchestrator's ServiceAccount may do, in its own namespace: exactly the calls of
# KubernetesBackend (tests/orchestrator/test_k8s_testbed.py derives them from this file's
# calls through the client's own paths and fails on a missing or an unused verb).
ROLE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]},
    # exec: the traces, a pause. A websocket exec is a GET (clusters before 1.31 check
    # `get`); since 1.31 (AuthorizePodWebsocketUpgradeCreatePermission) `create` is checked
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["secrets", "services"], "verbs": ["create", "delete"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["create", "delete"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "verbs": ["patch"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
     "verbs": ["create", "delete"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["create", "get", "update", "delete"]},
]
ORCHESTRATOR_SA, RUNS, RUNS_DIR = "weeble-orchestrator", "weeble-runs", "/var/lib/weeble/runs"
SCENARIO_DIR = "/etc/weeble/scenario"


def testbed_objects(name: str, scenario_file: str, scenario_text: str, *,
                    image: str = RELEASE_IMAGE) -> list[dict[str, Any]]:
    """The testbed in the cluster: a namespace (Pod Security restricted), the orchestrator's
    ServiceAccount, Role (`ROLE_RULES`) and RoleBinding, the scenario in a ConfigMap, a
    volume for the runs, the Job that runs `weeble run SCENARIO --backend k8s` there (the
    brokers come up in the same namespace, the orchestrator admitted by its labels), and a
    pod that holds the runs' volume for `kubectl cp` once the Job is done."""
    namespace = f"weeble-{name}"
    mounts = [{"name": "runs", "mountPath": RUNS_DIR},
              {"name": "tmp", "mountPath": "/tmp"}]
    volumes = [{"name": "runs", "persistentVolumeClaim": {"claimName": RUNS}},
               {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}]
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    orchestrator = {
        "name": "orchestrator", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": [f"{PYTHON.rsplit('/', 1)[0]}/weeble"],
        # the analysis (PySpark, a JVM) is not in the image: `weeble analyze` the copied run
        "args": ["run", f"{SCENARIO_DIR}/{Path(scenario_file).name}", "--backend", "k8s",
                 "--runs-dir", RUNS_DIR, "--quiet", "--no-analysis"],
        "env": [{"name": ENV_NAMESPACE, **field("metadata.namespace")},
                {"name": ENV_INSTANCE,
                 **field("metadata.labels['app.kubernetes.io/instance']")},
                {"name": ENV_POD, **field("metadata.name")},
                {"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [{"name": "scenario", "mountPath": SCENARIO_DIR, "readOnly": True},
                         *mounts]}
    holder = {
        "name": "results", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": [PYTHON, "-c", "import time\nwhile True: time.sleep(3600)"],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [{**mounts[0], "readOnly": True}, mounts[1]]}
    pod_spec = {"securityContext": POD_SECURITY, "enableServiceLinks": False}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {**labels(name, "namespace"),
                                                     **PSS_LABELS}}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": ORCHESTRATOR_SA, "labels": labels(name, "orchestrator")},
         "automountServiceAccountToken": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": ORCHESTRATOR_SA, "labels": labels(name, "orchestrator")},
         "rules": ROLE_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": ORCHESTRATOR_SA, "labels": labels(name, "orchestrator")},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": ORCHESTRATOR_SA},
         "subjects": [{"kind": "ServiceAccount", "name": ORCHESTRATOR_SA,
                       "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "weeble-scenario", "labels": labels(name, "scenario")},
         "data": {Path(scenario_file).name: scenario_text}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": RUNS, "labels": labels(name, "results")},
         "spec": {"accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "2Gi"}}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "testbed-default-deny", "labels": labels(name, "policy")},
         # the orchestrator and the results pod serve nothing: no ingress to any pod (the
         # run's brokers get theirs from their own policies, which add to this)
         "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "weeble-run", "labels": labels(name, "orchestrator"),
                      "annotations": {"checkov.io/skip1": "CKV_K8S_38=the orchestrator"
                                      " drives the API server (its Role: ROLE_RULES)"}},
         "spec": {"backoffLimit": 0, "template": {
             "metadata": {"labels": labels(name, "orchestrator")},
             "spec": {**pod_spec, "serviceAccountName": ORCHESTRATOR_SA,
                      # the one pod that talks to the API server
                      "automountServiceAccountToken": True, "restartPolicy": "Never",
                      "containers": [orchestrator],
                      "volumes": [{"name": "scenario",
                                   "configMap": {"name": "weeble-scenario"}}, *volumes]}}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "weeble-results", "labels": labels(name, "results"),
                      "annotations": {
                          "checkov.io/skip1": "CKV_K8S_8=it holds the runs' volume for kubectl"
                                              " cp and serves nothing a probe could ask",
                          "checkov.io/skip2": "CKV_K8S_9=it holds the runs' volume for kubectl"
                                              " cp and serves nothing a probe could ask"}},
         "spec": {**pod_spec, "automountServiceAccountToken": False,
                  "terminationGracePeriodSeconds": 1,
                  "containers": [holder], "volumes": volumes}},
    ]


def render_testbed(name: str, scenario_file: str, scenario_text: str) -> dict[str, str]:
    """The files of k8s/overlays/testbed (no base: the brokers are the run's own)."""
    objects = testbed_objects(name, scenario_file, scenario_text)
    files = {"testbed.yaml": _yaml(objects)}
    files["kustomization.yaml"] = yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": f"weeble-{name}", "resources": ["testbed.yaml"],
        "images": [{"name": IMAGE_NAME, "newName": IMAGE_NAME, "newTag": VERSION}],
    }, sort_keys=False)
    return {k: _HEADER.format(name=name) + v for k, v in files.items()}


def write_tree(root: Path) -> list[Path]:
    """(Re)write k8s/base and k8s/overlays/* from the code; returns the files written."""
    from weeble.model.scenario import load_scenario

    repo = Path(__file__).resolve().parents[3]
    written = []
    trees = {root / "base": render_base()}
    for name, scenario in OVERLAYS.items():
        trees[root / "overlays" / name] = render_overlay(load_scenario(repo / scenario), name)
    name, scenario = TESTBED
    trees[root / "overlays" / name] = render_testbed(name, scenario,
                                                     (repo / scenario).read_text())
    trees[root / "overlays" / MONITORING] = render_monitoring()
    for folder, files in trees.items():
        folder.mkdir(parents=True, exist_ok=True)
        for old in (*folder.glob("*.yaml"), *folder.glob("*.json")):
            if old.name not in files:
                old.unlink()
        for fname, text in files.items():
            (folder / fname).write_text(text)
            written.append(folder / fname)
    return written


# ---- the backend ------------------------------------------------------------------------------


class KubernetesBackend(Assembly):
    """Brokers as the pods of a StatefulSet in a namespace of their own, per run.

    The orchestrator must reach the pods' DNS names (it runs in the cluster, labelled
    app.kubernetes.io/component=orchestrator); an assembly (assembly.py) of placement in pods,
    `KubePods` (processes), admin access over those names and `KubePolicies` (the network).

    A run that reshapes its tree (planned with `Ports.peer_network`: reconfigurations, the
    colour scheme, the optimizer, every `weeble up`) gives every broker an address book of the
    other brokers' stable DNS names, and its link policies admit any broker of the run (a cut
    excepted): the k8s form of the peer network of Mininet and Docker (peernet.py). A change of
    the tree (`add_link`, `remove_link`) rewrites the ends' configs in the ConfigMap, so a pod
    the StatefulSet restarts boots with its neighbours of now; a link policy changes only where
    a cut changes (or, on a run that does not reshape its tree, where its neighbours change).
    A leaf added at run time is a StatefulSet of one pod of its own (`leaf_set`), with its
    config in the ConfigMap and its link policy; removing it deletes them. A planned broker
    leaves only from the top of its StatefulSet (the set scales down by one)."""

    name = "k8s"
    links_at_run_time = True
    assigns_addresses = True

    def __init__(self, workdir: Path | str, access: AdminAccess, *, run_id: str,
                 log_level: str = "INFO", api: Any = None,
                 image: str | None = None) -> None:
        super().__init__(workdir, access, log_level=log_level)
        # in the cluster (k8s/overlays/testbed), the orchestrator's pod says where: its own
        # namespace (its Role is there) and its instance label (the brokers admit it by it)
        self.instance = os.environ.get(ENV_INSTANCE) or \
            run_id.lower().replace("_", "-")[:40].strip("-")
        self.own_namespace = bool(os.environ.get(ENV_NAMESPACE))
        self.namespace = os.environ.get(ENV_NAMESPACE) or \
            f"weeble-{self.instance}"[:63].strip("-")
        self.image = image or default_image(api)
        self._api = api  # the kubernetes.client.ApiClient to use
        self._ports: tuple[int, int, int | None] = (DEFAULT_LISTEN, DEFAULT_ADMIN, None)
        self._pods: dict[str, str] = {}  # broker -> its pod
        self._leaves: set[str] = set()  # brokers added at run time: a StatefulSet each
        self._replicas = 0  # the planned StatefulSet's, now
        self._planned: list[str] = []  # its brokers, by ordinal
        self._edges: list[tuple[str, str]] = []
        self._root = ""
        self._applied = False
        self._peer_network = False
        self._policies: dict[str, dict[str, Any]] = {}  # pod -> its link policy as applied
        self._shard_of: dict[str, str] = {}  # pod -> the ConfigMap holding its config
        self._shards = 1
        self.processes: KubePods = KubePods(self)
        self.policies = KubePolicies(self)  # its network part
        self.network = self.policies

    @classmethod
    def create(cls, run_dir: Path, access: AdminAccess, *, run_id: str,
               log_level: str = "INFO") -> KubernetesBackend:
        return cls(Path(run_dir) / "brokers", access, run_id=run_id, log_level=log_level,
                   api=api_client())

    @classmethod
    def reattach(cls, run_dir: Path, access: AdminAccess, configs: dict[str, BrokerConfig],
                 brokers: dict[str, dict[str, Any]], state: dict[str, Any],
                 api: Any = None) -> KubernetesBackend:
        backend = cls(Path(run_dir) / "brokers", access, run_id=state.get("instance", "run"),
                      api=api if api is not None else api_client())
        backend.namespace = state.get("namespace", backend.namespace)
        backend.instance = state.get("instance", backend.instance)
        backend.own_namespace = bool(state.get("own_namespace"))
        backend._shard_of = dict(state.get("shard_of") or {})
        backend._shards = int(state.get("shards", 1))
        backend._detached = True
        backend._applied = True
        backend._configs.update(configs)
        ports = state.get("ports") or (DEFAULT_LISTEN, DEFAULT_ADMIN, None)
        backend._ports = (int(ports[0]), int(ports[1]),
                          None if ports[2] is None else int(ports[2]))
        backend._planned = list(state.get("planned") or configs)
        backend._pods = dict(state.get("pods") or {b: pod(i) for i, b in
                                                   enumerate(backend._planned)})
        backend._leaves = set(state.get("leaves") or [])
        backend._replicas = int(state.get("replicas", len(backend._planned)))
        backend._peer_network = bool(state.get("peer_network"))
        backend.policies.cut_links = {frozenset(pair) for pair in state.get("cut") or []}
        backend._root = state.get("root", "")
        backend._edges = [(a, b) for a, b in state.get("edges") or []]
        backend._trace_home = Path(run_dir) / RUN_TRACE_DIR
        backend._reach = {b: _place(p, b, backend.namespace, backend._ports).reach
                          for b, p in backend._pods.items()}
        for b in backend._pods:  # the policies as they are now (the next change diffs them)
            backend._policies[backend._pods[b]] = backend._policy_of(b)
        return backend

    def state(self) -> dict[str, Any]:
        return {"instance": self.instance, "namespace": self.namespace,
                "own_namespace": self.own_namespace, "shard_of": self._shard_of,
                "shards": self._shards,
                "ports": list(self._ports), "planned": self._planned, "pods": self._pods,
                "leaves": sorted(self._leaves), "replicas": self._replicas,
                "peer_network": self._peer_network, "root": self._root,
                "edges": [list(e) for e in self.links()],
                "cut": sorted(sorted(k) for k in self.policies.cut_links)}

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
        self._ports = (ports.listen or DEFAULT_LISTEN, ports.admin or DEFAULT_ADMIN,
                       (ports.metrics or DEFAULT_METRICS) if ports.metrics_enabled else None)
        layout = _Layout(brokers, self.namespace, self._ports)
        self._planned = list(brokers)
        self._pods = {b: pod(i) for i, b in enumerate(brokers)}
        self._replicas = len(brokers)
        self._edges = list(edges)
        self._root = brokers[0] if brokers else ""
        self._peer_network = ports.peer_network
        self._reach = {b: p.reach for b, p in layout.places.items()}
        return dict(layout.places)

    def trace_path(self, run_trace_dir: Path, broker_id: str) -> Path:
        self._trace_home = Path(run_trace_dir)  # where a leaving broker's trace is kept
        return Path(TRACE_DIR) / f"{broker_id}.jsonl"

    def _pod_name(self, broker_id: str) -> str:
        try:
            return self._pods[broker_id]
        except KeyError:
            raise BackendError(f"unknown broker {broker_id!r}") from None

    def pod_labels(self, broker_id: str) -> dict[str, str]:
        """The labels the broker's pod carries (its StatefulSet's template, and the name its
        StatefulSet gives it)."""
        name = self._pod_name(broker_id)
        owner = leaf_set(broker_id) if broker_id in self._leaves else STATEFULSET
        return {**labels(self.instance), SET_LABEL: owner, POD_LABEL: name}

    def objects(self) -> list[dict[str, Any]]:
        """What this run applies: `manifests` of its configs, in pod order."""
        ordered = [self._configs[b] for b in self._planned]
        root = next((c.root for c in ordered), self._root)
        return manifests(ordered, instance=self.instance, namespace=self.namespace,
                         image=self.image, ports=self._ports,
                         tokens=(self.access.token, ordered[0].link_token if ordered else "",
                                 (ordered[0].client_secret or "") if ordered else ""),
                         edges=self._edges, root=root, run_wide=self._peer_network)

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
        objects = self.objects()
        self._root = json.loads(objects[1]["data"]["topology.json"])["root"]
        self._shard_of = {key[:-len(".json")]: o["metadata"]["name"] for o in objects
                          if o["kind"] == "ConfigMap" for key in o["data"]
                          if key != "topology.json"}
        self._shards = len({o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"})
        if self.own_namespace:  # the orchestrator's own: it is there, and not ours to make
            objects = [o for o in objects if o["kind"] != "Namespace"]
        for obj in objects:
            self._call(f"create {obj['kind']} {obj['metadata']['name']}",
                       creators[obj["kind"]], obj)
            if obj["metadata"]["name"].startswith("link-"):
                self._policies[obj["metadata"]["name"][len("link-"):]] = obj
        self._applied = True

    # ---- the ConfigMap and the link policies, as the tree changes ---------------------------

    def _publish(self, brokers: list[str], gone: tuple[str, ...] = ()) -> None:
        """Write these brokers' configs (and topology.json) into the ConfigMap, drop the
        entries of `gone` pods: the config a pod the StatefulSet (re)starts reads. The files
        beside the run are rewritten too (`weeble reconfigure` from another process reads
        them)."""
        for b in brokers:
            self._configs[b].dump(self.config_path(b))
        if not self._applied:
            return  # `apply` writes them all
        # each entry in its ConfigMap (a broker added at run time: the first)
        patches: dict[str, dict[str, str | None]] = {CONFIGS: {}}
        for b in brokers:
            name = self._pods[b]
            patches.setdefault(self._shard_of.setdefault(name, CONFIGS), {})[
                f"{name}.json"] = stored_config(self._configs[b])
        for name in gone:  # a merge patch's null deletes a key
            patches.setdefault(self._shard_of.pop(name, CONFIGS), {})[f"{name}.json"] = None
        patches[CONFIGS]["topology.json"] = topology_json(self._root, dict(self._pods),
                                                          self.links())
        for cm, data in patches.items():
            self._call(f"patch ConfigMap {cm}", self._core().patch_namespaced_config_map,
                       cm, self.namespace, {"data": data})

    def _policy_of(self, broker_id: str) -> dict[str, Any]:
        config = self._configs[broker_id]
        cut = [self._pods[n] for n in config.neighbors
               if frozenset((broker_id, n)) in self.policies.cut_links and n in self._pods]
        obj = link_policy(self.instance, self._pods[broker_id],
                          [self._pods[n] for n in config.neighbors if n in self._pods],
                          self._ports[0], run_wide=self._peer_network, denied=cut)
        obj["metadata"]["namespace"] = self.namespace
        return obj

    def _sync_policies(self, brokers: list[str]) -> None:
        """Replace the link policy of each of these brokers whose admitted set changed."""
        if not self._applied:
            return
        for x in brokers:
            if x not in self._pods:
                continue
            obj = self._policy_of(x)
            name = self._pods[x]
            if self._policies.get(name) == obj:
                continue
            self._call(f"replace link policy of {x}",
                       self._net().replace_namespaced_network_policy,
                       obj["metadata"]["name"], self.namespace, obj)
            self._policies[name] = obj

    # ---- brokers ----------------------------------------------------------------------------

    def preflight(self, configs: list[BrokerConfig]) -> None:
        for c in configs:
            if c.tls is not None or c.link_tls is not None:
                raise BackendError(
                    f"k8s: broker {c.broker_id}: live.tls is not supported on the k8s backend"
                    " (the run's certificates would have to be a Secret mounted in the pods);"
                    " run without it, or on local, mininet or docker")

    def start_broker(self, config: BrokerConfig) -> None:
        """Record the config; the StatefulSet starts every pod once all configs are in (the
        ConfigMap holds them all), and a started pod restarts on its own after a crash. A
        broker added at run time (`add_broker`) gets its own StatefulSet here: its config and
        its neighbours' (which now name it) go into the ConfigMap first, then its link policy,
        then the set."""
        self.preflight([config])
        self._configs[config.broker_id] = config
        self.processes.start(config, health_address=self.address(config.broker_id).listen)

    def _start_leaf(self, config: BrokerConfig) -> None:
        b = config.broker_id
        self._publish([b, *[n for n in config.neighbors if n in self._pods]])
        policy = self._policy_of(b)
        self._call(f"create link policy of {b}", self._net().create_namespaced_network_policy,
                   self.namespace, policy)
        self._policies[self._pods[b]] = policy
        obj = broker_set(self.instance, leaf_set(b), replicas=1, image=self.image,
                         container_ports=_container_ports(self._ports), listen=self._ports[0],
                         configs=list(self._configs.values()),  # sized as the run's worst
                         shards=self._shards)
        obj["metadata"]["namespace"] = self.namespace
        self._call(f"create StatefulSet {leaf_set(b)}",
                   self._apps().create_namespaced_stateful_set, self.namespace, obj)

    def _place(self, config: BrokerConfig) -> BrokerConfig:
        """A broker added at run time: pod `leaf-<id>-0` of a StatefulSet of its own."""
        b = config.broker_id
        name = leaf_pod(b)
        if name in self._pods.values():
            raise BackendError(f"k8s: pod {name} of broker {b} exists already")
        place = _place(name, b, self.namespace, self._ports)
        self._pods[b] = name
        self._leaves.add(b)
        self._reach[b] = place.reach
        return config.model_copy(update={"listen_address": place.listen,
                                         "admin_address": place.admin,
                                         "metrics_address": place.metrics})

    def update_config(self, broker_id: str, **fields: Any) -> BrokerConfig:
        config = super().update_config(broker_id, **fields)
        self._publish([broker_id])
        return config

    def check_remove(self, broker_id: str) -> None:
        """BackendError unless this broker's pod can go by itself: a leaf added at run time
        (its own StatefulSet), or the top ordinal of the planned StatefulSet."""
        self._config(broker_id)
        if broker_id in self._leaves:
            return
        top = self._planned[self._replicas - 1] if self._replicas else None
        if broker_id != top:
            raise BackendError(
                f"k8s: {broker_id} is pod {self._pod_name(broker_id)} of StatefulSet"
                f" {STATEFULSET}, which removes only its highest ordinal (now {top},"
                f" pod {self._pods.get(top or '', '?')}); remove that one first, or a broker"
                " added at run time")

    def remove_broker(self, broker_id: str, timeout: float = 10.0) -> None:
        """Take a broker that has left the tree out of the run: its trace is copied into the
        run first (its pod's volume goes with the pod), then its pod goes (its own
        StatefulSet deleted, or the planned set scaled down by one: SIGTERM, the broker
        drains), its link policy is deleted and its ConfigMap entry dropped, and its
        neighbours' entries rewritten without it."""
        self.check_remove(broker_id)
        name = self._pods[broker_id]
        deployed = self._deployed(broker_id)  # (an add that failed early: nothing to delete)
        if deployed:
            self._keep_trace(broker_id)
            if broker_id in self._leaves:
                self._call(f"delete StatefulSet {leaf_set(broker_id)}",
                           self._apps().delete_namespaced_stateful_set, leaf_set(broker_id),
                           self.namespace)
            else:
                self._call("scale down", self._apps().patch_namespaced_stateful_set_scale,
                           STATEFULSET, self.namespace,
                           {"spec": {"replicas": self._replicas - 1}})
            self._call(f"delete link policy of {broker_id}",
                       self._net().delete_namespaced_network_policy, f"link-{name}",
                       self.namespace)
        if broker_id not in self._leaves:
            self._replicas -= 1
        neighbours = [n for n in self._config(broker_id).neighbors if n in self._configs]
        self._forget(broker_id)
        self.policies.cut_links = {k for k in self.policies.cut_links if broker_id not in k}
        self._pods.pop(broker_id)
        self._leaves.discard(broker_id)
        self._policies.pop(name, None)
        self.admin.drop([broker_id])
        self._publish(neighbours, gone=(name,) if deployed else ())
        self._sync_policies(neighbours)

    def _keep_trace(self, broker_id: str) -> None:
        """Copy a leaving broker's trace to where `collect_traces` will find it (best effort:
        a broker whose pod does not answer is said in the log)."""
        config = self._configs[broker_id]
        if config.trace_path is None or self._trace_home is None:
            return
        try:
            text = self.processes.exec(broker_id, f"print(open({str(config.trace_path)!r}).read(),"
                                         " end='')")
        except BackendError as e:
            log.warning("k8s: trace of leaving broker %s not kept: %s", broker_id, e)
            return
        self._trace_home.mkdir(parents=True, exist_ok=True)
        (self._trace_home / f"{broker_id}.jsonl").write_text(text)

    _trace_home: Path | None = None  # where collect_traces put traces (the run's trace dir)

    def _deployed(self, broker_id: str) -> bool:
        """Has this broker's pod been asked for (its link policy applied)?"""
        return self._pods.get(broker_id, "") in self._policies

    def restart_broker(self, broker_id: str, timeout: float = 30.0) -> None:
        if self.alive(broker_id):
            self.kill_broker(broker_id)
        self.wait_healthy(broker_id, timeout)

    # ---- links ------------------------------------------------------------------------------

    # ---- results and the end ----------------------------------------------------------------

    def collect_traces(self, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        self._trace_home = dest
        out = []
        for b, config in self._configs.items():
            if config.trace_path is None or not self.alive(b):
                continue
            text = self.processes.exec(b, f"print(open({str(config.trace_path)!r}).read(), end='')")
            target = dest / f"{b}.jsonl"
            target.write_text(text)
            out.append(target)
        return out

    def teardown(self) -> None:
        """Delete the run's namespace: every object of the run goes with it. In a namespace
        that is not the run's own (the in-cluster orchestrator's), delete the run's objects
        one by one, the brokers first."""
        if self._applied and not self.own_namespace:
            self._call("delete namespace", self._core().delete_namespace, self.namespace)
        elif self._applied:
            deleters = {
                "StatefulSet": self._apps().delete_namespaced_stateful_set,
                "Service": self._core().delete_namespaced_service,
                "PodDisruptionBudget": self._policy().delete_namespaced_pod_disruption_budget,
                "NetworkPolicy": self._net().delete_namespaced_network_policy,
                "ConfigMap": self._core().delete_namespaced_config_map,
                "Secret": self._core().delete_namespaced_secret}
            names = [("StatefulSet", leaf_set(b)) for b in sorted(self._leaves)]
            names += [(o["kind"], o["metadata"]["name"]) for o in self.objects()
                      if o["kind"] in deleters and not (
                          o["kind"] == "NetworkPolicy" and o["metadata"]["name"].startswith(
                              "link-") and o["metadata"]["name"][5:] not in self._policies)]
            names += [("NetworkPolicy", f"link-{p}") for p in self._policies
                      if ("NetworkPolicy", f"link-{p}") not in names]
            order = list(deleters)
            for kind, name in sorted(names, key=lambda kn: order.index(kn[0])):
                try:
                    self._call(f"delete {kind} {name}", deleters[kind], name, self.namespace)
                except BackendError as e:
                    if " 404 " not in f"{e} ":
                        raise
        self._applied = False
        self.admin.drop()


class KubePolicies(LinkControl):
    """The network part of the Kubernetes backend: a link is its ends' entries in the
    ConfigMap (the configs a pod boots with) and each end's link NetworkPolicy; a cut is a
    policy that stops admitting the other end, read back from the API server. Shaping stays
    in the brokers' user-space shaper (a pod's qdisc is the CNI's)."""

    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend
        self.cut_links: set[frozenset[str]] = set()

    def add(self, a: str, b: str) -> None:
        bk = self.backend
        bk.enter_link(a, b)
        if bk._deployed(a) and bk._deployed(b):  # (a leaf being added: its start does)
            bk._publish([a, b])
            bk._sync_policies([a, b])

    def remove(self, a: str, b: str) -> None:
        bk = self.backend
        bk.drop_link(a, b)
        self.cut_links.discard(frozenset((a, b)))
        bk._publish([a, b])
        bk._sync_policies([a, b])

    def links(self) -> list[tuple[str, str]]:
        return self.backend.entered_links()

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        return self.backend.address(broker_id).listen

    @property
    def reconfigurable(self) -> bool:
        return self.backend._peer_network

    def book_address(self, broker_id: str) -> str:
        if not self.backend._peer_network:
            raise BackendError(
                "the k8s backend: this run was planned without reconfiguration, so its link"
                " policies admit only the planned neighbours (`weeble up`, or a scenario that"
                " reconfigures, plans one whose brokers reach each other)")
        return self.backend.address(broker_id).listen

    def _set_cut(self, a: str, b: str, cut: bool) -> None:
        self.backend.user_links.ends(a, b)
        (self.cut_links.add if cut else self.cut_links.discard)(frozenset((a, b)))
        self.backend._sync_policies([a, b])

    def cut(self, a: str, b: str) -> None:
        self._set_cut(a, b, cut=True)

    def heal(self, a: str, b: str) -> None:
        self._set_cut(a, b, cut=False)

    def state(self, a: str, b: str) -> LinkState:
        """Each end's link policy as the API server holds it, read back: does it admit the
        other end's pod to its link port?"""
        from kubernetes import client

        bk = self.backend
        bk.user_links.ends(a, b)
        ends = {}
        for x, y in ((a, b), (b, a)):
            policy = bk._call(f"read link policy of {x}",
                              bk._net().read_namespaced_network_policy,
                              f"link-{bk._pod_name(x)}", bk.namespace)
            obj = client.ApiClient().sanitize_for_serialization(policy)
            ends[x] = (f"admits {y}" if admits([obj], bk.pod_labels(x), bk.pod_labels(y),
                                               bk._ports[0]) else f"denies {y}")
        cut = all(v.startswith("denies") for v in ends.values())
        return LinkState(a, b, cut=cut, mechanism="network-policy", ends=ends)

    def shape(self, a: str, b: str, change: LinkShapeChange, *, both_ways: bool = True) -> None:
        # everything in the brokers' user-space shaper: a pod's qdisc is the CNI's
        self.backend.user_links.shape(a, b, change, both_ways=both_ways)


class KubePods(ProcessControl):
    """The process part of the Kubernetes backend: a broker is a pod of a StatefulSet (which
    the backend deploys, `KubernetesBackend.start_broker`); its state is the pod's phase and,
    inside it, the kernel's state letter of the broker process (exec); a pause is
    SIGSTOP/SIGCONT by exec, a crash the pod deleted at once (its StatefulSet makes anew), a
    stop every StatefulSet scaled to zero."""

    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend
        self.paused: set[str] = set()

    def start(self, config: BrokerConfig, *, health_address: str) -> None:
        """Deploy what the broker's pod needs, once all of it is there (the backend's
        `start_broker` says when)."""
        bk = self.backend
        broker_id = config.broker_id
        bk.workdir.mkdir(parents=True, exist_ok=True)
        config.dump(bk.config_path(broker_id))
        if broker_id in bk._leaves:
            if bk._applied:
                bk._start_leaf(config)
            return
        if not bk._applied and all(b in bk._configs for b in bk._planned):
            bk.apply()

    def pod(self, broker_id: str) -> Any:
        from kubernetes.client.exceptions import ApiException

        bk = self.backend
        try:
            return bk._core().read_namespaced_pod(bk._pod_name(broker_id), bk.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise BackendError(f"k8s: pod of {broker_id}: {e.status} {e.reason}") from None
        except BackendError:
            raise
        except Exception as e:
            raise BackendError(f"k8s: pod of {broker_id}: {e}") from None

    def exec(self, broker_id: str, code: str) -> str:
        """Run Python in the broker's container (exec); its stdout."""
        from kubernetes.stream import stream

        bk = self.backend
        name = bk._pod_name(broker_id)
        return str(bk._call(
            f"exec in {name}", stream, bk._core().connect_get_namespaced_pod_exec, name,
            bk.namespace, container="broker", command=[PYTHON, "-c", code], stderr=True,
            stdin=False, stdout=True, tty=False))

    _SIGNAL = ("import os, signal\n"
               "for p in os.listdir('/proc'):\n"
               "    if p.isdigit() and int(p) != os.getpid():\n"
               "        try: cmd = open(f'/proc/{p}/cmdline', 'rb').read()\n"
               "        except OSError: continue\n"
               "        if cmd.startswith(b'" + PYTHON + "\\0-m\\0weeble.runtime'):\n"
               "            {action}\n")

    def state(self, broker_id: str) -> BrokerState:
        p = self.pod(broker_id)
        if p is None:
            return BrokerState(broker_id, running=False, paused=False, handle=None,
                               detail="absent")
        phase = p.status.phase or "Unknown"
        running = phase == "Running"
        letter = ""
        if running:
            letter = self.exec(broker_id, self._SIGNAL.replace("{action}", (
                "print(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0])"))).strip()
        return BrokerState(broker_id, running=running, paused=letter == "T",
                           handle=p.metadata.uid, detail=f"{phase} {letter}".strip())

    def alive(self, broker_id: str) -> bool:
        p = self.pod(broker_id)
        return p is not None and p.status.phase == "Running" and \
            p.metadata.deletion_timestamp is None

    def handle(self, broker_id: str) -> str | None:
        p = self.pod(broker_id)
        return None if p is None else str(p.metadata.uid)

    def wait_healthy(self, broker_id: str, timeout: float, *, links: bool,
                     address: str) -> None:
        try:
            wait_serving(address, timeout, links=links, name=broker_id,
                         access=self.backend.access,
                         alive=lambda: True)  # a pod that is not up yet is coming
        except BackendError as e:
            raise BackendError(f"{e} at {address} (its pod's DNS name: the orchestrator must"
                               " run in the cluster, labelled"
                               " app.kubernetes.io/component=orchestrator)") from None

    def pause(self, broker_id: str) -> BrokerState:
        self.exec(broker_id, self._SIGNAL.replace("{action}",
                                                  "os.kill(int(p), signal.SIGSTOP)"))
        self.paused.add(broker_id)
        return self.state(broker_id)

    def resume(self, broker_id: str) -> BrokerState:
        self.exec(broker_id, self._SIGNAL.replace("{action}",
                                                  "os.kill(int(p), signal.SIGCONT)"))
        self.paused.discard(broker_id)
        return self.state(broker_id)

    def kill(self, broker_id: str) -> None:
        """Delete the pod at once (no grace): its RAM is gone; its StatefulSet makes anew."""
        from kubernetes import client

        bk = self.backend
        uid = self.handle(broker_id)
        bk._call(f"delete pod of {broker_id}", bk._core().delete_namespaced_pod,
                 bk._pod_name(broker_id), bk.namespace,
                 body=client.V1DeleteOptions(grace_period_seconds=0))
        deadline = time.monotonic() + 30
        while self.handle(broker_id) == uid and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self, targets: list[str], timeout: float = 10.0) -> dict[str, int | None]:
        """Scale every StatefulSet of the run to zero: every pod gets SIGTERM and its grace
        period."""
        bk = self.backend
        if set(targets) != set(bk._configs):
            raise BackendError("k8s: a StatefulSet stops all its brokers or none")
        for name in [STATEFULSET, *sorted(leaf_set(b) for b in bk._leaves)]:
            bk._call(f"scale {name} to 0", bk._apps().patch_namespaced_stateful_set_scale,
                     name, bk.namespace, {"spec": {"replicas": 0}})
        return dict.fromkeys(targets)

    def forget(self, broker_id: str) -> None:
        self.paused.discard(broker_id)

    def log_tail(self, broker_id: str, lines: int = 30) -> str:
        bk = self.backend
        try:
            return str(bk._call("logs", bk._core().read_namespaced_pod_log,
                                bk._pod_name(broker_id), bk.namespace,
                                container="broker", tail_lines=lines))
        except BackendError as e:
            return f"(no log: {e})"

    def collect_logs(self, dest: Path, brokers: list[str]) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for b in brokers:
            target = dest / f"{b}.log"
            target.write_text(self.log_tail(b, lines=100_000))
            out.append(target)
        return out


ENV_NAMESPACE, ENV_INSTANCE = "WEEBLE_K8S_NAMESPACE", "WEEBLE_K8S_INSTANCE"
ENV_POD = "WEEBLE_K8S_POD"


def default_image(api: Any = None) -> str:
    """The image a run's brokers run: $WEEBLE_IMAGE; else, in the orchestrator's pod, the
    image that pod runs (whatever the user's overlay set it to); else this source tree's
    content tag (`weeble image build`), else the release's."""
    if os.environ.get("WEEBLE_IMAGE"):
        return os.environ["WEEBLE_IMAGE"]
    if os.environ.get(ENV_POD) and os.environ.get(ENV_NAMESPACE) and api is not None:
        from kubernetes import client

        try:
            me = client.CoreV1Api(api).read_namespaced_pod(os.environ[ENV_POD],
                                                           os.environ[ENV_NAMESPACE])
            return str(me.spec.containers[0].image)
        except Exception as e:
            raise BackendError(f"k8s: the orchestrator's own pod: {e}") from None
    from weeble.orchestrator.backends import image

    try:
        return image.broker_tag()
    except (OSError, BackendError):  # no source tree (pyproject.toml) here
        return RELEASE_IMAGE


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
            # KUBECONFIG as it is now (the client reads it once, when first imported)
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)
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
