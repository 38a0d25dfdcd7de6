"""Spark reading registry-framed records into typed columns, next to reading the same records as
raw bytes, in the same run.

    .venv/bin/python bench/spark_registry.py [--millions 1] [--partitions 2] [--runs 5]

Starts a node serving the schema registry and a `local[2]` SparkSession (Python workers on this
interpreter). Two topics of `--millions` million records each, in Confluent's wire format: Avro
of an eight-field order record (long, string, int, double, a nullable string, a timestamp, an
enum, a boolean; ~50 bytes) and the same orders as JSON Schema documents (~170 bytes); the
records are encoded here with fastavro / `json.dumps` after the schemas are registered, and
produced with confluent-kafka.

Each round reads every topic with `spark.read.format("moldau")` twice, one after the other: as
raw bytes, aggregating `count(*), sum(length(value))` (what `bench/spark.py` measures), and
decoded (`value.format` avro / json), aggregating `count(*), sum(value.quantity)`, so every
record is decoded and reaches the JVM as typed columns. Beside them, the ceiling of the decoded
reads: a Python data source replaying one prepared Arrow batch of the decoded columns (what
Spark's Python data source path carries for them, with no broker and no decoding). Then, the
decoder alone, on one core (CPU time): partition 0 of each topic fetched by `read_range` (what
a task runs, no Spark) in this process and kept, `FramedDecoder.decode` timed over its batches,
and for Avro the value column's decoding alone, column-wise and record by record (fastavro).
Figures are medians of `--runs` rounds (their spread in brackets); nothing is asserted but the
counts and sums.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from _harness import Broker, create_topic, header
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REGISTRY_LINE = re.compile(r"Moldau schema registry: (http://\S+)")
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "gift", "type": "boolean"},
    ],
}  # fmt: skip
ORDER_JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "quantity": {"type": "integer"},
        "amount": {"type": "number"},
        "note": {"type": ["string", "null"]},
        "placed": {"type": "integer"},
        "status": {"enum": ["NEW", "PAID", "SHIPPED"]},
        "gift": {"type": "boolean"},
    },
}
PLACED_MS = 1_780_000_000_000
Rates = dict[str, list[float]]


def order(number: int) -> dict[str, Any]:
    return {
        "id": number,
        "customer": f"customer-{number % 100_000}",
        "quantity": number % 10,
        "amount": number * 0.25,
        "note": None if number % 3 else "leave at the door",
        "placed": PLACED_MS + number,
        "status": ("NEW", "PAID", "SHIPPED")[number % 3],
        "gift": number % 7 == 0,
    }


def register(url: str, subject: str, schema: Any, schema_type: str) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    return int(client.register_schema(subject, Schema(json.dumps(schema), schema_type)))


def fill(
    bootstrap: str, topic: str, records: int, partitions: int, encode: Callable[[int], bytes]
) -> None:
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    for number in range(records):
        value = encode(number)
        while True:
            try:
                producer.produce(topic, value, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def avro_encoder(schema_id: int) -> Callable[[int], bytes]:
    parsed = fastavro.parse_schema(ORDER)
    header_bytes = b"\0" + schema_id.to_bytes(4, "big")

    def encode(number: int) -> bytes:
        out = io.BytesIO()
        out.write(header_bytes)
        fastavro.schemaless_writer(out, parsed, order(number))
        return out.getvalue()

    return encode


def json_encoder(schema_id: int) -> Callable[[int], bytes]:
    header_bytes = b"\0" + schema_id.to_bytes(4, "big")
    return lambda number: header_bytes + json.dumps(order(number), separators=(",", ":")).encode()


class ReplayedOrders(DataSource):
    """A Python data source yielding one prepared Arrow batch of decoded orders (the rows
    `value.format=avro` gives: the source's columns, `value` a struct) over and over: what
    Spark's Python data source path carries for these columns, with no broker and no decoding
    (the decoded reads' ceiling)."""

    @classmethod
    def name(cls) -> str:
        return "replayed_orders"

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.options["schema"]))

    def reader(self, schema: StructType) -> DataSourceReader:
        return ReplayedOrdersReader(schema, int(self.options["rows"]), int(self.options["parts"]))


