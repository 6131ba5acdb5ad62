"""Raw node traces (JSON lines) -> one Parquet dataset partitioned by kind, validated.

`RUN/analysis/events/kind=<kind>/` holds every record of the run in the form of the trace
schema (`weeble/trace/schema.py`): a column per field of its kind, plus `file` (the trace file
it came from) and `ord` (its position in the read, which follows the file order: the
tie-break when two records of a kind share a time). A JSON-valued field (type json) is kept as
its JSON text (a string value as the string itself).

The rules are the reference reader's (`weeble.trace.reader.read_trace`): a torn last line of a
file is skipped; a record of an unknown version, a line that is not a record, or a record of a
known kind without one of its required fields stops the ingest with an error naming the file.

How (no Spark: its JSON reader took two thirds of a 10M-record analysis): the bulk kinds are
parsed by pyarrow's multithreaded JSON reader with a typed schema; the few other records
(and `publish`, whose attributes are a JSON object) are parsed by the reference reader's rules
in Python, from their lines. A file pyarrow cannot read as expected (a bad line, a value of the
wrong type, an empty line) is read whole by the reference reader, whose error names the line.

The result is kept: `ingest.json` records the trace files' names, sizes and modification times
(`source`), and `current(run_dir, out_dir)` says whether a stored ingest still matches them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weeble.trace import schema
from weeble.trace.reader import (
    TraceFormatError,
    TraceVersionError,
    check_version,
    read_trace,
    torn_tail,
    trace_files,
    validate,
)
from weeble.trace.schema import KINDS, Type

if TYPE_CHECKING:
    import pyarrow as pa

EVENTS = "events"
INGEST_FILE = "ingest.json"
# Bumped when the stored form changes, so an ingest by an older weeble is not reused.
FORMAT = 2

# The kinds that make up nearly all of a large trace. Those without a JSON-valued field are
# parsed by pyarrow with a schema of their fields only: every column costs time per record.
BULK_KINDS = ("deliver", "send", "receive", "publish", "drop", "subscribe", "refresh",
              "unsubscribe", "crash")
ARROW_KINDS = tuple(k for k in BULK_KINDS if Type.JSON not in KINDS[k].fields.values())
ROWS_PER_GROUP = 1 << 20  # Parquet row groups: Spark splits a kind's table by them


@dataclass(slots=True)
class IngestReport:
    files: int
    records: int
    by_kind: dict[str, int]
    unknown_kinds: list[str]
    torn_lines: list[str]  # files whose torn last line was skipped
    t_min_ns: int | None
    t_max_ns: int | None
    # what was read: [name, size, mtime_ns] per trace file; a stored ingest is current while
    # these are unchanged
    source: list[list[Any]] = field(default_factory=list)
    format: int = FORMAT

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def spark_schema(kinds: tuple[str, ...] | None = None) -> Any:
    """The Spark schema of the given kinds (all kinds by default)."""
    from pyspark.sql import types as T

    spark_type = {
        Type.STR: T.StringType(), Type.INT: T.LongType(), Type.FLOAT: T.DoubleType(),
        Type.BOOL: T.BooleanType(), Type.STR_LIST: T.ArrayType(T.StringType()),
        Type.JSON: T.StringType(),  # kept as its JSON text
    }
    wanted = set(schema.HEADER)
    for kind in kinds if kinds is not None else tuple(KINDS):
        wanted |= set(KINDS[kind].fields)
    return T.StructType([T.StructField(name, spark_type[typ])
                         for name, typ in schema.all_fields().items() if name in wanted])


def source(run_dir: Path) -> list[list[Any]]:
    """The trace files as an ingest records them: name, size, modification time (ns)."""
    return [[p.name, (s := p.stat()).st_size, s.st_mtime_ns] for p in trace_files(run_dir)]


def current(run_dir: Path, out_dir: Path) -> dict[str, Any] | None:
    """The stored ingest report if `out_dir` holds an ingest of the trace as it is now."""
    try:
        stored = json.loads((out_dir / INGEST_FILE).read_text())
    except (OSError, ValueError):
        return None
    if (isinstance(stored, dict) and stored.get("format") == FORMAT
            and stored.get("source") == source(run_dir) and (out_dir / EVENTS).is_dir()):
        return stored
    return None


def ingest(run_dir: Path, out_dir: Path) -> IngestReport:
    """Read the run's trace into `out_dir/events` and write `out_dir/ingest.json`."""
    files = trace_files(run_dir)
    stamp = source(run_dir)  # before reading: a file that grows meanwhile is read again later
    for path in files:  # fail fast on a trace of another version
        _check_first_line(path)
    events = out_dir / EVENTS
    shutil.rmtree(events, ignore_errors=True)
    (out_dir / INGEST_FILE).unlink(missing_ok=True)
    parts: dict[str, list[pa.Table]] = {}
    torn: list[str] = []
    ord0 = 0
    for path in files:
        tables, rows, was_torn = _read(path, ord0)
        ord0 += rows
        if was_torn:
            torn.append(path.name)
        for kind, table in tables.items():
            parts.setdefault(kind, []).append(table)
    if not parts:
        raise TraceFormatError(f"{run_dir}: the trace files hold no records")
    report = _write(parts, events, files=len(files), torn=torn)
    report.source = stamp
    (out_dir / INGEST_FILE).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return report


