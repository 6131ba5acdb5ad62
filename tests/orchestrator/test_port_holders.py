"""A restart that cannot bind says who holds the address (issue 23 item 5)."""

from __future__ import annotations

import os
import socket

from weeble.orchestrator.local import holders


def test_the_process_listening_on_an_address_is_named() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        assert holders(address) == []  # bound, not listening
        s.listen()
        (who,) = holders(address)
        assert who.startswith(f"pid {os.getpid()} (")
    assert holders(address) == []
