"""Secure by default: every pod template of k8s/ meets the Pod Security "restricted" profile
(its rules, checked offline), and the broker container, run by the local Docker engine as the
pod runs it (its user, read-only root file system, no capability, no privilege escalation, no
shared process namespace), serves, is paused and resumed by the backend's own exec code as that
user, and ends on SIGTERM while paused."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.orchestrator.test_kubernetes import kustomize
from tests.runtime.livebed import REPO
from weeble.model.scenario import load_scenario
from weeble.orchestrator.backends import image
from weeble.orchestrator.backends import kubernetes as k8s

# https://kubernetes.io/docs/concepts/security/pod-security-standards/ (baseline + restricted)
VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                "persistentVolumeClaim", "projected", "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """What a pod spec breaks of the "restricted" profile (empty: it passes)."""
    bad = []
    pod_sc = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            bad.append(f"{key} set")
    if spec.get("shareProcessNamespace"):
        bad.append("shareProcessNamespace set (the issue asks for none)")
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= VOLUME_TYPES:
            bad.append(f"volume {v['name']}: type {kinds - VOLUME_TYPES}")
    for s in pod_sc.get("sysctls") or []:
        if s["name"] not in SAFE_SYSCTLS:
            bad.append(f"sysctl {s['name']}")
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        bad.append("hostProcess")
    containers = [*(spec.get("initContainers") or []), *spec["containers"],
                  *(spec.get("ephemeralContainers") or [])]
    for c in containers:
        sc, name = c.get("securityContext") or {}, c["name"]
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        caps = sc.get("capabilities") or {}
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: capabilities added {caps['add']}")
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities not dropped (ALL)")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            bad.append(f"{name}: hostPort")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation not false")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            bad.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            bad.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile {seccomp}")
        for se in (sc.get("seLinuxOptions") or {}, pod_sc.get("seLinuxOptions") or {}):
            if se.get("type") not in (None, "", "container_t", "container_init_t",
                                      "container_kvm_t") or se.get("user") or se.get("role"):
                bad.append(f"{name}: seLinuxOptions {se}")
        apparmor = (sc.get("appArmorProfile") or {}).get("type")
        if apparmor not in (None, "RuntimeDefault", "Localhost"):
            bad.append(f"{name}: appArmorProfile {apparmor}")
    return bad


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for o in objects:
        spec = o.get("spec") or {}
        if o["kind"] == "Pod":
            out.append((o["metadata"]["name"], spec))
        elif "template" in spec:
            out.append((f"{o['kind']}/{o['metadata']['name']}", spec["template"]["spec"]))
        elif o["kind"] == "CronJob":
            out.append((o["metadata"]["name"], spec["jobTemplate"]["spec"]["template"]["spec"]))
    return out


def test_the_rules_catch_what_the_issue_found() -> None:
    """The check itself: the pod as it was before (root, shared namespace, no context)."""
    old = {"shareProcessNamespace": True, "containers": [{"name": "broker"}],
           "volumes": [{"name": "x", "hostPath": {"path": "/"}}]}
    bad = restricted_violations(old)
    assert any("shareProcessNamespace" in b for b in bad)
    assert any("runAsNonRoot" in b for b in bad) and any("seccomp" in b for b in bad)
    assert any("hostPath" in b for b in bad) and any("ALL" in b for b in bad)


@pytest.mark.parametrize("overlay", sorted([*k8s.OVERLAYS, k8s.TESTBED[0]]))
def test_every_pod_meets_the_restricted_profile(overlay: str) -> None:
    rendered = kustomize(overlay)
    specs = pod_specs(rendered)
    assert specs, "no pod template rendered"
    for name, spec in specs:
        assert restricted_violations(spec) == [], name
        for c in spec["containers"]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
    (namespace,) = [o for o in rendered if o["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # only the orchestrator talks to the API server
    for name, spec in specs:
        assert spec["automountServiceAccountToken"] is (name == "Job/weeble-run"), name
    if overlay == k8s.TESTBED[0]:
        return
    brokers = next(s for n, s in specs if n == "StatefulSet/broker")
    # writable: the traces and /tmp only (the configs are read-only, the root file system too)
    mounts = brokers["containers"][0]["volumeMounts"]
    assert {m["mountPath"] for m in mounts if not m.get("readOnly")} == {k8s.TRACE_DIR, "/tmp"}


# ---- the broker container, as the pod runs it, in the local Docker engine ------------------------


@pytest.fixture
def pod_container(tmp_path: Path) -> Iterator[Any]:
    """Broker 0 of the small overlay, started as its StatefulSet's container would be: the
    same command, arguments, environment (tokens), user, read-only root, no capability."""
    client = image._client()
    tag = image.ensure_image()
    objects = k8s.scenario_manifests(
        load_scenario(REPO / k8s.OVERLAYS["small"]), instance="small",
        namespace="weeble-small", image=tag, tokens=("a" * 32, "l" * 32, "c" * 32))
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    statefulset = next(o for o in objects if o["kind"] == "StatefulSet")
    spec = statefulset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "broker-0.json").write_text(configmap["data"]["broker-0.json"])
    args = [a.replace("$(POD_NAME)", "broker-0") for a in container["args"]]
    env = {"WEEBLE_ADMIN_TOKEN": "a" * 32, "WEEBLE_LINK_TOKEN": "l" * 32,
           "WEEBLE_CLIENT_SECRET": "c" * 32, "POD_NAME": "broker-0"}
    sc, pod_sc = container["securityContext"], spec["securityContext"]
    traces = tmp_path / "traces"  # the emptyDir: writable by the pod's fsGroup
    traces.mkdir()
    os.chown(traces, pod_sc["runAsUser"], pod_sc["fsGroup"])
    uid = f"{pod_sc['runAsUser']}:{pod_sc['runAsGroup']}"
    run = client.containers.run(
        tag, [*container["command"], *args], detach=True, environment=env, user=uid,
        read_only=sc["readOnlyRootFilesystem"], cap_drop=sc["capabilities"]["drop"],
        security_opt=["no-new-privileges"], network_mode="none",
        volumes={str(configs): {"bind": k8s.CONFIG_DIR, "mode": "ro"},
                 str(traces): {"bind": k8s.TRACE_DIR, "mode": "rw"}},
        tmpfs={"/tmp": "mode=1777"},
        labels={"weeble.test": "k8s-security"})
    try:
        yield run
    finally:
        run.remove(force=True)


def _exec(container: Any, code: str) -> str:
    """The backend's exec (`KubePods.exec`): Python in the container, as its user."""
    result = container.exec_run([image.PYTHON, "-c", code])
    assert result.exit_code == 0, result.output.decode()
    return str(result.output.decode())