def _write(parts: dict[str, list[pa.Table]], events: Path, *, files: int,
           torn: list[str]) -> IngestReport:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    by_kind, t_min, t_max = {}, None, None
    tables = {}
    for kind, chunks in parts.items():
        table = pa.concat_tables(chunks, promote_options="permissive")
        tables[kind] = table
        by_kind[kind] = table.num_rows
        lo, hi = pc.min_max(table["t"]).values()
        t_min = lo.as_py() if t_min is None else min(t_min, lo.as_py())
        t_max = hi.as_py() if t_max is None else max(t_max, hi.as_py())

    def write(kind: str) -> None:
        folder = events / f"kind={kind}"
        folder.mkdir(parents=True)
        pq.write_table(tables[kind], folder / "part-0.zstd.parquet", compression="zstd",
                       row_group_size=ROWS_PER_GROUP)

    # largest first, two at a time: the writer releases the GIL (and there are two cores)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(write, sorted(tables, key=lambda k: -tables[k].num_rows)))
    return IngestReport(
        files=files, records=sum(by_kind.values()), by_kind=dict(sorted(by_kind.items())),
        unknown_kinds=sorted(k for k in by_kind if k not in KINDS), torn_lines=sorted(torn),
        t_min_ns=t_min, t_max_ns=t_max)


# ---- one file --------------------------------------------------------------------------------


def _arrow_type(typ: Type) -> pa.DataType:
    import pyarrow as pa

    return {Type.STR: pa.string(), Type.INT: pa.int64(), Type.FLOAT: pa.float64(),
            Type.BOOL: pa.bool_(), Type.STR_LIST: pa.list_(pa.string()),
            Type.JSON: pa.string()}[typ]


def _arrow_schema() -> pa.Schema:
    """What pyarrow parses of every line: the header and the fields of ARROW_KINDS."""
    import pyarrow as pa

    names = dict(schema.HEADER)
    for kind in ARROW_KINDS:
        names.update(KINDS[kind].fields)
    return pa.schema([(name, _arrow_type(typ)) for name, typ in names.items()])


def _columns(kind: str) -> list[str]:
    return [name for name in (*schema.HEADER, *KINDS[kind].fields) if name != "kind"]


