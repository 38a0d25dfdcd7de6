"""The schema registry a node hosts, driven by confluent-kafka's `SchemaRegistryClient` and its
serializers: framed records produced and decoded end to end, Confluent's error bodies for bad
input, ids and versions kept across a restart, one id per schema under concurrent registrations,
and writes that go on after the writer node of a 3-node cluster is SIGKILLed."""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .cluster import build_cluster, wait_for
from .conftest import MoldauServer, ServerFactory

REGISTRY_LINE = re.compile(r"Moldau schema registry: (?P<url>https?://\S+)")
ANY_PORT = {"schema_registry_listeners": "http://127.0.0.1:0"}


def registry_url(server: MoldauServer) -> str:
    found = REGISTRY_LINE.findall(server.output_tail(400))
    assert found, f"no registry line in the output:\n{server.output_tail()}"
    return str(found[-1])


@pytest.fixture(scope="module")
def registry(module_server_factory: ServerFactory) -> Iterator[tuple[MoldauServer, str]]:
    server = module_server_factory(**ANY_PORT)
    yield server, registry_url(server)


def request(url: str, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        connection.close()


def round_trip(bootstrap: str, topic: str, serialize: Any, deserialize: Any, value: Any) -> Any:
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, serialize(value, context))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        message = wait_for(lambda: consumer.poll(0.5), timeout_s=30, what=f"a record on {topic}")
        raw = message.value()  # type: ignore[attr-defined]
        return raw, deserialize(raw, context)
    finally:
        consumer.close()


