"""How much of the C core's and the JVM's own logging reaches the terminal (`weeble -v`).

Stdlib only, and imported before anything that loads gRPC: its core reads GRPC_VERBOSITY once,
when it starts.
"""

from __future__ import annotations

import os

VERBOSE_ENV = "WEEBLE_VERBOSE"


def configure_output(verbose: bool) -> None:
    """Keep the C core's and the JVM's logs out of the terminal unless asked for. gRPC reads
    GRPC_VERBOSITY when its core starts (its INFO lines, such as one `Got goaway ... Cancelling
    all calls` per channel when brokers stop, went to the terminal); the brokers and `weeble
    analyze`, started from here, inherit the setting. A GRPC_VERBOSITY the user set is kept."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
        os.environ.setdefault("GRPC_VERBOSITY", "INFO")
    elif os.environ.get(VERBOSE_ENV) != "1":
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def verbose() -> bool:
    """-v was given (here or to the weeble command that started this process)."""
    return os.environ.get(VERBOSE_ENV) == "1"
