"""A per-peer cap on open streams, for every streaming method of a gRPC server.

An open stream costs the broker memory (the probe: 5,000 idle PublishStreams took RSS from 72
to 154 MB) whether or not it is ever authenticated; services check who is calling only when
the first request arrives (the client service, the link hello), and some never do (Health
Watch, reflection). So a server interceptor counts the open streams of each peer address
(the host, without the port: a peer opening many connections is still one peer) and refuses
one over `Tuning.max_streams_per_peer` with RESOURCE_EXHAUSTED naming the limit. Unary calls
end on their own and are not counted; one whose request never arrives is ended by
`RequestDeadline` (below) after `Tuning.hello_timeout_s`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import Counter as Tally
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from weeble.runtime.quiet import rate_limited

log = rate_limited(logging.getLogger(__name__))


def peer_host(peer: str) -> str:
    """'ipv4:127.0.0.5:41234' -> 'ipv4:127.0.0.5'; 'ipv6:[::1]:5' -> 'ipv6:[::1]'."""
    head, sep, port = peer.rpartition(":")
    return head if sep and port.isdigit() else peer


class PeerStreamCap(grpc.aio.ServerInterceptor):
    """Counts the open streams per peer host; refuses those beyond `limit`."""

    def __init__(self, limit: int, on_refused: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.open: Tally[str] = Tally()
        self.refused = 0
        self._on_refused = on_refused

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        if handler.unary_stream is not None:
            return handler._replace(  # type: ignore[attr-defined]
                unary_stream=self._guard(handler.unary_stream))
        if handler.stream_stream is not None:
            return handler._replace(  # type: ignore[attr-defined]
                stream_stream=self._guard(handler.stream_stream))
        if handler.stream_unary is not None:
            return handler._replace(  # type: ignore[attr-defined]
                stream_unary=self._guard(handler.stream_unary))
        return handler

    async def _enter(self, context: grpc.aio.ServicerContext) -> str:
        host = peer_host(context.peer() or "")
        if self.open[host] >= self.limit:
            self.refused += 1
            if self._on_refused is not None:
                self._on_refused()
            log.warning("refused a stream from %s: %d streams open (max_streams_per_peer)",
                        host, self.open[host])
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"{host} has {self.open[host]} streams open here, the most"
                                f" one peer may (max_streams_per_peer = {self.limit})")
        self.open[host] += 1
        return host

    def _leave(self, host: str) -> None:
        self.open[host] -= 1
        if self.open[host] <= 0:
            del self.open[host]

    def _guard(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):
            async def generator(request: Any, context: grpc.aio.ServicerContext
                                ) -> AsyncIterator[Any]:
                host = await self._enter(context)
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._leave(host)
            return generator

        async def coroutine(request: Any, context: grpc.aio.ServicerContext) -> Any:
            host = await self._enter(context)
            try:
                return await behavior(request, context)
            finally:
                self._leave(host)
        return coroutine


class RequestDeadline(grpc.aio.ServerInterceptor):
    """A unary-request call (unary, or a server stream such as Subscribe or Health Watch) whose
    request never arrives is ended within `timeout` seconds with DEADLINE_EXCEEDED.

    gRPC runs a unary-request handler only once the request has arrived, so no handler can
    time a silent call out: the call, opened and never sent, is held for good (as the
    PublishStreams were before their first-request timeout). Unary and streaming requests are
    the same frames on the wire; this interceptor serves unary-request methods as
    stream-request ones, reads the one request within the timeout, then calls the method's
    own behaviour with it. List it first (outermost): the stream cap then counts only the
    calls it counted before."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.timed_out = 0

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_streaming:
            return handler
        method = details.method
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            unary = handler.unary_unary

            async def stream_unary(_requests: Any, context: grpc.aio.ServicerContext) -> Any:
                return await unary(await self._request(method, context), context)
            return handler._replace(  # type: ignore[attr-defined]
                request_streaming=True, unary_unary=None, stream_unary=stream_unary)
        behavior = handler.unary_stream
        if behavior is not None and inspect.isasyncgenfunction(behavior):
            async def stream_gen(_requests: Any, context: grpc.aio.ServicerContext
                                 ) -> AsyncIterator[Any]:
                async for item in behavior(await self._request(method, context), context):
                    yield item
            return handler._replace(  # type: ignore[attr-defined]
                request_streaming=True, unary_stream=None, stream_stream=stream_gen)
        if behavior is not None and inspect.iscoroutinefunction(behavior):
            async def stream_coro(_requests: Any, context: grpc.aio.ServicerContext) -> None:
                await behavior(await self._request(method, context), context)
            return handler._replace(  # type: ignore[attr-defined]
                request_streaming=True, unary_stream=None, stream_stream=stream_coro)
        return handler  # a synchronous behaviour (none of ours): left as gRPC runs it

    async def _request(self, method: str, context: grpc.aio.ServicerContext) -> Any:
        try:
            async with asyncio.timeout(self.timeout):
                request = await context.read()
        except TimeoutError:
            self.timed_out += 1
            host = peer_host(context.peer() or "")
            log.warning("ended %s from %s: no request within %g s (hello_timeout_s)",
                        method, host, self.timeout)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"{method}: no request within {self.timeout:g} s"
                                " (hello_timeout_s)")
            raise AssertionError("unreachable") from None
        if request is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{method}: the call ended without its request")
        return request
