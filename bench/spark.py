"""Spark on Moldau: records/s of the sink and of the source, against Parquet and against Spark's
own Kafka connector (`format("kafka")`) in the same run.

    .venv/bin/python bench/spark.py [--millions 2] [--size 100] [--partitions 2] [--runs 3]

Starts a broker on a temporary directory and a `local[2]` SparkSession (Python workers on this
interpreter) with Spark's Kafka connector on its classpath (`tests/java/spark-kafka/lib/`, which
`scripts/setup.sh` resolves; the connector talks to Moldau through Kafka's Java client, each side
with its own defaults). Every figure is the median of `--runs` rounds; within a round the
contenders run one after the other, so that the machine's load falls on each alike.

Sink: `--millions` million `--size`-byte values (`spark.range` made into distinct strings, no
keys) written to a fresh `--partitions`-partition topic with `df.write.format("moldau")` and with
`df.write.format("kafka")`, with the Java producer's defaults (16 KiB batches, `linger.ms` 0)
and with batches as large as `format("moldau")` makes (`kafka.batch.size` 1,000,000,
`kafka.linger.ms` 20); the same DataFrame written to Parquet (Spark's defaults: snappy) is
the sinks' ceiling, and so is a Python data source whose writer only reads the Arrow batches
Spark hands it (what Spark's Python data source write path alone allows). Rounds follow a
warm-up write of each (a quarter of the rows, at most 500,000: Python workers started, the
JVM's code compiled). The streaming sinks are measured the same way on one micro-batch of as
many rows (`rate-micro-batch` source, `Trigger.AvailableNow`): `format("moldau")` with
`exactlyOnce` (transactions the driver commits) and without, and `format("kafka")`.

Source: the first written topic read back with `spark.read.format("moldau")` and with
`spark.read.format("kafka")`, aggregating every value's length (so every value is decoded, reaches
the JVM's rows and is looked at), against the same aggregate over the Parquet copy of the very
rows Moldau returned (the read ceiling of Spark on this machine; Parquet reads only the value
column, the sources always produce every column) and over a Python data source replaying one
prepared Arrow batch of the source's schema (what Spark's Python data source path alone
allows). Last, the executor's range reader (`read_range`, fetch + Arrow decoding, no Spark)
drains one partition in this process, the Python side's own rate on one core, next to
`Consumer.consume` (a `Message` per record). Nothing is asserted but the record counts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from _harness import Broker, create_topic, header
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from moldau.spark.schema import source_schema

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import spark_kafka

TARGET_RECORDS_PER_S = 1_000_000
Rates = dict[str, list[float]]  # records/s of each round, by contender
# the Java producer batching as format("moldau") does (its kafka.batch.size default)
LARGE_BATCHES = {"kafka.batch.size": "1000000", "kafka.linger.ms": "20"}


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from moldau.spark import register

    jars = spark_kafka.spark_jars()
    if jars is None:
        raise SystemExit(f"bench/spark.py: {spark_kafka.unavailable()}")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("moldau-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(ReplayedArrow)
    spark.dataSource.register(DiscardedArrow)
    return spark


class DiscardedArrow(DataSource):
    """A Python data source whose writer reads every Arrow batch Spark hands it and keeps
    nothing: the rate at which Spark gives rows to Python data source writers at all (the
    Moldau sink's ceiling, with no encoding and no broker)."""

    @classmethod
    def name(cls) -> str:
        return "discarded_arrow"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return DiscardedArrowWriter()


class DiscardedArrowWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return WriterCommitMessage()


class ReplayedArrow(DataSource):
    """A Python data source that yields one prepared Arrow batch of the source's schema over and
    over: the rate at which Spark takes rows from Python data sources at all (the Moldau source's
    ceiling, with no broker and no decoding)."""

    @classmethod
    def name(cls) -> str:
        return "replayed_arrow"

    def schema(self) -> StructType:
        return source_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return ReplayedArrowReader(int(self.options["rows"]), int(self.options["partitions"]))


class ReplayedArrowReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.partition_count = partitions

    def partitions(self) -> list[InputPartition]:
        share = self.rows // self.partition_count
        return [InputPartition(share) for _ in range(self.partition_count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from moldau.protocol.records import NewRecord, build_batch
        from moldau.spark.arrow_records import fetch_to_arrow

        rows: int = partition.value  # type: ignore[attr-defined]
        records = build_batch([NewRecord(value=b"%0100d" % i) for i in range(10_000)])
        batch = fetch_to_arrow(
            records, topic="bench", partition=0, fetch_offset=0, end_offset=10_000
        ).batch
        assert batch is not None
        for _ in range(rows // batch.num_rows):
            yield batch
        if rows % batch.num_rows:
            yield batch.slice(0, rows % batch.num_rows)


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def generated(spark: Any, records: int, size: int, partitions: int) -> Any:
    """`records` distinct values of exactly `size` bytes: the row number, zero-padded."""
    return spark.range(records, numPartitions=partitions).selectExpr(
        f"lpad(cast(id as string), {size}, '0') as value"
    )


def value_lengths(df: Any) -> tuple[int, int]:
    row = df.selectExpr("count(*) as n", "sum(length(value)) as bytes").collect()[0]
    return int(row.n), int(row.bytes or 0)


def median(rates: list[float]) -> float:
    return statistics.median(rates)


def report(label: str, rates: list[float], note: str = "") -> None:
    """One line: the median records/s of the rounds, their spread, and a note."""
    spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
    print(f"{label:<48}| {median(rates):11,.0f} records/s  ({spread}){note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--millions", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    records = int(args.millions * 1_000_000)
    with Broker() as broker, tempfile.TemporaryDirectory(prefix="moldau-bench-") as scratch:
        spark = spark_session()
        try:
            header(
                f"Spark local[2], {records:,} records of {args.size} B, "
                f"{args.partitions} partitions; medians of {args.runs} rounds (spread)"
            )
            rates = sink(spark, broker, args, records, scratch)
            rates |= streaming_sinks(spark, broker, args, records, scratch)
            report("sink    df.write.format('moldau')", rates["moldau"])
            report("sink    df.write.format('kafka')", rates["kafka"],
                   "  (Spark's Kafka sink, the Java producer's defaults)")  # fmt: skip
            report("sink    df.write.format('kafka'), 1 MB batches", rates["kafka large batches"],
                   "  (kafka.batch.size 1000000, kafka.linger.ms 20)")  # fmt: skip
            report("ceiling df.write.parquet", rates["parquet"])
            report("ceiling discarded Arrow batches", rates["discarded"],
                   "  (a Python data source writer that only reads them)")  # fmt: skip
            report("sink    writeStream moldau, exactlyOnce", rates["stream exactly once"],
                   "  (one micro-batch)")  # fmt: skip
            report("sink    writeStream moldau, at least once", rates["stream at least once"])
            report("sink    writeStream kafka (at least once)", rates["stream kafka"])
            rates |= sources(spark, broker, args, records, scratch)
            report("source  spark.read.format('moldau')", rates["read moldau"],
                   "  (sum(length(value)))")  # fmt: skip
            report("source  spark.read.format('kafka')", rates["read kafka"],
                   "  (Spark's Kafka source)")  # fmt: skip
            report(
                "ceiling spark.read.parquet", rates["read parquet"], "  (same rows, same aggregate)"
            )
            report("ceiling replayed Arrow batches", rates["read replayed"],
                   "  (a Python data source, no broker, no decoding)")  # fmt: skip
        finally:
            spark.stop()
        reader_rate, consumer_rate = drain_one_partition(broker.bootstrap)
        print(f"partition 0 in this process, no Spark: read_range (Arrow) {reader_rate:,.0f} "
              f"records/s, Consumer.consume (Messages) {consumer_rate:,.0f} records/s")  # fmt: skip
    m = {name: median(values) for name, values in rates.items()}
    header("same-run ratios (of medians)")
    print(f"moldau sink / kafka sink: {m['moldau'] / m['kafka']:.2f} (the Java producer's "
          f"defaults), {m['moldau'] / m['kafka large batches']:.2f} (1 MB batches)")  # fmt: skip
    print(f"moldau streaming sink (at least once) / kafka streaming sink: "
          f"{m['stream at least once'] / m['stream kafka']:.2f}")  # fmt: skip
    print(f"moldau source / kafka source: {m['read moldau'] / m['read kafka']:.2f}")
    print(f"source / Parquet read: moldau {m['read moldau'] / m['read parquet']:.2f}, "
          f"kafka {m['read kafka'] / m['read parquet']:.2f}")  # fmt: skip
    print(f"moldau source / replayed Arrow (Spark's Python data source ceiling): "
          f"{m['read moldau'] / m['read replayed']:.2f}")  # fmt: skip
    print(f"sink / Parquet write: moldau {m['moldau'] / m['parquet']:.2f}, "
          f"kafka {m['kafka'] / m['parquet']:.2f}")  # fmt: skip
    print(f"moldau sink / discarded Arrow (Spark's Python data source ceiling): "
          f"{m['moldau'] / m['discarded']:.2f}")  # fmt: skip
    print(f"moldau sink records/s / 1 M target: {m['moldau'] / TARGET_RECORDS_PER_S:.2f}")
    print(f"exactly-once sink / at-least-once sink: "
          f"{m['stream exactly once'] / m['stream at least once']:.2f}")  # fmt: skip
    print(f"moldau source records/s / 1 M target: {m['read moldau'] / TARGET_RECORDS_PER_S:.2f}")
    print(f"read_range / Consumer.consume: {reader_rate / consumer_rate:.2f}")


def sink(spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str) -> Rates:
    """Write the generated rows to Moldau through each format (topic `bench` first, then fresh
    topics), to Parquet and to the discarding data source, round by round after a warm-up;
    the records/s of every round of each."""
    rows = generated(spark, records, args.size, args.partitions)

    def to_topic(data_format: str, topic: str, frame: Any, **options: str) -> None:
        create_topic(broker.bootstrap, topic, args.partitions)
        writer = (
            frame.write.mode("append")
            .format(data_format)
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
        )
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save()

    def discarded(frame: Any) -> None:
        frame.write.mode("append").format("discarded_arrow").save()

    warm_up = generated(spark, min(records // 4, 500_000), args.size, args.partitions)
    to_topic("moldau", "warm-up", warm_up)
    to_topic("kafka", "warm-up-kafka", warm_up)
    warm_up.write.parquet(os.path.join(scratch, "warm-up"))
    discarded(warm_up)
    rates: Rates = {"moldau": [], "kafka": [], "kafka large batches": [], "parquet": [],
                    "discarded": []}  # fmt: skip
    for run in range(args.runs):
        topic = "bench" if run == 0 else f"bench-{run}"
        _, elapsed = timed(lambda topic=topic: to_topic("moldau", topic, rows))  # type: ignore[misc]
        rates["moldau"].append(records / elapsed)
        topic = f"bench-kafka-{run}"
        _, elapsed = timed(lambda topic=topic: to_topic("kafka", topic, rows))  # type: ignore[misc]
        assert end_offsets(broker.bootstrap, topic, args.partitions) == records
        rates["kafka"].append(records / elapsed)
        topic = f"bench-kafka-large-{run}"
        _, elapsed = timed(
            lambda topic=topic: to_topic("kafka", topic, rows, **LARGE_BATCHES)  # type: ignore[misc]
        )
        assert end_offsets(broker.bootstrap, topic, args.partitions) == records
        rates["kafka large batches"].append(records / elapsed)
        target = os.path.join(scratch, f"write-ceiling-{run}")
        _, elapsed = timed(lambda target=target: rows.write.parquet(target))  # type: ignore[misc]
        rates["parquet"].append(records / elapsed)
        _, elapsed = timed(lambda: discarded(rows))
        rates["discarded"].append(records / elapsed)
    return rates


def streaming_sinks(
    spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str
) -> Rates:
    """records/s of a streaming query writing one micro-batch of `records` generated rows:
    `format("moldau")` with `exactlyOnce` and without, and `format("kafka")`; round by round
    after a warm-up of each."""

    def write(topic: str, rows: int, data_format: str, exactly_once: bool = False) -> float:
        create_topic(broker.bootstrap, topic, args.partitions)
        query = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows)
            .option("numPartitions", args.partitions)
            .load()
            .selectExpr(f"lpad(cast(value as string), {args.size}, '0') as value")
            .writeStream.format(data_format)
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("checkpointLocation", os.path.join(scratch, f"checkpoint-{topic}"))
            .trigger(availableNow=True)
        )
        if exactly_once:
            query = query.option("exactlyOnce", "true")
        start = time.perf_counter()
        running = query.start()
        running.awaitTermination()
        elapsed = time.perf_counter() - start
        if running.exception() is not None:
            raise RuntimeError(f"the streaming write to {topic} failed: {running.exception()}")
        written = end_offsets(broker.bootstrap, topic, args.partitions)
        assert written >= rows, f"{written} records in {topic}, expected {rows}"
        return rows / elapsed

    warm_up = min(records // 4, 500_000)
    write("stream-warm-up-exactly-once", warm_up, "moldau", exactly_once=True)
    write("stream-warm-up", warm_up, "moldau")
    write("stream-warm-up-kafka", warm_up, "kafka")
    rates: Rates = {"stream exactly once": [], "stream at least once": [], "stream kafka": []}
    for run in range(args.runs):
        rates["stream exactly once"].append(
            write(f"stream-exactly-once-{run}", records, "moldau", exactly_once=True)
        )
        rates["stream at least once"].append(
            write(f"stream-at-least-once-{run}", records, "moldau")
        )
        rates["stream kafka"].append(write(f"stream-kafka-{run}", records, "kafka"))
    return rates


def sources(
    spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str
) -> Rates:
    """records/s of `sum(length(value))` over topic `bench` through each format, over a Parquet
    copy of the rows Moldau returns and over replayed Arrow batches, round by round."""
    expected = (records, records * args.size)

    def topic_source(data_format: str) -> Any:
        return (
            spark.read.format(data_format)
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "bench")
            .load()
        )

    contenders = {"read moldau": topic_source("moldau"), "read kafka": topic_source("kafka")}
    parquet_dir = os.path.join(scratch, "read-copy")
    contenders["read moldau"].write.parquet(parquet_dir)  # the rows Moldau returns, as Parquet
    contenders["read parquet"] = spark.read.parquet(parquet_dir)
    contenders["read replayed"] = (
        spark.read.format("replayed_arrow")
        .option("rows", records)
        .option("partitions", args.partitions)
        .load()
    )
    value_lengths(contenders["read kafka"])  # warm-up: the connector's classes loaded and compiled
    rates: Rates = {name: [] for name in contenders}
    for _ in range(args.runs):
        for name, frame in contenders.items():
            counted, elapsed = timed(lambda frame=frame: value_lengths(frame))  # type: ignore[misc]
            assert counted == expected, f"{name}: {counted}, expected {expected}"
            rates[name].append(records / elapsed)
    return rates


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of the topic's partitions' end offsets (records, and transaction markers)."""
    from moldau.client import SyncConsumer, TopicPartition

    with SyncConsumer({"bootstrap.servers": bootstrap}) as consumer:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in range(partitions)
        )


def drain_one_partition(bootstrap: str) -> tuple[float, float]:
    """records/s over all of partition 0 in this process: `read_range` (fetch + Arrow decoding,
    what a Spark task runs) and, for comparison, `Consumer.consume` (a `Message` per record, the
    path the source used before, without even building Arrow arrays from them)."""
    from moldau.client import OFFSET_BEGINNING, SyncConsumer, TopicPartition
    from moldau.spark.partition_reader import read_range
    from moldau.spark.planning import OffsetRange

    tp = TopicPartition("bench", 0)
    client = {"bootstrap.servers": bootstrap}
    with SyncConsumer(client) as consumer:
        _low, high = consumer.get_watermark_offsets(tp)
        consumer.assign([tp], {tp: OFFSET_BEGINNING})

        def consume_all() -> int:
            count = 0
            while count < high:
                count += len(consumer.consume(20_000, 5.0))
            return count

        consumed, consumer_elapsed = timed(consume_all)
    read, elapsed = timed(
        lambda: sum(b.num_rows for b in read_range(client, OffsetRange("bench", 0, 0, high)))
    )
    assert read == consumed == high, f"read {read} and consumed {consumed} of {high} records"
    return high / elapsed, high / consumer_elapsed


if __name__ == "__main__":
    main()
