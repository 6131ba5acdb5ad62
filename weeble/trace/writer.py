"""The trace writer: records of `weeble.trace.schema`, as JSON lines, one file per node.

Two sinks share the record format and encoder:

- `SimSink` (the simulator): one process writes the files of every node. Records are buffered
  in memory and appended in batches (every `flush_every` records and at the end); each flush
  opens, appends and closes, so one file is open at a time however many nodes there are.
- `LiveSink` (a live broker, client or orchestrator process: one node, one file). The caller's
  hot path only appends the record's parts to a queue; a background thread of the process (one
  for all its sinks), or the node's event loop once `start` is called in it (a broker's),
  builds the JSON and writes it every `flush_interval` seconds (0.2 s by default), or sooner
  when `max_buffer` entries are waiting (a loop hands the write itself to a writer thread).
  On a loop, one ticker flushes every sink that recorded since its last tick: an idle sink
  costs nothing (a runner holds a sink per client, 12,000 at the paper's scale).
  The hottest records take one queue entry per request, per write to a client or per link
  batch (`published`, `delivered`, `notifies_sent`,
  `notifies_received`: each notification's record, byte for byte what `record` gives, at one
  time `t` for the whole entry), encoded when queued, without a dict of its own: when every
  value is what the wire gives, the whole entry is one bytes formatting of a template repeated
  per record, filled from columns (timestamps, attribute maps, seqs: one orjson call each), so
  no Python step runs per record (tracing was two thirds of a batched broker's CPU). A process
  killed with SIGKILL loses at most the records of its last `flush_interval` (those not yet
  written), and may leave a torn last line, which the reader skips. With `max_bytes`, the file
  stops growing there: the record that would pass the cap is replaced by one `trace_capped`
  record, and every later one is counted (`dropped`), not written.

A restarted live node appends to its own file (its `start` record marks the restart); a torn
tail left by the killed predecessor is cut first.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import logging
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from json.encoder import encode_basestring as _quote  # type: ignore[attr-defined]
from pathlib import Path
from typing import IO, Any, ClassVar

import orjson

from weeble.core.messages import Message, Notification, Notify, Sub, Switch, Unsub
from weeble.trace.columns import OPTIONS as _OPTIONS
from weeble.trace.columns import deliver_fast as _deliver_fast
from weeble.trace.columns import fast as _fast
from weeble.trace.columns import jsonable as _jsonable
from weeble.trace.columns import publish_fast as _publish_fast
from weeble.trace.columns import receive_fast as _receive_fast
from weeble.trace.columns import send_fast as _send_fast
from weeble.trace.schema import RUN_FILE, TRACE_DIR, VERSION

log = logging.getLogger(__name__)

_HEADER = ("v", "t", "node", "kind")
_RESERVED = frozenset(_HEADER)


def make_record(t_ns: int, node: str, kind: str, *parts: dict[str, Any] | None) -> dict[str, Any]:
    """A record: the four header fields, then the fields of `parts` in order.

    A field named like a header field must not overwrite the header: it is kept as `_<name>`.
    """
    rec: dict[str, Any] = {"v": VERSION, "t": t_ns, "node": node, "kind": kind}
    for part in parts:
        if not part:
            continue
        if _RESERVED.isdisjoint(part):
            rec.update(part)
        else:
            for key, value in part.items():
                rec["_" + key if key in _RESERVED else key] = value
    return rec


def encode(rec: dict[str, Any]) -> bytes:
    """One JSON line (without its newline). Never raises: what cannot be encoded is named."""
    # orjson: tracing is a large per-message cost live, and orjson encodes ~4x faster than json.
    # json covers what orjson refuses (ints beyond 64 bits, non-str keys in nested dicts).
    try:
        return orjson.dumps(rec, default=_jsonable, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return json.dumps(rec, separators=(",", ":"), default=_jsonable,
                          ensure_ascii=False).encode()
    except (TypeError, ValueError) as e:  # e.g. a circular structure from a fault
        header = {k: rec[k] for k in _HEADER if k in rec}
        return json.dumps(header | {"unencodable": str(e)}).encode()


CLIP_CHARS = 256  # free-text trace values longer than this are cut (their digest is kept)


def clip(value: Any, limit: int = CLIP_CHARS) -> tuple[Any, str | None]:
    """(value, None) for a short value; (its first `limit` characters + '…', the SHA-256 hex
    of the whole) for a longer string."""
    if not isinstance(value, str) or len(value) <= limit:
        return value, None
    return value[:limit] + "…", hashlib.sha256(value.encode()).hexdigest()


def clipped(**fields: Any) -> dict[str, Any]:
    """Trace fields with each long string clipped; a clipped `name` gains `name_sha256`."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        short, digest = clip(value)
        out[name] = short
        if digest is not None:
            out[f"{name}_sha256"] = digest
    return out


