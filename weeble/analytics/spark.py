"""The SparkSession the jobs share: local[*] unless told otherwise, quiet, sized for small data.

Master: the `master` argument, else `$WEEBLE_SPARK_MASTER`, else `local[*]`. Under `spark-submit`
a session already exists (with the master given on its command line); `getOrCreate` returns it.
Extra settings come from `$WEEBLE_SPARK_CONF` as `key=value,key=value`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from weeble.analytics.errors import AnalyticsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER_ENV = "WEEBLE_SPARK_MASTER"
CONF_ENV = "WEEBLE_SPARK_CONF"

DEFAULTS = {
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.enabled": "false",  # no web UI port per analysis
    "spark.ui.showConsoleProgress": "false",  # the progress bar garbles the verdict table
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
    # Arrow makes toPandas() of the small result tables (report, notebooks) fast.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.compression.codec": "zstd",
}


@contextlib.contextmanager
def stderr_to(log: Path | None) -> Iterator[None]:
    """File descriptor 2 goes to `log` (appended) for the block: a process started inside it
    (Spark's JVM, and the Python workers it starts later) keeps writing its stderr there, while
    this process's own stderr comes back after. None: nothing changes."""
    if log is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def require_java() -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise AnalyticsError(
            "Java not found: Spark needs Java 17 (apt-get install openjdk-17-jre-headless; "
            "scripts/setup.sh does this)"
        )


def session(master: str | None = None, app: str = "weeble-analytics",
            log: Path | None = None) -> SparkSession:
    """The session (a new one, or the one this process has). `log`: where the JVM's own
    output goes when this call starts it (its WARN lines, log4j's profile notice) instead of
    the terminal."""
    require_java()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    master = master or os.environ.get(MASTER_ENV)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # set by spark-submit, which names a master
        builder = builder.master("local[*]")
    conf = dict(DEFAULTS)
    for item in filter(None, os.environ.get(CONF_ENV, "").split(",")):
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    for key, value in conf.items():
        builder = builder.config(key, value)
    with stderr_to(log):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if "spark.sql.shuffle.partitions" not in conf:
        # A run's trace is MBs to a few GBs: Spark's default of 200 shuffle partitions would
        # mostly schedule near-empty tasks, and a task costs more than its data here. One per
        # core keeps every core busy (measured: a third less time than 8 on small runs).
        cores = spark.sparkContext.defaultParallelism
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, cores)))
    return spark
