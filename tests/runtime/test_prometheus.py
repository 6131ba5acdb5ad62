"""A real Prometheus server (Debian package `prometheus`, installed by scripts/setup.sh) scrapes
two live brokers, and a broker metric is read back through Prometheus's HTTP API.

Never skipped: without the `prometheus` binary this test fails and says how to install it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.helpers import run
from tests.runtime.livebed import scenario, start
from tests.runtime.prometheus import eventually, prometheus_server
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
    with prometheus_server(tmp_path, {b: brokers.address(b).metrics
                                      for b in brokers.brokers}) as url:
        yield url


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