def message_ids(message: Message) -> dict[str, Any]:
    """The ids of a link message, for send/receive/drop records. A Sub's filter is clipped
    (with its digest): a refresh repeats it on every hop every ρ, and the `subscribe` record
    has it whole."""
    if isinstance(message, Notify):
        n = message.notification
        return {"msg": "notify", "nid": n.id, "publisher": n.publisher, "seq": n.seq}
    if isinstance(message, Sub | Unsub):
        return {"msg": "sub" if isinstance(message, Sub) else "unsub", "sub_id": message.sub_id,
                **clipped(filter=str(message.filter)), "tag": message.tag}
    if isinstance(message, Switch):
        return {"msg": "switch", "tag": message.tag}
    rid = getattr(message, "rid", None)  # a reconfiguration's coordination message
    if isinstance(rid, str):
        return {"msg": type(message).__name__.lower(), "rid": rid}
    rids = getattr(message, "rids", None)  # a recolor carrying reconfigurations
    if rids:
        return {"msg": type(message).__name__.lower(), "rids": list(rids)}
    return {"msg": type(message).__name__.lower()}


def _number(x: float) -> str:
    return repr(x) if x == x and abs(x) != float("inf") else "null"  # JSON has no NaN or inf


# ---- batch entries of the live sink: the hot records, encoded without a dict each -------------
#
# An entry (the records of one request, one write to a client, one link batch) is encoded as
# one bytes: its records joined by newlines. When every value is what the wire gives, the whole
# entry is one bytes formatting of a template repeated once per record, filled from columns
# (each notification's publisher, seq, timestamp, attributes, ...) that C code gathers: no
# Python step per record (`weeble.trace.columns`, compiled with the core). Otherwise each
# record is formatted on its own here, and a value of another type than the wire gives takes
# the general encoder; the bytes are the same either way (tests/trace/test_trace.py holds them
# to `encode(make_record(...))` on odd values).

_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1  # the ints orjson encodes (beyond: json, see `encode`)
_NONE_YET: Any = object()


def _records(entry: tuple[int, Any, Any, Any]) -> int:
    """How many records a queue entry of `LiveSink` holds."""
    return 1 if entry[1] is not None else entry[3]


def _publish_lines(t: int, node: str, ends: tuple[str, str],
                   notifications: list[Notification]) -> bytes:
    """`publish` records, byte for byte what `encode(make_record(...))` gives (see above)."""
    client, broker = ends
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"publish","client":%s,"broker":%s,"nid":' % (
        VERSION, t, dumps(node), dumps(client), dumps(broker))
    fast = _fast(_publish_fast, head, notifications)
    if fast is not None:
        return fast
    lines = []
    append = lines.append
    last, quoted, open_ = _NONE_YET, b"", b""
    for n in notifications:
        publisher, seq = n.publisher, n.seq
        try:
            if publisher is not last:
                last, quoted = publisher, dumps(publisher)
                open_ = quoted[:-1]
            if not _plain(publisher, seq):
                raise TypeError
            append(b'%s%s#%d","publisher":%s,"seq":%d,"published_at":%s,"attributes":%s}' % (
                head, open_, seq, quoted, seq,
                dumps(n.published_at, default=_jsonable, option=_OPTIONS),
                dumps(n.attributes, default=_jsonable, option=_OPTIONS)))
        except (TypeError, orjson.JSONEncodeError):
            last = _NONE_YET
            append(encode(make_record(t, node, "publish", {
                "client": client, "broker": broker, "nid": n.id, "publisher": publisher,
                "seq": seq, "published_at": n.published_at, "attributes": n.attributes})))
    return b"\n".join(lines)


