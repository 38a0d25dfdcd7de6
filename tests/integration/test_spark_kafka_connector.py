"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 with Kafka's Java client)
against a single Moldau node, beside Moldau's `format("moldau")` on the same data.

Batch reads by subscribe, subscribePattern and assign, with startingOffsets/endingOffsets, give the
records as produced (keys, values, headers, timestamps) and the very rows `format("moldau")` gives;
a batch write of every sink column puts each row where `format("moldau")` puts it; a streaming copy
from one topic to another, run twice from one checkpoint, outputs its input once.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from moldau.client.partitioner import partition_for_key

from .conftest import MoldauServer
from .support import unique_topic
from .test_spark_sink import HEADERS_DDL
from .test_spark_support import (
    consume_all,
    create_topic,
    produce,
    source,
    spark,
    spark_kafka,
    start_copy,
)

__all__ = ["spark", "spark_kafka"]

BASE_TS = 1_700_000_000_000


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    """Every row as a tuple of all its columns (headers as (key, value) pairs, none as None), by
    partition and offset (columns every frame given here has)."""
    rows = sorted(
        (row.asDict() for row in df.collect()), key=lambda r: (r["partition"], r["offset"])
    )
    return [
        tuple(
            tuple((h.key, h.value) for h in value) if name == "headers" and value else value
            for name, value in row.items()
        )
        for row in rows
    ]


@pytest.fixture(scope="module")
def topic(server: MoldauServer) -> tuple[str, list[Any]]:
    """Three partitions, ten records each (record i in partition i % 3 at offset i // 3): keys
    (one null), values (one null), timestamps BASE_TS + i seconds, no header, one, or two of which
    one has a null value."""
    name = unique_topic("kafka-format-batch")
    create_topic(server.bootstrap_servers, name, partitions=3)
    records = [
        (i % 3, None if i == 4 else f"k{i}".encode(), None if i == 7 else f"v{i}".encode())
        for i in range(30)
    ]
    produced = produce(
        server.bootstrap_servers,
        name,
        records,
        timestamps=[BASE_TS + i * 1000 for i in range(30)],
        headers=[(("n", str(i).encode()), ("empty", None))[: i % 3] for i in range(30)],
    )
    return name, produced


