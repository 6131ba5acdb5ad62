"""The Docker backend's end of a run, against a stand-in engine (no Docker here; the real one
is in test_network_backends.py and test_backend_reconfig.py): containers stop one after the
other, never two at once (two containers leaving a shared network together can deadlock
Docker 20.10's network controller: backends/docker.py's docstring); a run's networks go only
once the engine lists none of its containers; and an engine that does not answer is an
EngineHang naming the step, after which nothing waits on it again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from weeble.orchestrator.backend import BackendError
from weeble.orchestrator.backends import docker as backend
from weeble.orchestrator.backends.docker import DockerContainers, EngineHang


@pytest.fixture(autouse=True)
def engine_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No hang carried over from or into another test; a diagnosis that asks no engine."""
    monkeypatch.setattr(backend, "_hung", None)
    monkeypatch.setattr(
        backend, "engine_diagnosis", lambda timeout=10.0: (True, "(the stand-in's diagnosis)")
    )
    monkeypatch.setattr(backend, "SETTLE", 0.0)
    yield


class Engine:
    """The low-level API the stops use: inspect, unpause, stop; a stop takes a moment, and
    counts how many run at once."""

    def __init__(self, hang_on: str | None = None) -> None:
        self.status = {"c0": "running", "c1": "paused", "c2": "running", "c3": "exited"}
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.stopped: list[str] = []
        self.hang_on = hang_on
        self.api = self

    def inspect_container(self, cid: str) -> dict[str, Any]:
        status = self.status[cid]
        return {
            "State": {
                "Status": status,
                "Paused": status == "paused",
                "ExitCode": 0 if status == "exited" else None,
            }
        }

    def unpause(self, cid: str) -> None:
        assert self.status[cid] == "paused"
        self.status[cid] = "running"

    def stop(self, cid: str, timeout: int) -> None:
        if cid == self.hang_on:
            raise requests.exceptions.ReadTimeout("UnixHTTPConnectionPool: Read timed out.")
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        time.sleep(0.05)
        with self.lock:
            self.active -= 1
        assert self.status[cid] == "running", self.status[cid]
        self.status[cid] = "exited"
        self.stopped.append(cid)

    def logs(self, cid: str) -> bytes:
        return b""


class Container:
    def __init__(self, cid: str) -> None:
        self.id = cid
        self.name = f"weeble-test-{cid}"


def containers(engine: Engine) -> DockerContainers:
    control = DockerContainers(Path("/nonexistent"), lambda: None)  # type: ignore[arg-type,return-value]
    control._engine = engine
    for cid in engine.status:
        control.containers[f"b{cid[1:]}"] = Container(cid)
    return control


def test_containers_stop_one_after_the_other() -> None:
    engine = Engine()
    control = containers(engine)
    control.paused.add("b1")
    codes = control.stop(["b0", "b1", "b2", "b3", "b9"], timeout=5)
    assert engine.most == 1  # never two stops at once
    assert engine.stopped == ["c0", "c1", "c2"]  # the paused one unpaused first; c3 had ended
    assert codes == {"b0": 0, "b1": 0, "b2": 0, "b3": 0, "b9": None}  # b9: no container
    assert not control.paused


def test_a_stop_the_engine_does_not_answer_names_the_container_and_is_not_waited_on_again() -> None:
    engine = Engine(hang_on="c2")
    control = containers(engine)
    with pytest.raises(
        EngineHang,
        match=r"stopping container weeble-test-c2 .*ReadTimeout"
        r".*the stand-in's diagnosis",
    ):
        control.stop(["b0", "b2", "b3"], timeout=5)
    assert engine.stopped == ["c0"]
    started = time.monotonic()
    with pytest.raises(
        EngineHang,
        match="inspecting container weeble-test-c3: not tried, the"
        " engine hung before: docker: stopping container",
    ):
        control.running("b3")  # the teardown at exit: no second wait on a hung engine
    assert time.monotonic() - started < 1.0
    assert isinstance(EngineHang("x"), BackendError)  # the orchestrator's error, with its text


class Network:
    def __init__(self, client: Client, name: str) -> None:
        self.client, self.name = client, name

    def remove(self) -> None:
        # the networks go only once the engine lists none of the run's containers
        assert self.client.listed_after_removal == 0, "a network removed before its containers"
        self.client.networks_removed.append(self.name)


class RunContainer:
    def __init__(self, client: Client, name: str) -> None:
        self.client, self.name, self.status = client, name, "running"

    def remove(self, force: bool) -> None:
        assert force
        self.client.removed.append(self.name)


class Client:
    """A run of two containers whose removal the engine takes a moment to finish: it lists
    them `lag` more times after the last was removed."""

    def __init__(self, lag: int) -> None:
        self.removed: list[str] = []
        self.networks_removed: list[str] = []
        self.lag = lag
        self.listed_after_removal = 0
        self.boxes = [RunContainer(self, "weeble-t-b0"), RunContainer(self, "weeble-t-b1")]
        self.containers = self
        self.networks = self

    def list(self, **kw: Any) -> list[Any]:
        if "all" not in kw:  # networks
            return [Network(self, "weeble-t-mgmt"), Network(self, "weeble-t-peers")]
        if len(self.removed) < len(self.boxes):
            return list(self.boxes)
        if self.lag > 0:
            self.lag -= 1
            self.listed_after_removal += 1
            return list(self.boxes)
        self.listed_after_removal = 0
        return []


def test_a_runs_networks_go_only_once_its_containers_are_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forgotten = []
    monkeypatch.setattr(backend.registry, "forget", lambda kind, tag: forgotten.append(tag))
    client = Client(lag=3)
    removed = backend._remove_run(client, "t")
    assert client.removed == ["weeble-t-b0", "weeble-t-b1"]
    assert client.networks_removed == ["weeble-t-mgmt", "weeble-t-peers"]
    assert removed == [
        "container weeble-t-b0",
        "container weeble-t-b1",
        "network weeble-t-mgmt",
        "network weeble-t-peers",
    ]
    assert forgotten == ["t"]


def test_containers_that_do_not_go_leave_the_networks_and_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forgotten = []
    monkeypatch.setattr(backend.registry, "forget", lambda kind, tag: forgotten.append(tag))
    client = Client(lag=10**9)
    with pytest.raises(
        BackendError,
        match=r"run t: container\(s\) weeble-t-b0, weeble-t-b1"
        r" still there 0.5 s after their removal",
    ):
        backend._remove_run(client, "t", wait=0.5)
    assert client.networks_removed == [] and forgotten == []  # `weeble clean`'s, later