class ReplayedOrdersReader(DataSourceReader):
    def __init__(self, schema: StructType, rows: int, partitions: int) -> None:
        self.schema = schema
        self.rows = rows
        self.partition_count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.rows // self.partition_count)] * self.partition_count

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        rows: int = partition.value  # type: ignore[attr-defined]
        schema = to_arrow_schema(self.schema, timezone="UTC")
        count = min(rows, 10_000)
        columns = {
            "key": pa.nulls(count, pa.binary()),
            "value": pa.array([order(n) for n in range(count)], type=schema.field("value").type),
            "topic": pa.array(["orders"] * count),
            "partition": pa.array([0] * count, type=pa.int32()),
            "offset": pa.array(range(count), type=pa.int64()),
            "timestamp": pa.array([PLACED_MS * 1000] * count, type=pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * count, type=pa.int32()),
        }
        batch = pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)
        for _ in range(rows // count):
            yield batch
        if rows % count:
            yield batch.slice(0, rows % count)


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from moldau.spark import register as register_format

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("moldau-bench-registry")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_format(spark)
    spark.dataSource.register(ReplayedOrders)
    return spark


def report(label: str, rates: list[float], note: str = "") -> None:
    spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
    print(f"{label:<44}| {statistics.median(rates):11,.0f} records/s  ({spread}){note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--millions", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    records = int(args.millions * 1_000_000)
    with Broker("schema.registry.listeners=http://127.0.0.1:0") as broker:
        url = next(m.group(1) for line in broker.startup_lines if (m := REGISTRY_LINE.search(line)))
        avro_id = register(url, "orders-avro-value", ORDER, "AVRO")
        json_id = register(url, "orders-json-value", ORDER_JSON, "JSON")
        start = time.perf_counter()
        fill(broker.bootstrap, "orders-avro", records, args.partitions, avro_encoder(avro_id))
        fill(broker.bootstrap, "orders-json", records, args.partitions, json_encoder(json_id))
        print(f"(topics filled in {time.perf_counter() - start:.0f} s)")
        spark = spark_session()
        try:
            header(
                f"Spark local[2], {records:,} records per topic, {args.partitions} partitions; "
                f"medians of {args.runs} rounds (spread)"
            )
            rates = reads(spark, broker.bootstrap, url, records, args.runs)
        finally:
            spark.stop()
        report("avro topic, raw bytes", rates["avro raw"], "  (sum(length(value)))")
        report("avro topic, value.format=avro", rates["avro"], "  (sum(value.quantity))")
        report("ceiling: replayed decoded batches", rates["avro ceiling"],
               "  (a Python data source, no broker, no decoding)")  # fmt: skip
        report("json topic, raw bytes", rates["json raw"])
        report("json topic, value.format=json", rates["json"])
        header("the decoder alone: one partition's fetched batches, this process, one core")
        alone = decoder_alone(broker.bootstrap, url, args.runs)
        for name, values in alone.items():
            report(name, values)
    m = {name: statistics.median(values) for name, values in rates.items()}
    header("same-run ratios (of medians)")
    print(f"avro decoded / raw bytes, through Spark: {m['avro'] / m['avro raw']:.2f}")
    print(f"avro decoded / replayed decoded batches (Spark's ceiling for these columns): "
          f"{m['avro'] / m['avro ceiling']:.2f}")  # fmt: skip
    print(f"json decoded / raw bytes, through Spark: {m['json'] / m['json raw']:.2f}")


def reads(spark: Any, bootstrap: str, url: str, records: int, runs: int) -> Rates:
    def topic(name: str, **options: str) -> Any:
        reader = spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
        reader = reader.option("subscribe", name)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    raw = "count(*) as n", "sum(length(value)) as s"
    decoded = "count(*) as n", "sum(value.quantity) as s"
    registry = {"schema.registry.url": url}
    avro = topic("orders-avro", **{"value.format": "avro"}, **registry)
    replayed = (
        spark.read.format("replayed_orders")
        .option("schema", avro.schema.json())
        .option("rows", records)
        .option("parts", 2)
        .load()
    )
    contenders = {
        "avro raw": (topic("orders-avro"), raw),
        "avro": (avro, decoded),
        "avro ceiling": (replayed, decoded),
        "json raw": (topic("orders-json"), raw),
        "json": (topic("orders-json", **{"value.format": "json"}, **registry), decoded),
    }
    expected_quantity = sum(n % 10 for n in range(records))
    for frame, columns in contenders.values():  # warm-up: workers started, code compiled
        frame.selectExpr(*columns).collect()
    rates: Rates = {name: [] for name in contenders}
    for _ in range(runs):
        for name, (frame, columns) in contenders.items():
            start = time.perf_counter()
            row = frame.selectExpr(*columns).collect()[0]
            elapsed = time.perf_counter() - start
            assert row.n == records, f"{name}: {row.n} records, expected {records}"
            if name in ("avro", "json"):
                assert row.s == expected_quantity, f"{name}: sum {row.s}"
            rates[name].append(records / elapsed)
    return rates


def decoder_alone(bootstrap: str, url: str, runs: int) -> Rates:
    """records/s on one core (CPU time) over partition 0's batches as `read_range` gives them
    (fetched once, kept in memory): `FramedDecoder.decode` (headers, grouping, decoding, the
    batch rebuilt) for each topic, and for the Avro topic the value column's decoding alone,
    column-wise and record by record (fastavro), round by round."""
    from moldau.client import SyncConsumer, TopicPartition
    from moldau.spark.avro_decoding import AvroColumnDecoder
    from moldau.spark.framed_source import FramedDecoder, reader_schemas
    from moldau.spark.framing import read_frames
    from moldau.spark.options import SourceOptions
    from moldau.spark.partition_reader import read_range
    from moldau.spark.planning import OffsetRange
    from moldau.spark.registry_lookup import SchemaLookup

    contenders: dict[str, Callable[[], int]] = {}
    for name, record_format in (("orders-avro", "avro"), ("orders-json", "json")):
        options = SourceOptions.parse(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": name,
             "value.format": record_format, "schema.registry.url": url},
            streaming=False,
        )  # fmt: skip
        assert options.registry is not None
        with SyncConsumer({"bootstrap.servers": bootstrap}) as consumer:
            _low, high = consumer.get_watermark_offsets(TopicPartition(name, 0))
        batches = list(read_range(options.client, OffsetRange(name, 0, 0, high)))
        readers = reader_schemas(options.registry)
        decoder = FramedDecoder(options.registry, readers)
        contenders[f"FramedDecoder.decode, {record_format}"] = partial(
            _decode_batches, decoder, batches
        )
        if record_format == "avro":
            schema_id = readers[0].schema_id
            schema = SchemaLookup(options.registry.connection).parsed(schema_id)
            frames = [read_frames(batch.column("value")) for batch in batches]
            for label, smallest in (("column-wise", 1), ("record by record", None)):
                avro = AvroColumnDecoder(schema, description="bench", column_wise_min=smallest)
                contenders[f"avro values alone, {label}"] = partial(
                    _decode_values, avro, schema_id, schema, frames
                )
    rates: Rates = {label: [] for label in contenders}
    for _ in range(runs):
        for label, decode in contenders.items():
            start = time.process_time()
            decoded = decode()
            rates[label].append(decoded / (time.process_time() - start))
    return rates


def _decode_batches(decoder: Any, batches: list[Any]) -> int:
    return sum(decoder.decode(batch).num_rows for batch in batches)


def _decode_values(decoder: Any, schema_id: int, schema: Any, frames: list[Any]) -> int:
    return sum(
        len(decoder.decode(schema_id, schema, f.payloads, f.data_bytes).values) for f in frames
    )


if __name__ == "__main__":
    main()