def _deliver_lines(t: int, node: str, ends: tuple[str, str],
                   deliveries: list[tuple[str | None, Notification]]) -> bytes:
    """`deliver` records, byte for byte what `encode(make_record(...))` gives (see above)."""
    client, broker = ends
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"deliver","client":%s,"broker":%s,"sub_id":' % (
        VERSION, t, dumps(node), dumps(client), dumps(broker))
    fast = _fast(_deliver_fast, head, deliveries)
    if fast is not None:
        return fast
    lines = []
    append = lines.append
    last, quoted, open_ = _NONE_YET, b"", b""
    last_sub, sub = _NONE_YET, b"null"
    for sub_id, n in deliveries:
        publisher, seq = n.publisher, n.seq
        try:
            if publisher is not last:
                last, quoted = publisher, dumps(publisher)
                open_ = quoted[:-1]
            if sub_id is not last_sub:
                last_sub, sub = sub_id, dumps(sub_id)
            if not _plain(publisher, seq) or (sub_id is not None and type(sub_id) is not str):
                raise TypeError
            append(b'%s%s,"nid":%s#%d","publisher":%s,"seq":%d,"published_at":%s}' % (
                head, sub, open_, seq, quoted, seq,
                dumps(n.published_at, default=_jsonable, option=_OPTIONS)))
        except (TypeError, orjson.JSONEncodeError):
            last = last_sub = _NONE_YET
            append(encode(make_record(t, node, "deliver", {
                "client": client, "broker": broker, "sub_id": sub_id, "nid": n.id,
                "publisher": publisher, "seq": seq, "published_at": n.published_at})))
    return b"\n".join(lines)


def _plain(publisher: Any, seq: Any) -> bool:
    """The notification ids the encoders below format directly (what the wire gives)."""
    return type(publisher) is str and type(seq) is int and _I64_MIN <= seq <= _U64_MAX


def _send_lines(t: int, node: str, ends: tuple[str, str],
                sends: tuple[list[Notification], list[int], list[int], list[str]]) -> bytes:
    """`send` records of Notify messages: (notifications, lseqs, sizes, fates), a value each
    (see above)."""
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"send","msg":"notify","nid":' % (
        VERSION, t, dumps(node))
    tail = b',"from":%s,"to":%s,"fate":' % (dumps(ends[0]), dumps(ends[1]))
    fast = _fast(_send_fast, head, tail, *sends)
    if fast is not None:
        return fast
    lines = []
    for n, lseq, size, fate in zip(*sends, strict=True):
        publisher, seq = n.publisher, n.seq
        try:
            quoted = dumps(publisher)
            if not (_plain(publisher, seq) and type(lseq) is int and type(size) is int
                    and 0 <= lseq <= _U64_MAX):
                raise TypeError
            lines.append(b'%s%s#%d","publisher":%s,"seq":%d,"lseq":%d,"bytes":%d%s%s}' % (
                head, quoted[:-1], seq, quoted, seq, lseq, size, tail, dumps(fate)))
        except (TypeError, orjson.JSONEncodeError):
            lines.append(encode(make_record(t, node, "send", {
                "msg": "notify", "nid": n.id, "publisher": publisher, "seq": seq,
                "lseq": lseq, "bytes": size, "from": ends[0], "to": ends[1], "fate": fate})))
    return b"\n".join(lines)


