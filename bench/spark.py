"""Spark on Moldau: records/s of the sink and of the source, against Parquet in the same run.

    .venv/bin/python bench/spark.py [--millions 2] [--size 100] [--partitions 2] [--runs 3]

Starts a broker on a temporary directory and a `local[2]` SparkSession (Python workers on this
interpreter).

Sink: `--millions` million `--size`-byte values (`spark.range` made into distinct strings, no
keys) written to a fresh `--partitions`-partition topic with `df.write.format("moldau")`; the
same DataFrame written to Parquet (Spark's defaults: snappy) is the sink's ceiling, and so is a
Python data source whose writer only reads the Arrow batches Spark hands it (what Spark's
Python data source write path alone allows). Writes interleave after a warm-up write of each (a
quarter of the rows, at most 500,000: Python workers started, the JVM's code compiled) and the
best of `--runs` is kept for each. The streaming sink is measured the same way on one
micro-batch of as many rows (`rate-micro-batch` source, `Trigger.AvailableNow`) with
`exactlyOnce` (transactions the driver commits) and without.

Source: the first written topic read back with `spark.read.format("moldau")`, aggregating
every value's length (so every value is decoded, crosses from the Python workers to the JVM and
is looked at), against the same aggregate over the Parquet copy of the very rows Moldau
returned (the read ceiling of Spark on this machine; Parquet reads only the value column, the
Moldau source always produces every column) and over a Python data source replaying one
prepared Arrow batch of the source's schema (what Spark's Python data source path alone
allows). Reads interleave and the best of `--runs` is kept for each. Last, the executor's range
reader (`read_range`, fetch + Arrow decoding, no Spark) drains one partition in this process,
the Python side's own rate on one core, next to `Consumer.consume` (a `Message` per record).
Nothing is asserted but the record counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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

TARGET_RECORDS_PER_S = 1_000_000


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from moldau.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("moldau-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--millions", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    records = int(args.millions * 1_000_000)
    expected = (records, records * args.size)
    with Broker() as broker, tempfile.TemporaryDirectory(prefix="moldau-bench-") as scratch:
        spark = spark_session()
        try:
            header(
                f"Spark local[2], {records:,} records of {args.size} B, "
                f"{args.partitions} partitions"
            )
            sink_rate, parquet_write_rate, discarded_rate = sink(
                spark, broker, args, records, scratch
            )
            print(f"sink    df.write.format('moldau')  | {sink_rate:11,.0f} records/s"
                  f"  (best of {args.runs})")  # fmt: skip
            print(f"ceiling df.write.parquet           | {parquet_write_rate:11,.0f} records/s")
            print(f"ceiling discarded Arrow batches    | {discarded_rate:11,.0f} records/s"
                  f"  (a Python data source writer that only reads them)")  # fmt: skip
            exactly_once_rate, at_least_once_rate = streaming_sinks(
                spark, broker, args, records, scratch
            )
            print(f"sink    writeStream, exactlyOnce   | {exactly_once_rate:11,.0f} records/s"
                  f"  (one micro-batch, best of {args.runs})")  # fmt: skip
            print(f"sink    writeStream, at least once | {at_least_once_rate:11,.0f} records/s")
            source = (
                spark.read.format("moldau")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", "bench")
                .load()
            )
            parquet_dir = os.path.join(scratch, "read-copy")
            source.write.parquet(parquet_dir)  # the rows Moldau returns, as Parquet
            parquet = spark.read.parquet(parquet_dir)
            replayed = (
                spark.read.format("replayed_arrow")
                .option("rows", records)
                .option("partitions", args.partitions)
                .load()
            )
            source_rate = parquet_rate = replayed_rate = 0.0
            for _ in range(args.runs):
                counted, elapsed = timed(lambda: value_lengths(replayed))
                assert counted == expected, f"replayed {counted}, expected {expected}"
                replayed_rate = max(replayed_rate, records / elapsed)
                counted, elapsed = timed(lambda: value_lengths(source))
                assert counted == expected, f"moldau read {counted}, expected {expected}"
                source_rate = max(source_rate, records / elapsed)
                counted, elapsed = timed(lambda: value_lengths(parquet))
                assert counted == expected, f"parquet read {counted}, expected {expected}"
                parquet_rate = max(parquet_rate, records / elapsed)
            print(f"source  spark.read.format('moldau') | {source_rate:11,.0f} records/s"
                  f"  (sum(length(value)), best of {args.runs})")  # fmt: skip
            print(f"ceiling spark.read.parquet         | {parquet_rate:11,.0f} records/s"
                  f"  (same rows, same aggregate)")  # fmt: skip
            print(f"ceiling replayed Arrow batches     | {replayed_rate:11,.0f} records/s"
                  f"  (a Python data source, no broker, no decoding)")  # fmt: skip
        finally:
            spark.stop()
        reader_rate, consumer_rate = drain_one_partition(broker.bootstrap)
        print(f"partition 0 in this process, no Spark: read_range (Arrow) {reader_rate:,.0f} "
              f"records/s, Consumer.consume (Messages) {consumer_rate:,.0f} records/s")  # fmt: skip
        header("same-run ratios")
        print(f"source / Parquet read: {source_rate / parquet_rate:.2f}")
        print(f"source / replayed Arrow (Spark's Python data source ceiling): "
              f"{source_rate / replayed_rate:.2f}")  # fmt: skip
        print(f"sink / Parquet write: {sink_rate / parquet_write_rate:.2f}")
        print(f"sink / discarded Arrow (Spark's Python data source ceiling): "
              f"{sink_rate / discarded_rate:.2f}")  # fmt: skip
        print(f"sink records/s / 1 M target: {sink_rate / TARGET_RECORDS_PER_S:.2f}")
        print(f"exactly-once sink / Parquet write: {exactly_once_rate / parquet_write_rate:.2f}")
        print(f"exactly-once sink / at-least-once sink: "
              f"{exactly_once_rate / at_least_once_rate:.2f}")  # fmt: skip
        print(f"source records/s / 1 M target: {source_rate / TARGET_RECORDS_PER_S:.2f}")
        print(f"read_range / Consumer.consume: {reader_rate / consumer_rate:.2f}")


def sink(
    spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str
) -> tuple[float, float, float]:
    """Write the generated rows to Moldau (topic `bench` first, then fresh topics), to Parquet
    and to the discarding data source, interleaved after a warm-up; the best records/s of
    each."""
    rows = generated(spark, records, args.size, args.partitions)

    def to_moldau(topic: str, frame: Any) -> None:
        create_topic(broker.bootstrap, topic, args.partitions)
        (
            frame.write.mode("append")
            .format("moldau")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .save()
        )

    def discarded(frame: Any) -> None:
        frame.write.mode("append").format("discarded_arrow").save()

    warm_up = generated(spark, min(records // 4, 500_000), args.size, args.partitions)
    to_moldau("warm-up", warm_up)
    warm_up.write.parquet(os.path.join(scratch, "warm-up"))
    discarded(warm_up)
    sink_rate = parquet_rate = discarded_rate = 0.0
    for run in range(args.runs):
        topic = "bench" if run == 0 else f"bench-{run}"
        _, elapsed = timed(lambda topic=topic: to_moldau(topic, rows))  # type: ignore[misc]
        sink_rate = max(sink_rate, records / elapsed)
        target = os.path.join(scratch, f"write-ceiling-{run}")
        _, elapsed = timed(lambda target=target: rows.write.parquet(target))  # type: ignore[misc]
        parquet_rate = max(parquet_rate, records / elapsed)
        _, elapsed = timed(lambda: discarded(rows))
        discarded_rate = max(discarded_rate, records / elapsed)
    return sink_rate, parquet_rate, discarded_rate


def streaming_sinks(
    spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str
) -> tuple[float, float]:
    """records/s of a streaming query writing one micro-batch of `records` generated rows, with
    `exactlyOnce` and without; interleaved after a warm-up of each, best of `--runs`."""

    def write(topic: str, rows: int, exactly_once: bool) -> float:
        create_topic(broker.bootstrap, topic, args.partitions)
        query = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows)
            .option("numPartitions", args.partitions)
            .load()
            .selectExpr(f"lpad(cast(value as string), {args.size}, '0') as value")
            .writeStream.format("moldau")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", str(exactly_once).lower())
            .option("checkpointLocation", os.path.join(scratch, f"checkpoint-{topic}"))
            .trigger(availableNow=True)
        )
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
    write("stream-warm-up-exactly-once", warm_up, True)
    write("stream-warm-up", warm_up, False)
    exactly_once = at_least_once = 0.0
    for run in range(args.runs):
        exactly_once = max(exactly_once, write(f"stream-exactly-once-{run}", records, True))
        at_least_once = max(at_least_once, write(f"stream-at-least-once-{run}", records, False))
    return exactly_once, at_least_once


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
