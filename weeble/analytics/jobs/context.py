"""What every job gets: the session, the run's metadata, its time axis, and table I/O.

Jobs read the ingested events (`events(kind)`) and the tables of earlier jobs (`table(name)`),
and write their own tables with `write`. Every table is Parquet under RUN/analysis/<name>/.
Times are seconds since the run's origin (column `ts`), the unit of the bounds they meet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weeble.analytics import ingest
from weeble.analytics.ingest import EVENTS
from weeble.trace.header import RunHeader
from weeble.trace.schema import ANALYSIS_DIR, Type, all_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


_TYPES = {name: {Type.STR: "string", Type.INT: "long", Type.FLOAT: "double", Type.BOOL: "boolean",
                Type.STR_LIST: "array<string>", Type.JSON: "string"}[typ]
          for name, typ in all_fields().items()}


@dataclass(slots=True)
class Context:
    spark: SparkSession
    run_dir: Path
    header: RunHeader
    t0_ns: int  # the time origin of `ts`: the run header's time
    end: float  # the run's end (its run_end record, else its last record), s since the origin

    @classmethod
    def open(cls, spark: SparkSession, run_dir: Path, header: RunHeader, t0_ns: int,
             end_ns: int | None, t_max_ns: int | None) -> Context:
        end = end_ns if end_ns is not None else (t_max_ns or t0_ns)
        return cls(spark, run_dir, header, t0_ns, (end - t0_ns) / 1e9)

    @property
    def out(self) -> Path:
        return self.run_dir / ANALYSIS_DIR

    @property
    def bin(self) -> float:
        """Width of a time-series bin: a round number giving 100-250 bins over the run."""
        raw = max(self.end, 1e-3) / 250
        magnitude = 10 ** math.floor(math.log10(raw))
        return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)

    def ts(self) -> Column:
        from pyspark.sql import functions as F

        return ((F.col("t") - F.lit(self.t0_ns)) / F.lit(1e9)).alias("ts")

    def events(self, kind: str, *columns: str) -> DataFrame:
        """The records of one kind: `ts`, `ord` and the named columns (null where absent)."""
        from pyspark.sql import functions as F

        path = self.out / EVENTS / f"kind={kind}"
        if path.exists():
            df = self.spark.read.parquet(str(path))
        else:  # no record of this kind: an empty table of the right shape
            df = self.spark.createDataFrame([], ingest.spark_schema()).withColumns(
                {"file": F.lit(None).cast("string"), "ord": F.lit(None).cast("long")})
        have = set(df.columns)
        return df.select(self.ts(), "ord", *[
            F.col(c) if c in have else F.lit(None).cast(_TYPES[c]).alias(c) for c in columns])

    def write(self, name: str, df: DataFrame) -> DataFrame:
        path = str(self.out / name)
        df.write.mode("overwrite").parquet(path)
        return self.spark.read.parquet(path)

    def table(self, name: str) -> DataFrame:
        return self.spark.read.parquet(str(self.out / name))

    def bins(self, ts: str = "ts") -> Column:
        """The start of the bin that time column `ts` falls in."""
        from pyspark.sql import functions as F

        return (F.floor(F.col(ts) / self.bin) * self.bin).alias("bin")

    def rows(self, df: DataFrame) -> list[dict[str, Any]]:
        return [r.asDict(recursive=True) for r in df.collect()]