def _read(path: Path, ord0: int) -> tuple[dict[str, pa.Table], int, bool]:
    """The records of one file by kind, the number of records, and whether its tail was torn."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    data = path.read_bytes()
    torn = torn_tail(path) is not None
    if torn:
        data = data[:data.rfind(b"\n") + 1]
    lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    try:
        table = pj.read_json(
            pa.py_buffer(data), read_options=pj.ReadOptions(block_size=8 << 20),
            parse_options=pj.ParseOptions(explicit_schema=_arrow_schema(),
                                          unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        table = None
    if table is None or table.num_rows != lines:  # a bad line or type, or an empty line
        tables = _read_slowly(path, ord0)
        return tables, sum(t.num_rows for t in tables.values()), torn
    if lines == 0:
        return {}, 0, torn
    n = table.num_rows
    table = table.append_column("file", pa.DictionaryArray.from_arrays(
        np.zeros(n, np.int32), pa.array([path.name])))
    table = table.append_column("ord", pa.array(np.arange(ord0, ord0 + n, dtype=np.int64)))
    _check_header(path, table)
    kinds = table["kind"]
    out: dict[str, pa.Table] = {}
    for kind in ARROW_KINDS:
        mask = pc.equal(kinds, kind)
        rows = table.filter(mask).select([*_columns(kind), "file", "ord"])
        if rows.num_rows:
            _check_required(path, kind, rows)
            out[kind] = rows
    # the other records, by the reference reader's rules, from their own lines
    others = pc.indices_nonzero(pc.invert(pc.is_in(kinds, pa.array(ARROW_KINDS)))).to_numpy()
    if len(others):
        records = []
        for row, text in zip(others, _lines_at(data, others), strict=True):
            where = f"{path}:{row + 1}"
            try:
                rec = json.loads(text)
            except ValueError:  # pyarrow read it: it is JSON, but not for Python's reader
                raise TraceFormatError(f"{where}: not a JSON record: {text[:80]!r}") from None
            records.append((validate(rec, where), path.name, ord0 + int(row)))
        for kind, table_ in _tables(records).items():
            out[kind] = table_
    return out, table.num_rows, torn


def _lines_at(data: bytes, rows: Iterable[int]) -> list[bytes]:
    """The given lines (0-based, increasing) of `data`."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    out = []
    for row in rows:
        start = int(ends[row - 1]) + 1 if row > 0 else 0
        end = int(ends[row]) if row < len(ends) else len(data)
        out.append(data[start:end])
    return out


def _read_slowly(path: Path, ord0: int) -> dict[str, pa.Table]:
    """The whole file by the reference reader, which names the line of the first problem."""
    records = ((rec, path.name, ord0 + i) for i, rec in enumerate(read_trace(path)))
    return _tables(records)


def _tables(records: Iterable[tuple[dict[str, Any], str, int]]) -> dict[str, pa.Table]:
    """Validated records (record, file, ord) -> a table per kind, in the stored form."""
    import pyarrow as pa

    types = schema.all_fields()
    by_kind: dict[str, list[tuple[dict[str, Any], str, int]]] = {}
    for item in records:
        by_kind.setdefault(item[0]["kind"], []).append(item)
    out = {}
    for kind, items in by_kind.items():
        if kind in KINDS:
            names = _columns(kind)
        else:  # a kind the schema does not list: the fields it has that the schema names
            seen = {name for rec, _, _ in items for name in rec}
            names = [n for n in types if n in seen and n != "kind"]
        columns = {}
        for name in names:
            typ = types[name]
            values = [rec.get(name) for rec, _, _ in items]
            if typ is Type.JSON:
                values = [v if v is None or isinstance(v, str)
                          else json.dumps(v, separators=(",", ":")) for v in values]
            try:
                columns[name] = pa.array(values, _arrow_type(typ))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                raise TraceFormatError(f"{items[0][1]}: a {kind} record's {name!r} is not "
                                       f"{typ} (trace schema v{schema.VERSION})") from None
        columns["file"] = pa.array([f for _, f, _ in items],
                                   pa.dictionary(pa.int32(), pa.string()))
        columns["ord"] = pa.array([o for _, _, o in items], pa.int64())
        out[kind] = pa.table(columns)
    return out


def _check_header(path: Path, table: pa.Table) -> None:
    """Version, `t`, `node` and `kind` of every record pyarrow read."""
    import pyarrow.compute as pc

    bad = pc.or_kleene(pc.is_null(table["v"]), pc.not_equal(table["v"], schema.VERSION))
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        raise TraceVersionError(f"{path.name}: trace schema version "
                                f"{table['v'][row].as_py()!r}; this weeble reads version "
                                f"{schema.VERSION} (line {row + 1})")
    for name in ("t", "node", "kind"):
        if table[name].null_count:
            row = pc.index(pc.is_null(table[name]), True).as_py()
            raise TraceFormatError(f"{path}:{row + 1}: header field {name!r} missing")


def _check_required(path: Path, kind: str, rows: pa.Table) -> None:
    for name in KINDS[kind].required:
        missing = rows[name].null_count
        if missing:
            raise TraceFormatError(
                f"{path.name}: {missing} {kind} record(s) lack required field {name!r} "
                f"(trace schema v{schema.VERSION})")


def _check_first_line(path: Path) -> None:
    with path.open(encoding="utf-8", errors="replace") as f:
        line = f.readline()
    try:
        rec = json.loads(line)
    except ValueError:
        return  # judged with the rest
    if isinstance(rec, dict):
        check_version(rec.get("v"), f"{path}:1")
