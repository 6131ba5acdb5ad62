"""The `weeble` subcommands, one module each.

A command module exposes `register(subparsers)`, which adds its parser and sets `handler` (a
function taking the parsed arguments and returning the exit status). `weeble.cli.COMMANDS` lists
the modules. Errors the user can fix are raised as one of `USER_ERRORS`: the CLI prints them as
`weeble: error: <message>` and exits 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.filters import FilterSyntaxError
from weeble.core.rom import ConfigError
from weeble.model.scenario import ScenarioError
from weeble.orchestrator.backend import BackendError

if TYPE_CHECKING:
    from weeble.runtime.client import ClientTls


class UsageError(Exception):
    """A command-line mistake a command detects itself (bad combination of options, ...)."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    # OSError: a missing scenario file, an --out directory that cannot be written, ...
    ScenarioError, ConfigError, FilterSyntaxError, UsageError, OSError, BackendError,
)


def add_mode_option(p: Any) -> None:
    """`--mode`: run the scenario in another stabilization mode than its `mode:` says."""
    from weeble.core.rom import Mode

    p.add_argument("--mode", choices=[m.value for m in Mode],
                   help="how routing tables are kept correct: leasing (seed 000, the default),"
                        " anti_entropy (seed 002: Bloom sketches per tree edge) or skip_ring"
                        " (seed 003); overrides the scenario's `mode:`")


def add_junit_option(p: Any) -> None:
    """`--junit FILE`: the verdict as JUnit XML too (weeble.commands.junit)."""
    p.add_argument("--junit", metavar="FILE",
                   help="also write the verdict as JUnit XML to FILE: one test case per fault"
                        " episode, per reconfiguration and per run-level rule, the reason as"
                        " the failure message (docs/guide/results.md)")


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

    from weeble.runtime.clientauth import client_token as derive
    from weeble.runtime.config import BrokerConfig

    if token:
        return token
    if os.environ.get("WEEBLE_CLIENT_TOKEN"):
        return os.environ["WEEBLE_CLIENT_TOKEN"]
    found = _run_of(broker, runs_dir)
    if found is None:
        return None
    try:
        secret = BrokerConfig.load(found[1]["config"]).client_secret
    except (OSError, KeyError, ConfigError):
        return None
    return None if secret is None else derive(secret, client)


def client_tls(broker: str, *, runs_dir: str = "runs") -> ClientTls | None:
    """The run's client TLS for the broker at `broker` (a run with `live.tls`), from the run
    in `runs_dir` whose broker listens there; None: plain, or no run found."""
    from weeble.runtime.client import ClientTls

    found = _run_of(broker, runs_dir)
    if found is None:
        return None
    admin = found[0].get("admin") or {}
    if not (admin.get("ca") and admin.get("client_cert") and admin.get("client_key")):
        return None
    try:
        return ClientTls.from_files(admin["ca"], admin["client_cert"], admin["client_key"])
    except OSError:
        return None


def _run_of(broker: str, runs_dir: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(state, broker info) of the newest run in `runs_dir` with a broker listening at
    `broker`."""
    from pathlib import Path

    from weeble.orchestrator.testbed import STATE_FILE, read_state

    runs = Path(runs_dir)
    states = sorted(runs.glob(f"*/{STATE_FILE}"), key=lambda p: p.stat().st_mtime,
                    reverse=True) if runs.is_dir() else []
    for state in states[:100]:  # the newest runs: the one up now is among them
        try:
            data = read_state(state.parent)
            info = next((i for i in data["brokers"].values() if i.get("listen") == broker),
                        None)
        except (OSError, KeyError, ValueError, BackendError):
            continue
        if info is not None:
            return data, info
    return None
