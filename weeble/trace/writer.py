"""The trace writer: records of `weeble.trace.schema`, as JSON lines, one file per node.

Two sinks share the record format and encoder:

- `SimSink` (the simulator): one process writes the files of every node. Records are buffered
  in memory and appended in batches (every `flush_every` records and at the end); each flush
  opens, appends and closes, so one file is open at a time however many nodes there are.
- `LiveSink` (a live broker, client or orchestrator process: one node, one file). The caller's
  hot path only appends the record's parts to a queue; a background thread of the process (one
  for all its sinks), or the node's event loop once `start` is called in it (a broker's),
  builds the JSON and writes it every `flush_interval` seconds (0.2 s by default), or sooner
  when `max_buffer` entries are waiting. The hottest records take one queue
  entry per request or per write to a client (`published`, `delivered`: each notification's
  record, byte for byte what `record` gives, at one time `t` for the whole entry, encoded
  without a dict of its own, and when every value is what the wire gives, a column of a
  whole entry (its timestamps, its attribute maps) in one orjson call: tracing was two thirds
  of a batched broker's CPU). A process
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
from json.encoder import encode_basestring as _quote  # type: ignore[attr-defined]
from pathlib import Path
from typing import IO, Any

import orjson

from weeble.core.messages import Message, Notification, Notify, Sub, Switch, Unsub
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


def _jsonable(value: Any) -> Any:
    """Values JSON has no form for: sets sorted (set order depends on hash randomization),
    anything else (a Filter, an enum) by its text."""
    if isinstance(value, set | frozenset):
        return sorted(str(v) for v in value)
    return str(value)


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

_OPTIONS = orjson.OPT_NON_STR_KEYS
_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1  # the ints orjson encodes (beyond: json, see `encode`)
_NONE_YET: Any = object()


def _records(entry: tuple[int, Any, Any, Any]) -> int:
    """How many records a queue entry of `LiveSink` holds."""
    return 1 if type(entry[1]) is str else len(entry[3])


def _columns(values: list[Any], sep: bytes, strip: int) -> list[bytes] | None:
    """Each value's JSON as orjson writes it inside a record, from one orjson call for the
    whole column: orjson writes a list as its items' JSON joined by commas, so the items are
    the pieces between the separators (`sep`: "," for scalars, "},{" for dicts, whose outer
    braces `strip` takes off). None when some piece holds a separator itself (the count tells)
    or the column does not encode: the caller then encodes record by record."""
    try:
        joined = orjson.dumps(values, default=_jsonable, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    pieces = joined[1 + strip:-1 - strip].split(sep)
    return pieces if len(pieces) == len(values) else None


def _ids(notifications: list[Notification]) -> tuple[dict[str, bytes], list[int]] | None:
    """The notifications' publishers' JSON and their seqs, when every publisher is a str and
    every seq an int orjson encodes (what the wire gives): the batch encoders' fast path."""
    publishers = {n.publisher for n in notifications}
    seqs = [n.seq for n in notifications]
    if not seqs or {type(p) for p in publishers} != {str} or {type(s) for s in seqs} != {int}:
        return None
    if not (min(seqs) >= _I64_MIN and max(seqs) <= _U64_MAX):
        return None
    return {p: orjson.dumps(p) for p in publishers}, seqs


def _publish_fast(head: bytes, notifications: list[Notification]) -> list[bytes] | None:
    """`publish` records of a request whose values are all what the wire gives, one column
    at a time (see `_columns`); None otherwise."""
    ids = _ids(notifications)
    if ids is None:
        return None
    attributes = [n.attributes for n in notifications]
    if {type(a) for a in attributes} != {dict}:
        return None
    stamps = _columns([n.published_at for n in notifications], b",", 0)
    maps = _columns(attributes, b"},{", 1)
    if stamps is None or maps is None:
        return None
    quoted, seqs = ids
    if len(quoted) == 1:  # one publisher, as a request from one client usually has
        (q,) = quoted.values()
        return [b'%s%s#%d","publisher":%s,"seq":%d,"published_at":%s,"attributes":{%s}}' % (
            head, q[:-1], seq, q, seq, stamp, m)
            for seq, stamp, m in zip(seqs, stamps, maps, strict=True)]
    return [b'%s%s#%d","publisher":%s,"seq":%d,"published_at":%s,"attributes":{%s}}' % (
        head, quoted[n.publisher][:-1], seq, quoted[n.publisher], seq, stamp, m)
        for n, seq, stamp, m in zip(notifications, seqs, stamps, maps, strict=True)]


