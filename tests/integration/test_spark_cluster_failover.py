"""A streaming query over a 3-node cluster survives the loss of its input partition's leader:
the source follows the new leader, the exactly-once sink's transactions follow theirs, and the
output holds every input record exactly once (read_committed and read_uncommitted alike)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from moldau.client import NewTopic, SyncAdminClient

from .cluster import COMBINED, Cluster, build_cluster, wait_for
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


def replicated_cluster(
    start_server: Any, base: Path, topics: dict[str, int]
) -> tuple[Cluster, int]:
    """Three combined nodes (FAST) with `topics` (name: partitions) on three replicas each, once
    every partition has an ISR of three; and the leader of the first topic's partition 0."""
    cluster = build_cluster(start_server, base, roles=[COMBINED] * 3, extra=FAST)
    with SyncAdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, count) for name, count in topics.items()])

        def first_leader() -> int | None:
            for name, count in topics.items():
                partitions = admin.describe_topic(name).partitions
                for partition in map(partitions.get, range(count)):
                    if partition is None or partition.leader < 0 or len(partition.isr) < 3:
                        return None
            return int(admin.describe_topic(next(iter(topics))).partitions[0].leader)

        leader = wait_for(first_leader, timeout_s=30, what="an ISR of three everywhere")
    assert isinstance(leader, int)
    return cluster, leader


def test_an_exactly_once_query_survives_its_input_leaders_death(
    spark: Any, start_server: Any, tmp_path: Path
) -> None:
    source, target = unique_topic("failover-in"), unique_topic("failover-out")
    cluster, leader = replicated_cluster(start_server, tmp_path / "cluster", {source: 1, target: 2})
    bootstrap = cluster.bootstrap
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
