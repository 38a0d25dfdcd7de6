"""Batch reads through `spark.read.format("moldau")` against a real server and local Spark.

Every option family of Spark's Kafka source: subscribe / subscribePattern / assign, offsets as
words and JSON (-2/-1), timestamps, minPartitions, includeHeaders, failOnDataLoss after
DeleteRecords, and the kafka.* keys Spark rejects.
"""

from __future__ import annotations

import datetime
import json

import pytest

from moldau.client import SyncAdminClient, TopicPartition

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_support import create_topic, produce, source, spark

__all__ = ["spark"]

BASE_TS = 1_700_000_000_000


def rows_of(df: object) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return sorted(
        (r.partition, r.offset, r.key, r.value)
        for r in df.select("partition", "offset", "key", "value").collect()  # type: ignore[attr-defined]
    )


@pytest.fixture(scope="module")
def topic(server: MoldauServer) -> tuple[str, list]:
    """Three partitions, ten records each, timestamps BASE_TS + index seconds, one header each."""
    name = unique_topic("spark-batch")
    create_topic(server.bootstrap_servers, name, partitions=3)
    records = [(i % 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(30)]
    produced = produce(
        server.bootstrap_servers,
        name,
        records,
        timestamps=[BASE_TS + i * 1000 for i in range(30)],
        headers=[(("n", str(i).encode()), ("empty", None)) for i in range(30)],
    )
    return name, produced


def test_batch_read_returns_every_record_with_kafka_source_schema(
    spark: object, server: MoldauServer, topic: tuple[str, list]
) -> None:
    name, produced = topic
    df = source(spark, server.bootstrap_servers, subscribe=name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [  # type: ignore[attr-defined]
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))  # type: ignore[attr-defined]
    expected = sorted(produced, key=lambda p: (p.partition, p.offset))
    assert [(r.partition, r.offset, r.key, r.value) for r in rows] == [
        (p.partition, p.offset, p.key, p.value) for p in expected
    ]
    assert {r.topic for r in rows} == {name}
    assert {r.timestampType for r in rows} == {0}
    first = next(r for r in rows if r.value == b"v0")
    assert first.timestamp.replace(tzinfo=None) == datetime.datetime.fromtimestamp(
        BASE_TS / 1000
    ).replace(tzinfo=None)
    assert [(h.key, h.value) for h in first.headers] == [("n", b"0"), ("empty", None)]


def test_batch_read_of_exact_offset_ranges(
    spark: object, server: MoldauServer, topic: tuple[str, list]
) -> None:
    name, _ = topic
    starting = json.dumps({name: {"0": 2, "1": -2, "2": 9}})
    ending = json.dumps({name: {"0": 5, "1": 3, "2": -1}})
    df = source(
        spark,
        server.bootstrap_servers,
        subscribe=name,
        startingOffsets=starting,
        endingOffsets=ending,
    )
    assert [(p, o) for p, o, _k, _v in rows_of(df)] == [
        (0, 2),
        (0, 3),
        (0, 4),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 9),
    ]


def test_batch_read_by_timestamps(
    spark: object, server: MoldauServer, topic: tuple[str, list]
) -> None:
    name, _ = topic
    # Record i has timestamp BASE_TS + i s and sits in partition i % 3 at offset i // 3.
    df = source(
        spark,
        server.bootstrap_servers,
        subscribe=name,
        startingTimestamp=str(BASE_TS + 20_000),
        endingTimestamp=str(BASE_TS + 26_000),
    )
    assert sorted(v for *_rest, v in rows_of(df)) == sorted(f"v{i}".encode() for i in range(20, 26))
    by_partition = json.dumps({name: {"0": BASE_TS + 27_000, "1": BASE_TS, "2": BASE_TS + 99_000}})
    df = source(
        spark,
        server.bootstrap_servers,
        subscribe=name,
        startingOffsetsByTimestamp=by_partition,
        startingOffsetsByTimestampStrategy="latest",
    )
    values = sorted(v for *_rest, v in rows_of(df))
    assert values == sorted([b"v27"] + [f"v{i}".encode() for i in range(1, 30, 3)])


def test_assign_pattern_and_min_partitions(
    spark: object, server: MoldauServer, topic: tuple[str, list]
) -> None:
    name, produced = topic
    df = source(spark, server.bootstrap_servers, assign=json.dumps({name: [1]}))
    assert {p for p, *_ in rows_of(df)} == {1}
    df = source(spark, server.bootstrap_servers, subscribePattern=name.replace("batch", "b.tch"))
    assert len(rows_of(df)) == len(produced)
    df = source(spark, server.bootstrap_servers, subscribe=name, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7  # type: ignore[attr-defined]
    assert len(rows_of(df)) == len(produced)


def test_fail_on_data_loss_after_delete_records(spark: object, server: MoldauServer) -> None:
    name = unique_topic("spark-loss")
    create_topic(server.bootstrap_servers, name)
    produce(server.bootstrap_servers, name, [(0, None, f"v{i}".encode()) for i in range(10)])
    with SyncAdminClient({"bootstrap.servers": server.bootstrap_servers}) as admin:
        admin.delete_records({TopicPartition(name, 0): 4})
    starting = json.dumps({name: {"0": 1}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        source(spark, server.bootstrap_servers, subscribe=name, startingOffsets=starting).collect()
    df = source(
        spark,
        server.bootstrap_servers,
        subscribe=name,
        startingOffsets=starting,
        failOnDataLoss="false",
    )
    assert [o for _p, o, _k, _v in rows_of(df)] == list(range(4, 10))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
        ({"subscribePattern": "x.*"}, "exactly one of"),
        ({"startingOffsets": "latest"}, "may not be 'latest'"),
        ({"maxOffsetsPerTrigger": "10"}, "streaming queries only"),
    ],
)
def test_invalid_source_options_are_refused(
    spark: object, server: MoldauServer, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        source(spark, server.bootstrap_servers, subscribe="any", **options).collect()