def _receive_lines(t: int, node: str, ends: tuple[str, str],
                   received: tuple[list[int], list[Notification]]) -> bytes:
    """`receive` records of Notify messages: (lseqs, notifications), a value each (see
    above)."""
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"receive","msg":"notify","nid":' % (
        VERSION, t, dumps(node))
    tail = b',"from":%s,"to":%s}' % (dumps(ends[0]), dumps(ends[1]))
    fast = _fast(_receive_fast, head, tail, *received)
    if fast is not None:
        return fast
    lines = []
    append = lines.append
    last, quoted, open_ = _NONE_YET, b"", b""
    for lseq, n in zip(*received, strict=True):
        publisher, seq = n.publisher, n.seq
        try:
            if publisher is not last:
                last, quoted = publisher, dumps(publisher)
                open_ = quoted[:-1]
            if not (_plain(publisher, seq) and type(lseq) is int and 0 <= lseq <= _U64_MAX):
                raise TypeError
            append(b'%s%s#%d","publisher":%s,"seq":%d,"lseq":%d%s' % (
                head, open_, seq, quoted, seq, lseq, tail))
        except (TypeError, orjson.JSONEncodeError):
            last = _NONE_YET
            append(encode(make_record(t, node, "receive", {
                "msg": "notify", "nid": n.id, "publisher": publisher, "seq": seq,
                "lseq": lseq, "from": ends[0], "to": ends[1]})))
    return b"\n".join(lines)


# ---- the simulator's sink -----------------------------------------------------------------


class SimSink:
    """Buffered sink of a whole simulation: `write(file, t, node, kind, fields)`, t in seconds.

    `file` is the node whose file the record goes to. Clients of the simulator have no process of
    their own (and a large run has 10^5 of them): their records go to their broker's file.
    """

    def __init__(self, run_dir: Path | str, flush_every: int = 20_000) -> None:
        self.dir = Path(run_dir) / TRACE_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.jsonl"):  # a previous run into the same directory
            stale.unlink()
        self._buffers: dict[str, list[bytes]] = {}
        self._pending = 0
        self._flush_every = flush_every
        self.records = 0

    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None:
        self._append(file, encode(make_record(round(t * 1e9), node, kind, fields)))

    def header(self, t: float, node: str, fields: dict[str, Any]) -> None:
        """The run's `run` record (or `run_end`, with kind in fields' place: see `end`)."""
        self._append(RUN_FILE.removesuffix(".jsonl"),
                     encode(make_record(round(t * 1e9), node, "run", fields)))

    def end(self, t: float, node: str, reason: str) -> None:
        self._append(RUN_FILE.removesuffix(".jsonl"),
                     encode(make_record(round(t * 1e9), node, "run_end", {"reason": reason})))

    def deliver(self, t: float, broker: str, client: str, sub_id: str | None,
                n: Notification) -> None:
        """The most frequent record by far, so it is formatted by hand (same JSON as `write`)."""
        sub = f'"sub_id":{_quote(sub_id)},' if sub_id is not None else ""
        self._append(
            broker,
            f'{{"v":{VERSION},"t":{round(t * 1e9)},"node":{_quote(broker)},"kind":"deliver",'
            f'"client":{_quote(client)},"broker":{_quote(broker)},{sub}"nid":{_quote(n.id)},'
            f'"publisher":{_quote(n.publisher)},"seq":{n.seq},'
            f'"published_at":{_number(n.published_at)}}}'.encode(),
        )

    def _append(self, file: str, line: bytes) -> None:
        buffer = self._buffers.get(file)
        if buffer is None:
            buffer = self._buffers[file] = []
        buffer.append(line)
        self.records += 1
        self._pending += 1
        if self._pending >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        for file, lines in self._buffers.items():
            if lines:
                name = file.replace("/", "_").replace("\\", "_")
                with open(self.dir / f"{name}.jsonl", "ab") as fh:
                    fh.write(b"\n".join(lines))
                    fh.write(b"\n")
                lines.clear()
        self._pending = 0

    def close(self) -> None:
        self.flush()


# ---- the live sink ------------------------------------------------------------------------


