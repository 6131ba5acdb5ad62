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
