"""A batch job of the Moldau source and sink on `local-cluster[2,1,1024]` (two executor JVMs).

Run by `test_spark_local_cluster.py` in its own process, so its SparkSession does not meet the
test run's `local[2]` one. It waits until both executors have registered, reads a topic with
`format("moldau")` in several tasks, writes it (values upper-cased) to another topic with
`format("moldau")`, and prints one JSON line: what it read, and which executors ran the tasks.

    python spark_cluster_job.py BOOTSTRAP SOURCE_TOPIC SINK_TOPIC
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyspark

MASTER = "local-cluster[2,1,1024]"
EXECUTORS = 2
REGISTER_TIMEOUT_S = 60.0


def main(bootstrap: str, source_topic: str, sink_topic: str) -> None:
    # local-cluster starts executors with SPARK_HOME/bin scripts, which the pyspark package ships;
    # executors run this interpreter, where moldau is installed
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from moldau.spark import register

    spark = (
        SparkSession.builder.master(MASTER)
        .appName("moldau-local-cluster")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        wait_for_executors(spark)
        source = (
            spark.read.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic)
            .option("includeHeaders", "true")
            .option("minPartitions", "6")
            .load()
        )
        # one job: each task returns its rows and the parent of its Python worker (the
        # executor's worker daemon), so the driver sees which executors read
        tasks = source.rdd.mapPartitions(read_task).collect()
        rows = [row for _parent, task_rows in tasks for row in task_rows]
        workers = {parent for parent, _task_rows in tasks}
        (
            source.select("key", F.upper(F.col("value").cast("string")).alias("value"))
            .write.mode("append")
            .format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink_topic)
            .save()
        )
        print(json.dumps({"rows": sorted(rows), "worker_parents": len(workers)}))
    finally:
        spark.stop()


def read_task(rows: Iterator[Any]) -> list[tuple[int, list[list[Any]]]]:
    found = [
        [r.partition, r.offset, r.key.decode(), r.value.decode(), [h.key for h in r.headers]]
        for r in rows
    ]
    return [(os.getppid(), found)]


def wait_for_executors(spark: object) -> None:
    """Block until both executors have registered (the driver counts itself too)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # type: ignore[attr-defined]
    deadline = time.monotonic() + REGISTER_TIMEOUT_S
    while status().size() < EXECUTORS + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{EXECUTORS} executors did not register in {REGISTER_TIMEOUT_S}s")
        time.sleep(0.2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
