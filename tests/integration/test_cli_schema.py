"""`moldau schema ...`, and `moldau produce`/`consume` with `--value-schema`/`--key-schema`,
against a real node's registry: subjects registered, listed, read, checked, configured and
deleted; JSON lines encoded to Avro, JSON Schema and Protobuf records that confluent-kafka's
deserializers read, and records its serializers wrote decoded back to JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from .cluster import wait_for
from .conftest import MoldauServer, ServerFactory
from .support import unique_topic
from .test_cli_support import moldau
from .test_schema_registry import ANY_PORT, order_message_class, registry_url

pytestmark = pytest.mark.timeout(180)

USER_V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
    ],
}
ORDER_PROTO = """syntax = "proto3";
package shop;

message Order {
  string id = 1;
  int32 quantity = 2;
}
"""


@pytest.fixture(scope="module")
def registry(module_server_factory: ServerFactory) -> Iterator[tuple[MoldauServer, str]]:
    server = module_server_factory(**ANY_PORT)
    yield server, registry_url(server)


def write(directory: Path, name: str, content: object) -> Path:
    path = directory / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_schema_commands_register_list_get_check_configure_and_delete(
    registry: tuple[MoldauServer, str], tmp_path: Path
) -> None:
    _, url = registry
    subject = unique_topic("users") + "-value"
    v1, v2 = write(tmp_path, "v1.avsc", USER_V1), write(tmp_path, "v2.avsc", USER_V2)

    def schema(*arguments: str, expect: int | None = 0) -> str:
        return moldau("schema", *arguments, "-r", url, bootstrap=None, expect=expect).text

    first = json.loads(schema("register", subject, str(v1), "--format", "json"))
    assert first["version"] == 1
    line = schema("register", subject, str(v2))
    second_id = first["id"] + 1
    assert line == f"Registered {subject} version 2 (id {second_id}).\n"
    listed = json.loads(schema("list", "--prefix", subject[:12], "--format", "json"))
    assert listed == [{"subject": subject, "version": 2, "id": second_id, "schemaType": "AVRO"}]
    assert json.loads(schema("get", subject)) == USER_V2
    assert json.loads(schema("get", "--id", str(first["id"]))) == USER_V1

    # a field whose type changes is refused under BACKWARD, accepted once the level is NONE
    changed = write(
        tmp_path,
        "v3.avsc",
        {"type": "record", "name": "User", "fields": [{"name": "name", "type": "int"}]},
    )
    verdict = moldau("schema", "check", subject, str(changed), "-r", url, bootstrap=None, expect=1)
    assert verdict.text == (
        f"Incompatible with {subject} version latest.\n  TYPE_MISMATCH: reader type int is not "
        "compatible with writer type string at /fields/0/type\n"
    )
    level = schema("config", subject, "--set", "none")
    assert level == f"Compatibility of {subject} set to NONE.\n"
    assert schema("check", subject, str(changed)).startswith("Compatible")

    assert schema("delete", subject, "--version", "1") == f"Deleted {subject} version 1.\n"
    assert schema("delete", subject) == f"Deleted {subject} version 2.\n"
    missing = moldau("schema", "get", subject, "-r", url, bootstrap=None, expect=1)
    assert "(schema registry error 40401)" in missing.stderr
    assert "moldau schema list" in missing.stderr
    nobody = moldau("schema", "list", "-r", "http://127.0.0.1:1", bootstrap=None, expect=3)
    assert "no schema registry answered" in nobody.stderr


def raw_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first `count` values of `topic`'s partition 0, as stored."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        while len(values) < count:
            message = wait_for(lambda: consumer.poll(0.5), timeout_s=30, what=f"records on {topic}")
            values.append(message.value())  # type: ignore[attr-defined]
        return values
    finally:
        consumer.close()


def test_produce_encodes_json_lines_that_confluent_deserializers_read(
    registry: tuple[MoldauServer, str], tmp_path: Path
) -> None:
    server, url = registry
    b = server.bootstrap_servers
    client = SchemaRegistryClient({"url": url})

    topic = unique_topic("users")
    v2 = write(tmp_path, "user.avsc", USER_V2)
    key_schema = write(
        tmp_path, "key.json", {"type": "object", "properties": {"id": {"type": "integer"}}}
    )
    lines = b'{"id": 1}\t{"name": "ada", "age": {"int": 36}}\n{"id": 2}\t{"name": "alan", "age": null}\n'
    moldau(
        "produce", topic, "-K", "\\t", "--value-schema", str(v2),
        "--key-schema", f"json:{key_schema}", "-r", url,
        bootstrap=b, stdin=lines,
    )  # fmt: skip
    value_id = client.get_latest_version(f"{topic}-value").schema_id
    assert client.get_latest_version(f"{topic}-key").schema.schema_type == "JSON"
    context = SerializationContext(topic, MessageField.VALUE)
    raw = raw_values(b, topic, 2)
    assert {int.from_bytes(value[1:5], "big") for value in raw} == {value_id}
    assert [AvroDeserializer(client)(value, context) for value in raw] == [
        {"name": "ada", "age": 36},
        {"name": "alan", "age": None},
    ]
    decoded = moldau(
        "consume", topic, "-e", "--value-schema", "auto", "--key-schema", "auto", "-r", url,
        bootstrap=b,
    ).json_lines()  # fmt: skip
    assert [(record["key"], record["value"]) for record in decoded] == [
        ({"id": 1}, {"name": "ada", "age": {"int": 36}}),
        ({"id": 2}, {"name": "alan", "age": None}),
    ]
    # a line that does not fit stops the command, naming it
    refused = moldau(
        "produce", topic, "--value-schema", "latest", "-r", url,
        bootstrap=b, stdin=b'{"name": "x"}\n{"nom": 1}\n', expect=1,
    )  # fmt: skip
    assert "record 2: its value does not fit the Avro schema" in refused.stderr

    orders = unique_topic("orders")
    proto = write(tmp_path, "order.proto", ORDER_PROTO)
    moldau(
        "produce", orders, "--value-schema", str(proto), "-r", url,
        bootstrap=b, stdin=b'{"id": "o-1", "quantity": 3}\n',
    )  # fmt: skip
    order_class = order_message_class()
    [value] = raw_values(b, orders, 1)
    order = ProtobufDeserializer(order_class, {"use.deprecated.format": False})(
        value, SerializationContext(orders, MessageField.VALUE)
    )
    assert (order.id, order.quantity) == ("o-1", 3)


def test_consume_decodes_what_confluent_serializers_wrote(
    registry: tuple[MoldauServer, str], tmp_path: Path
) -> None:
    server, url = registry
    b = server.bootstrap_servers
    client = SchemaRegistryClient({"url": url})
    topic = unique_topic("people")
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": b})
    producer.produce(
        topic, AvroSerializer(client, json.dumps(USER_V2))({"name": "ada", "age": 36}, context)
    )
    producer.produce(topic, b"plain text")
    order_class = order_message_class()
    serialize = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    orders = unique_topic("orders")
    producer.produce(
        orders,
        serialize(
            order_class(id="o-2", quantity=5), SerializationContext(orders, MessageField.VALUE)
        ),
    )
    assert producer.flush(30) == 0

    # read with the first version of the schema: Avro's resolution drops `age`; a record that
    # is not framed is printed as it is, after a warning
    v1 = write(tmp_path, "user-v1.avsc", USER_V1)
    result = moldau(
        "consume", topic, "-e", "--value-schema", str(v1), "-r", url, "-f", "%s\\n", bootstrap=b
    )
    assert result.text.splitlines() == ['{"name":"ada"}', "plain text"]
    assert "not in the schema registry's wire format" in result.stderr
    [decoded] = moldau(
        "consume", orders, "-e", "--value-schema", "auto", "-r", url, bootstrap=b
    ).json_lines()
    assert decoded["value"] == {"id": "o-2", "quantity": 5}
