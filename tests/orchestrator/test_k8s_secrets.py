"""Secrets per deployment: k8s/ commits none; `weeble k8s secrets` writes a fresh one (mode
0600) that the overlay's pods take; a broker refuses to start with a placeholder or empty
token, naming the variable."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from tests.orchestrator.test_kubernetes import kustomize
from tests.runtime.livebed import REPO
from weeble.cli import main
from weeble.model.scenario import load_scenario
from weeble.orchestrator.backends import kubernetes as k8s
from weeble.runtime import __main__ as broker_main


def test_no_secret_is_committed() -> None:
    for path in (REPO / "k8s").rglob("*.yaml"):
        for obj in yaml.safe_load_all(path.read_text()):
            assert not (obj and obj.get("kind") == "Secret"), path
            assert "change-me" not in path.read_text(), path


def test_secrets_writes_fresh_tokens_the_overlay_uses(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "secret.yaml"
    assert main(["k8s", "secrets", "-n", "weeble-small", "-o", str(out)]) == 0
    assert "kubectl apply -f" in capsys.readouterr().out
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    (secret,) = list(yaml.safe_load_all(out.read_text()))
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == k8s.TOKENS
    assert secret["metadata"]["namespace"] == "weeble-small"
    tokens = secret["stringData"]
    assert len(set(tokens.values())) == 3 and all(len(t) >= 43 for t in tokens.values())
    # the keys are those the StatefulSet reads
    statefulset = next(o for o in kustomize("small") if o["kind"] == "StatefulSet")
    refs = {e["valueFrom"]["secretKeyRef"]["key"]
            for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == set(tokens)
    # a second deployment gets other tokens; an existing file is not overwritten by mistake
    assert main(["k8s", "secrets", "-n", "weeble-small", "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    other = tmp_path / "other.yaml"
    assert main(["k8s", "secrets", "-n", "weeble-small", "-o", str(other)]) == 0
    assert not set(yaml.safe_load(other.read_text())["stringData"].values()) & \
        set(tokens.values())


def _config(tmp_path: Path) -> Path:
    """Broker 0 of the small overlay, as its ConfigMap holds it (placeholders for tokens)."""
    objects = k8s.scenario_manifests(load_scenario(REPO / k8s.OVERLAYS["small"]),
                                     instance="small", namespace="weeble-small",
                                     image=k8s.RELEASE_IMAGE, tokens=("", "", ""))
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    path = tmp_path / "broker-0.json"
    path.write_text(configmap["data"]["broker-0.json"])
    assert json.loads(path.read_text())["admin_token"] == broker_main.TOKEN_PLACEHOLDER
    return path


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("WEEBLE_ADMIN_TOKEN", "", "WEEBLE_ADMIN_TOKEN is not set or empty"),
    ("WEEBLE_LINK_TOKEN", "change-me-link-token", "WEEBLE_LINK_TOKEN is a placeholder"),
    ("WEEBLE_CLIENT_SECRET", broker_main.TOKEN_PLACEHOLDER,
     "WEEBLE_CLIENT_SECRET is a placeholder"),
    ("WEEBLE_CLIENT_SECRET", None, "WEEBLE_CLIENT_SECRET is not set"),
])
def test_a_broker_refuses_a_placeholder_or_empty_token(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        variable: str, value: str | None, said: str) -> None:
    good = {"WEEBLE_ADMIN_TOKEN": "a" * 43, "WEEBLE_LINK_TOKEN": "l" * 43,
            "WEEBLE_CLIENT_SECRET": "c" * 43}
    for k, v in good.items():
        monkeypatch.setenv(k, v)
    if value is None:
        monkeypatch.delenv(variable)
    else:
        monkeypatch.setenv(variable, value)
    config = _config(tmp_path)
    assert broker_main.main(["--tokens-from-env", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert said in err and "bad config" in err
    # with every token real, the config is accepted (the tokens are the environment's)
    monkeypatch.setenv(variable, good[variable])
    loaded = broker_main.tokens_from_env(broker_main.BrokerConfig.load(config))
    assert (loaded.admin_token, loaded.link_token, loaded.client_secret) == \
        (good["WEEBLE_ADMIN_TOKEN"], good["WEEBLE_LINK_TOKEN"], good["WEEBLE_CLIENT_SECRET"])