class LiveSink:
    """The trace of one live node, written off the caller's hot path (see the module docstring).

        sink = LiveSink(path, "b3")
        sink.record("deliver", {"client": ...}, sub_id=...)   # cheap: queues the parts
        sink.close()                                          # writes what is left

    `record` keeps a reference to the dicts it is given until they are written: pass dicts you do
    not change afterwards. `path=None` gives a disabled sink (every call is a no-op).
    """

    def __init__(self, path: Path | str | None, node: str, *, flush_interval: float = 0.2,
                 max_buffer: int = 4096, max_bytes: int | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.node = node
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.max_bytes = max_bytes  # None: unbounded
        self.dropped = 0  # records not written because the file reached max_bytes
        self._size = 0
        # (t_ns, kind, fields, more), or a batch entry's (t_ns, None, its records encoded,
        # how many): deque append/popleft are atomic, so the hot path takes no lock; the
        # flusher drains what was there when it looked.
        self._queue: deque[tuple[int, str | None, Any, Any]] = deque()
        self._lock = threading.Lock()  # one writer at a time (flusher thread or close)
        self._file: IO[bytes] | None = None
        # with `start` inside an event loop: the loop flushes (see `start`); else the thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: _LoopTicker | None = None  # flushes this sink on the loop (see start)
        # records queued since the ticker's last flush (always True off a loop: the flag then
        # costs the hot path one test)
        self._dirty = True
        self._soon = False  # a flush is scheduled on the loop for now
        self._written: Future[None] | None = None  # the last write handed to `_writer()`
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                drop_torn_tail(self.path)
            self._file = self.path.open("ab")
            self._size = self._file.tell()
            _FLUSHER.add(self)

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, kind: str, fields: dict[str, Any] | None = None, /, **more: Any) -> None:
        if self._file is None:
            return
        queue = self._queue
        queue.append((time.time_ns(), kind, fields, more))
        if not self._dirty:
            self._mark()
        if len(queue) >= self.max_buffer:
            self._full()

    def published(self, client: str, broker: str, notifications: list[Notification]) -> None:
        """The `publish` records of the notifications of one request, accepted together (one
        time `t`), in order: one queue entry, encoded in one pass by the flusher (the same
        bytes as `record("publish", client=, broker=, nid=, publisher=, seq=, published_at=,
        attributes=)` would give). `notifications` must not change afterwards."""
        self._entry(_publish_lines, (client, broker), notifications)

    def delivered(self, client: str, broker: str,
                  deliveries: list[tuple[str | None, Notification]]) -> None:
        """The `deliver` records of one write to a client, (sub_id, notification) each, in
        order, at one time `t`: one queue entry (see `published`); the same bytes as
        `record("deliver", client=, broker=, sub_id=, nid=, publisher=, seq=, published_at=)`."""
        self._entry(_deliver_lines, (client, broker), deliveries)

    def notify_sent(self, n: Notification, lseq: int, size: int, ends: tuple[str, str],
                    fate: str) -> None:
        """The `send` record of a Notify, (from, to) `ends`: the same bytes as
        `record("send", message_ids(notify), lseq=, bytes=, from=, to=, fate=)`, encoded
        without a dict (see `published`)."""
        self._entry(_send_lines, ends, ([n], [lseq], [size], [fate]), 1)

    def notifies_sent(self, ends: tuple[str, str], notifications: list[Notification],
                      lseqs: list[int], sizes: list[int], fates: list[str]) -> None:
        """The `send` records of Notify messages queued together on one link, in order, at one
        time `t`, their notifications, link sequence numbers, sizes and fates in columns (one
        value each): one queue entry, the same bytes as `notify_sent` for each (see
        `published`)."""
        self._entry(_send_lines, ends, (notifications, lseqs, sizes, fates), len(notifications))

    def notifies_received(self, ends: tuple[str, str], lseqs: list[int],
                          notifications: list[Notification]) -> None:
        """The `receive` records of the Notify messages of one link batch, their link sequence
        numbers and notifications in columns, (from, to) `ends`: the same bytes as
        `record("receive", message_ids(notify), lseq=, from=, to=)` for each, at one time `t`
        (see `published`)."""
        self._entry(_receive_lines, ends, (lseqs, notifications), len(notifications))

    def _entry(self, lines: Any, shared: Any, items: Any, count: int | None = None) -> None:
        """Queue one batch entry of `count` records (default: one per item) at one time,
        encoded now by `lines(t, node, shared, items)` (see `published`); nothing without
        records or a file. Encoded at once, not at the flush: a batch is one formatting (no
        step per record), and the queue then holds bytes, not the notifications, which would
        otherwise outlive their request by a flush interval and be walked by every collection
        of the cyclic collector meanwhile."""
        if count is None:
            count = len(items)
        if self._file is None or not count:
            return
        t = time.time_ns()
        try:
            data = lines(t, self.node, shared, items)
        except Exception:  # never let tracing fail the request (the encoders do not raise)
            log.exception("trace %s: %d records not encoded", self.path, count)
            self.dropped += count
            return
        queue = self._queue
        queue.append((t, None, data, count))
        if not self._dirty:
            self._mark()
        if len(queue) >= self.max_buffer:
            self._full()

    def _mark(self) -> None:
        """The first record since the ticker's last flush: the next tick flushes this sink."""
        self._dirty = True
        ticker = self._ticker
        if ticker is not None:
            ticker.dirty.append(self)

    def _full(self) -> None:
        if self._loop is not None:
            if not self._soon:  # once, as below
                self._soon = True
                self._loop.call_soon(self._flush_on_loop)
        elif not _FLUSHER.waking:  # once: a wake per record until the flusher runs costs CPU
            _FLUSHER.wake()
        if len(self._queue) >= 16 * self.max_buffer:  # the flusher cannot keep up: write here
            self.flush()

    def flush_soon(self) -> None:
        """Have the flusher (the thread or the loop) write what is queued now rather than at
        its next period (for the rare records someone waits for, off the caller's thread)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: close writes
                self._loop.call_soon_threadsafe(self._flush_on_loop)
        else:
            _FLUSHER.wake()

    def record_at(self, t_ns: int, kind: str, fields: dict[str, Any]) -> None:
        """A record with a time of the caller's (e.g. the moment a fault struck)."""
        if self._file is not None:
            self._queue.append((t_ns, kind, fields, {}))
            if not self._dirty:
                self._mark()

    def flush(self, writes: list[tuple[LiveSink, IO[bytes], bytes]] | None = None) -> None:
        """Write every queued record now (from any thread). On a loop, with `writes`, the
        bytes are added to it for the caller to hand to the writer thread together with other
        sinks' (`_LoopTicker`: one hand-off per tick, not one per sink)."""
        with self._lock:
            file = self._file
            if file is None:
                return
            queue, node = self._queue, self.node
            n = len(queue)
            if not n:
                return
            cap = self.max_bytes
            if cap is not None and self._size >= cap:  # capped already: count, do not write
                self.dropped += sum(_records(queue.popleft()) for _ in range(n))
                return
            lines: list[bytes] = []
            append = lines.append
            size = self._size
            capped = False
            for i in range(n):
                t, kind, fields, more = queue.popleft()
                # a batch entry (`published`, `delivered`, ...): its records, encoded already
                entry = fields if kind is None else encode(make_record(t, node, kind, fields,
                                                                       more))
                whole = size + len(entry) + 1
                if cap is None or whole <= cap:  # the whole entry fits (but for the last one)
                    append(entry)
                    size = whole
                    continue
                # records hold no raw newline (JSON escapes it): one line each
                records = entry.split(b"\n")
                for j, line in enumerate(records):
                    size += len(line) + 1
                    if size > cap:
                        # the cap: one record says so (it may pass the cap by its own length)
                        append(encode(make_record(t, node, "trace_capped", {
                            "max_bytes": cap, "written": size - len(line) - 1})))
                        self.dropped += len(records) - j + sum(
                            _records(queue.popleft()) for _ in range(n - i - 1))
                        size, capped = cap, True
                        log.error("trace %s: reached its cap of %d bytes; later records are "
                                  "counted, not written", self.path, cap)
                        break
                    append(line)
                if capped:
                    break
            lines.append(b"")
            data = b"\n".join(lines)
            self._size = max(size, self._size + len(data))
            if self._loop is not None:
                if writes is not None:
                    writes.append((self, file, data))
                    return
                # a broker's loop: the write (the kernel's copy, megabytes a second, and any
                # wait for the disk) goes to a thread that holds the GIL only around it
                with contextlib.suppress(RuntimeError):  # the interpreter is exiting: here
                    self._written = _writer().submit(self._write, file, data)
                    return
            self._write(file, data)

    def _write(self, file: IO[bytes], data: bytes) -> None:
        try:
            file.write(data)
            file.flush()
        except OSError as e:  # a full disk must not take the node down
            log.error("trace %s: write failed: %s", self.path, e)

    def start(self) -> None:
        """Called inside a running event loop (a broker's): from now on that loop flushes the
        queue every `flush_interval`, not the process's flusher thread, and hands the bytes to
        the writer thread (`_writer`). A Python thread's CPU is the process's, and a second
        thread running Python costs the loop more than its own CPU: each time the loop lets go
        of the GIL (every gRPC call, every `select`) the flusher takes it, and the loop waits
        for it up to the switch interval (5 ms); the writer thread runs no Python but around
        its write. Outside a loop (or without a file) the flusher thread keeps writing.

        One timer per loop (and flush interval) flushes the sinks that queued records since
        its last tick, not one per sink: a runner's 12,000 client sinks ticking each on its own
        cost its loop 0.26 CPU s a second while idle (`benchmarks/trace_sinks.py`)."""
        if self._file is None or self._loop is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._loop = loop
        _FLUSHER.remove(self)
        self._ticker = _LoopTicker.of(loop, self.flush_interval)
        self._ticker.sinks += 1
        self._dirty = True
        self._ticker.dirty.append(self)  # what was queued before start

    def _flush_on_loop(self) -> None:
        self._soon = False
        try:
            self.flush()
        except Exception:  # never let tracing take the loop down (the thread does the same)
            log.exception("trace %s: flush failed", self.path)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.sinks -= 1
            self._ticker = None
        if self._file is None:
            return
        try:
            self.flush()
        finally:
            with self._lock:
                if self._written is not None:  # the writer writes in order: the last one
                    with contextlib.suppress(Exception):
                        self._written.result()
                    self._written = None
                if self._file is not None:
                    self._file.close()
                    self._file = None
            _FLUSHER.remove(self)


