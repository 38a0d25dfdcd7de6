"""`format("moldau")` with keys and values in the schema registry's wire format, against a node
hosting the registry and confluent-kafka's serializers: Avro values of two versions read as
typed columns of the latest, JSON Schema values, struct columns written as Avro under a
registered subject and read back by confluent-kafka's AvroDeserializer, a streaming query that
decodes and re-encodes, and records whose schema id the registry does not know (FAILFAST and
PERMISSIVE).

The registry is reached through a counting proxy, so the tests can see that a task asks for a
schema id once, not once per record.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.unit.spark.registry_records import ORDER_V1, ORDER_V2

from .conftest import MoldauServer, ServerFactory
from .support import unique_topic
from .test_schema_registry import ANY_PORT, registry_url
from .test_spark_support import create_topic, source, spark

__all__ = ["spark"]

PLACED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class CountingProxy:
    """Forwards HTTP requests to the registry and counts them by path."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.paths: Counter[str] = Counter()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def _forward(self) -> None:
                proxy.paths[self.path] += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = urllib.request.Request(
                    proxy.target + self.path,
                    data=body if self.command == "POST" else None,
                    method=self.command,
                    headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, content = answer.status, answer.read()
                except urllib.error.HTTPError as error:
                    status, content = error.code, error.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def registry(module_server_factory: ServerFactory) -> Iterator[tuple[MoldauServer, str]]:
    server = module_server_factory(**ANY_PORT)
    yield server, registry_url(server)


@pytest.fixture
def proxy(registry: tuple[MoldauServer, str]) -> Iterator[CountingProxy]:
    counting = CountingProxy(registry[1])
    try:
        yield counting
    finally:
        counting.close()


def produce(
    bootstrap: str, topic: str, serialize: Any, values: list[Any], *, partitions: int = 1
) -> None:
    """`values` serialized by `serialize` (None: bytes as they are), spread over the
    partitions in turn."""
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index, value in enumerate(values):
        data = serialize(value, context) if serialize else value
        producer.produce(topic, data, partition=index % partitions)
    assert producer.flush(30) == 0


def order(number: int, *, v2: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": number,
        "customer": f"customer-{number}",
        "quantity": number % 5,
        "amount": number * 1.5,
        "placed": PLACED,
        "note": None if number % 2 else f"note {number}",
    }
    if v2:
        record["channel"] = "app"
    return record


def test_avro_values_of_two_versions_are_read_as_columns_of_the_latest(
    spark: Any, registry: tuple[MoldauServer, str], proxy: CountingProxy
) -> None:
    server, url = registry
    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-avro")
    create_topic(bootstrap, topic, partitions=2)
    client = SchemaRegistryClient({"url": url})
    # per partition 500 v1 records (read column-wise) and 100 v2 ones (fewer than
    # COLUMN_WISE_MIN: read record by record)
    v1 = AvroSerializer(client, json.dumps(ORDER_V1))
    produce(bootstrap, topic, v1, [order(n) for n in range(1000)], partitions=2)
    v2 = AvroSerializer(client, json.dumps(ORDER_V2))
    produce(bootstrap, topic, v2, [order(n, v2=True) for n in range(1000, 1200)], partitions=2)
    v1_id = client.get_version(f"{topic}-value", 1).schema_id
    v2_id = client.get_latest_version(f"{topic}-value").schema_id

    frame = source(
        spark,
        bootstrap,
        subscribe=topic,
        **{"value.format": "avro", "schema.registry.url": proxy.url},
    )
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:string,quantity:bigint,amount:double,note:string,"
        "placed:timestamp,channel:string>"
    )
    rows = sorted(frame.select("value.*").collect(), key=lambda row: row.id)
    assert len(rows) == 1200
    for row in rows:
        expected = order(row.id, v2=row.id >= 1000)
        got = row.asDict()
        got["placed"] = got["placed"].astimezone(UTC)  # (Spark gives local time, naive)
        assert got == {**expected, "channel": expected.get("channel", "web")}
    # the columns are typed: Spark computes on them as on any column; its two tasks (one per
    # partition) ask for each schema id once, not once per record
    proxy.paths.clear()
    total = frame.selectExpr("sum(value.quantity) as q").collect()[0].q
    assert total == sum(n % 5 for n in range(1200))
    assert proxy.paths[f"/schemas/ids/{v1_id}"] == 2
    assert 2 <= proxy.paths[f"/schemas/ids/{v2_id}"] <= 2 + 1  # (+ the driver's planning)


def test_json_schema_values_are_read_as_columns(
    spark: Any, registry: tuple[MoldauServer, str]
) -> None:
    server, url = registry
    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-json")
    create_topic(bootstrap, topic)
    schema = {
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "count": {"type": "integer"},
            "price": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "dimensions": {
                "type": "object",
                "properties": {"width": {"type": "number"}, "height": {"type": "number"}},
            },
        },
        "required": ["sku"],
    }
    client = SchemaRegistryClient({"url": url})
    items = [
        {"sku": f"A-{n}", "count": n, "price": n * 0.5 if n % 3 else None,
         "tags": ["x"] * (n % 3), "dimensions": {"width": 1.0, "height": float(n)}}
        for n in range(200)
    ]  # fmt: skip
    produce(bootstrap, topic, JSONSerializer(json.dumps(schema), client), items)

    frame = source(
        spark, bootstrap, subscribe=topic, **{"value.format": "json", "schema.registry.url": url}
    )
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<sku:string,count:bigint,price:double,tags:array<string>,"
        "dimensions:struct<width:double,height:double>>"
    )
    rows = frame.selectExpr("value").collect()
    decoded = sorted((row.value.asDict(recursive=True) for row in rows), key=lambda r: r["count"])
    assert decoded == items


