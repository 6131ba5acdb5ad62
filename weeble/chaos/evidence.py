"""The record of a fault: fault_begin / fault_end trace records, and the evidence in them.

Every injection leaves two records in the trace schema (weeble/trace/schema.py), in the run's
trace directory as `chaos.jsonl` (node "chaos"):

    {"v": 2, "t": <ns>, "node": "chaos", "kind": "fault_begin", "fault_id": "f2",
     "type": "cut", "target": "b0-b1", "targets": ["b0-b1"], "links": ["b0-b1"],
     "spec": "", "took_effect": true, "evidence": {"b0": {"b1": "cut"}, "b1": {"b0": "cut"}}}
    {"v": 2, "t": <ns>, "node": "chaos", "kind": "fault_end", "fault_id": "f2", "type": "cut",
     ..., "ok": true, "evidence": {...}}

`took_effect` is never assumed: it is read from what the system reports after the action — the
state diff of an admin snapshot taken before and after a state fault, the link states and
shapes the brokers report, the process table for crashes and pauses. A fault whose action
failed, or that changed nothing, says `took_effect: false` (with `error` when there was one).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from weeble.model.experiment import Injection
from weeble.trace.reader import read_trace
from weeble.trace.writer import LiveSink

NODE = "chaos"
TRACE_FILE = "chaos.jsonl"


class ChaosTrace:
    """Fault records of the chaos runner (node `chaos`), through the one trace writer, flushed
    at once: a record must survive the orchestrator being killed right after its fault."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sink = LiveSink(path, NODE)

    def known_ids(self) -> set[str]:
        """Fault ids already in the file (an earlier experiment against the same run)."""
        self._sink.flush()
        return {r["fault_id"] for r in read_trace(self.path) if r.get("fault_id")}

    def write(self, kind: str, t_ns: int, fields: dict[str, Any]) -> None:
        self._sink.record_at(t_ns, kind, fields)
        self._sink.flush()

    def close(self) -> None:
        self._sink.close()


def fault_fields(inj: Injection, fault_id: str, targets: list[str],
                 links: list[str] | None) -> dict[str, Any]:
    """The ids a fault record carries: what it is, where it hit, when it was planned."""
    f = inj.fault
    fields: dict[str, Any] = {
        "fault_id": fault_id, "type": f.kind, "target": ",".join(targets), "targets": targets,
        "spec": f.spec, "what": f.describe(), "planned_at": inj.start, "planned_end": inj.end,
    }
    if links:
        fields["links"] = links
    if inj.during is not None:  # scheduled inside a reconfiguration window
        fields["rid"], fields["phase"] = inj.during.reconfiguration, inj.during.phase
    if getattr(f, "clients", None) is not None:  # a client crash of workload subscribers:
        if len(targets) == 1:  # `targets` are client ids
            fields["client"] = targets[0]
    elif len(targets) == 1 and not links:
        fields["broker"] = targets[0]
    for name in ("field", "value", "args", "probability", "delay_ms", "jitter_ms"):
        if name in type(f).model_fields:
            fields[name] = getattr(f, name)
    return fields


def now_ns() -> int:
    return time.time_ns()