def test_batch_reads_give_the_records_and_the_rows_of_format_moldau(
    spark_kafka: Any, server: MoldauServer, topic: tuple[str, list[Any]]
) -> None:
    bootstrap = server.bootstrap_servers
    name, produced = topic
    kafka = source(
        spark_kafka, bootstrap, data_format="kafka", subscribe=name, includeHeaders="true"
    )
    rows = rows_of(kafka.selectExpr("partition", "offset", "key", "value", "headers"))
    assert rows == [
        (p.partition, p.offset, p.key, p.value, p.headers or None)
        for p in sorted(produced, key=lambda p: (p.partition, p.offset))
    ]
    moldau = source(spark_kafka, bootstrap, subscribe=name, includeHeaders="true")
    assert kafka.columns == moldau.columns
    assert rows_of(kafka) == rows_of(moldau)
    by_index = {r.offset * 3 + r.partition: r for r in kafka.collect()}
    assert {r.timestampType for r in by_index.values()} == {0}
    assert by_index[5].timestamp == datetime.datetime.fromtimestamp((BASE_TS + 5000) / 1000)

    starting = json.dumps({name: {"0": 2, "1": -2, "2": 9}})
    ending = json.dumps({name: {"0": 5, "1": 3, "2": -1}})
    ranged = source(
        spark_kafka,
        bootstrap,
        data_format="kafka",
        subscribe=name,
        startingOffsets=starting,
        endingOffsets=ending,
    )
    assert rows_of(ranged.select("partition", "offset")) == [
        (0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (2, 9)
    ]  # fmt: skip

    assigned = source(
        spark_kafka,
        bootstrap,
        data_format="kafka",
        assign=json.dumps({name: [1, 2]}),
        startingOffsets=json.dumps({name: {"1": 8, "2": -2}}),
        endingOffsets=json.dumps({name: {"1": -1, "2": 1}}),
    )
    assert rows_of(assigned.select("partition", "offset", "value")) == [
        (1, 8, b"v25"), (1, 9, b"v28"), (2, 0, b"v2")
    ]  # fmt: skip
    pattern = source(
        spark_kafka, bootstrap, data_format="kafka", subscribePattern=name.replace("batch", "b.tch")
    )
    assert len(pattern.collect()) == len(produced)


def sink_rows(count: int) -> list[tuple[Any, ...]]:
    """(value, key, partition, headers): explicit partitions, keyed rows, rows with neither; null
    and empty values and keys; a header with a null value. The first header names the row."""
    rows = []
    for i in range(count):
        value = None if i % 17 == 0 else b"" if i % 13 == 0 else b"value-%d" % i
        key = None if i % 3 == 0 else b"" if i % 29 == 0 else b"key-%d" % (i % 40)
        partition = i % 3 if i % 5 == 0 else None
        headers = [("row", b"%d" % i), ("empty", None)][: 1 + i % 2]
        rows.append((value, key, partition, headers))
    return rows


def test_a_batch_write_puts_every_row_where_format_moldau_puts_it(
    spark_kafka: Any, server: MoldauServer
) -> None:
    """The same rows written by each format to a topic of three partitions: every row arrives once
    with its key, value and headers, in its partition column's partition, else its key's murmur2
    partition (a row with neither goes to a sticky partition, each sink's own pick). The Kafka
    sink's output reads back through `format("moldau")` as it was written."""
    bootstrap = server.bootstrap_servers
    rows = sink_rows(300)
    expected = {
        headers[0][1]: (placement(partition, key), key, value, tuple(headers))
        for value, key, partition, headers in rows
    }
    df = spark_kafka.createDataFrame(
        rows, f"value binary, key binary, partition int, headers {HEADERS_DDL}"
    )
    for fmt in ("kafka", "moldau"):
        name = unique_topic(f"{fmt}-format-sink")
        create_topic(bootstrap, name, partitions=3)
        (
            df.write.mode("append")
            .format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", name)
            .save()
        )
        written = consume_all(bootstrap, name, 3)
        by_row = {headers[0][1]: (p, key, value, headers) for p, _o, key, value, headers in written}
        assert len(written) == len(by_row) == len(rows), f"format({fmt!r}) wrote {len(written)}"
        assert {
            row: (p if expected[row][0] is not None else None, *rest)
            for row, (p, *rest) in by_row.items()
        } == expected, f"format({fmt!r})"
        if fmt == "kafka":
            back = source(spark_kafka, bootstrap, subscribe=name, includeHeaders="true")
            columns = back.select("partition", "offset", "key", "value", "headers")
            assert rows_of(columns) == sorted(written)


def placement(partition: int | None, key: bytes | None) -> int | None:
    """The partition a row of a three-partition topic must land in (None: a sticky one)."""
    if partition is not None:
        return partition
    return None if key is None else partition_for_key(key, 3)


def test_a_streaming_copy_restarted_from_its_checkpoint_outputs_its_input_once(
    spark_kafka: Any, server: MoldauServer, tmp_path: Path
) -> None:
    """`readStream.format("kafka")` (assign, startingOffsets skipping partition 0's first five
    records) into `writeStream.format("kafka")`, run to the end of its input twice from one
    checkpoint, records produced in between. Spark's Kafka sink is at-least-once: a replayed
    micro-batch would write again. Neither run fails or is stopped inside a batch, so none
    replays, and the output must hold each input record once."""
    bootstrap = server.bootstrap_servers
    topic_in, target = unique_topic("kafka-format-in"), unique_topic("kafka-format-out")
    create_topic(bootstrap, topic_in, partitions=2)
    create_topic(bootstrap, target, partitions=2)

    def produce_round(label: str, count: int) -> list[tuple[int, bytes, bytes, tuple[Any, ...]]]:
        records = [(i % 2, f"{label}k{i}".encode(), f"{label}v{i}".encode()) for i in range(count)]
        headers = [
            (("round", label.encode()), ("i", None if i % 5 else b"%d" % i)) for i in range(count)
        ]
        produced = produce(bootstrap, topic_in, records, headers=headers)
        return [(p.partition, p.key, p.value, p.headers) for p in produced]

    def run() -> list[dict[str, Any]]:
        query = start_copy(
            spark_kafka,
            bootstrap,
            data_format="kafka",
            source_options={
                "assign": json.dumps({topic_in: [0, 1]}),
                "startingOffsets": json.dumps({topic_in: {"0": 5, "1": -2}}),
                "includeHeaders": "true",
                "maxOffsetsPerTrigger": "25",
            },
            columns=("key", "value", "headers", "partition"),
            target=target,
            checkpoint=tmp_path / "checkpoint",
            availableNow=True,
        )
        query.awaitTermination(120)
        assert not query.isActive, "the AvailableNow query did not finish in 120s"
        assert query.exception() is None, query.exception()
        return list(query.recentProgress)

    first = produce_round("a", 40)
    run()
    second = produce_round("b", 30)
    progress = run()  # its startingOffsets no longer count: the checkpoint has the offsets
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {topic_in: {"0": 35, "1": 35}}
    skipped = {b"ak%d" % i for i in range(0, 10, 2)}  # partition 0's first five
    expected = [r for r in first if r[1] not in skipped] + second
    output = Counter(
        (p, key, value, headers)
        for p, _offset, key, value, headers in consume_all(bootstrap, target, 2)
    )
    missing = Counter(expected) - output
    duplicates = sum(output.values()) - len(output)
    assert not missing, f"{sum(missing.values())} input records missing, e.g. {list(missing)[:3]}"
    assert set(output) == set(expected), "the output holds records that were never input"
    assert duplicates == 0, f"{duplicates} records written twice without a replayed batch"
