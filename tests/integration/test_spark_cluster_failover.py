"""A streaming query over a 3-node cluster survives the loss of its input partition's leader:
the source follows the new leader, the exactly-once sink's transactions follow theirs, and the
output holds every input record exactly once (read_committed and read_uncommitted alike)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from moldau.client import NewTopic, SyncAdminClient

from .cluster import COMBINED, build_cluster, wait_for
from .support import unique_topic
from .test_spark_exactly_once import values
from .test_spark_support import produce, spark

__all__ = ["spark"]

RECORDS = 1200
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


def test_an_exactly_once_query_survives_its_input_leaders_death(
    spark: Any, start_server: Any, tmp_path: Path
) -> None:
    cluster = build_cluster(start_server, tmp_path / "cluster", roles=[COMBINED] * 3, extra=FAST)
    bootstrap = cluster.bootstrap
    source, target = unique_topic("failover-in"), unique_topic("failover-out")
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics(
            [NewTopic(source, num_partitions=1), NewTopic(target, num_partitions=2)]
        )

        def source_leader() -> int | None:
            info = admin.describe_topic(source)
            partition = info.partitions.get(0)
            if partition is None or partition.leader < 0 or len(partition.isr) < 3:
                return None
            return int(partition.leader)

        leader = wait_for(source_leader, timeout_s=30, what="the input partition's ISR of three")
    written = [b"v%05d" % i for i in range(RECORDS)]
    produce(bootstrap, source, [(0, b"k%d" % i, v) for i, v in enumerate(written)])

    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(
            lambda: (query.lastProgress or {}).get("batchId", -1) >= 2 or query.exception(),
            timeout_s=120,
            what="three micro-batches written",
        )
        assert query.exception() is None, query.exception()
        cluster.kill(leader)  # SIGKILL, mid-query
        deadline = time.monotonic() + 180
        committed: list[bytes] = []
        while time.monotonic() < deadline and query.exception() is None:
            committed = values(bootstrap, target, "read_committed")
            if len(committed) >= RECORDS:
                break
            time.sleep(0.5)  # polling pace; each round reads the whole output
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert committed == written, (
        f"{len(committed)} records committed; missing {sorted(set(written) - set(committed))[:5]}, "
        f"duplicated {len(committed) - len(set(committed))}"
    )
    assert values(bootstrap, target, "read_uncommitted") == written
