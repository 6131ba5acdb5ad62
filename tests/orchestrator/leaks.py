"""What a backend test may leave behind: nothing. A snapshot of the system's namespaces,
interfaces, processes, containers and networks of the runs of one test (those whose run
directory lies under the test's own folder: other test sessions on the machine run their own
Mininet and Docker runs meanwhile), before and after."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from weeble.orchestrator.backends import registry

ROOT_INTF = re.compile(r"^w([0-9a-f]{4})m\d+$")  # Mininet management veths (root side)


@dataclass(frozen=True)
class Snapshot:
    namespaces: frozenset[str]  # network namespaces held by weeble's processes
    interfaces: frozenset[str]  # root-namespace interfaces of weeble's naming
    processes: frozenset[str]  # "pid cmdline" of weeble's processes (brokers, host shells)
    containers: frozenset[str]  # docker containers labelled weeble.run
    networks: frozenset[str]  # docker networks labelled weeble.run


def _mininet_tags(marker: str) -> set[str]:
    """The Mininet runs (tags) whose run directory lies under `marker`."""
    return {tag for tag, entry in registry.entries("mininet").items()
            if marker in str(entry.get("workdir", ""))}


def _ours(cmd: str, marker: str, tags: set[str]) -> bool:
    return any(f"mininet:w{tag}" in cmd for tag in tags) or (
        "weeble.runtime" in cmd and marker in cmd)


_engine_hung: str | None = None  # the Docker engine gave no answer to the last check


def _docker(kind: str, marker: str) -> frozenset[str]:
    """The IDs of weeble's containers or networks of the test under `marker`. An engine that
    does not answer fails the check saying so; while it has not answered again, a check waits
    5 s, not 30: a deadlocked engine (backends/docker.py) does not recover until dockerd
    restarts, and 30 s per test made one hang 43 failures in a slow row."""
    global _engine_hung
    if not Path("/var/run/docker.sock").exists():
        return frozenset()
    wait = 30 if _engine_hung is None else 5
    command = ["docker", kind, "ls", *(["-a"] if kind == "container" else []),
               "--filter", "label=weeble.run", "--format", '{{.ID}} {{.Label "weeble.workdir"}}']
    try:
        out = subprocess.run(command, capture_output=True, text=True, check=False,
                             timeout=wait).stdout
    except subprocess.TimeoutExpired:
        _engine_hung = _engine_hung or (
            f"`docker {kind} ls` gave no answer in {wait} s ({time.strftime('%H:%M:%S')}): the"
            " Docker engine hangs (its network controller deadlocked? moby/moby#42545);"
            " restart dockerd")
        raise AssertionError(f"leak check not possible: {_engine_hung}") from None
    _engine_hung = None
    return frozenset(line.split()[0] for line in out.splitlines()
                     if line.strip() and marker in line)


def snapshot(marker: str) -> Snapshot:
    """Weeble's footprint; `marker` (a test's tmp path) picks that test's broker processes."""
    processes, namespaces = set(), set()
    tags = _mininet_tags(marker)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if not _ours(cmd, marker, tags):
                continue
            processes.add(f"{entry.name} {cmd.strip()}")
            ns = os.readlink(entry / "ns" / "net")
            if ns != os.readlink("/proc/self/ns/net"):  # the root namespace: not one of ours
                namespaces.add(ns)
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    interfaces = {li["ifname"] for li in links
                  if (m := ROOT_INTF.match(li["ifname"])) and m.group(1) in tags}
    return Snapshot(frozenset(namespaces), frozenset(interfaces), frozenset(processes),
                    _docker("container", marker), _docker("network", marker))


def leaked(before: Snapshot, after: Snapshot) -> dict[str, list[str]]:
    """What `after` has that `before` had not, by kind ({} = nothing leaked)."""
    out = {}
    for kind in ("namespaces", "interfaces", "processes", "containers", "networks"):
        new = sorted(getattr(after, kind) - getattr(before, kind))
        if new:
            out[kind] = new
    return out
