"""Which runs of a backend kind exist on this machine, and whether their owner still lives.

A Mininet or Docker run leaves things on the system (namespaces, veths, containers,
networks) that outlive its orchestrator if that dies without cleaning up. Each run writes an
entry /run/weeble/<kind>-<tag>.json naming its owner (pid), its workdir, and whether it was
handed on (`weeble up`: detached). A run whose owner is gone and that was not handed on is a
leftover: `clean_leftovers` of its backend removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REGISTRY = Path("/run/weeble")


def path(kind: str, tag: str) -> Path:
    return REGISTRY / f"{kind}-{tag}.json"


def register(kind: str, tag: str, workdir: Path, *, detached: bool = False) -> None:
    REGISTRY.mkdir(parents=True, exist_ok=True)
    path(kind, tag).write_text(json.dumps({"owner": os.getpid(), "workdir": str(workdir),
                                           "detached": detached}))


def forget(kind: str, tag: str) -> None:
    path(kind, tag).unlink(missing_ok=True)


def entries(kind: str) -> dict[str, dict[str, Any]]:
    """tag -> entry, for every registered run of `kind`."""
    out: dict[str, dict[str, Any]] = {}
    if not REGISTRY.is_dir():
        return out
    for p in REGISTRY.glob(f"{kind}-*.json"):
        try:
            entry = json.loads(p.read_text())
        except (OSError, ValueError):
            entry = {}
        out[p.stem.removeprefix(f"{kind}-")] = entry if isinstance(entry, dict) else {}
    return out


def owner_alive(entry: dict[str, Any]) -> bool:
    pid = entry.get("owner")
    if not isinstance(pid, int):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def claimed(entry: dict[str, Any]) -> bool:
    """The run is someone's: handed on by `weeble up`, or its owner still runs."""
    return bool(entry.get("detached")) or owner_alive(entry)


@contextlib.contextmanager
def machine_lock(kind: str) -> Iterator[None]:
    """One run of `kind` at a time picks its tag and addresses (they must not collide)."""
    REGISTRY.mkdir(parents=True, exist_ok=True)
    with (REGISTRY / f"{kind}.lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
