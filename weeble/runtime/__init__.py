"""Live brokers: the pure core driven by asyncio + grpc.aio (links, clients, admin, traces).

Entry points: `BrokerConfig` (one JSON document per broker), `BrokerServer` (in-process, one
asyncio loop), `BrokerProcess` (a `python -m weeble.runtime` subprocess), `AdminClient`.
"""
