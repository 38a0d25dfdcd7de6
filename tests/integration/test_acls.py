"""ACL authorization against a real `moldau server` with Kafka's StandardAuthorizer settings,
driven by confluent-kafka's admin client, producer and consumer over SASL PLAIN.

The server's SASL listener (CLEAR) knows three users: admin (a super user), alice and bob. Its
PLAINTEXT listener is the node's own (User:ANONYMOUS, a super user as Kafka's inter-broker
principal must be). Each test grants what it needs under names of its own.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .conftest import MoldauServer, ServerFactory
from .test_sasl_listeners import PLAIN_MODULE
from .test_sasl_wire import authenticate_plain
from .test_tls_listeners import listener_port
from .wire import Connection

DEADLINE_S = 30.0
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = f"{PLAIN_MODULE} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> MoldauServer:
    return module_server_factory(
        listeners="PLAINTEXT://127.0.0.1:0,CLEAR://127.0.0.1:0",
        num_partitions="1",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLEAR:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.clear.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
        },
    )


@pytest.fixture(scope="module")
def bootstrap(server: MoldauServer) -> str:
    return f"127.0.0.1:{listener_port(server, 'CLEAR')}"


def settings(user: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def admin_client(bootstrap: str, user: str = "admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **settings(user)})


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def allow(
    principal: str,
    resource_name: str,
    operation: AclOperation,
    *,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(resource_type, resource_name, pattern, principal, "*", operation, permission)


def grant(bootstrap: str, *bindings: AclBinding) -> None:
    admin = admin_client(bootstrap)  # (alive until its futures are done)
    for future in admin.create_acls(list(bindings)).values():
        future.result(DEADLINE_S)


def create_topics(bootstrap: str, *topics: str) -> None:
    admin = admin_client(bootstrap)
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(DEADLINE_S)


def produce(bootstrap: str, user: str, topic: str, count: int = 3) -> list[KafkaError | None]:
    """The delivery error of each record (None: delivered)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, **settings(user)}
    )
    outcomes: list[KafkaError | None] = []
    for index in range(count):
        producer.produce(
            topic, value=b"v%d" % index, on_delivery=lambda error, _m: outcomes.append(error)
        )
    producer.flush(DEADLINE_S)
    return outcomes


