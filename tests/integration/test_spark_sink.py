"""Writing DataFrames through `df.write.format("moldau")` and `df.writeStream.format("moldau")`.

The written records are read back with Moldau's own client and compared byte for byte: value,
key, headers, the topic column or option, the partition column (else the key's murmur2
partition), with every codec, in batches small enough that several are in flight per partition;
the batches in the log files show the codec. `RecordWriter` is also driven without Spark to see
which codec it picks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from moldau.client import NewTopic, SyncAdminClient
from moldau.client.partitioner import partition_for_key
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import BatchHeader, iter_batches

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_support import consume_all, create_topic, produce, spark, start_copy

__all__ = ["spark"]

HEADERS_DDL = "array<struct<key:string,value:binary>>"
SINK_DDL = f"value binary, key binary, partition int, headers {HEADERS_DDL}"


def _logged_batches(server: MoldauServer, topic: str, partitions: int) -> list[BatchHeader]:
    """The headers of every batch in the topic's segment files."""
    headers = []
    for partition in range(partitions):
        for segment in sorted((server.data_dir / f"{topic}-{partition}").glob("*.log")):
            headers += [batch.header for batch in iter_batches(segment.read_bytes())]
    return headers


def _sink_rows(count: int) -> list[tuple[Any, ...]]:
    """(value, key, partition, headers): explicit partitions, keyed rows, rows with neither;
    null and empty values and keys, headers with null values, empty and null header lists."""
    rows = []
    for i in range(count):
        value = (
            None
            if i % 17 == 0
            else b""
            if i % 13 == 0
            else b"value-%d-" % i + bytes([i % 256]) * (i % 50)
        )
        key = None if i % 3 == 0 else b"" if i % 29 == 0 else b"key-%d" % (i % 40)
        partition = i % 3 if i % 5 == 0 else None
        headers = None if i % 7 == 0 else [("row", b"%d" % i), ("empty", None)][: i % 3]
        rows.append((value, key, partition, headers))
    return rows


@pytest.mark.parametrize("codec", [codec.name.lower() for codec in CompressionType])
def test_every_codec_writes_what_reads_back_byte_for_byte(
    spark: Any, server: MoldauServer, codec: str
) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic(f"spark-sink-{codec}")
    create_topic(bootstrap, topic, partitions=3)
    rows = _sink_rows(3000)
    (
        spark.createDataFrame(rows, SINK_DDL)
        .coalesce(1)  # one task: its rows keep their order in each partition
        .write.mode("append")
        .format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.compression.type", codec)
        .option("kafka.batch.size", "4000")  # dozens of batches per partition, several in flight
        .option("topic", topic)
        .save()
    )
    written = consume_all(bootstrap, topic, 3)
    by_value = {
        value: (partition, key, tuple(headers or ()))
        for value, key, partition, headers in rows
        if value
    }
    assert len(written) == len(rows)
    for partition, _offset, key, value, headers in written:
        if value:  # (null and empty values are not unique)
            expected_partition, expected_key, expected_headers = by_value[value]
            assert (key, headers) == (expected_key, expected_headers)
            if expected_partition is not None:
                assert partition == expected_partition
            elif key is not None:
                assert partition == partition_for_key(key, 3)
    assert Counter((key, value, tuple(headers)) for *_, key, value, headers in written) == Counter(
        (key, value, tuple(headers or ())) for value, key, _partition, headers in rows
    )
    for partition in range(3):
        indices = [
            int(value.split(b"-")[1])
            for p, _o, _k, value, _h in written
            if p == partition and value
        ]
        assert indices == sorted(indices)
    logged = _logged_batches(server, topic, 3)
    assert len(logged) > 20
    assert {batch.compression for batch in logged} == {CompressionType.from_name(codec)}


