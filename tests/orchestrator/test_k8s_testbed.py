"""The testbed in the cluster (k8s/overlays/testbed): the orchestrator's Job, its ServiceAccount,
Role and RoleBinding. The Role grants exactly the verbs the backend's calls need, derived from
the backend's source through the client's own request paths; in its own namespace the backend
stays there (no cluster-scoped call) and removes what it made."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from tests.orchestrator.test_kubernetes import K8S_VERSION, _Api, api, kustomize  # noqa: F401
from tests.runtime.livebed import REPO
from weeble.model.scenario import load_scenario
from weeble.orchestrator.backend import AdminAccess, Ports
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.orchestrator.testbed import broker_configs

GROUPS = {"_core": client.CoreV1Api, "_apps": client.AppsV1Api,
          "_net": client.NetworkingV1Api, "_policy": client.PolicyV1Api}
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _request(api_class: type, method: str) -> tuple[str, str]:
    """(HTTP method, path template) of a client method, from the client's own code."""
    for name in (f"_{method}_serialize", f"{method}_with_http_info"):
        if hasattr(api_class, name):
            src = inspect.getsource(getattr(api_class, name))
            found = re.findall(r"method='(\w+)',\s*resource_path='([^']+)'", src) or \
                [(m, p) for p, m in re.findall(r"call_api\(\s*'([^']+)',\s*'(\w+)'", src)]
            if found:
                return found[0]
    raise AssertionError(f"{api_class.__name__}.{method}: no request path found")


def _permission(http: str, path: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) that RBAC checks for a request."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[:2] == ["namespaces", "{namespace}"]:
        rest = rest[2:]
    resource = rest[0] + ("/" + rest[2] if len(rest) > 2 else "")
    verb = VERBS.get(http) or ("get" if len(rest) > 1 else "list")
    return group, resource, verb


def _backend_calls() -> set[tuple[str, str]]:
    """Every client method the backend calls: `self._core().x`, ..., and the client class
    calls (`client.CoreV1Api(api).x`)."""
    tree = ast.parse(Path(k8s.__file__).read_text())
    calls = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Call):
            continue
        fn = node.value.func
        if isinstance(fn, ast.Attribute) and fn.attr in GROUPS:
            calls.add((fn.attr, node.attr))
        elif isinstance(fn, ast.Attribute) and fn.attr.endswith("Api") and \
                hasattr(client, fn.attr):
            calls.add(({v.__name__: k for k, v in GROUPS.items()}[fn.attr], node.attr))
    return calls


def _granted() -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in k8s.ROLE_RULES for g in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def test_the_role_grants_exactly_what_the_backend_calls() -> None:
    calls = _backend_calls()
    assert ("_apps", "patch_namespaced_stateful_set_scale") in calls  # the scan sees them
    needed, cluster_scoped = set(), set()
    for group, method in calls:
        http, path = _request(GROUPS[group], method)
        if "{namespace}" not in path:  # a namespace of the run's own: not in the cluster
            cluster_scoped.add(method)
            continue
        g, r, v = _permission(http, path)
        needed.add((g, r, v))
        if r == "pods/exec":  # a websocket GET: `create` is checked since 1.31
            needed.add((g, r, "create"))
    assert cluster_scoped == {"create_namespace", "delete_namespace"}
    granted = _granted()
    assert needed - granted == set(), "the Role lacks these"
    assert granted - needed == set(), "the Role grants these, never used"


def test_in_its_own_namespace_the_backend_stays_there_and_cleans_up(
        api: tuple[Any, type[_Api]],  # noqa: F811 (the fixture)
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8s.ENV_NAMESPACE, "weeble-testbed")
    monkeypatch.setenv(k8s.ENV_INSTANCE, "testbed")
    api_client, recorder = api
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    topology = scenario.build_topology()
    backend = k8s.KubernetesBackend(tmp_path, AdminAccess("t" * 32), run_id="Any_1",
                                    api=api_client, image="reg/weeble-broker:1")
    assert (backend.namespace, backend.instance) == ("weeble-testbed", "testbed")
    places = backend.plan(list(topology.brokers), list(topology.links),
                          Ports(listen=7000, admin=7001))
    configs = broker_configs(scenario, places, backend.peer_address, admin_token="t" * 32,
                             link_token="l" * 32, client_secret="c" * 32, tls=None,
                             trace_path=lambda b: backend.trace_path(tmp_path, b))
    for config in configs.values():
        backend.start_broker(config)
    created = {path for method, path, _ in recorder.log if method == "POST"}
    made = set(recorder.store)
    backend.cut_link("b0", "b1")
    backend.link_state("b0", "b1")
    backend.kill_broker("b3")
    backend.stop_all()
    backend.teardown()
    backend.close()
    paths = [(m, p.split("?")[0]) for m, p, _ in recorder.log]
    assert all("/namespaces/weeble-testbed/" in p for _, p in paths), paths
    granted = _granted()
    for method, path in paths:  # every request it made, the Role allows
        parts = path.strip("/").split("/")
        template = "/".join("{namespace}" if i > 0 and parts[i - 1] == "namespaces" else x
                            for i, x in enumerate(parts))
        assert _permission(method, "/" + template) in granted, (method, path)
    assert created and not (made & set(recorder.store)), "left behind after teardown"
    # the orchestrator of the testbed overlay is the pod the brokers admit
    job = next(o for o in kustomize("testbed") if o["kind"] == "Job")
    policies = [o for o in backend.objects() if o["kind"] == "NetworkPolicy"]
    broker = backend.pod_labels("b0")
    orchestrator = job["spec"]["template"]["metadata"]["labels"]
    assert k8s.admits(policies, broker, orchestrator, 7001)
    assert not k8s.admits(policies, broker, {**orchestrator, "app.kubernetes.io/instance": "x"},
                          7001)


def test_the_testbed_overlay_runs_the_scenario_with_its_role() -> None:
    rendered = kustomize("testbed")
    for obj in rendered:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    by_kind = {o["kind"]: o for o in rendered}
    job = by_kind["Job"]
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"][:4] == ["run", "/etc/weeble/scenario/quickstart.yaml",
                                     "--backend", "k8s"]
    assert container["image"] == k8s.RELEASE_IMAGE
    assert spec["serviceAccountName"] == k8s.ORCHESTRATOR_SA
    binding = by_kind["RoleBinding"]
    assert binding["roleRef"]["name"] == by_kind["Role"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": k8s.ORCHESTRATOR_SA,
                                    "namespace": "weeble-testbed"}]
    assert by_kind["Role"]["rules"] == k8s.ROLE_RULES
    scenario = by_kind["ConfigMap"]["data"]["quickstart.yaml"]
    assert scenario == (REPO / "scenarios" / "quickstart.yaml").read_text()
    # the runs go to the volume the results pod holds for `kubectl cp`
    runs = {m["mountPath"]: m for m in container["volumeMounts"]}[k8s.RUNS_DIR]
    assert {v["name"]: v for v in spec["volumes"]}[runs["name"]]["persistentVolumeClaim"] == \
        {"claimName": k8s.RUNS}
    holder = by_kind["Pod"]["spec"]
    assert {v["name"]: v for v in holder["volumes"]}["runs"]["persistentVolumeClaim"] == \
        {"claimName": k8s.RUNS}
    env = {e["name"]: e for e in container["env"]}
    assert env[k8s.ENV_NAMESPACE]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
