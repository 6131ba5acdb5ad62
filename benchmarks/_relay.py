"""The raw grpc.aio baseline of the live benchmarks: one relay process, nothing but gRPC.

    python benchmarks/_relay.py --listen HOST:PORT [--next HOST:PORT] [--batch B]

It speaks the brokers' wire protocol (weeble.v1) with the same batching, and does nothing else:
the first relay takes a PublishStream (and acknowledges it cumulatively), relays pass
Envelope batches over weeble.v1.Link/Connect streams, and the last one serves a Subscribe
stream with NotificationBatches of up to the batch size the subscriber asks for. Every relay
parses what it receives and serializes what it sends (the protobuf library's own code, in C),
so it is the floor any Python gRPC broker with this protocol stands on: no routing, no
metrics, no traces. It imports only gRPC and the generated protobuf code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weeble.proto.v1 import client_pb2, link_pb2

CONNECT = "/weeble.v1.Link/Connect"


def serve_relay(listen: str, next_hop: str | None, batch: int) -> None:
    async def main() -> None:
        queue: asyncio.Queue[client_pb2.Notification] = asyncio.Queue()
        out_call: Any = None
        seq = 0
        if next_hop is not None:
            out_call = channel(next_hop).stream_stream(CONNECT)()

        async def forward(notifications: Any) -> None:
            """To the next relay in Envelope batches of up to `batch`, or to the subscriber."""
            nonlocal seq
            if out_call is None:
                for n in notifications:
                    queue.put_nowait(n)
                return
            envs = []
            for n in notifications:
                seq += 1
                envs.append(link_pb2.Envelope(seq=seq, notify=link_pb2.NotifyMsg(notification=n)))
            for i in range(0, len(envs), batch):
                chunk = envs[i:i + batch]
                out = chunk[0] if len(chunk) == 1 else link_pb2.Envelope(
                    batch=link_pb2.Batch(envelopes=chunk))
                await out_call.write(out.SerializeToString())

        async def connect(request_iterator: Any, context: Any) -> None:
            async for data in request_iterator:
                env = link_pb2.Envelope.FromString(data)
                inner = env.batch.envelopes if env.HasField("batch") else [env]
                await forward([e.notify.notification for e in inner])

        async def publish_stream(request_iterator: Any, context: Any) -> None:
            accepted = 0
            changed = asyncio.Event()

            async def acknowledge() -> None:  # coalesced, as the broker does
                acked = 0
                while True:
                    await changed.wait()
                    changed.clear()
                    if accepted > acked:
                        acked = accepted
                        await context.write(
                            client_pb2.PublishAck(accepted=acked).SerializeToString())

            writer = asyncio.create_task(acknowledge())
            try:
                async for data in request_iterator:
                    request = client_pb2.PublishRequest.FromString(data)
                    await forward(request.notifications)
                    accepted += len(request.notifications)
                    changed.set()
            finally:
                writer.cancel()

        async def subscribe(data: bytes, context: Any) -> Any:
            request = client_pb2.SubscribeRequest.FromString(data)
            yield client_pb2.SubscriptionEvent(
                sub_id=request.sub_id, subscribed=client_pb2.Subscribed(sub_id=request.sub_id)
            ).SerializeToString()
            most = max(1, request.max_batch)
            while True:
                items = [await queue.get()]
                while len(items) < most and not queue.empty():
                    items.append(queue.get_nowait())
                if len(items) == 1:
                    event = client_pb2.SubscriptionEvent(sub_id=request.sub_id,
                                                         notification=items[0])
                else:
                    event = client_pb2.SubscriptionEvent(
                        sub_id=request.sub_id,
                        batch=client_pb2.NotificationBatch(notifications=items))
                yield event.SerializeToString()

        # the keepalive pings of the client library's channels (weeble/runtime/client.py), as a
        # broker allows them (server.py): gRPC's default answers them with a GOAWAY
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0), *_SIZES,
                                          ("grpc.http2.min_recv_ping_interval_without_data_ms",
                                           5_000),
                                          ("grpc.http2.max_ping_strikes", 0)])
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("weeble.v1.Link", {
                "Connect": grpc.stream_stream_rpc_method_handler(connect)}),
            grpc.method_handlers_generic_handler("weeble.v1.Client", {
                "PublishStream": grpc.stream_stream_rpc_method_handler(publish_stream),
                "Subscribe": grpc.unary_stream_rpc_method_handler(subscribe)}),
        ))
        server.add_insecure_port(listen)
        await server.start()
        print("READY", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


_SIZES = [("grpc.max_send_message_length", 64 * 1024 * 1024),
          ("grpc.max_receive_message_length", 64 * 1024 * 1024)]


def channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=_SIZES)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--next")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    serve_relay(args.listen, args.next, args.batch)
