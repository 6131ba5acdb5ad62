"""A real Prometheus server (Debian package `prometheus`, installed by scripts/setup.sh) for the
live tests: started on loopback scraping the given targets every second, queried through its
HTTP API. Never skipped: without the `prometheus` binary a test fails and says how to install
it."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.runtime.livebed import next_base_host
from weeble.orchestrator.local import free_port


@contextmanager
def prometheus_server(workdir: Path, targets: dict[str, str],
                      job: str = "weeble") -> Iterator[str]:
    """Prometheus scraping `targets` (broker id -> host:port, each labelled `broker`) every
    second, its data in `workdir`; yields its base URL, and stops it after."""
    binary = shutil.which("prometheus")
    assert binary is not None, (
        "the `prometheus` binary is not on PATH: run scripts/setup.sh (as root it installs the"
        " Debian package: apt-get install -y prometheus)"
    )
    host = next_base_host()
    listen = f"{host}:{free_port(host)}"
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": job,
            "static_configs": [{"targets": [address], "labels": {"broker": broker}}
                               for broker, address in targets.items()],
        }],
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config_path}", f"--storage.tsdb.path={workdir / 'tsdb'}",
         f"--web.listen-address={listen}", "--log.level=warn"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://{listen}"
        deadline = time.monotonic() + 60
        while not _ready(url):
            assert proc.poll() is None, (workdir / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prometheus not ready after 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _get(url: str, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}{path}?{q}", timeout=10) as reply:
        body = json.load(reply)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query: the series and their values now."""
    return _get(url, "/api/v1/query", {"query": promql})


def query_range(url: str, promql: str, start: float, end: float,
                step: float = 1.0) -> list[dict[str, Any]]:
    """A range query, as Grafana runs a panel's or an annotation's query over its time range."""
    return _get(url, "/api/v1/query_range", {"query": promql, "start": start, "end": end,
                                             "step": step})


def eventually(url: str, promql: str, want: Any, what: str, timeout: float = 30) -> None:
    """Query until `want(result)` holds: Prometheus scrapes each target on its own schedule."""
    deadline = time.monotonic() + timeout
    while True:
        result = query(url, promql)
        if want(result):
            return
        assert time.monotonic() < deadline, f"{what}: {promql} -> {result}"
        time.sleep(0.5)