def error_code(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(DEADLINE_S)
    return int(raised.value.args[0].code())


def test_an_admin_creates_describes_and_deletes_acls(bootstrap: str) -> None:
    topic = name("acl-crud")
    bindings = [
        allow("User:alice", topic, AclOperation.READ),
        allow("User:bob", topic, AclOperation.WRITE, permission=AclPermissionType.DENY),
        allow("User:alice", f"{topic}-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
    ]
    grant(bootstrap, *bindings)
    grant(bootstrap, bindings[0])  # an ACL created again is stored once
    admin = admin_client(bootstrap)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    described = admin.describe_acls(everything).result(DEADLINE_S)
    mine = [b for b in described if b.name.startswith(topic)]
    assert sorted(mine, key=str) == sorted(bindings, key=str)
    # MATCH finds the ACLs that apply to a resource: the literal one and the prefix.
    match = AclBindingFilter(
        ResourceType.TOPIC, f"{topic}-x", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert admin.describe_acls(match).result(DEADLINE_S) == [bindings[2]]
    by_topic = AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    deleted = admin.delete_acls([by_topic])[by_topic].result(DEADLINE_S)
    assert sorted(deleted, key=str) == sorted(bindings[:2], key=str)
    remaining = [b for b in admin.describe_acls(everything).result(DEADLINE_S) if topic in b.name]
    assert remaining == [bindings[2]]


def test_without_alter_on_the_cluster_acls_cannot_be_changed_or_read(bootstrap: str) -> None:
    alice = admin_client(bootstrap, "alice")
    binding = allow("User:alice", "*", AclOperation.ALL)
    futures = alice.create_acls([binding])
    assert error_code(futures[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    # (confluent-kafka's describe_acls reads a refusal as no ACLs: ask on the wire)
    connection = Connection("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]))
    assert authenticate_plain(connection, "alice", USERS["alice"]).error_code == 0
    described = connection.request(
        ApiKey.DESCRIBE_ACLS,
        3,
        {
            "resource_type_filter": ResourceType.ANY.value,
            "resource_name_filter": None,
            "pattern_type_filter": ResourcePatternType.ANY.value,
            "principal_filter": None,
            "host_filter": None,
            "operation": AclOperation.ANY.value,
            "permission_type": AclPermissionType.ANY.value,
        },
    )
    assert described.error_code == ErrorCode.cluster_authorization_failed
    assert described.resources == ()
    deletion = alice.delete_acls([everything])[everything]
    assert error_code(deletion) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_producers_write_only_where_an_acl_lets_them(bootstrap: str) -> None:
    prefix = name("acl-w")
    allowed, other = f"{prefix}-mine", name("acl-other")
    create_topics(bootstrap, allowed, other)
    grant(
        bootstrap,
        allow("User:alice", f"{prefix}-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
    )
    assert produce(bootstrap, "alice", allowed) == [None, None, None]
    refused = produce(bootstrap, "alice", other)
    assert [e.code() if e else None for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    refused = produce(bootstrap, "bob", allowed)
    assert [e.code() if e else None for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3


def test_metadata_shows_only_the_topics_a_principal_may_describe(bootstrap: str) -> None:
    seen, hidden = name("acl-seen"), name("acl-hidden")
    create_topics(bootstrap, seen, hidden)
    grant(bootstrap, allow("User:bob", seen, AclOperation.READ))  # READ implies DESCRIBE
    bob = admin_client(bootstrap, "bob")
    topics = bob.list_topics(timeout=DEADLINE_S).topics
    assert seen in topics
    assert hidden not in topics
    assert hidden in admin_client(bootstrap).list_topics(timeout=DEADLINE_S).topics
    asked = bob.list_topics(hidden, timeout=DEADLINE_S).topics
    assert asked[hidden].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def consume(bootstrap: str, user: str, topic: str, count: int) -> tuple[list[bytes], list[int]]:
    """Values read from the start of partition 0, and the errors met, assigning (no group
    coordination)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": name("g"),
            "enable.auto.commit": False,
            **settings(user),
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    errors: list[int] = []
    deadline = time.monotonic() + 15
    try:
        while len(values) < count and not errors and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                errors.append(message.error().code())
            else:
                values.append(message.value())
    finally:
        consumer.close()
    return values, errors


def test_a_consumer_reads_with_read_and_a_deny_overrides_it(bootstrap: str) -> None:
    topic = name("acl-r")
    create_topics(bootstrap, topic)
    assert produce(bootstrap, "admin", topic) == [None, None, None]
    grant(
        bootstrap,
        allow("User:*", topic, AclOperation.READ),
        # (librdkafka looks up its group's coordinator even when it assigns partitions)
        allow(
            "User:*",
            "g-",
            AclOperation.READ,
            resource_type=ResourceType.GROUP,
            pattern=ResourcePatternType.PREFIXED,
        ),
    )
    assert consume(bootstrap, "alice", topic, 3) == ([b"v0", b"v1", b"v2"], [])
    grant(
        bootstrap, allow("User:alice", topic, AclOperation.READ, permission=AclPermissionType.DENY)
    )
    values, errors = consume(bootstrap, "alice", topic, 3)
    assert values == []
    assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert consume(bootstrap, "bob", topic, 3) == ([b"v0", b"v1", b"v2"], [])


def test_topics_are_created_and_configs_read_only_as_acls_allow(bootstrap: str) -> None:
    prefix = name("acl-c")
    grant(
        bootstrap,
        allow(
            "User:alice", f"{prefix}-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED
        ),
    )
    alice = admin_client(bootstrap, "alice")
    mine, theirs = f"{prefix}-a", name("acl-theirs")
    futures = alice.create_topics([NewTopic(mine, 1, 1), NewTopic(theirs, 1, 1)])
    futures[mine].result(DEADLINE_S)
    assert error_code(futures[theirs]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # CREATE does not imply DESCRIBE_CONFIGS.
    resource = ConfigResource(ConfigResource.Type.TOPIC, mine)
    assert error_code(alice.describe_configs([resource])[resource]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    grant(bootstrap, allow("User:alice", mine, AclOperation.ALTER_CONFIGS))
    configs = alice.describe_configs([resource])[resource].result(DEADLINE_S)
    assert configs["cleanup.policy"].value == "delete"
    # Deleting it needs DELETE, which nobody granted.
    assert error_code(alice.delete_topics([mine])[mine]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
