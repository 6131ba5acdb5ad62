"""Trace writer: JSON lines, one file per node, the schema the analytics jobs read.

Every record is `{"v": 1, "t": <int ns>, "node": ..., "kind": ..., ...ids}`. Kinds written by the
simulator: publish, deliver, subscribe, refresh, unsubscribe, crash, send, receive, drop (the last
three only with `trace.sends`), fault_begin, fault_end, snapshot, legitimacy, plus whatever the
brokers emit as Trace effects (expire, fault, switch, garbage, ...).

Files are `<out>/trace/<file>.jsonl`. A broker's records go to its own file. A simulated client
has no process of its own (and a large run has 10^5 of them), so its records go to the file of
its local broker; their `node` field still names the client and `broker` names the broker. Records
of the simulator itself (legitimacy, link faults) go to `sim.jsonl`.

Records are buffered and written in batches; every flush opens, appends and closes, so the number
of open files stays at one however many brokers there are.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _quote  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from weeble.broker.core.messages import Message, Notification, Notify, Sub, Switch, Unsub

SCHEMA_VERSION = 1
SIM = "sim"  # pseudo-node for the simulator's own records


def _jsonable(value: Any) -> Any:
    """Fallback for values json cannot encode: Filters and other objects by their text."""
    if isinstance(value, set | frozenset):
        return sorted(str(v) for v in value)  # sorted: set order depends on hash randomization
    return str(value)


class TraceWriter:
    def __init__(self, out_dir: Path, flush_every: int = 20_000) -> None:
        self.dir = Path(out_dir) / "trace"
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.jsonl"):  # a previous run into the same directory
            stale.unlink()
        self._buffers: dict[str, list[str]] = {}
        self._pending = 0
        self._flush_every = flush_every
        self._encode = json.JSONEncoder(
            separators=(",", ":"), ensure_ascii=False, default=_jsonable
        ).encode
        self.records = 0

    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None:
        record = {"v": SCHEMA_VERSION, "t": round(t * 1e9), "node": node, "kind": kind}
        record.update(fields)
        self._append(file, self._encode(record))

    def deliver(self, t: float, broker: str, client: str, n: Notification) -> None:
        """The most frequent record by far, so it is formatted by hand (same JSON as `write`)."""
        self._append(
            broker,
            f'{{"v":{SCHEMA_VERSION},"t":{round(t * 1e9)},"node":{_quote(client)},'
            f'"kind":"deliver","broker":{_quote(broker)},"id":{_quote(n.id)},'
            f'"publisher":{_quote(n.publisher)},"seq":{n.seq},'
            f'"latency":{_number(t - n.published_at)}}}',
        )

    def _append(self, file: str, line: str) -> None:
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
                with open(self.dir / f"{name}.jsonl", "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines))
                    fh.write("\n")
                lines.clear()
        self._pending = 0

    def close(self) -> None:
        self.flush()


def _number(x: float) -> str:
    return repr(x) if x == x and abs(x) != float("inf") else "null"  # JSON has no NaN or inf


def message_fields(msg: Message) -> dict[str, Any]:
    """The ids of a link message, for send/receive records."""
    if isinstance(msg, Notify):
        n = msg.notification
        return {"msg": "notify", "id": n.id, "publisher": n.publisher, "seq": n.seq}
    if isinstance(msg, Sub | Unsub):
        return {"msg": "sub" if isinstance(msg, Sub) else "unsub", "sub_id": msg.sub_id,
                "filter": str(msg.filter), "tag": msg.tag}
    if isinstance(msg, Switch):
        return {"msg": "switch", "tag": msg.tag}
    return {"msg": type(msg).__name__}
