"""`weeble publish --broker ADDR class=3 city=Oslo`: publish a notification from a terminal."""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
from typing import Any

_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?$")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "publish",
        help="publish a notification to a live broker",
        description="Publish one notification with the given attributes (NAME=VALUE: 3 and"
                    " 2.5 are numbers, true/false booleans, anything else (or \"quoted\") a"
                    " string). Prints each notification's id, publisher:seq.",
    )
    p.add_argument("attributes", nargs="+", metavar="NAME=VALUE")
    p.add_argument("--token", metavar="TOKEN",
                   help="this client's token (default: $WEEBLE_CLIENT_TOKEN, else derived from"
                        " the run in ./runs that has this broker)")
    p.add_argument("--broker", required=True, metavar="HOST:PORT",
                   help="the broker's clients address (see `weeble status`)")
    p.add_argument("--client", help="publisher id (default: a fresh one per invocation)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="publish N times")
    p.add_argument("--interval", type=float, default=0.0, metavar="S",
                   help="seconds between repeats (default: 0)")
    p.set_defaults(handler=run)


def parse_attribute(text: str) -> tuple[str, Any]:
    from weeble.commands import UsageError

    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        raise UsageError(f"attribute {text!r}: expected NAME=VALUE, NAME like class or a.b_c")
    raw = raw.strip()
    if raw in ("true", "false"):
        return name, raw == "true"
    if _NUMBER.match(raw):
        from weeble.core.filters import attribute_error

        value = float(raw) if any(c in raw for c in ".eE") else int(raw)
        why = attribute_error(name, value)  # 1e999 is inf
        if why is not None:
            raise UsageError(f"attribute {text!r}: {why}")
        return name, value
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            return name, json.loads(raw)
        except ValueError:
            raise UsageError(f"attribute {text!r}: bad quoted string") from None
    return name, raw


def run(args: argparse.Namespace) -> int:
    import asyncio

    from weeble.commands import UsageError
    from weeble.runtime.config import split_address

    try:
        split_address(args.broker)
    except ValueError as e:
        raise UsageError(f"--broker: {e}") from None
    if args.repeat < 1:
        raise UsageError(f"--repeat: must be >= 1, got {args.repeat}")
    attributes = dict(parse_attribute(a) for a in args.attributes)
    client = args.client or f"cli-{os.getpid()}-{secrets.token_hex(2)}"
    asyncio.run(_publish(args, client, attributes))
    return 0


async def _publish(args: argparse.Namespace, client: str, attributes: dict[str, Any]) -> None:
    """One publish stream for every repeat; each line is printed once the broker accepted it."""
    import asyncio

    import grpc

    from weeble.commands import UsageError, client_tls, client_token
    from weeble.runtime.client import Publisher

    token = client_token(args.broker, client, args.token)
    async with Publisher(args.broker, client, token=token,
                         tls=client_tls(args.broker)) as pub:
        for i in range(args.repeat):
            if i and args.interval > 0:
                await asyncio.sleep(args.interval)
            try:
                n = await pub.publish(attributes)
            except grpc.aio.AioRpcError as e:
                raise UsageError(f"broker {args.broker}: {e.code().name}: {e.details()}"
                                 ) from None
            except TimeoutError:
                raise UsageError(f"broker {args.broker}: no acknowledgement within"
                                 f" {pub.timeout:g} s (is the run up? `weeble status`)") from None
            print(f"published {n.publisher}:{n.seq} {json.dumps(n.attributes)}", flush=True)
