"""The trace reader: one file, or a whole run directory, checked against the schema.

Rules (the PySpark ingest applies the same ones):
- a line is one JSON object; an empty line is skipped;
- the last line of a file may be torn (its writer was killed mid-write): if it does not end with a
  newline and does not parse, it is skipped. Any other line that does not parse is an error
  naming file and line;
- every record has `v` (this code reads version VERSION only), `t`, `node`, `kind`; a record of
  a kind of the schema has its required fields, and each field it has has the schema's type.
  A record of a kind the schema does not list is kept as it is.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weeble.trace.header import HeaderError, RunHeader
from weeble.trace.schema import HEADER, KINDS, RUN_FILE, TRACE_DIR, VERSION, Type


class TraceError(ValueError):
    """Input a user can fix (no run, a record that breaks the schema): the message says where."""


class TraceVersionError(TraceError):
    pass


class TraceFormatError(TraceError):
    pass


class RunDirError(TraceError):
    pass


def torn_tail(path: Path) -> str | None:
    """The unterminated last line of a trace file if it does not parse, else None.

    A complete last record that only lacks its newline is not torn.
    """
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return None
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        pos, tail = size, b""
        while pos > 0:  # scan back for the last newline; traces can be large
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            i = tail.rfind(b"\n")
            if i >= 0:
                tail = tail[i + 1:]
                break
    text = tail.decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except ValueError:
        return text
    return None


def read_trace(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield the records of one trace file in file order, checked (see the module docstring)."""
    path = Path(path)
    torn = torn_tail(path)
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if torn is not None and not line.endswith("\n"):
                    return  # the torn last line
                raise TraceFormatError(
                    f"{path}:{number}: not a JSON record: {line[:80]!r}") from None
            yield validate(rec, f"{path}:{number}")


def validate(rec: Any, where: str) -> dict[str, Any]:
    """Check version, header and the fields of a known kind; return the record."""
    if not isinstance(rec, dict):
        raise TraceFormatError(f"{where}: not a JSON object")
    check_version(rec.get("v"), where)
    for name, typ in HEADER.items():
        if not is_type(rec.get(name), typ):
            raise TraceFormatError(f"{where}: header field {name!r} missing or not {typ}")
    kind = KINDS.get(rec["kind"])
    if kind is None:
        return rec
    for name, typ in kind.fields.items():
        value = rec.get(name)
        if value is None:
            if name in kind.required:
                raise TraceFormatError(f"{where}: {kind.name} record lacks field {name!r}")
        elif not is_type(value, typ):
            raise TraceFormatError(f"{where}: {kind.name}.{name} is not {typ}: {value!r}")
    return rec


def check_version(v: Any, where: str) -> None:
    if v != VERSION or isinstance(v, bool):
        hint = "; re-run it with this weeble" if isinstance(v, int) and v < VERSION else ""
        raise TraceVersionError(
            f"{where}: trace schema version {v!r}; this weeble reads version {VERSION}{hint}")


def is_type(value: Any, typ: Type) -> bool:
    if typ is Type.STR:
        return isinstance(value, str)
    if typ is Type.INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is Type.FLOAT:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if typ is Type.BOOL:
        return isinstance(value, bool)
    if typ is Type.STR_LIST:
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    return True


# ---- a run directory ----------------------------------------------------------------------


def trace_files(run_dir: Path | str) -> list[Path]:
    """The run's trace files (RUN/trace/*.jsonl); a clear error when there are none."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory")
    files = sorted((run_dir / TRACE_DIR).glob("*.jsonl"))
    if not files:
        raise RunDirError(f"{run_dir}: no trace files ({TRACE_DIR}/*.jsonl)")
    return files


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run's header, its time (the origin of the run's seconds) and its end, if recorded."""

    header: RunHeader
    t0_ns: int
    end_ns: int | None  # the (last) run_end record's time


def read_header(run_dir: Path | str) -> RunInfo:
    """The `run` and `run_end` records of RUN/trace/run.jsonl."""
    path = Path(run_dir) / TRACE_DIR / RUN_FILE
    if not path.exists():
        raise RunDirError(f"{run_dir}: no run header ({TRACE_DIR}/{RUN_FILE}): the run's "
                          f"algorithm and timing are unknown")
    header: tuple[RunHeader, int] | None = None
    end: int | None = None
    for rec in read_trace(path):
        if rec["kind"] == "run" and header is None:
            try:
                header = RunHeader.from_record(rec), rec["t"]
            except HeaderError as exc:
                raise TraceFormatError(f"{path}: {exc}") from None
        elif rec["kind"] == "run_end":
            end = rec["t"] if end is None else max(end, rec["t"])
    if header is None:
        raise RunDirError(f"{path}: no `run` record")
    return RunInfo(header[0], header[1], end)


@dataclass(slots=True)
class Run:
    """A whole run: its header, origin and end, and its records in time order."""

    dir: Path
    header: RunHeader
    t0_ns: int  # the header's time: the origin of the run's seconds
    end_ns: int  # the run_end record's time, else the last record's
    records: list[dict[str, Any]]
    torn: list[str]  # files whose torn last line was skipped

    def seconds(self, t_ns: int) -> float:
        return (t_ns - self.t0_ns) / 1e9

    @property
    def end(self) -> float:
        """The run's end in seconds since its origin."""
        return self.seconds(self.end_ns)


def read_run(run_dir: Path | str) -> Run:
    """Every record of a run, merged by time (ties: file name order, then file order)."""
    run_dir = Path(run_dir)
    files = trace_files(run_dir)
    info = read_header(run_dir)
    torn = [str(p) for p in files if torn_tail(p) is not None]
    # Each file is in time order for the simulator; live, a node's wall clock is monotone
    # enough but not guaranteed: sort each file (stable), then merge.
    streams: list[Iterable[tuple[int, int, int, dict[str, Any]]]] = []
    for i, path in enumerate(files):
        recs = sorted(((r["t"], i, n, r) for n, r in enumerate(read_trace(path))),
                      key=lambda x: (x[0], x[2]))
        streams.append(recs)
    records = [r for _, _, _, r in heapq.merge(*streams, key=lambda x: (x[0], x[1], x[2]))]
    end = info.end_ns if info.end_ns is not None else (
        records[-1]["t"] if records else info.t0_ns)
    return Run(run_dir, info.header, info.t0_ns, end, records, torn)
