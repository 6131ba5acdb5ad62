"""The raw grpc.aio baseline of the live benchmarks: one relay process, nothing but gRPC.

    python benchmarks/_relay.py --listen HOST:PORT [--next HOST:PORT] [--batch B]

It accepts the brokers' link stream (weeble.v1.Link/Connect, Envelope bytes) and the client
Subscribe stream (or weeble.bench.Sink/Follow: the same, with batches of notifications).
What arrives is parsed and either re-serialized onward to --next in batches
of up to B envelopes, or, at the end of a chain, handed to the subscribe stream one
notification per message: the same dataflow as a broker, without routing, metrics or traces.
It imports only gRPC and the generated protobuf code, so its RSS is the floor too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weeble.proto.v1 import client_pb2, client_pb2_grpc, link_pb2

CONNECT = "/weeble.v1.Link/Connect"


def serve_relay(listen: str, next_hop: str | None, batch: int) -> None:
    """A relay process: parse what arrives on the link stream, re-serialize it onward in
    batches of up to `batch` (or hand it to the subscribe stream at the end of the chain)."""

    async def main() -> None:
        queue: asyncio.Queue[client_pb2.Notification] = asyncio.Queue()
        out_call: Any = None
        if next_hop is not None:
            out_ch = channel(next_hop)
            out_call = out_ch.stream_stream(CONNECT)()

        async def connect(request_iterator: Any, context: Any) -> None:
            async for data in request_iterator:
                env = link_pb2.Envelope.FromString(data)
                inner = env.batch.envelopes if env.HasField("batch") else [env]
                if out_call is None:
                    for e in inner:
                        queue.put_nowait(e.notify.notification)
                    continue
                envs = [link_pb2.Envelope(seq=e.seq, notify=e.notify).SerializeToString()
                        for e in inner]
                for i in range(0, len(envs), batch):
                    chunk = envs[i:i + batch]
                    await out_call.write(chunk[0] if len(chunk) == 1 else _batch(chunk))

        class Client(client_pb2_grpc.ClientServicer):
            async def Subscribe(self, request: Any, context: Any) -> Any:
                yield client_pb2.SubscriptionEvent(
                    sub_id=request.sub_id, subscribed=client_pb2.Subscribed(sub_id=request.sub_id))
                while True:
                    n = await queue.get()
                    yield client_pb2.SubscriptionEvent(sub_id=request.sub_id, notification=n)

        async def follow(_request: bytes, context: Any) -> Any:
            """Like Subscribe, but each message carries every queued notification (up to
            `batch`): what a subscribe stream with batching could reach."""
            while True:
                items = [await queue.get()]
                while len(items) < batch and not queue.empty():
                    items.append(queue.get_nowait())
                envs = [link_pb2.Envelope(notify=link_pb2.NotifyMsg(notification=n))
                        .SerializeToString() for n in items]
                yield _batch(envs)

        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "weeble.v1.Link", {"Connect": grpc.stream_stream_rpc_method_handler(connect)}),))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "weeble.bench.Sink", {"Follow": grpc.unary_stream_rpc_method_handler(follow)}),))
        client_pb2_grpc.add_ClientServicer_to_server(Client(), server)
        server.add_insecure_port(listen)
        await server.start()
        print("READY", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


def _batch(envs: list[bytes]) -> bytes:
    # Batch.envelopes (field 1) inside Envelope.batch (field 15), as the broker's wire.py does
    inner = b"".join(b"\x0a" + _varint(len(e)) + e for e in envs)
    return b"\x7a" + _varint(len(inner)) + inner


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=[
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--next")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    serve_relay(args.listen, args.next, args.batch)
