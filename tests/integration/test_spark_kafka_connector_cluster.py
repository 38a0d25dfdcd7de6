"""Spark's own Kafka connector (`format("kafka")`) against a 3-node Moldau cluster (replication
factor 3, min.insync.replicas 2): a batch write and read, and a streaming copy from one topic to
another that outlives the SIGKILL of its input's leader, then is restarted from its checkpoint.

Spark's Kafka sink is at-least-once: a task that fails and is retried, or a micro-batch replayed
after a restart, writes its rows again. The test requires that no input record is missing and no
record appears that was never input, and counts the duplicates: none may appear unless a task of
the query failed (Spark's status tracker counts them), as the Java producer is idempotent and
retries across the leader change itself.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from .cluster import wait_for
from .support import unique_topic
from .test_spark_cluster_failover import replicated_cluster
from .test_spark_kafka_connector import rows_of
from .test_spark_support import consume_all, source, spark, spark_kafka, start_copy

__all__ = ["spark", "spark_kafka"]

FIRST, SECOND = 600, 200


def write(spark: Any, bootstrap: str, topic: str, start: int, count: int) -> None:
    """`count` keyed records with a header through `df.write.format("kafka")` (acks=all)."""
    (
        spark.range(start, start + count, numPartitions=2)
        .selectExpr(
            "CAST(id AS STRING) AS key",
            "format_string('v%05d', id) AS value",
            "array(named_struct('key', 'id', 'value', CAST(CAST(id AS STRING) AS BINARY)))"
            " AS headers",
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def failed_tasks(spark: Any, run_ids: list[str]) -> int:
    """Task attempts that failed in the jobs of these streaming query runs (each run's jobs are
    in the job group of its run id)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(job) for run in run_ids for job in tracker.getJobIdsForGroup(run)]
    stages = [tracker.getStageInfo(stage) for job in jobs if job for stage in job.stageIds]
    return sum(stage.numFailedTasks for stage in stages if stage is not None)


def test_kafka_format_copies_a_topic_through_a_leader_s_death_and_a_restart(
    spark_kafka: Any, start_server: Any, tmp_path: Path
) -> None:
    topic_in, target = unique_topic("kafka-format-in"), unique_topic("kafka-format-out")
    cluster, leader = replicated_cluster(
        start_server, tmp_path / "cluster", {topic_in: 2, target: 2}
    )
    bootstrap = cluster.bootstrap
    write(spark_kafka, bootstrap, topic_in, 0, FIRST)
    read = source(spark_kafka, bootstrap, data_format="kafka", subscribe=topic_in)
    assert sorted(
        value for *_rest, value in rows_of(read.select("partition", "offset", "value"))
    ) == [b"v%05d" % i for i in range(FIRST)]

    def copy(**trigger: Any) -> Any:
        return start_copy(
            spark_kafka,
            bootstrap,
            data_format="kafka",
            source_options={
                "subscribe": topic_in,
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": "100",
                "includeHeaders": "true",
                # The driver's Java admin client (3.9) maps a partition to its leader before
                # asking for offsets; when that lookup falls between the leader's death and its
                # fencing, the ListOffsets waits for the dead broker until this timeout (60 s by
                # default; no shorter than a request's), and Spark then retries with a new admin
                # client. Kafka's brokers answer the lookup the same way until their controller
                # fences the dead one.
                "kafka.default.api.timeout.ms": "10000",
                "kafka.request.timeout.ms": "10000",
            },
            columns=("key", "value", "headers"),
            target=target,
            checkpoint=tmp_path / "checkpoint",
            **trigger,
        )

    def read_to(query: Any, records: int) -> object:
        """The query's last committed batch ends at `records` input records, or it failed."""
        if query.exception() is not None:
            return True
        progress = query.lastProgress or {"sources": []}
        ends = [json.loads(s["endOffset"] or "{}") for s in progress["sources"]]
        return ends and sum(ends[0].get(topic_in, {}).values()) == records

    query = copy(processingTime="200 milliseconds")
    runs = [str(query.runId)]
    try:
        wait_for(
            lambda: (query.lastProgress or {}).get("batchId", -1) >= 1 or query.exception(),
            timeout_s=120,
            what="two micro-batches copied",
        )
        cluster.kill(leader)  # SIGKILL, mid-query
        wait_for(lambda: read_to(query, FIRST), timeout_s=180, what="the input copied")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    write(spark_kafka, bootstrap, topic_in, FIRST, SECOND)  # to the partitions' new leaders
    query = copy(availableNow=True)
    runs.append(str(query.runId))
    query.awaitTermination(120)
    assert not query.isActive, "the AvailableNow query did not finish in 120s"
    assert query.exception() is None, query.exception()
    assert read_to(query, FIRST + SECOND)

    copied = Counter(
        (key, value, headers)
        for _p, _o, key, value, headers in consume_all(cluster.bootstrap_without(leader), target, 2)
    )
    expected = {(b"%d" % i, b"v%05d" % i, (("id", b"%d" % i),)) for i in range(FIRST + SECOND)}
    missing = expected - set(copied)
    duplicates = sum(copied.values()) - len(copied)
    failed = failed_tasks(spark_kafka, runs)
    assert not missing, f"{len(missing)} input records not copied, e.g. {sorted(missing)[:3]}"
    assert set(copied) == expected, "the output holds records that were never input"
    assert duplicates == 0 or failed > 0, (
        f"{duplicates} records copied twice, though no task failed"
    )
    print(f"copied {len(copied)} records, {duplicates} twice, {failed} tasks failed")
