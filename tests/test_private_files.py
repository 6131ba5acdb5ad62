"""Issue 12, finding 4: files with tokens or keys are 0600, in 0700 directories.

The probe found runs/<id>/brokers/b*.json at 0644 with the admin and link tokens in them. A
permissive umask makes the point: the modes must not depend on it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.livebed import scenario
from weeble.orchestrator.testbed import Testbed
from weeble.runtime.certs import generate_run_certs


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_keeps_its_tokens_and_keys_private(tmp_path: Path, permissive_umask: None) -> None:
    bed = Testbed.plan(scenario(topology={"kind": "chain", "brokers": 2}, live={"tls": True}),
                       runs_dir=tmp_path / "runs", any_ports=True)
    try:
        for b, config in bed.configs.items():  # what starting a broker writes
            config.dump(bed.backend.config_path(b))
            config.dump(bed.backend.config_path(b))  # rewriting keeps the mode
        secrets = [c.admin_token for c in bed.configs.values()] + [bed.link_token]
        holders = []
        for path in sorted(bed.run_dir.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if any(s.encode() in data for s in secrets) or b"PRIVATE KEY" in data:
                    holders.append(path)
                    assert mode(path) == 0o600, path
                    for d in path.relative_to(bed.run_dir).parents:
                        assert mode(bed.run_dir / d) == 0o700, bed.run_dir / d
        names = {p.relative_to(bed.run_dir).as_posix() for p in holders}
        assert {"testbed.json", "brokers/b0.json", "brokers/b1.json"} <= names
        assert any(n.endswith(".key") for n in names)
        assert not [p for p in bed.run_dir.rglob(".*.tmp")]
    finally:
        bed.backend.close()


def test_certificate_keys_are_private_from_the_start(tmp_path: Path,
                                                    permissive_umask: None) -> None:
    certs = generate_run_certs(tmp_path / "tls", {"b1": ["127.0.0.1"]})
    assert mode(tmp_path / "tls") == 0o700
    assert mode(certs.brokers["b1"][1]) == 0o600 and mode(certs.client_key) == 0o600