def test_more_rows_than_a_chunk_go_to_their_keys_partitions_in_order(
    spark: Any, server: MoldauServer
) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-sink-chunks")
    create_topic(bootstrap, topic, partitions=4)
    count = 140_000  # one task: three chunks of CHUNK_ROWS (65,536) and what is left
    (
        spark.range(count, numPartitions=1)
        .selectExpr("cast(id % 97 as string) as key", "cast(id as string) as value")
        .write.mode("append")
        .format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    written = consume_all(bootstrap, topic, 4)
    assert sorted(int(value) for *_, value, _h in written) == list(range(count))
    last_by_key: dict[bytes, int] = {}
    for partition, _offset, key, value, _headers in written:
        assert key is not None and value is not None
        assert partition == partition_for_key(key, 4)
        assert int(value) > last_by_key.get(key, -1)  # (consume_all sorts by partition, offset)
        last_by_key[key] = int(value)


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
    query = start_copy(
        spark,
        bootstrap,
        data_format="moldau",
        source_options={"subscribe": source, "startingOffsets": "earliest"},
        columns=("key", "value", "partition"),
        target=target,
        checkpoint=tmp_path / "checkpoint",
        availableNow=True,
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


@pytest.mark.parametrize(
    ("topic_codec", "option", "written"),
    [
        ("zstd", None, CompressionType.ZSTD),
        ("uncompressed", None, CompressionType.NONE),
        ("producer", None, CompressionType.NONE),
        ("zstd", "lz4", CompressionType.LZ4),
    ],
)
def test_batches_take_the_codec_option_else_the_topic_s_compression_type(
    server: MoldauServer, topic_codec: str, option: str | None, written: CompressionType
) -> None:
    import pyarrow as pa

    from moldau.spark.record_writer import RecordWriter

    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-sink-codec")
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, config={"compression.type": topic_codec})])
    client = {"bootstrap.servers": bootstrap}
    if option is not None:
        client["compression.type"] = option
    sent: list[BatchHeader] = []
    with RecordWriter(client, topic=topic) as writer:
        send_batch = writer.producer.send_batch

        def recording(topic: str, partition: int, batch: Any) -> Any:
            sent.append(BatchHeader.parse(batch))
            return send_batch(topic, partition, batch)

        writer.producer.send_batch = recording  # type: ignore[method-assign]
        writer.write(pa.RecordBatch.from_pydict({"value": [b"v%d" % i for i in range(100)]}))
        writer.flush()
    assert [header.compression for header in sent] == [written]
    assert [value for *_, value, _h in consume_all(bootstrap, topic, 1)] == [
        b"v%d" % i for i in range(100)
    ]


def test_a_transaction_of_many_batches_in_flight_commits_every_row_once_in_order(
    server: MoldauServer,
) -> None:
    """The exactly-once path without Spark's streaming: sequences per batch, several batches in
    flight per partition, then the driver's commit."""
    import pyarrow as pa

    from moldau.spark.options import SinkOptions
    from moldau.spark.transactional_sink import TransactionalStreamWriter, write_transaction

    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-sink-transaction")
    create_topic(bootstrap, topic, partitions=2)
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "exactlyOnce": "true",
            "kafka.batch.size": "2000",
        },
        streaming=True,
    )
    rows = [
        pa.RecordBatch.from_pydict(
            {
                "key": [b"k%d" % (i % 2) for i in range(start, start + 500)],
                "value": [b"v%d" % i for i in range(start, start + 500)],
            }
        )
        for start in range(0, 3000, 500)
    ]
    written = write_transaction(options, unique_topic("spark-sink-txn-id"), iter(rows))
    assert written.open and written.records == 3000
    assert consume_all(bootstrap, topic, 2) == []  # read_committed: not committed yet
    TransactionalStreamWriter(options).commit([written], 0)
    read = consume_all(bootstrap, topic, 2)
    for key in (b"k0", b"k1"):
        values = [int(value[1:]) for _p, _o, k, value, _h in read if k == key]
        assert values == [i for i in range(3000) if i % 2 == int(key[1:])]
