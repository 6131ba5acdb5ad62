"""Raw node traces (JSON lines) -> one Parquet dataset partitioned by kind, validated.

`RUN/analysis/events/kind=<kind>/` holds every record of the run in the form of the trace
schema (`weeble/trace/schema.py`): a column per field of its kind (the bulk kinds share one
column set, the other kinds another: read the whole dataset with `mergeSchema`), plus `file`
(the trace file it came from) and `ord` (its position in the read, which follows the file
order: the tie-break when two records of a kind share a time).

The rules are the reference reader's (`weeble.trace.reader.read_trace`): a torn last line of a
file is skipped; a record of an unknown version, a line that is not a record, or a record of a
known kind without one of its required fields stops the ingest with an error naming the file.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weeble.trace import schema
from weeble.trace.reader import (
    TraceFormatError,
    TraceVersionError,
    check_version,
    torn_tail,
    trace_files,
    validate,
)
from weeble.trace.schema import KINDS, Type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS = "events"
INVALID = "_invalid"  # partition of lines that did not parse: torn tails, or errors
CORRUPT = "_corrupt"


@dataclass(slots=True)
class IngestReport:
    files: int
    records: int
    by_kind: dict[str, int]
    unknown_kinds: list[str]
    torn_lines: list[str]  # files whose torn last line was skipped
    t_min_ns: int | None
    t_max_ns: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# The kinds that make up nearly all of a large trace. They are read with a schema of their own
# fields only: every column costs time per record in the JSON parser and in the Parquet writer,
# and the other ~50 columns would be null here. The other kinds are few; they are found by a
# cheap substring test on the raw lines and parsed with the full schema.
BULK_KINDS = ("deliver", "send", "receive", "publish", "drop", "subscribe", "refresh",
              "unsubscribe", "crash")


def spark_schema(kinds: tuple[str, ...] | None = None) -> Any:
    """The Spark schema of the given kinds (all kinds by default), CORRUPT included."""
    from pyspark.sql import types as T

    spark_type = {
        Type.STR: T.StringType(), Type.INT: T.LongType(), Type.FLOAT: T.DoubleType(),
        Type.BOOL: T.BooleanType(), Type.STR_LIST: T.ArrayType(T.StringType()),
        Type.JSON: T.StringType(),  # Spark keeps an object or array as its JSON text here
    }
    wanted = set(schema.HEADER)
    for kind in kinds if kinds is not None else tuple(KINDS):
        wanted |= set(KINDS[kind].fields)
    fields = [T.StructField(name, spark_type[typ])
              for name, typ in schema.all_fields().items() if name in wanted]
    return T.StructType([*fields, T.StructField(CORRUPT, T.StringType())])


def ingest(spark: SparkSession, run_dir: Path, out_dir: Path) -> IngestReport:
    files = trace_files(run_dir)
    for path in files:  # fail fast on a trace of another version, before the Spark pass
        _check_first_line(path)
    torn = {p.name: tail for p in files if (tail := torn_tail(p)) is not None}
    events = out_dir / EVENTS
    paths = [str(p) for p in files]
    rest = tuple(k for k in KINDS if k not in BULK_KINDS)
    metrics = _merge(_write(_bulk(spark, paths), events, "overwrite", BULK_KINDS),
                     _write(_rest(spark, paths), events, "append", rest))

    skipped = _check_invalid(spark, events, torn, {p.name: p for p in files})
    shutil.rmtree(events / f"kind={INVALID}", ignore_errors=True)
    if not any(events.glob("kind=*")):
        raise TraceFormatError(f"{run_dir}: the trace files hold no records")
    return _validate(spark, events, metrics, len(files), skipped)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The checks of both passes together: counts add up, times span both."""
    out = dict(a)
    for key, value in b.items():
        old = out.get(key)
        if old is None or value is None:
            out[key] = value if old is None else old
        elif key == "t_min":
            out[key] = min(old, value)
        elif key == "t_max":
            out[key] = max(old, value)
        else:
            out[key] = old + value
    return out


def _bulk(spark: SparkSession, paths: list[str]) -> DataFrame:
    from pyspark.sql import functions as F

    df = (spark.read.schema(spark_schema(BULK_KINDS))
          .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
          .json(paths))
    df = _known_columns(_located(df))
    return df.where(F.col("kind").isin(*BULK_KINDS) | F.col(CORRUPT).isNotNull())


def _rest(spark: SparkSession, paths: list[str]) -> DataFrame:
    from pyspark.sql import functions as F

    lines = spark.read.text(paths)
    for kind in BULK_KINDS:  # both writers write compact JSON; a miss only costs a parse
        lines = lines.where(~F.col("value").contains(f'"kind":"{kind}"'))
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    parsed = _located(lines).select(F.from_json("value", spark_schema(), options).alias("r"),
                                    "file", "ord")
    df = _known_columns(parsed.select("r.*", "file", "ord"))
    return df.where(~F.col("kind").isin(*BULK_KINDS) | F.col(CORRUPT).isNotNull())


def _located(df: DataFrame) -> DataFrame:
    """Add the record's file name and its position in the read (file order within a file)."""
    from pyspark.sql import functions as F

    return (df.withColumn("file", F.substring_index(F.input_file_name(), "/", -1))
            .withColumn("ord", F.monotonically_increasing_id()))