class _LoopTicker:
    """Every `interval`, on one event loop, flushes the loop-started sinks that queued records
    since its last tick (each marks itself dirty on its first record after a flush); it stops
    when its last sink has closed."""

    _running: ClassVar[dict[tuple[asyncio.AbstractEventLoop, float], _LoopTicker]] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self.loop = loop
        self.interval = interval
        self.sinks = 0  # started on this ticker and not closed
        self.dirty: list[LiveSink] = []  # appended from any thread (atomic), popped here
        self.handle: asyncio.TimerHandle | None = loop.call_later(interval, self._tick)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop, interval: float) -> _LoopTicker:
        ticker = cls._running.get((loop, interval))
        if ticker is None or ticker.handle is None:
            for key in [k for k in cls._running if k[0].is_closed()]:  # sinks never closed
                del cls._running[key]
            ticker = cls._running[loop, interval] = cls(loop, interval)
        return ticker

    def _tick(self) -> None:
        dirty = self.dirty
        writes: list[tuple[LiveSink, IO[bytes], bytes]] = []
        # as many as were there: a record that marks a sink meanwhile waits for the next tick
        for _ in range(len(dirty)):
            sink = dirty.pop()
            sink._dirty = False  # before its flush: a record from now on marks it again
            sink._soon = False
            try:
                sink.flush(writes)
            except Exception:  # never let tracing take the loop down
                log.exception("trace %s: flush failed", sink.path)
        if writes:
            # one hand-off to the writer thread for the tick's sinks. A sink started on a loop
            # is recorded to from that loop (its node's): no other flush of it comes between
            # this tick's and this hand-off, and each file keeps its order
            try:
                written = _writer().submit(_write_all, writes)
            except RuntimeError:  # the interpreter is exiting: here
                _write_all(writes)
            else:
                for sink, _, _ in writes:
                    sink._written = written
        if self.sinks > 0 or dirty:
            self.handle = self.loop.call_later(self.interval, self._tick)
        else:
            self.handle = None
            self._running.pop((self.loop, self.interval), None)


