"""Shared pieces of the Spark tests: one local SparkSession for the whole run, and small helpers
that create topics, produce known records and read topics back with Moldau's own client.

The session runs `local[2]` with Python workers on this interpreter; it is created once (every
module's `spark` fixture gets the same one) and stopped when the test run ends. It has Spark's
own Kafka connector on its classpath when `scripts/setup.sh` resolved it (`tests/spark_kafka.py`):
the tests of `format("kafka")` against Moldau take it as `spark_kafka`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from moldau.client import (
    OFFSET_BEGINNING,
    NewTopic,
    SyncAdminClient,
    SyncConsumer,
    SyncProducer,
    TopicPartition,
)
from tests.spark_kafka import spark_jars, unavailable

from .kafka_jvm import _missing

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed (pip install -e '.[spark]')"
)


@dataclass(frozen=True, slots=True)
class Produced:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from moldau.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("moldau-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "20s")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", spark_jars() or "")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_kafka(spark: object) -> object:
    """The shared session, for tests of Spark's own `format("kafka")`: skipped without the
    connector (failed under CI=true)."""
    reason = unavailable()
    if reason is not None:
        _missing(reason)
    return spark


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions)])


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[int, bytes | None, bytes | None]],
    *,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[tuple[tuple[str, bytes | None], ...]] | None = None,
) -> list[Produced]:
    """Produce `(partition, key, value)` records in order; returns where each one landed."""
    delivered: list[Produced | None] = [None] * len(records)
    errors: list[object] = []
    with SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 1}) as producer:
        for index, (partition, key, value) in enumerate(records):
            record_headers = headers[index] if headers else ()
            timestamp = timestamps[index] if timestamps else None

            def report(error: object, metadata: object, index: int = index) -> None:
                if error is not None:
                    errors.append(error)
                    return
                delivered[index] = Produced(
                    metadata.partition,  # type: ignore[attr-defined]
                    metadata.offset,  # type: ignore[attr-defined]
                    records[index][1],
                    records[index][2],
                    metadata.timestamp,  # type: ignore[attr-defined]
                    tuple(records_headers_of(headers, index)),
                )

            producer.produce(
                topic,
                value,
                key,
                partition=partition,
                headers=list(record_headers),
                timestamp=timestamp,
                on_delivery=report,
            )
        assert producer.flush(30) == 0, "records were not delivered in 30s"
    assert not errors, errors
    return [d for d in delivered if d is not None]


def records_headers_of(
    headers: Sequence[tuple[tuple[str, bytes | None], ...]] | None, index: int
) -> tuple[tuple[str, bytes | None], ...]:
    return headers[index] if headers else ()


def consume_all(
    bootstrap: str, topic: str, partitions: int, *, isolation_level: str = "read_committed"
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    """Every record of `topic`: (partition, offset, key, value, headers), in partition order."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    settings = {"bootstrap.servers": bootstrap, "isolation.level": isolation_level}
    found = []
    with SyncConsumer(settings) as consumer:
        consumer.assign(tps, dict.fromkeys(tps, OFFSET_BEGINNING))
        while True:
            messages = consumer.consume(10_000, 2.0)
            for m in messages:
                found.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers())))
            if not messages and consumer.all_at_end():
                break
    return sorted(found)


def source(spark: object, bootstrap: str, *, data_format: str = "moldau", **options: str) -> Any:
    """`spark.read.format(data_format)` ("moldau", or "kafka": Spark's own connector) with the
    bootstrap servers and `options` set."""
    reader = spark.read.format(data_format).option("kafka.bootstrap.servers", bootstrap)  # type: ignore[attr-defined]
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def start_copy(
    spark: Any,
    bootstrap: str,
    *,
    data_format: str,
    source_options: Mapping[str, str],
    columns: Sequence[str],
    target: str,
    checkpoint: Path,
    **trigger: Any,
) -> Any:
    """Start a streaming query that copies topics into `target`: `readStream.format(data_format)`
    with `source_options`, the `columns` selected, `writeStream.format(data_format)` checkpointed
    in `checkpoint`, triggered as `trigger` says (`availableNow=True`, ...)."""
    reader = spark.readStream.format(data_format).option("kafka.bootstrap.servers", bootstrap)
    for key, value in source_options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .selectExpr(*columns)
        .writeStream.format(data_format)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )
