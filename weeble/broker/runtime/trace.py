"""JSON-lines trace of one node (broker or client): one record per event, one file per node.

Record: {"v": 1, "t": <wall-clock ns>, "node": <id>, "kind": <kind>, ...ids}. Wall-clock time
(not monotonic) so that records of different processes on one machine can be merged.
Kinds written by the runtime: start, stop, publish, deliver, send, receive, drop, subscribe,
refresh, unsubscribe, link_up, link_down, link_shape, link_cut, link_heal, fault_begin,
fault_end, error, plus every Trace effect of the core under its own kind (expire, fault,
switch, garbage, ...). The client library writes client_publish and client_deliver.

Writes are batched: records are buffered and flushed every `flush_interval` seconds, when the
buffer is full, and on close. A process killed mid-write leaves a torn last line; `read_trace`
ignores it (and only it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

VERSION = 1
_HEADER = ("v", "t", "node", "kind")
_RESERVED = frozenset(_HEADER)

log = logging.getLogger(__name__)


class TraceFormatError(ValueError):
    """A trace line other than the last one is not a JSON object."""


class TraceWriter:
    def __init__(
        self,
        path: Path | str | None,
        node: str,
        *,
        flush_interval: float = 0.2,
        max_buffer: int = 4096,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.node = node
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self._buffer: list[dict[str, Any]] = []
        self._file: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # append: a restarted node continues its own file (a "start" record marks it)
            if self.path.exists():
                _drop_torn_tail(self.path)
            self._file = self.path.open("ab")

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, kind: str, fields: dict[str, Any] | None = None, /, **more: Any) -> None:
        if self._file is None:
            return
        rec: dict[str, Any] = {"v": VERSION, "t": time.time_ns(), "node": self.node, "kind": kind}
        for source in (fields, more):
            if not source:
                continue
            if _RESERVED.isdisjoint(source):
                rec.update(source)
            else:  # a core field named like a header field must not overwrite the header
                for key, value in source.items():
                    rec["_" + key if key in _RESERVED else key] = value
        self._buffer.append(rec)
        if len(self._buffer) >= self.max_buffer:
            self.flush()

    def flush(self) -> None:
        if self._file is None or not self._buffer:
            return
        lines = b"".join([_encode(rec) + b"\n" for rec in self._buffer])
        self._buffer.clear()
        self._file.write(lines)
        self._file.flush()

    def start(self) -> None:
        """Flush periodically from the running event loop."""
        if self._file is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush_forever())

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                self.flush()
            except OSError as e:  # a full disk must not take the broker down
                log.error("trace flush failed: %s", e)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.close()

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self.flush()
        finally:
            self._file.close()
            self._file = None


def _encode(rec: dict[str, Any]) -> bytes:
    # orjson: tracing every message is the runtime's largest per-message cost, and orjson
    # encodes ~4x faster than json. json covers what orjson refuses (ints beyond 64 bits).
    try:
        return orjson.dumps(rec, default=str, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return json.dumps(rec, separators=(",", ":"), default=str).encode()
    except (TypeError, ValueError) as e:  # e.g. a circular structure from a fault
        header = {k: rec[k] for k in _HEADER if k in rec}
        return json.dumps(header | {"unencodable": str(e)}).encode()


def read_trace(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield the records of a trace file, skipping a torn last line.

    A torn line is an unterminated tail (the writer died mid-write) that does not parse.
    Any other bad line raises TraceFormatError naming its line number.
    """
    with Path(path).open("r", encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    tail = lines.pop()  # "" when the file ends with a newline
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rec = _parse(line)
        if rec is None:
            raise TraceFormatError(f"{path}:{number}: not a JSON object: {line[:80]!r}")
        yield rec
    if tail.strip():
        rec = _parse(tail)
        if rec is not None:  # complete but for its newline
            yield rec


def _parse(line: str) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _drop_torn_tail(path: Path) -> None:
    """Cut an unterminated last line left by a killed writer, before appending after it."""
    with path.open("rb+") as f:
        size = f.seek(0, 2)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # scan back for the last newline in chunks; traces can be large
        pos = size
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            i = chunk.rfind(b"\n")
            if i >= 0:
                f.truncate(pos + i + 1)
                return
        f.truncate(0)
