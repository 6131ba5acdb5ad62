"""`python -m weeble.broker.runtime --config cfg.json`: run one broker process.

SIGTERM or SIGINT drains the outgoing link queues, flushes the trace and exits 0. Exit code 2:
bad configuration; 3: the broker could not start (address in use, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from weeble.broker.core.rom import ConfigError
from weeble.broker.runtime.config import BrokerConfig
from weeble.broker.runtime.server import BrokerServer, StartupError


async def serve(config: BrokerConfig) -> None:
    server = BrokerServer(config)
    await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    print(f"READY {config.broker_id} {config.listen_address} {config.admin_address}", flush=True)
    await server.wait_stopped()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weeble.broker.runtime",
                                     description="Run one live Weeble broker.")
    parser.add_argument("--config", required=True, help="BrokerConfig JSON file")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    try:
        config = BrokerConfig.load(args.config)
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
