"""`weeble subscribe --broker ADDR 'class == 3'`: print matching notifications until Ctrl-C.

The subscription's lease is refreshed every --rho seconds, as every client must (SC-4); Ctrl-C
unsubscribes and exits cleanly. When the broker goes away (stopped, restarted, unreachable) the
command says so on stderr and keeps reconnecting with backoff, saying when it is subscribed
again; notifications published while it was away are not replayed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
from typing import Any

CONNECT_TIMEOUT = 10.0


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "subscribe",
        help="subscribe at a live broker and print what arrives",
        description="Subscribe with FILTER (e.g. 'class == 3 && price < 10') at a broker and"
                    " print each delivered notification as a JSON line, until Ctrl-C,"
                    " --count or --timeout. A lost broker is reported on stderr and"
                    " reconnected with backoff.",
    )
    p.add_argument("filter", help="filter text, e.g. 'class == 3'")
    p.add_argument("--token", metavar="TOKEN",
                   help="this client's token (default: $WEEBLE_CLIENT_TOKEN, else derived from"
                        " the run in ./runs that has this broker)")
    p.add_argument("--broker", required=True, metavar="HOST:PORT",
                   help="the broker's clients address (see `weeble status`)")
    p.add_argument("--client", help="client id (default: a fresh one per invocation)")
    p.add_argument("--rho", type=float, default=1.0, metavar="S",
                   help="lease refresh period; must be below the brokers' pi (default: 1)")
    p.add_argument("--count", type=int, metavar="N", help="exit after N notifications")
    p.add_argument("--timeout", type=float, metavar="S", help="exit after S seconds")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.commands import UsageError
    from weeble.core.filters import Filter
    from weeble.runtime.config import split_address

    try:
        split_address(args.broker)
    except ValueError as e:
        raise UsageError(f"--broker: {e}") from None
    if not args.rho > 0:
        raise UsageError(f"--rho: must be > 0, got {args.rho}")
    Filter.parse(args.filter)  # a syntax error is the user's, reported before any connection
    client = args.client or f"cli-{os.getpid()}-{secrets.token_hex(2)}"
    # Ctrl-C is the normal way to stop; `follow` has unsubscribed by the time it propagates
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(follow(args, client))
    return 0


async def follow(args: argparse.Namespace, client: str) -> None:
    import grpc

    from weeble.commands import UsageError, client_tls, client_token
    from weeble.runtime.client import Subscriber

    def status(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    token = client_token(args.broker, client, args.token)
    async with Subscriber(args.broker, client, rho=args.rho, on_status=status,
                          tls=client_tls(args.broker),
                          token=token) as sub:
        try:
            sub_id = await sub.subscribe(args.filter, timeout=CONNECT_TIMEOUT)
        except TimeoutError:
            raise UsageError(f"broker {args.broker}: no answer within {CONNECT_TIMEOUT:g}s"
                             " (is the run up? `weeble status`)") from None
        except grpc.aio.AioRpcError as e:
            raise UsageError(f"broker {args.broker}: {e.code().name}: {e.details()}") from None
        print(f"subscribed at {args.broker} as {client} ({sub_id}): {args.filter}"
              " (Ctrl-C to stop)", file=sys.stderr, flush=True)
        count = 0
        try:
            async with asyncio.timeout(args.timeout):
                async for d in sub:
                    n = d.notification
                    print(json.dumps({"sub_id": d.sub_id, "publisher": n.publisher,
                                      "seq": n.seq, "attributes": n.attributes}), flush=True)
                    count += 1
                    if args.count is not None and count >= args.count:
                        break
        except TimeoutError:
            pass  # --timeout reached
        finally:
            # also on Ctrl-C (the task is cancelled): leave no subscription behind
            with contextlib.suppress(grpc.aio.AioRpcError, KeyError, TimeoutError):
                async with asyncio.timeout(3):
                    await sub.unsubscribe(sub_id)
