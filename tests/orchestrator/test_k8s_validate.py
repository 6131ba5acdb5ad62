"""Offline validation an SRE would run before `kubectl apply`: every rendered overlay against
the API's JSON schemas of each Kubernetes minor from 1.29 to the newest kubernetes-validate
ships (strict: no unknown field), checkov's checks (every skip justified: k8s/.checkov.yaml
and the objects' own checkov.io/skip annotations), and yamllint over k8s/ and the rendered
output (k8s/.yamllint)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate import utils as kv_utils
from yamllint import config as yl_config
from yamllint import linter

from tests.runtime.livebed import REPO
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.orchestrator.backends import monitoring

OVERLAYS = sorted([*k8s.OVERLAYS, k8s.TESTBED[0], monitoring.NAME])
MINORS = sorted({v for v in kv_utils.all_versions()
                 if tuple(map(int, v.split(".")[:2])) >= (1, 29)},
                key=lambda v: tuple(map(int, v.split("."))))


def _render(overlay: str) -> str:
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "k8s" / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_minors_run_from_1_29_to_the_newest() -> None:
    assert MINORS[0] == "1.29.0" and MINORS[-1] == kv_utils.latest_version()
    assert len(MINORS) >= 9  # 1.29 .. 1.37 as pinned


def _shape(obj: Any) -> Any:
    """What the schemas see of an object: its fields and types (the values of the 121 link
    policies differ, their shapes do not)."""
    if isinstance(obj, dict):
        return {k: _shape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        shapes = [json.dumps(_shape(v), sort_keys=True) for v in obj]
        return [json.loads(s) for s in dict.fromkeys(shapes)]
    return type(obj).__name__


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly_on_every_minor(overlay: str) -> None:
    import yaml

    rendered = list(yaml.safe_load_all(_render(overlay)))
    # one object of each shape (the schemas check fields and types; kinds and enums too)
    objects = list({json.dumps(_shape(o) | {"kind": o["kind"]}, sort_keys=True): o
                    for o in rendered}.values())
    assert {o["kind"] for o in objects} == {o["kind"] for o in rendered}
    for version in MINORS:
        for obj in objects:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                raise AssertionError(f"{version} {obj['kind']}/{obj['metadata']['name']}:"
                                     f" {e.message}") from None


def test_checkov_passes_with_every_skip_justified(tmp_path: Path) -> None:
    for overlay in OVERLAYS:
        (tmp_path / f"{overlay}.yaml").write_text(_render(overlay))
    checkov = Path(sys.executable).parent / "checkov"
    assert checkov.exists(), "checkov is missing: pip install -e .[test] (bash scripts/setup.sh)"
    out = subprocess.run([str(checkov), "-d", str(tmp_path), "--config-file",
                          str(REPO / "k8s" / ".checkov.yaml"), "-o", "json"],
                         capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    results = report["results"]
    failed = [(c["check_id"], c["resource"]) for c in results["failed_checks"]]
    assert failed == [], failed
    assert report["summary"]["passed"] > 100  # it read the objects
    for skipped in results["skipped_checks"]:  # each with its reason, in the object
        assert len((skipped.get("check_result") or {}).get("suppress_comment") or "") > 20, \
            skipped["check_id"]
    # the file-wide skips each carry a comment saying why
    text = (REPO / "k8s" / ".checkov.yaml").read_text().splitlines()
    for i, line in enumerate(text):
        if line.strip().startswith("- CKV"):
            assert text[i - 1].strip().startswith("#"), line


def test_yamllint_is_clean_on_k8s_and_the_rendered_overlays() -> None:
    conf = yl_config.YamlLintConfig(file=str(REPO / "k8s" / ".yamllint"))
    problems = []
    for path in sorted((REPO / "k8s").rglob("*.yaml")):
        problems += [f"{path}:{p}" for p in linter.run(path.read_text(), conf)]
    for overlay in OVERLAYS:
        problems += [f"{overlay} (rendered):{p}" for p in linter.run(_render(overlay), conf)]
    assert problems == []


# ---- limits that scale -----------------------------------------------------------------------

ANNOTATION_LIMIT = 262_144  # all annotations of an object (client-side apply's copy is one)
CONFIGMAP_LIMIT = 1_048_576  # a ConfigMap's data
OBJECT_LIMIT = 1_572_864  # etcd's request size, the API server's default


def test_a_1000_broker_overlay_keeps_every_object_within_the_apis_limits(
        tmp_path: Path) -> None:
    import shutil

    import yaml

    from weeble.cli import main
    from weeble.model.scenario import parse_scenario

    scenario = tmp_path / "big.yaml"
    scenario.write_text(yaml.safe_dump(
        {"name": "big", "duration": 10, "topology": {"kind": "kary", "m": 10, "levels": 4},
         "routing": {"algorithm": "identity"},
         "timing": {"pi": 4, "rho": 2, "delta_min": 0, "delta_max": 0.05}}))
    n = len(parse_scenario(yaml.safe_load(scenario.read_text()),
                           source=str(scenario)).build_topology().brokers)
    assert n >= 1000
    shutil.copytree(REPO / "k8s" / "base", tmp_path / "k8s" / "base")
    out = tmp_path / "k8s" / "overlays" / "big"
    assert main(["k8s", "render", str(scenario), "--name", "big", "--out", str(out)]) == 0
    rendered = subprocess.run(["kubectl", "kustomize", str(out)], capture_output=True,
                              text=True, timeout=300, check=False)
    assert rendered.returncode == 0, rendered.stderr
    # libyaml's loader: PyYAML's pure one takes most of this test's time on 1,111 brokers
    objects = list(yaml.load_all(rendered.stdout,
                                 Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    configmaps = [o for o in objects if o["kind"] == "ConfigMap"]
    assert sum(len(o["data"]) for o in configmaps) == n + 1 and len(configmaps) > 1
    statefulset = next(o for o in objects if o["kind"] == "StatefulSet")
    assert statefulset["spec"]["replicas"] == n
    sources = next(v for v in statefulset["spec"]["template"]["spec"]["volumes"]
                   if v["name"] == "configs")["projected"]["sources"]
    assert sorted(s["configMap"]["name"] for s in sources) == \
        sorted(o["metadata"]["name"] for o in configmaps)  # every pod sees every config
    assert sum(o["kind"] == "NetworkPolicy" for o in objects) == n + 2
    for obj in objects:
        size = len(json.dumps(obj, separators=(",", ":")))
        what = f"{obj['kind']}/{obj['metadata']['name']}: {size} bytes"
        assert size < OBJECT_LIMIT, what
        # client-side apply stores the object in an annotation: it must fit with room to spare
        assert size < ANNOTATION_LIMIT - 4096, what
        if obj["kind"] == "ConfigMap":
            assert sum(len(k) + len(v.encode()) for k, v in obj["data"].items()) < \
                CONFIGMAP_LIMIT, what
        assert len(obj["metadata"]["name"]) <= 63, what
        for value in (obj["metadata"].get("labels") or {}).values():
            assert len(value) <= 63, what