def _write(df: DataFrame, events: Path, mode: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    """Write the records partitioned by kind; return the checks of `_validate`, computed in the
    same pass (an Observation: reading everything again to check it costs a fifth of ingest)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    valid = F.col(CORRUPT).isNull() & F.col("kind").isNotNull()
    df = df.withColumn("kind", F.when(valid, F.col("kind")).otherwise(F.lit(INVALID)))
    ok, kind = F.col("kind") != INVALID, F.col("kind")

    def count(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    columns = set(df.columns)
    checks = [
        count(ok & ~kind.isin(*KINDS)).alias("n:?"),
        count(ok & (F.col("v").isNull() | (F.col("v") != schema.VERSION))).alias("bad_version"),
        count(ok & (F.col("t").isNull() | F.col("node").isNull())).alias("no_header"),
        F.min(F.when(ok, F.col("t"))).alias("t_min"),
        F.max(F.when(ok, F.col("t"))).alias("t_max"),
        *[count(kind == k).alias(f"n:{k}") for k in kinds],
        *[count((kind == k) & (F.col(name).isNull() if name in columns else F.lit(True)))
          .alias(f"missing:{k}:{name}") for k in kinds for name in KINDS[k].required],
    ]
    observation = Observation(f"ingest-{mode}")
    df.observe(observation, *checks).write.mode(mode).partitionBy("kind").parquet(str(events))
    return dict(observation.get)


def _known_columns(df: DataFrame) -> DataFrame:
    """The schema's columns, the corrupt-record column and the location."""
    known = set(schema.HEADER).union(*(kind.fields for kind in KINDS.values()))
    keep = [name for name in df.columns if name in known]
    return df.select(*keep, CORRUPT, "file", "ord")


def _check_first_line(path: Path) -> None:
    with path.open(encoding="utf-8", errors="replace") as f:
        line = f.readline()
    try:
        rec = json.loads(line)
    except ValueError:
        return  # judged with the rest, by Spark
    if isinstance(rec, dict):
        check_version(rec.get("v"), f"{path}:1")


def _check_invalid(spark: SparkSession, events: Path, torn: dict[str, str],
                   paths: dict[str, Path]) -> list[str]:
    """Every line Spark could not read must be a torn last line; name the first that is not."""
    invalid = events / f"kind={INVALID}"
    if not invalid.exists():
        return []
    bad = (spark.read.option("mergeSchema", "true").parquet(str(invalid))
           .select("file", CORRUPT).limit(1000).collect())
    skipped = set()
    for row in bad:
        text = row[CORRUPT]
        if torn.get(row["file"]) is not None and text == torn[row["file"]]:
            skipped.add(row["file"])
            continue
        path = paths[row["file"]]
        where = f"{path}:{_line_number(path, text)}"
        try:
            rec = json.loads(text)
        except ValueError:
            raise TraceFormatError(f"{where}: not a JSON record: {text[:80]!r}") from None
        validate(rec, where)  # raises the precise version or field error
        raise TraceFormatError(f"{where}: not a record of trace schema v{schema.VERSION}: "
                               f"{text[:80]!r}")
    return sorted(skipped)


def _line_number(path: Path, text: str) -> int | str:
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if line.rstrip("\n") == text:
                return number
    return "?"


def _validate(spark: SparkSession, events: Path, metrics: dict[str, Any], files: int,
              torn: list[str]) -> IngestReport:
    """Version, header and required fields of every record, from the checks of `_write`."""
    from pyspark.sql import functions as F

    def stored() -> DataFrame:  # only on the way to an error: which file is it in?
        return spark.read.option("mergeSchema", "true").parquet(str(events))

    if metrics["bad_version"]:
        row = stored().where(F.col("v").isNull() | (F.col("v") != schema.VERSION)) \
            .select("file", "v").first()
        assert row is not None
        raise TraceVersionError(f"{row['file']}: trace schema version {row['v']!r}; this weeble "
                                f"reads version {schema.VERSION}")
    if metrics["no_header"]:
        row = stored().where(F.col("t").isNull() | F.col("node").isNull()).first()
        assert row is not None
        raise TraceFormatError(f"{row['file']}: a {row['kind']} record lacks 't' or 'node'")
    for key, missing in metrics.items():
        if key.startswith("missing:") and missing:
            _, kind, name = key.split(":")
            part = spark.read.parquet(str(events / f"kind={kind}"))
            row = (part.where(F.col(name).isNull()) if name in part.columns else part).first()
            assert row is not None
            raise TraceFormatError(
                f"{row['file']}: {missing} {kind} record(s) lack required field {name!r} "
                f"(trace schema v{schema.VERSION})")
    by_kind = {key[2:]: n for key, n in metrics.items() if key.startswith("n:") and n
               and key != "n:?"}
    unknown = sorted(p.name.removeprefix("kind=") for p in events.glob("kind=*")
                     if p.name.removeprefix("kind=") not in KINDS)
    for kind in unknown:  # few, if any: count them apart
        by_kind[kind] = spark.read.parquet(str(events / f"kind={kind}")).count()
    return IngestReport(
        files=files,
        records=sum(by_kind.values()),
        by_kind=dict(sorted(by_kind.items())),
        unknown_kinds=unknown,
        torn_lines=sorted(torn),
        t_min_ns=metrics.get("t_min"),
        t_max_ns=metrics.get("t_max"),
    )
