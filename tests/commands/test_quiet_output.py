"""Quiet by default: gRPC's C-core INFO lines (one `Got goaway` per channel when brokers stop)
and Spark's JVM output stay out of the terminal; `-v` brings them back; identical client errors
are said once and counted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from weeble.analytics.spark import stderr_to
from weeble.cli import build_parser
from weeble.orchestrator.workload import Repeats

# A server stopped under an open stream sends its client GOAWAY "Cancelling all calls": the
# line a broker network's shutdown printed once per channel.
GOAWAY = """
import asyncio, sys
import weeble.cli  # what `weeble` loads before it configures the output
assert "grpc" not in sys.modules
from weeble.verbosity import configure_output
configure_output(sys.argv[1] == "verbose")
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

async def once():
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
    await call.read()
    await server.stop(0)
    try:
        await call.read()
    except grpc.aio.AioRpcError as e:
        print(e.code().name)
    await asyncio.sleep(0.2)
    await channel.close()

async def main():
    # the socket's close can overtake the GOAWAY: several rounds, so that some send it
    for _ in range(8):
        await once()

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["quiet", "verbose"])
def test_grpc_core_logs_stay_out_unless_verbose(mode: str) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GRPC_VERBOSITY", "GRPC_TRACE", "WEEBLE_VERBOSE")}
    done = subprocess.run([sys.executable, "-c", GOAWAY, mode], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    assert set(done.stdout.split()) == {"UNAVAILABLE"}  # the server went away under the call
    assert ("Got goaway" in done.stderr) is (mode == "verbose"), done.stderr


def test_verbose_is_accepted_before_and_after_the_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["-v", "check", "RUN"]).verbose is True
    assert parser.parse_args(["check", "RUN", "-v"]).verbose is True
    assert parser.parse_args(["check", "RUN"]).verbose is False


def test_a_process_started_while_stderr_is_redirected_keeps_writing_to_the_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "spark.log"
    with stderr_to(log):  # as Spark's JVM is started inside it
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys, time; sys.stderr.write('WARN first\\n');"
                                  " sys.stderr.flush(); time.sleep(0.5);"
                                  " sys.stderr.write('WARN later\\n')"])
    print("back", file=sys.stderr)
    assert child.wait(timeout=60) == 0
    assert log.read_text() == "WARN first\nWARN later\n"
    err = capfd.readouterr().err
    assert "back" in err and "WARN" not in err


def test_identical_client_errors_are_said_once_then_counted() -> None:
    repeats = Repeats()
    crash = "pb4@b4 publish: UNAVAILABLE: failed to connect to all addresses"
    said = [repeats.first(crash) for _ in range(11)]
    assert said == [True] + [False] * 10
    assert repeats.first("sb1@b1 subscribe: DEADLINE_EXCEEDED") is True
    assert repeats.summary() == [f"{crash} (repeated: 11 times in all)"]