def test_struct_columns_are_written_as_avro_under_a_registered_subject(
    spark: Any, registry: tuple[MoldauServer, str]
) -> None:
    server, url = registry
    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-avro-sink")
    create_topic(bootstrap, topic, partitions=2)
    frame = spark.createDataFrame(
        [(n, f"customer-{n}", [f"t{n}"] * (n % 3), {"k": n}, PLACED, n * 1.25) for n in range(500)],
        "id bigint, customer string, tags array<string>, attributes map<string,bigint>, "
        "placed timestamp, amount double",
    ).selectExpr(
        "cast(id as string) as key",
        "struct(id, customer, tags, attributes, placed, named_struct('amount', amount) as total) "
        "as value",
    )
    (
        frame.write.mode("append")
        .format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("schema.registry.url", url)
        .option("value.format", "avro")
        .option("value.recordName", "Order")
        .option("value.recordNamespace", "shop")
        .save()
    )
    client = SchemaRegistryClient({"url": url})
    registered = client.get_latest_version(f"{topic}-value")
    assert json.loads(registered.schema.schema_str)["name"] == "Order"

    deserialize = AvroDeserializer(client)
    context = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    found: dict[int, Any] = {}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        deadline = time.monotonic() + 60
        while len(found) < 500 and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                assert message.value()[1:5] == registered.schema_id.to_bytes(4, "big")
                value = deserialize(message.value(), context)
                assert message.key() == str(value["id"]).encode()
                found[value["id"]] = value
    finally:
        consumer.close()
    assert sorted(found) == list(range(500))
    assert found[7] == {
        "id": 7,
        "customer": "customer-7",
        "tags": ["t7"],
        "attributes": {"k": 7},
        "placed": PLACED,
        "total": {"amount": 8.75},
    }
    # and the source reads them back as the same columns
    read_back = source(
        spark, bootstrap, subscribe=topic, **{"value.format": "avro", "schema.registry.url": url}
    )
    value_type = frame.schema["value"].dataType.simpleString()
    assert read_back.schema["value"].dataType.simpleString() == value_type
    assert read_back.selectExpr("sum(value.total.amount) as s").collect()[0].s == sum(
        n * 1.25 for n in range(500)
    )


def test_a_streaming_query_decodes_avro_and_writes_avro_under_its_own_subject(
    spark: Any, registry: tuple[MoldauServer, str], tmp_path: Path
) -> None:
    server, url = registry
    bootstrap = server.bootstrap_servers
    source_topic, target = unique_topic("spark-avro-in"), unique_topic("spark-avro-out")
    create_topic(bootstrap, source_topic)
    create_topic(bootstrap, target)
    client = SchemaRegistryClient({"url": url})
    serialize = AvroSerializer(client, json.dumps(ORDER_V1))
    produce(bootstrap, source_topic, serialize, [order(n) for n in range(50)])
    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .option("value.format", "avro")
        .option("schema.registry.url", url)
        .load()
        .selectExpr(
            "cast(value.id as string) as key",
            "struct(value.customer as customer, value.quantity * 2 as doubled) as value",
        )
        .writeStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("value.format", "avro")
        .option("schema.registry.url", url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert client.get_latest_version(f"{target}-value").schema.schema_type == "AVRO"
    rows = source(
        spark, bootstrap, subscribe=target, **{"value.format": "avro", "schema.registry.url": url}
    ).collect()
    assert sorted((row.key, row.value.customer, row.value.doubled) for row in rows) == sorted(
        (str(n).encode(), f"customer-{n}", 2 * (n % 5)) for n in range(50)
    )


def test_a_record_with_an_unknown_id_fails_the_read_or_is_null_when_permissive(
    spark: Any, registry: tuple[MoldauServer, str]
) -> None:
    server, url = registry
    bootstrap = server.bootstrap_servers
    topic = unique_topic("spark-avro-unknown")
    create_topic(bootstrap, topic)
    client = SchemaRegistryClient({"url": url})
    serialize = AvroSerializer(client, json.dumps(ORDER_V1))
    produce(bootstrap, topic, serialize, [order(1), order(2)])
    unknown = b"\0" + (987_654).to_bytes(4, "big") + b"\2\4"
    produce(bootstrap, topic, None, [unknown, b"not framed"])
    produce(bootstrap, topic, serialize, [order(3)])
    options = {"value.format": "avro", "schema.registry.url": url}

    with pytest.raises(Exception, match=r"offset 2: schema id 987654 is not in the registry"):
        source(spark, bootstrap, subscribe=topic, **options).collect()

    rows = (  # (one partition: in offset order)
        source(spark, bootstrap, subscribe=topic, mode="PERMISSIVE", **options)
        .select("offset", "value.id", "_corrupt_value")
        .collect()
    )
    assert [tuple(row) for row in rows] == [
        (0, 1, None),
        (1, 2, None),
        (2, None, bytearray(unknown)),
        (3, None, bytearray(b"not framed")),
        (4, 3, None),
    ]
