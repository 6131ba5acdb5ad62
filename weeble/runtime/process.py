"""BrokerProcess: one broker as a `python -m weeble.runtime` subprocess.

The unit the local backend (and the tests) start, wait for, stop and kill:

    proc = BrokerProcess(config, workdir)
    proc.start()
    proc.wait_ready(timeout=10, links=True)   # gRPC health: serving, and every link up
    ...
    code = proc.stop()                        # SIGTERM: drain, flush trace, exit 0

The config is written to workdir/<id>.json, stdout+stderr go to workdir/<id>.log. The child
runs in its own session, so a Ctrl-C at the terminal reaches the orchestrator, which then
stops the brokers in order, rather than every process at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from weeble.runtime.config import BrokerConfig
from weeble.runtime.links import LINK_SERVICE, tls_credentials
from weeble.runtime.private import private_dir


class BrokerStartError(RuntimeError):
    """The broker process exited or did not become ready; the message has its log's tail."""


class BrokerProcess:
    def __init__(self, config: BrokerConfig, workdir: Path | str, *,
                 python: str = sys.executable, log_level: str = "INFO",
                 env: dict[str, str] | None = None, prefix: list[str] | None = None,
                 health_address: str | None = None) -> None:
        """`prefix`: a command the broker runs under (e.g. `mnexec -a PID`, which enters a
        network namespace and then execs it, so the pid stays the broker's);
        `health_address`: where this process reaches the broker's health service (default:
        its listen address)."""
        self.config = config
        self.workdir = Path(workdir)
        self.python = python
        self.log_level = log_level
        self.env = env
        self.prefix = list(prefix or [])
        self.health_address = health_address or config.listen_address
        self.config_path = self.workdir / f"{config.broker_id}.json"
        self.log_path = self.workdir / f"{config.broker_id}.log"
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def broker_id(self) -> str:
        return self.config.broker_id

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running (pid {self.pid})")
        private_dir(self.workdir)  # the config holds tokens
        self.config.dump(self.config_path)
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [*self.prefix, self.python, "-m", "weeble.runtime",
                 "--config", str(self.config_path), "--log-level", self.log_level],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 15.0, *, links: bool = False) -> None:
        """Wait until the broker serves (and, with `links`, until all its links are up)."""
        deadline = time.monotonic() + timeout
        service = LINK_SERVICE if links else ""
        tls = self.config.link_tls
        channel = (grpc.insecure_channel(self.health_address) if tls is None else
                   grpc.secure_channel(self.health_address, tls_credentials(tls),
                                       options=[("grpc.ssl_target_name_override",
                                                 self.config.broker_id)]))
        with channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if not self.alive:
                    raise BrokerStartError(
                        f"broker {self.broker_id} exited with {self.returncode}:\n{self.log_tail()}"
                    )
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    what = "links up" if links else "serving"
                    raise BrokerStartError(
                        f"broker {self.broker_id} not {what} after {timeout}s:\n{self.log_tail()}"
                    )
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (graceful drain), then SIGKILL after `timeout`; returns the exit code."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def kill(self) -> int | None:
        """SIGKILL: a crash. The trace may end in a torn line; readers skip it."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        return self.popen.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
