"""The analysis on a Spark standalone cluster: a master and two workers on this machine (on
127.0.0.1 only), started with the daemon script the PySpark package ships
(`pyspark/sbin/spark-daemon.sh`, which Spark's own start-master.sh and start-worker.sh wrap;
the pip package leaves those two out), then `spark-submit --master spark://...` of
weeble/analytics/submit.py over a simulated run. Its answers must equal `weeble check`'s. The
cluster is stopped whatever happens."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyspark
import pytest

from tests.analytics.conftest import C1_ONLY
from weeble.check.history import check_run
from weeble.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
DAEMON = SPARK_HOME / "sbin" / "spark-daemon.sh"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_PID_DIR": str(tmp_path / "pids"),
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_IDENT_STRING": "weeble-test",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_DAEMON_JAVA_OPTS": C1_ONLY}  # the master's and workers' JVMs (conftest)
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"

    def daemon(*args: str) -> None:
        subprocess.run(["bash", str(DAEMON), *args], env=env, check=True, timeout=120,
                       capture_output=True)

    def alive() -> int | None:
        """The workers registered with the master; None while its web UI does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except OSError:
            return None

    def wait_for(ready: Callable[[int | None], bool], what: str) -> None:
        deadline = time.monotonic() + 180
        while not ready(alive()):
            assert time.monotonic() < deadline, f"{what}: see {tmp_path / 'logs'}"
            time.sleep(0.2)

    started: list[tuple[str, str]] = []
    try:
        daemon("start", MASTER, "1", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui))
        started.append((MASTER, "1"))
        # The workers start once the master answers (a worker that finds no master retries
        # only 5-15 s later), both at once (the daemon script waits 2.5 s after each start).
        wait_for(lambda n: n is not None, f"the master at {url} did not start")
        started += [(WORKER, "1"), (WORKER, "2")]
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda n: daemon(
                "start", WORKER, n, "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                "--webui-port", str(free_port()), url), ("1", "2")))
        wait_for(lambda n: n == 2, f"the workers did not register with {url}")
        yield url, env
    finally:
        for cls, n in reversed(started):
            subprocess.run(["bash", str(DAEMON), "stop", cls, n], env=env, timeout=120,
                           capture_output=True, check=False)
        for pid in (tmp_path / "pids").glob("*.pid"):  # none may outlive the test
            with pytest.raises(ProcessLookupError):
                os.kill(int(pid.read_text()), 0)


def test_spark_submit_on_a_standalone_cluster_agrees_with_weeble_check(
        cluster: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, env = cluster
    run = tmp_path / "run"
    assert main(["simulate", str(Path(__file__).parent / "data" / "report-run.yaml"),
                 "--out", str(run), "--quiet"]) == 0
    done = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url,
         "--conf", "spark.driver.memory=1g", "--conf", "spark.executor.memory=768m",
         "--conf", "spark.executor.cores=1", "--driver-java-options", C1_ONLY,
         "--conf", f"spark.executor.extraJavaOptions={C1_ONLY}",
         str(ROOT / "weeble" / "analytics" / "submit.py"), str(run), "--no-report"],
        env=env, capture_output=True, text=True, timeout=1200, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    # the driver's progress lines ("analyze: ingest", ...) come first; then the JSON document
    lines = done.stdout.splitlines()
    shown = json.loads("\n".join(lines[lines.index("{"):]))
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["run"]["dir"] == str(run)
    # the jobs ran on the cluster: one application, an executor on each worker
    (app,) = Path(env["SPARK_WORKER_DIR"]).glob("app-*")
    assert len([e for e in app.iterdir() if e.is_dir()]) == 2

    reference = check_run(run)
    assert shown["verdict"]["status"] == reference["verdict"]["status"] == "pass"
    d, r = summary["deliveries"], reference["deliveries"]
    for k in ("publications", "judged", "correct", "expected", "delivered", "missing",
              "window", "spurious", "duplicate", "phantom"):
        assert d[k] == r[k], k
    assert [f["fault_id"] for f in shown["faults"]] == [
        f["fault_id"] for f in reference["verdict"]["faults"]] == ["f0", "f1"]
    for f, g in zip(shown["faults"], reference["verdict"]["faults"], strict=True):
        assert f["service_time"] == pytest.approx(g["service_time"], abs=1e-6)
        assert f["state_time"] == pytest.approx(g["state_time"], abs=1e-6)
        assert (f["lost"], f["duplicated"], f["reordered"]) == (
            g["lost"], g["duplicated"], g["reordered"])
    ops = [(o["rid"], o["lost"], o["duplicated"], o["reordered"], o["verdict"])
           for o in summary["reconfigurations"]["operations"]]
    assert ops == [(o["rid"], o["lost"], o["duplicated"], o["reordered"], o["verdict"])
                   for o in reference["operations"]]
