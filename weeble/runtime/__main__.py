"""`python -m weeble.runtime --config cfg.json`: run one broker process.

SIGTERM or SIGINT drains the outgoing link queues, flushes the trace and exits 0. Exit code 2:
bad configuration; 3: the broker could not start (address in use, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys

from pydantic import ValidationError

from weeble.core.rom import ConfigError
from weeble.runtime.config import BrokerConfig, format_errors
from weeble.runtime.server import BrokerServer, StartupError

# The cyclic collector, tuned for a traced broker process (measured: docs/performance.md,
# "Tracing a live broker" and "Issue 25 item 2, continued"): what exists once the broker is up
# (modules, gRPC, the configuration) is frozen out of every collection, and the young
# generation is collected every 20,000 allocations instead of 700. A traced broker keeps a
# flush interval's notifications queued, so with the defaults they were walked again and
# again on their way to the old generation (tuned: 15.0 against 19.25 µs of CPU per
# notification). An untraced broker queues no objects per notification, and tuned it spent
# 5-10% more CPU per notification, so it keeps Python's defaults.
GC_THRESHOLD = (20_000, 50, 100)


async def serve(config: BrokerConfig) -> None:
    server = BrokerServer(config)
    await server.start()
    if server.trace.enabled:
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLD)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    print(f"READY {config.broker_id} {config.listen_address} {config.admin_address}", flush=True)
    await server.wait_stopped()


# The stand-in a ConfigMap's config holds for each token, and the prefix of example values:
# a broker started with one of them would run with a token anyone can read.
TOKEN_PLACEHOLDER = "from-secret-broker-tokens"
EXAMPLE_PREFIX = "change-me"


def _unusable(value: str | None) -> str | None:
    """Why this token cannot be used (None: it can)."""
    if not value:
        return "not set or empty"
    if value == TOKEN_PLACEHOLDER or value.lower().startswith(EXAMPLE_PREFIX):
        return f"a placeholder ({value[:40]!r}): generate one (weeble k8s secrets)"
    return None


def tokens_from_env(config: BrokerConfig) -> BrokerConfig:
    names = [("admin_token", "WEEBLE_ADMIN_TOKEN"), ("link_token", "WEEBLE_LINK_TOKEN")]
    # the client secret too, unless the config says the broker is open to any client
    if not config.open_clients and config.client_secret is not None:
        names.append(("client_secret", "WEEBLE_CLIENT_SECRET"))
    tokens = {field: os.environ.get(var) for field, var in names}
    bad = [f"{var} is {why}" for field, var in names
           if (why := _unusable(tokens[field])) is not None]
    if bad:
        raise ConfigError(f"--tokens-from-env: {'; '.join(bad)}")
    try:
        return BrokerConfig.model_validate({**config.model_dump(), **tokens})
    except ValidationError as e:
        raise ConfigError(f"--tokens-from-env: {format_errors(e)}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weeble.runtime",
                                     description="Run one live Weeble broker.")
    parser.add_argument("--config", required=True, help="BrokerConfig JSON file")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--tokens-from-env", action="store_true",
                        help="take admin_token and link_token from the environment variables"
                             " WEEBLE_ADMIN_TOKEN and WEEBLE_LINK_TOKEN (a Kubernetes Secret),"
                             " not from the config (a ConfigMap)")
    args = parser.parse_args(argv)
    try:
        config = BrokerConfig.load(args.config)
        if args.tokens_from_env:
            config = tokens_from_env(config)
    except ConfigError as e:
        print(f"weeble broker: bad config: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s {config.broker_id} %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(config))
    except StartupError as e:
        print(f"weeble broker {config.broker_id}: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
