"""Spark on Moldau: records/s of the sink and of the source, against Parquet in the same run.

    .venv/bin/python bench/spark.py [--millions 2] [--size 100] [--partitions 2] [--runs 3]

Starts a broker on a temporary directory and a `local[2]` SparkSession (Python workers on this
interpreter). The sink writes `--millions` million `--size`-byte values (`spark.range` made into
distinct strings, no keys) to a `--partitions`-partition topic with `df.write.format("moldau")`;
the same DataFrame written to Parquet (Spark's defaults: snappy) is the sink's ceiling. The source
then reads the topic back with `spark.read.format("moldau")` and aggregates every value's length
(so every value is decoded, crosses from the Python workers to the JVM and is looked at), against
the same aggregate over the Parquet copy of the very rows Moldau returned (the read ceiling of
Spark on this machine; Parquet reads only the value column, the Moldau source always produces
every column) and over a Python data source replaying one prepared Arrow batch of the source's
schema (what Spark's Python data source path alone allows). Reads interleave and the best of
`--runs` is kept for each. Last, the
executor's range reader (`read_range`, fetch + Arrow decoding, no Spark) drains one partition in
this process, the Python side's own rate on one core, next to `Consumer.consume` (a `Message`
per record). Nothing is asserted.
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
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
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
    return spark


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
        create_topic(broker.bootstrap, "bench", args.partitions)
        spark = spark_session()
        try:
            header(
                f"Spark local[2], {records:,} records of {args.size} B, "
                f"{args.partitions} partitions"
            )
            sink_rate, parquet_write_rate = sink(spark, broker, args, records, scratch)
            print(f"sink    df.write.format('moldau')  | {sink_rate:11,.0f} records/s")
            print(f"ceiling df.write.parquet           | {parquet_write_rate:11,.0f} records/s")
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
        print(f"source records/s / 1 M target: {source_rate / TARGET_RECORDS_PER_S:.2f}")
        print(f"read_range / Consumer.consume: {reader_rate / consumer_rate:.2f}")


def sink(
    spark: Any, broker: Broker, args: argparse.Namespace, records: int, scratch: str
) -> tuple[float, float]:
    """Write the generated rows to Moldau, then to Parquet; records/s of each."""
    rows = generated(spark, records, args.size, args.partitions)
    _, elapsed = timed(
        lambda: (
            rows.write.mode("append")
            .format("moldau")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "bench")
            .save()
        )
    )
    sink_rate = records / elapsed
    _, elapsed = timed(lambda: rows.write.parquet(os.path.join(scratch, "write-ceiling")))
    return sink_rate, records / elapsed


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
