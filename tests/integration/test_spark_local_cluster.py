"""The source and sink on a Spark cluster: `local-cluster[2,1,1024]` runs two executor JVMs,
each with its own Python workers, so tasks read and write from processes other than the driver's.

The job runs in a subprocess (`spark_cluster_job.py`): a JVM hosts one SparkContext, and the test
run's `local[2]` session lives in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_support import consume_all, create_topic, produce

JOB = Path(__file__).with_name("spark_cluster_job.py")
JOB_TIMEOUT_S = 240

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java")


def test_source_and_sink_run_on_two_executor_processes(server: MoldauServer) -> None:
    bootstrap = server.bootstrap_servers
    source_topic = unique_topic("cluster-in")
    sink_topic = unique_topic("cluster-out")
    create_topic(bootstrap, source_topic, partitions=3)
    create_topic(bootstrap, sink_topic, partitions=3)
    records = [(i % 3, f"k{i}".encode(), f"value-{i}".encode()) for i in range(300)]
    produced = produce(
        bootstrap, source_topic, records, headers=[(("n", str(i).encode()),) for i in range(300)]
    )

    completed = subprocess.run(
        [sys.executable, str(JOB), bootstrap, source_topic, sink_topic],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])

    assert result["rows"] == sorted(
        [p.partition, p.offset, p.key.decode(), p.value.decode(), ["n"]] for p in produced
    )
    assert result["worker_parents"] == 2  # tasks ran under both executors
    written = consume_all(bootstrap, sink_topic, 3)
    assert sorted((key, value) for _p, _o, key, value, _h in written) == sorted(
        (key, value.upper()) for _p, key, value in records
    )