def order_message_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    message = file.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="quantity", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_avro_json_and_protobuf_serializers_round_trip(registry: tuple[MoldauServer, str]) -> None:
    server, url = registry
    client = SchemaRegistryClient({"url": url})
    avro_schema = json.dumps(
        {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    )
    raw, decoded = round_trip(
        server.bootstrap_servers,
        "users",
        AvroSerializer(client, avro_schema),
        AvroDeserializer(client),
        {"name": "ada"},
    )
    schema_id = int.from_bytes(raw[1:5], "big")
    assert raw[0] == 0 and decoded == {"name": "ada"}
    assert client.get_latest_version("users-value").schema_id == schema_id

    json_schema = json.dumps(
        {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    )
    raw, decoded = round_trip(
        server.bootstrap_servers,
        "items",
        JSONSerializer(json_schema, client),
        JSONDeserializer(json_schema),
        {"sku": "A-1"},
    )
    assert decoded == {"sku": "A-1"}
    assert client.get_latest_version("items-value").schema.schema_type == "JSON"

    order = order_message_class()
    raw, decoded = round_trip(
        server.bootstrap_servers,
        "orders",
        ProtobufSerializer(order, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(order, {"use.deprecated.format": False}),
        order(id="o-1", quantity=3),
    )
    assert (decoded.id, decoded.quantity) == ("o-1", 3)
    registered = client.get_latest_version("orders-value").schema
    assert registered.schema_type == "PROTOBUF"
    assert "int32 quantity = 2;" in registered.schema_str
    # the same schema under another subject keeps its id; an incompatible one is refused
    again = client.register_schema("copy-value", Schema(avro_schema, "AVRO"))
    assert again == schema_id
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(
            "users-value",
            Schema(
                json.dumps(
                    {"type": "record", "name": "User", "fields": [{"name": "n", "type": "int"}]}
                ),
                "AVRO",
            ),
        )
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)


def test_bad_input_gets_confluent_errors(registry: tuple[MoldauServer, str]) -> None:
    _, url = registry
    register = "/subjects/bad-value/versions"
    cases = [
        ("POST", register, b"{not json", 400, 400),
        ("POST", register, json.dumps({"schema": '{"type": "nope"}'}).encode(), 422, 42201),
        (
            "POST",
            register,
            json.dumps({"schema": "[" * 100000 + "]" * 100000}).encode(),
            422,
            42201,
        ),
        ("POST", register, json.dumps({"schema": "{}", "schemaType": "XML"}).encode(), 422, 42201),
        ("POST", register, b"{" + b" " * (17 * 1024 * 1024) + b"}", 413, 413),
        ("GET", "/subjects/nobody/versions", None, 404, 40401),
        ("GET", "/subjects/nobody/versions/zero", None, 422, 42202),
        ("GET", "/schemas/ids/999999", None, 404, 40403),
        ("PUT", "/config", json.dumps({"compatibility": "SIDEWAYS"}).encode(), 422, 42203),
        ("GET", "/no/such/path", None, 404, 404),
    ]
    for method, path, body, status, error_code in cases:
        got_status, answer = request(url, method, path, body)
        assert (got_status, answer["error_code"]) == (status, error_code), (path, answer)
        assert answer["message"]
    status, answer = request(url, "GET", "/schemas/types")
    assert (status, sorted(answer)) == (200, ["AVRO", "JSON", "PROTOBUF"])


def test_concurrent_registrations_get_one_id_and_a_restart_keeps_ids_and_versions(
    start_server: ServerFactory,
) -> None:
    server = start_server(**ANY_PORT)
    url = registry_url(server)
    schema = json.dumps(
        {"type": "record", "name": "Event", "fields": [{"name": "at", "type": "long"}]}
    )
    ids: list[int] = []

    def register(index: int) -> None:
        client = SchemaRegistryClient({"url": url})
        ids.append(client.register_schema(f"events-{index % 3}", Schema(schema, "AVRO")))

    threads = [threading.Thread(target=register, args=(i,)) for i in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(ids) == 9 and len(set(ids)) == 1
    client = SchemaRegistryClient({"url": url})
    evolved = json.dumps(
        {
            "type": "record",
            "name": "Event",
            "fields": [
                {"name": "at", "type": "long"},
                {"name": "kind", "type": "string", "default": ""},
            ],
        }
    )
    second = client.register_schema("events-0", Schema(evolved, "AVRO"))
    before = {s: client.get_versions(s) for s in client.get_subjects()}

    server.restart()
    client = SchemaRegistryClient({"url": registry_url(server)})
    assert {s: client.get_versions(s) for s in client.get_subjects()} == before
    assert before["events-0"] == [1, 2]
    assert client.get_version("events-0", 2).schema_id == second
    assert json.loads(client.get_schema(ids[0]).schema_str) == json.loads(schema)
    third = json.dumps({"type": "record", "name": "Other", "fields": []})
    assert client.register_schema("others", Schema(third, "AVRO")) == second + 1


def test_writes_go_on_after_the_writer_node_is_killed(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=["broker,controller"] * 3,
        extra={"schema.registry.listeners": "http://127.0.0.1:0"},
    )
    try:
        urls = {i: registry_url(node.server) for i, node in cluster.nodes.items()}  # type: ignore[arg-type]
        first = SchemaRegistryClient({"url": urls[3]})
        schema = json.dumps({"type": "record", "name": "A", "fields": []})
        first_id = first.register_schema("a-value", Schema(schema, "AVRO"))
        # `_schemas` is on every broker, whichever registry instance created it first
        found = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("_schemas", 30)
        assert sorted(found.topics["_schemas"].partitions[0].replicas) == [1, 2, 3]
        # the writer is the instance with the smallest URL; kill that node
        writer = min(urls, key=lambda i: ("http", "127.0.0.1", int(urls[i].rsplit(":", 1)[1])))
        # only the writer applies a write, whatever a request's headers say
        other_node = next(i for i in urls if i != writer)
        claim = urllib.request.Request(
            f"{urls[other_node]}/subjects/not-forwarded/versions",
            data=json.dumps({"schema": schema}).encode(),
            headers={"Content-Type": "application/json", "X-Forwarded-By": "anyone"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(claim, timeout=30)
        assert json.loads(refused.value.read())["error_code"] == 50003
        assert "not-forwarded" not in first.get_subjects()
        cluster.kill(writer)
        survivor = next(i for i in urls if i != writer)
        client = SchemaRegistryClient({"url": urls[survivor]})
        other = json.dumps({"type": "record", "name": "B", "fields": []})
        new_id = wait_for(
            lambda: client.register_schema("b-value", Schema(other, "AVRO")),
            timeout_s=60,
            what="a registration after the writer died",
        )
        assert new_id == first_id + 1
        assert client.get_latest_version("a-value").schema_id == first_id
        third = next(i for i in urls if i not in (writer, survivor))
        reader = SchemaRegistryClient({"url": urls[third]})
        assert reader.get_latest_version("b-value").schema_id == new_id
        cluster.nodes[writer].server.process = None  # type: ignore[union-attr]
    finally:
        cluster.stop_all()


def test_a_bad_listener_value_stops_the_node_with_one_line(start_server: ServerFactory) -> None:
    server = start_server(launch_only=True, schema_registry_listeners="ftp://127.0.0.1:1")
    code = server.wait_exited(30)
    assert code != 0
    errors = [line for line in server.output_tail().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "schema.registry.listeners" in errors[0]
