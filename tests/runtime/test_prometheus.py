"""A real Prometheus server (Debian package `prometheus`, installed by scripts/setup.sh) scrapes
two live brokers, and a broker metric is read back through Prometheus's HTTP API.

Never skipped: without the `prometheus` binary this test fails and says how to install it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.runtime.helpers import run
from tests.runtime.livebed import next_base_host, scenario, start
from weeble.orchestrator.local import free_port
from weeble.orchestrator.testbed import Testbed
from weeble.runtime.client import Publisher

PUBLISHED = 3


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Testbed]:
    bed = start(scenario(topology={"kind": "chain", "brokers": 2},
                         live={"metrics_port": 9100}), tmp_path / "runs")
    try:
        yield bed
    finally:
        bed.close()


@pytest.fixture
def prometheus(tmp_path: Path, brokers: Testbed) -> Iterator[str]:
    """A Prometheus server scraping both brokers every second; yields its base URL."""
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
            "job_name": "weeble",
            "static_configs": [
                {"targets": [brokers.address(b).metrics], "labels": {"broker": b}}
                for b in brokers.brokers
            ],
        }],
    }
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config_path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address={listen}", "--log.level=warn"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://{listen}"
        deadline = time.monotonic() + 60
        while not _ready(url):
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
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


def query(url: str, promql: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as reply:
        body = json.load(reply)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def eventually(url: str, promql: str, want: Any, what: str, timeout: float = 30) -> None:
    """Query until `want(result)` holds: Prometheus scrapes each target on its own schedule."""
    deadline = time.monotonic() + timeout
    while True:
        result = query(url, promql)
        if want(result):
            return
        assert time.monotonic() < deadline, f"{what}: {promql} -> {result}"
        time.sleep(0.5)


def test_prometheus_scrapes_broker_metrics(brokers: Testbed, prometheus: str) -> None:
    async def publish() -> None:
        async with Publisher(brokers.address("b0").listen, "prom",
                             token=brokers.client_token("prom")) as pub:
            for i in range(PUBLISHED):
                await pub.publish({"class": 1, "n": i})

    run(publish(), timeout=30)
    eventually(prometheus, 'weeble_publishes_total{job="weeble",broker="b0"}',
               lambda r: r and float(r[0]["value"][1]) == PUBLISHED,
               "b0's publish counter, read back through Prometheus")
    eventually(prometheus, 'up{job="weeble"}',
               lambda r: {x["metric"]["broker"]: x["value"][1] for x in r} == {"b0": "1",
                                                                             "b1": "1"},
               "both brokers scraped")
    eventually(prometheus, 'weeble_link_state{broker="b1",neighbor="b0",weeble_link_state="up"}',
               lambda r: r and r[0]["value"][1] == "1", "b1's link to b0 is up")
