"""Writing DataFrames through `df.write.format("moldau")` and `df.writeStream.format("moldau")`.

The written records are read back with Moldau's own client and compared byte for byte: value,
key, headers, the topic column or option, the partition column.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_support import consume_all, create_topic, produce, spark

__all__ = ["spark"]

HEADERS_DDL = "array<struct<key:string,value:binary>>"


def test_batch_write_of_every_sink_column(spark: object, server: MoldauServer) -> None:
    bootstrap = server.bootstrap_servers
    first, second = unique_topic("spark-sink-a"), unique_topic("spark-sink-b")
    create_topic(bootstrap, first, partitions=2)
    create_topic(bootstrap, second, partitions=1)
    rows = [
        ("v0", "k0", first, 1, [("h", b"1")]),
        ("v1", None, first, 0, []),
        ("v2", "k2", second, 0, [("h", b"2"), ("n", None)]),
    ]
    df = spark.createDataFrame(  # type: ignore[attr-defined]
        rows, f"value string, key string, topic string, partition int, headers {HEADERS_DDL}"
    )
    df.write.mode("append").format("moldau").option("kafka.bootstrap.servers", bootstrap).save()
    assert consume_all(bootstrap, first, 2) == [
        (0, 0, None, b"v1", ()),
        (1, 0, b"k0", b"v0", (("h", b"1"),)),
    ]
    assert consume_all(bootstrap, second, 1) == [(0, 0, b"k2", b"v2", (("h", b"2"), ("n", None)))]


def test_topic_option_overrides_the_column_and_binary_values_stay_bytes(
    spark: object, server: MoldauServer
) -> None:
    bootstrap = server.bootstrap_servers
    name = unique_topic("spark-sink-option")
    df = spark.createDataFrame(  # type: ignore[attr-defined]
        [(bytes([0, 255, i]), "elsewhere") for i in range(5)], "value binary, topic string"
    )
    (
        df.write.mode("append")
        .format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", name)
        .save()
    )
    assert sorted(value for *_rest, value, _h in consume_all(bootstrap, name, 1)) == [
        bytes([0, 255, i]) for i in range(5)
    ]


def test_streaming_write_copies_a_topic(
    spark: object, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    source, target = unique_topic("spark-copy-in"), unique_topic("spark-copy-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(40)])
    query = (
        spark.readStream.format("moldau")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = consume_all(bootstrap, target, 2)
    assert sorted((p, k, v) for p, _o, k, v, _h in copied) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(40)
    )


@pytest.mark.parametrize(
    ("ddl", "options", "message"),
    [
        ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
        ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
        ("value string", {}, "topic option required"),
        ("value string", {"topic": "t", "kafka.value.serializer": "x"}, "value.serializer"),
    ],
)
def test_invalid_sink_input_is_refused(
    spark: object, server: MoldauServer, ddl: str, options: dict[str, str], message: str
) -> None:
    df = spark.createDataFrame([], ddl)  # type: ignore[attr-defined]
    writer = df.write.mode("append").format("moldau")
    writer = writer.option("kafka.bootstrap.servers", server.bootstrap_servers)
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=message):
        writer.save()
