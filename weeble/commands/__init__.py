"""The `weeble` subcommands, one module each.

A command module exposes `register(subparsers)`, which adds its parser and sets `handler` (a
function taking the parsed arguments and returning the exit status). `weeble.cli.COMMANDS` lists
the modules. Errors the user can fix are raised as one of `USER_ERRORS`: the CLI prints them as
`weeble: error: <message>` and exits 2.
"""

from __future__ import annotations

from weeble.broker.core.filters import FilterSyntaxError
from weeble.broker.core.rom import ConfigError
from weeble.model.scenario import ScenarioError
from weeble.orchestrator.backend import BackendError


class UsageError(Exception):
    """A command-line mistake a command detects itself (bad combination of options, ...)."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    # OSError: a missing scenario file, an --out directory that cannot be written, ...
    ScenarioError, ConfigError, FilterSyntaxError, UsageError, OSError, BackendError,
)


OPEN_CLIENTS_NOTE = ("weeble: note: OPEN client mode (scenario live.open_clients): the brokers"
                     " do not authenticate clients, any client may use any client id; for"
                     " local play only")


def client_token(broker: str, client: str, token: str | None, *,
                 runs_dir: str = "runs") -> str | None:
    """The token that proves `client` to the broker at `broker`: --token, else the
    environment's WEEBLE_CLIENT_TOKEN, else derived from the run (in `runs_dir`, readable by
    this user only) whose broker listens there. None: no run found (an open broker needs none;
    one that authenticates refuses the client with UNAUTHENTICATED, naming the metadata)."""
    import os
    from pathlib import Path

    from weeble.broker.runtime.clientauth import client_token as derive
    from weeble.broker.runtime.config import BrokerConfig
    from weeble.orchestrator.testbed import STATE_FILE, read_state

    if token:
        return token
    if os.environ.get("WEEBLE_CLIENT_TOKEN"):
        return os.environ["WEEBLE_CLIENT_TOKEN"]
    runs = Path(runs_dir)
    states = sorted(runs.glob(f"*/{STATE_FILE}"), key=lambda p: p.stat().st_mtime,
                    reverse=True) if runs.is_dir() else []
    for state in states[:100]:  # the newest runs: the one up now is among them
        try:
            brokers = read_state(state.parent)["brokers"]
            info = next((i for i in brokers.values() if i.get("listen") == broker), None)
            if info is None:
                continue
            secret = BrokerConfig.load(info["config"]).client_secret
        except (OSError, KeyError, ValueError, ConfigError, BackendError):
            continue
        return None if secret is None else derive(secret, client)
    return None
