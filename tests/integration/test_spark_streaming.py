"""Structured Streaming reads through `spark.readStream.format("moldau")`.

Queries run with `Trigger.AvailableNow` into a Parquet sink (exactly-once with its checkpoint),
so each run ends by itself. Restarts from the checkpoint resume exactly; new partitions and new
topics matching a pattern are picked up; read limits split the backlog into micro-batches;
deleted data follows failOnDataLoss; end offsets can be committed to a consumer group.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moldau.client import SyncAdminClient, TopicPartition

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_support import create_topic, produce, spark

__all__ = ["spark"]


def run_available_now(
    spark: object,
    bootstrap: str,
    directory: Path,
    **options: str,
) -> list[dict]:
    """Run one AvailableNow query into Parquet under `directory`; returns its progress reports."""
    reader = spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)  # type: ignore[attr-defined]
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(directory / "out"))
        .option("checkpointLocation", str(directory / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the AvailableNow query did not finish in 120s"
    if query.exception() is not None:
        raise query.exception()
    return list(query.recentProgress)


def written(spark: object, directory: Path) -> list[tuple[str, int, int, str]]:
    if not (directory / "out").exists():
        return []
    rows = spark.read.parquet(str(directory / "out")).collect()  # type: ignore[attr-defined]
    return sorted((r.topic, r.partition, r.offset, r.value) for r in rows)


def test_restart_from_checkpoint_loses_and_duplicates_nothing(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    name = unique_topic("spark-stream")
    create_topic(bootstrap, name, partitions=2)
    produce(bootstrap, name, [(i % 2, None, f"a{i}".encode()) for i in range(20)])
    run_available_now(spark, bootstrap, tmp_path, subscribe=name, startingOffsets="earliest")
    assert len(written(spark, tmp_path)) == 20
    produce(bootstrap, name, [(i % 2, None, f"b{i}".encode()) for i in range(14)])
    # startingOffsets only applies to a new query: the restart continues from the checkpoint.
    progress = run_available_now(spark, bootstrap, tmp_path, subscribe=name)
    rows = written(spark, tmp_path)
    assert len(rows) == 34
    assert len(set(rows)) == 34
    assert sorted(v for *_rest, v in rows) == sorted(
        [f"a{i}" for i in range(20)] + [f"b{i}" for i in range(14)]
    )
    end = json.loads(progress[-1]["sources"][0]["endOffset"])
    assert end == {name: {"0": 17, "1": 17}}


def test_new_partitions_and_pattern_topics_are_picked_up(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    prefix = unique_topic("spark-pattern")
    first = f"{prefix}-a"
    create_topic(bootstrap, first, partitions=1)
    produce(bootstrap, first, [(0, None, b"first-0")])
    options = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest"}
    run_available_now(spark, bootstrap, tmp_path, **options)
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_partitions({first: 2})
    second = f"{prefix}-b"
    create_topic(bootstrap, second, partitions=1)
    produce(bootstrap, first, [(1, None, b"first-1")])
    produce(bootstrap, second, [(0, None, b"second-0")])
    run_available_now(spark, bootstrap, tmp_path, **options)
    assert written(spark, tmp_path) == [
        (first, 0, 0, "first-0"),
        (first, 1, 0, "first-1"),
        (second, 0, 0, "second-0"),
    ]


def test_max_offsets_per_trigger_splits_the_backlog(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    name = unique_topic("spark-limit")
    create_topic(bootstrap, name, partitions=2)
    produce(bootstrap, name, [(i % 2, None, f"v{i}".encode()) for i in range(25)])
    progress = run_available_now(
        spark,
        bootstrap,
        tmp_path,
        subscribe=name,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="10",
    )
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 25
    assert max(sizes) <= 10
    assert len(sizes) >= 3
    assert len(set(written(spark, tmp_path))) == 25


def test_data_deleted_behind_a_checkpoint_follows_fail_on_data_loss(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    name = unique_topic("spark-stream-loss")
    create_topic(bootstrap, name)
    produce(bootstrap, name, [(0, None, f"a{i}".encode()) for i in range(5)])
    run_available_now(spark, bootstrap, tmp_path, subscribe=name, startingOffsets="earliest")
    produce(bootstrap, name, [(0, None, f"b{i}".encode()) for i in range(5)])
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_records({TopicPartition(name, 0): 7})
    with pytest.raises(Exception, match="failOnDataLoss"):
        run_available_now(spark, bootstrap, tmp_path, subscribe=name)
    run_available_now(spark, bootstrap, tmp_path, subscribe=name, failOnDataLoss="false")
    assert [o for _t, _p, o, _v in written(spark, tmp_path)] == [0, 1, 2, 3, 4, 7, 8, 9]


def test_end_offsets_are_committed_to_a_consumer_group(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    name = unique_topic("spark-group")
    group = unique_topic("spark-query")
    create_topic(bootstrap, name, partitions=2)
    produce(bootstrap, name, [(i % 2, None, b"x") for i in range(9)])
    run_available_now(
        spark,
        bootstrap,
        tmp_path,
        subscribe=name,
        startingOffsets="earliest",
        **{"kafka.group.id": group},
    )
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group)
    assert committed == {TopicPartition(name, 0): 5, TopicPartition(name, 1): 4}