def _publish_lines(t: int, node: str, ends: tuple[str, str],
                   notifications: list[Notification]) -> list[bytes]:
    """`publish` records, byte for byte what `encode(make_record(...))` gives: the parts every
    record shares are encoded once, and each record is one bytes formatting of its own values
    (orjson for each value, as inside a record; `nid` is `publisher#seq`, whose JSON is the
    publisher's with `#seq` inside the quotes, since neither `#` nor a digit is escaped). A
    record with a value of another type than the wire gives is encoded the general way."""
    client, broker = ends
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"publish","client":%s,"broker":%s,"nid":' % (
        VERSION, t, dumps(node), dumps(client), dumps(broker))
    fast = _publish_fast(head, notifications)
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
            if type(publisher) is not str or type(seq) is not int or not (
                    _I64_MIN <= seq <= _U64_MAX):
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
    return lines


def _deliver_lines(t: int, node: str, ends: tuple[str, str],
                   deliveries: list[tuple[str | None, Notification]]) -> list[bytes]:
    """`deliver` records, byte for byte what `encode(make_record(...))` gives (see
    `_publish_lines`)."""
    client, broker = ends
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"deliver","client":%s,"broker":%s,"sub_id":' % (
        VERSION, t, dumps(node), dumps(client), dumps(broker))
    fast = _deliver_fast(head, deliveries)
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
            if type(publisher) is not str or type(seq) is not int or not (
                    _I64_MIN <= seq <= _U64_MAX) or (sub_id is not None
                                                     and type(sub_id) is not str):
                raise TypeError
            append(b'%s%s,"nid":%s#%d","publisher":%s,"seq":%d,"published_at":%s}' % (
                head, sub, open_, seq, quoted, seq,
                dumps(n.published_at, default=_jsonable, option=_OPTIONS)))
        except (TypeError, orjson.JSONEncodeError):
            last = last_sub = _NONE_YET
            append(encode(make_record(t, node, "deliver", {
                "client": client, "broker": broker, "sub_id": sub_id, "nid": n.id,
                "publisher": publisher, "seq": seq, "published_at": n.published_at})))
    return lines


def _deliver_fast(head: bytes, deliveries: list[tuple[str | None, Notification]]
                  ) -> list[bytes] | None:
    """`deliver` records of a write whose values are all what the wire gives (see
    `_publish_fast`); None otherwise."""
    notifications = [n for _, n in deliveries]
    ids = _ids(notifications)
    if ids is None:
        return None
    subs = {sub_id for sub_id, _ in deliveries}
    if not {type(s) for s in subs} <= {str, type(None)}:
        return None
    stamps = _columns([n.published_at for n in notifications], b",", 0)
    if stamps is None:
        return None
    quoted, seqs = ids
    sub_ids = {s: orjson.dumps(s) for s in subs}
    if len(quoted) == 1 and len(sub_ids) == 1:  # one publisher, one subscription
        (q,), (sub,) = quoted.values(), sub_ids.values()
        return [b'%s%s,"nid":%s#%d","publisher":%s,"seq":%d,"published_at":%s}' % (
            head, sub, q[:-1], seq, q, seq, stamp) for seq, stamp in zip(seqs, stamps, strict=True)]
    return [b'%s%s,"nid":%s#%d","publisher":%s,"seq":%d,"published_at":%s}' % (
        head, sub_ids[sub_id], quoted[n.publisher][:-1], seq, quoted[n.publisher], seq, stamp)
        for (sub_id, n), seq, stamp in zip(deliveries, seqs, stamps, strict=True)]


def _plain(publisher: Any, seq: Any) -> bool:
    """The notification ids the encoders below format directly (what the wire gives)."""
    return type(publisher) is str and type(seq) is int and _I64_MIN <= seq <= _U64_MAX


def _send_lines(t: int, node: str, ends: tuple[str, str],
                sends: list[tuple[Notification, int, int, str]]) -> list[bytes]:
    """`send` records of Notify messages (see `_publish_lines`)."""
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"send","msg":"notify","nid":' % (
        VERSION, t, dumps(node))
    tail = b',"from":%s,"to":%s,"fate":' % (dumps(ends[0]), dumps(ends[1]))
    lines = []
    for n, lseq, size, fate in sends:
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
    return lines