def _write_all(writes: list[tuple[LiveSink, IO[bytes], bytes]]) -> None:
    """One tick's writes (on the writer thread). Sinks close on their loop, which waits for
    this (`_written`); one closed from another thread meanwhile loses its last bytes, said."""
    for sink, file, data in writes:
        try:
            sink._write(file, data)
        except ValueError:  # its file closed under it
            log.error("trace %s: closed before its last %d bytes were written", sink.path,
                      len(data))


_WRITER: tuple[int, ThreadPoolExecutor] | None = None


def _writer() -> ThreadPoolExecutor:
    """The process's trace writer thread: a loop-started sink hands it each flush's bytes, so
    the event loop does not wait for the write. It runs no Python but around the write
    (which lets go of the GIL), unlike a flusher that encodes (see `LiveSink.start`)."""
    global _WRITER
    import os

    if _WRITER is None or _WRITER[0] != os.getpid():  # none yet, or a forked child
        _WRITER = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="weeble-trace-writer"))
    return _WRITER[1]


class _Flusher:
    """One daemon thread per process that flushes every open LiveSink on its cadence."""

    def __init__(self) -> None:
        self._sinks: weakref.WeakSet[LiveSink] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, sink: LiveSink) -> None:
        import os

        with self._lock:
            self._sinks.add(sink)
            if self._thread is None or self._pid != os.getpid():  # none yet, or a forked child
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="weeble-trace-flusher",
                                                daemon=True)
                self._thread.start()

    def remove(self, sink: LiveSink) -> None:
        with self._lock:
            self._sinks.discard(sink)

    @property
    def waking(self) -> bool:
        """A wake is pending (the flusher has not yet run since)."""
        return self._wake.is_set()

    def wake(self) -> None:
        self._wake.set()

    def flush_all(self) -> None:
        with self._lock:
            sinks = list(self._sinks)
        for sink in sinks:
            sink.flush()

    def _run(self) -> None:
        while True:
            with self._lock:
                sinks = list(self._sinks)
            interval = min((s.flush_interval for s in sinks), default=0.2)
            self._wake.wait(interval)
            self._wake.clear()
            for sink in sinks:
                with contextlib.suppress(Exception):  # never let the flusher die
                    sink.flush()