def test_the_pods_container_serves_pauses_and_stops_as_its_non_root_user(
        pod_container: Any) -> None:
    code = k8s.KubePods._SIGNAL  # the code the process control part execs in a pod
    state = code.replace("{action}", "print(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1]"
                                     ".split()[0], open(f'/proc/{p}/status').read()"
                                     ".split('Uid:')[1].split()[0], p)")
    for _ in range(300):  # the broker writes its trace's header once it serves
        pod_container.reload()
        assert pod_container.status == "running", pod_container.logs().decode()[-2000:]
        if "READY b0" in pod_container.logs().decode():
            break
        time.sleep(0.1)
    else:
        raise AssertionError(pod_container.logs().decode()[-2000:])
    letter, uid, pid = _exec(pod_container, state).split()
    assert letter in ("S", "R") and uid == str(image.UID) and pid != "1"  # a child of podinit
    _exec(pod_container, code.replace("{action}", "os.kill(int(p), signal.SIGSTOP)"))
    assert _exec(pod_container, state).split()[0] == "T"  # stopped by the kernel
    _exec(pod_container, code.replace("{action}", "os.kill(int(p), signal.SIGCONT)"))
    assert _exec(pod_container, state).split()[0] in ("S", "R")
    trace = _exec(pod_container, f"print(open('{k8s.TRACE_DIR}/b0.jsonl').readline())")
    assert json.loads(trace)["node"] == "b0"  # the trace volume is writable
    # paused again, then the pod is deleted (SIGTERM to pid 1): podinit wakes and ends it
    _exec(pod_container, code.replace("{action}", "os.kill(int(p), signal.SIGSTOP)"))
    pod_container.stop(timeout=15)
    pod_container.reload()
    assert pod_container.attrs["State"]["ExitCode"] == 0, pod_container.logs().decode()[-2000:]
