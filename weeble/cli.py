"""The `weeble` command line: argparse subcommands, one module each under weeble/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Adding a subcommand: write weeble/commands/<name>.py with `register`, add its name here.
COMMANDS = ("simulate", "up", "status", "down", "clean", "run", "chaos", "publish", "subscribe",
            "check", "analyze", "reproduce", "reconfigure", "image", "explore", "k8s", "shrink",
            "replay")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="weeble",
        description="Testbed for self-stabilizing publish/subscribe broker networks.",
    )
    verbose_help = ("also show the logs of gRPC's C core and of Spark's JVM (without it they"
                    " stay out of the terminal; Spark's go to RUN_DIR/spark.log)")
    parser.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"weeble.commands.{name}").register(subparsers)
    for sub in subparsers.choices.values():  # `weeble run X -v` as well as `weeble -v run X`
        sub.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help=verbose_help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from weeble.verbosity import configure_output

    # before the parser is built: building it imports the commands, and with them gRPC
    args_in = sys.argv[1:] if argv is None else list(argv)
    configure_output("-v" in args_in or "--verbose" in args_in)
    from weeble.commands import USER_ERRORS

    args = build_parser().parse_args(args_in)
    try:
        return int(args.handler(args))
    except USER_ERRORS as exc:
        message = str(exc)
        if isinstance(exc, FileNotFoundError) and exc.filename:
            message = f"{exc.filename}: no such file"
        elif isinstance(exc, OSError) and exc.filename:
            message = f"{exc.filename}: {exc.strerror}"
        print(f"weeble: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("weeble: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