_FLUSHER = _Flusher()
atexit.register(_FLUSHER.flush_all)


def drop_torn_tail(path: Path) -> None:
    """Cut an unterminated last line left by a killed writer, before appending after it."""
    with path.open("rb+") as f:
        size = f.seek(0, 2)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        pos = size
        while pos > 0:  # scan back for the last newline in chunks; traces can be large
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            i = chunk.rfind(b"\n")
            if i >= 0:
                f.truncate(pos + i + 1)
                return
        f.truncate(0)


def write_header(run_dir: Path | str, node: str, fields: dict[str, Any],
                 t_ns: int | None = None) -> Path:
    """Write the `run` header record of a live run (RUN/trace/run.jsonl), at once and durably."""
    path = Path(run_dir) / TRACE_DIR / RUN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = encode(make_record(time.time_ns() if t_ns is None else t_ns, node, "run", fields))
    path.write_bytes(line + b"\n")
    return path


def write_run_end(run_dir: Path | str, node: str, reason: str, t_ns: int | None = None) -> None:
    """Append the `run_end` record of a live run."""
    path = Path(run_dir) / TRACE_DIR / RUN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        drop_torn_tail(path)
    line = encode(make_record(time.time_ns() if t_ns is None else t_ns, node, "run_end",
                              {"reason": reason}))
    with path.open("ab") as f:
        f.write(line + b"\n")