def _receive_lines(t: int, node: str, ends: tuple[str, str],
                   received: list[tuple[int, Notification]]) -> list[bytes]:
    """`receive` records of Notify messages (see `_publish_lines`)."""
    dumps = orjson.dumps
    head = b'{"v":%d,"t":%d,"node":%s,"kind":"receive","msg":"notify","nid":' % (
        VERSION, t, dumps(node))
    tail = b',"from":%s,"to":%s}' % (dumps(ends[0]), dumps(ends[1]))
    lines = []
    append = lines.append
    last, quoted, open_ = _NONE_YET, b"", b""
    for lseq, n in received:
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
    return lines


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
        # (t_ns, kind, fields, more): deque append/popleft are atomic, so the hot path takes
        # no lock; the flusher drains what was there when it looked.
        self._queue: deque[tuple[int, str, dict[str, Any] | None, dict[str, Any]]] = deque()
        self._lock = threading.Lock()  # one writer at a time (flusher thread or close)
        self._file: IO[bytes] | None = None
        # with `start` inside an event loop: the loop flushes (see `start`); else the thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._soon = False  # a flush is scheduled on the loop for now
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
        self._entry(_send_lines, ends, [(n, lseq, size, fate)])

    def notifies_sent(self, ends: tuple[str, str],
                      sends: list[tuple[Notification, int, int, str]]) -> None:
        """The `send` records of Notify messages queued together on one link, (notification,
        lseq, bytes, fate) each, in order, at one time `t`: one queue entry, the same bytes as
        `notify_sent` for each (see `published`). `sends` must not change afterwards."""
        self._entry(_send_lines, ends, sends)

    def notifies_received(self, ends: tuple[str, str],
                          received: list[tuple[int, Notification]]) -> None:
        """The `receive` records of the Notify messages of one link batch, (lseq, notification)
        each, (from, to) `ends`: the same bytes as `record("receive", message_ids(notify),
        lseq=, from=, to=)` for each, at one time `t` (see `published`)."""
        self._entry(_receive_lines, ends, received)

    def _entry(self, lines: Any, shared: Any, items: list[Any]) -> None:
        """Queue one batch entry: `items` at one time, encoded by `lines(t, node, shared,
        items)` when flushed (see `published`); nothing without items or a file."""
        if self._file is None or not items:
            return
        queue = self._queue
        queue.append((time.time_ns(), lines, shared, items))
        if len(queue) >= self.max_buffer:
            self._full()

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

    def flush(self) -> None:
        """Write every queued record now (from any thread)."""
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
            append, extend = lines.append, lines.extend
            size = self._size
            capped = False
            for i in range(n):
                t, kind, fields, more = queue.popleft()
                if type(kind) is str:
                    entry = [encode(make_record(t, node, kind, fields, more))]
                else:  # a batch entry (`published`, `delivered`): its own encoder
                    entry = kind(t, node, fields, more)
                if cap is None:
                    extend(entry)
                    continue
                whole = size + sum(map(len, entry)) + len(entry)
                if whole <= cap:  # the whole entry fits (always, but for the last one)
                    extend(entry)
                    size = whole
                    continue
                for j, line in enumerate(entry):
                    size += len(line) + 1
                    if size > cap:
                        # the cap: one record says so (it may pass the cap by its own length)
                        append(encode(make_record(t, node, "trace_capped", {
                            "max_bytes": cap, "written": size - len(line) - 1})))
                        self.dropped += len(entry) - j + sum(
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
            try:
                file.write(data)
                file.flush()
            except OSError as e:  # a full disk must not take the node down
                log.error("trace %s: write failed: %s", self.path, e)
            self._size = max(size, self._size + len(data))

    def start(self) -> None:
        """Called inside a running event loop (a broker's): from now on that loop writes the
        queue every `flush_interval`, not the process's flusher thread. A Python thread's CPU
        is the process's, and a second thread running Python costs the loop more than its own
        CPU: each time the loop lets go of the GIL (every gRPC call, every `select`) the
        flusher takes it, and the loop waits for it up to the switch interval (5 ms). Outside
        a loop (or without a file) the thread keeps writing."""
        if self._file is None or self._loop is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._loop = loop
        _FLUSHER.remove(self)
        self._tick_handle = loop.call_later(self.flush_interval, self._tick)

    def _tick(self) -> None:
        try:
            self._flush_on_loop()
        finally:
            if self._file is not None and self._loop is not None:
                self._tick_handle = self._loop.call_later(self.flush_interval, self._tick)

    def _flush_on_loop(self) -> None:
        self._soon = False
        try:
            self.flush()
        except Exception:  # never let tracing take the loop down (the thread does the same)
            log.exception("trace %s: flush failed", self.path)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self._file is None:
            return
        try:
            self.flush()
        finally:
            with self._lock:
                if self._file is not None:
                    self._file.close()
                    self._file = None
            _FLUSHER.remove(self)


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
