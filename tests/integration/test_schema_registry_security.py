"""The schema registry of a node whose only client listener is SASL_SSL: https with the node's
key, HTTP basic authentication against the cluster's SASL users (PLAIN from the listener's
JAAS config, SCRAM from the metadata log) and permissions from the ACLs of the subject's topic.
The registry itself reaches the node over that listener as the inter-broker user."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.certificates import Certificates, make_certificates

from .conftest import MoldauServer, ServerFactory
from .test_cli_support import moldau
from .test_sasl_listeners import PLAIN_MODULE, format_with_scram
from .test_schema_registry import registry_url
from .test_tls_listeners import listener_port

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
CAROL = ("carol", "carol-secret")  # a SCRAM-SHA-512 user of the metadata log
JAAS = (
    f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
    + " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
    + ";"
)
SCHEMA = json.dumps(
    {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def secured(
    module_server_factory: ServerFactory,
    certificates: Certificates,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[MoldauServer, str]:
    data_dir = tmp_path_factory.mktemp("secured-data")
    format_with_scram(data_dir, f"SCRAM-SHA-512=[name={CAROL[0]},password={CAROL[1]}]")
    server = module_server_factory(
        log_dirs=str(data_dir),
        listeners="SECURE://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "SECURE:SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "schema.registry.listeners": "https://127.0.0.1:0",
            "schema.registry.authentication.method": "BASIC",
        },
    )
    bootstrap = f"127.0.0.1:{listener_port(server, 'SECURE')}"
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
            "ssl.ca.location": certificates.path("ca.pem"),
        }
    )

    def acl(principal: str, name: str, operation: Any, pattern: Any) -> AclBinding:
        return AclBinding(
            ResourceType.TOPIC, name, pattern, f"User:{principal}", "*", operation,
            AclPermissionType.ALLOW,
        )  # fmt: skip

    bindings = [
        acl("alice", "orders", AclOperation.WRITE, ResourcePatternType.LITERAL),
        acl("bob", "orders", AclOperation.READ, ResourcePatternType.LITERAL),
        acl("carol", "pay", AclOperation.WRITE, ResourcePatternType.PREFIXED),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    return server, registry_url(server)


def call(
    url: str,
    certificates: Certificates,
    method: str,
    path: str,
    *,
    user: tuple[str, str] | None = None,
    body: object = None,
) -> tuple[int, Any, http.client.HTTPResponse]:
    host, port = url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=certificates.path("ca.pem"))
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(user).encode()).decode()
    try:
        payload = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=payload, headers=headers)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null"), answer
    finally:
        connection.close()


def test_basic_auth_and_permissions_per_subject(
    secured: tuple[MoldauServer, str], certificates: Certificates
) -> None:
    _, url = secured
    alice, bob = ("alice", USERS["alice"]), ("bob", USERS["bob"])
    register = "/subjects/orders-value/versions"

    status, body, answer = call(url, certificates, "GET", "/subjects")
    assert (status, body["error_code"]) == (401, 401)
    assert answer.getheader("WWW-Authenticate") == 'Basic realm="SchemaRegistry"'
    assert call(url, certificates, "GET", "/subjects", user=("alice", "wrong"))[0] == 401
    assert call(url, certificates, "GET", "/subjects", user=("nobody", "x"))[0] == 401

    status, body, _ = call(url, certificates, "POST", register, user=bob, body={"schema": SCHEMA})
    assert (status, body["error_code"]) == (403, 40301)
    assert body["message"] == "User bob is denied operation Write on Subject: orders-value"
    status, body, _ = call(url, certificates, "POST", register, user=alice, body={"schema": SCHEMA})
    assert status == 200
    schema_id = body["id"]
    # carol is a SCRAM user, allowed to write topics starting with "pay"
    status, body, _ = call(
        url, certificates, "POST", "/subjects/payments-value/versions", user=CAROL,
        body={"schema": SCHEMA},
    )  # fmt: skip
    assert (status, body["id"]) == (200, schema_id)

    # bob reads orders-value (READ implies DESCRIBE) but sees no other subject
    assert call(url, certificates, "GET", "/subjects", user=bob)[1] == ["orders-value"]
    status, body, _ = call(url, certificates, "GET", "/subjects/orders-value/versions/1", user=bob)
    assert (status, body["id"]) == (200, schema_id)
    assert call(url, certificates, "GET", f"/schemas/ids/{schema_id}", user=bob)[0] == 200
    status, body, _ = call(url, certificates, "GET", f"/schemas/ids/{schema_id}/subjects", user=bob)
    assert (status, body) == (200, ["orders-value"])
    status, body, _ = call(url, certificates, "GET", "/subjects/payments-value/versions", user=bob)
    assert (status, body["error_code"]) == (403, 40301)
    # the global level is the cluster's: ALTER_CONFIGS on it, which only the super user has
    status, _, _ = call(
        url, certificates, "PUT", "/config", user=alice, body={"compatibility": "FULL"}
    )
    assert status == 403
    admin = ("admin", USERS["admin"])
    status, body, _ = call(
        url, certificates, "PUT", "/config", user=admin, body={"compatibility": "FULL"}
    )
    assert (status, body) == (200, {"compatibility": "FULL"})


def test_confluent_client_and_the_cli_with_basic_auth_over_tls(
    secured: tuple[MoldauServer, str], certificates: Certificates, tmp_path: Path
) -> None:
    _, url = secured
    client = SchemaRegistryClient(
        {
            "url": url,
            "basic.auth.user.info": f"alice:{USERS['alice']}",
            "ssl.ca.location": certificates.path("ca.pem"),
        }
    )
    context = SerializationContext("orders", MessageField.VALUE)
    data = AvroSerializer(client, SCHEMA)({"id": "o-1"}, context)
    assert AvroDeserializer(client)(data, context) == {"id": "o-1"}
    assert client.get_latest_version("orders-value").schema_id == int.from_bytes(data[1:5], "big")
    assert client.register_schema("orders-value", Schema(SCHEMA, "AVRO")) > 0

    ca = certificates.path("ca.pem")
    listed = moldau(
        "schema", "list", "-r", url, "--registry-user", f"bob:{USERS['bob']}",
        "--registry-ca", ca, "--format", "json", bootstrap=None,
    ).json()  # fmt: skip
    assert [row["subject"] for row in listed] == ["orders-value"]
    refused = moldau("schema", "list", "-r", url, "--registry-ca", ca, bootstrap=None, expect=1)
    assert "--registry-user" in refused.stderr
