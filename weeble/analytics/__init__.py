"""Analytics: the one definition of correctness, computed with PySpark over a run's traces.

    errors.py     the errors a user can fix (the trace schema is weeble/trace)
    spark.py      the SparkSession (local[*], or $WEEBLE_SPARK_MASTER)
    ingest.py     node traces (JSON lines) -> Parquet, partitioned by kind, validated
    jobs/         faults, oracle, ordering, overhead, stabilization, latency, verdict
    report.py     report.md with matplotlib plots
    pipeline.py   analyze(run_dir): all of it, as `weeble analyze RUN_DIR` runs it
    submit.py     the entry point for spark-submit
"""
