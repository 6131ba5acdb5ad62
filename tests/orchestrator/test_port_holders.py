"""A restart that cannot bind waits for its address, then says who holds it (issue 23 item 5)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from weeble.orchestrator.backend import BackendError
from weeble.orchestrator.local import LocalBackend, check_free, holders


def test_the_process_listening_on_an_address_is_named() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        assert holders(address) == []  # bound, not listening
        s.listen()
        (who,) = holders(address)
        assert who.startswith(f"pid {os.getpid()} (")
    assert holders(address) == []


def test_a_restart_waits_for_its_address_to_be_released_then_names_who_holds_it(
        tmp_path: Path) -> None:
    """Issue 23 item 5: a restart whose killed broker's process still holds its address (it is
    still exiting, under load) waits until the address is free instead of failing at once with
    "Address already in use"; if it never is, the error names the holder."""
    backend = LocalBackend(tmp_path, cast(Any, None))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            address = f"127.0.0.1:{held.getsockname()[1]}"
            config = cast(Any, SimpleNamespace(broker_id="b3", listen_address=address,
                                               admin_address=address, metrics_address=None))
            with pytest.raises(BackendError, match=rf"held by pid {os.getpid()} \("):
                backend.await_addresses(config, timeout=0.2)
            release = threading.Timer(0.3, held.close)  # the exiting broker lets go
            release.start()
            backend.await_addresses(config, timeout=120)  # returns once it is free
            release.join()
        check_free(address, "listen address")  # free indeed
    finally:
        backend.close()
