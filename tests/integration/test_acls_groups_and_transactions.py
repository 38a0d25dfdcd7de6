"""Consumer groups, committed offsets and transactions under Kafka's StandardAuthorizer, against
a real `moldau server` driven by confluent-kafka (librdkafka).

One server: SASL_PLAINTEXT with PLAIN users, `User:admin` a super user who creates the topics
and the ACLs (CreateAcls). Each test gives alice or bob just the ACLs it is about: a consumer
without READ on its group is refused, one with READ on the group and the topic consumes and
commits; OffsetFetch leaves out the topics the principal may not describe; a transactional
producer without WRITE on its transactional id cannot initialize, one with it commits.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.config.authorization import STANDARD_AUTHORIZER

from .conftest import MoldauServer, ServerFactory
from .support import DEADLINE_S
from .test_tls_listeners import listener_port

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_USERS = (
    f"{PLAIN_MODULE} required "
    + " ".join(f'user_{name}="{password}"' for name, password in PASSWORDS.items())
    + ";"
)
RECORDS = 5


@pytest.fixture(scope="module")
def acl_server(module_server_factory: ServerFactory) -> MoldauServer:
    return module_server_factory(
        listeners="PLAINTEXT://127.0.0.1:0,CLEAR://127.0.0.1:0",
        num_partitions="1",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLEAR:SASL_PLAINTEXT",
            "listener.name.clear.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.clear.plain.sasl.jaas.config": PLAIN_USERS,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        },
    )


@pytest.fixture(scope="module")
def bootstrap(acl_server: MoldauServer) -> str:
    return f"127.0.0.1:{listener_port(acl_server, 'CLEAR')}"


def settings(bootstrap: str, user: str, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **more,
    }


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    admin = AdminClient(settings(bootstrap, "admin"))
    probe = allow("alice", ResourceType.TOPIC, "probe", AclOperation.DESCRIBE)
    [future] = admin.create_acls([probe], request_timeout=DEADLINE_S).values()
    try:
        future.result(DEADLINE_S)
    except KafkaException as error:
        if error.args[0].code() == KafkaError.SECURITY_DISABLED:
            pytest.skip("needs the CreateAcls handler under an authorizer")
        raise
    return admin


def allow(user: str, resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        resource_type,
        name,
        ResourcePatternType.LITERAL,
        f"User:{user}",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=DEADLINE_S).values():
        future.result(DEADLINE_S)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(admin: AdminClient, bootstrap: str) -> str:
    """A new topic holding RECORDS records, written by the super user."""
    name = unique("acl")
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(DEADLINE_S)
    producer = Producer(settings(bootstrap, "admin", acks="all"))
    for index in range(RECORDS):
        producer.produce(name, value=b"v%d" % index)
    assert producer.flush(DEADLINE_S) == 0
    return name


@contextmanager
def consumer(bootstrap: str, user: str, group: str, **more: Any) -> Iterator[Consumer]:
    client = Consumer(
        settings(bootstrap, user, **{"group.id": group, "enable.auto.commit": False, **more})
    )
    try:
        yield client
    finally:
        client.close()


def first_error(client: Consumer, timeout_s: float = DEADLINE_S) -> KafkaError:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = client.poll(0.2)
        if message is not None and message.error() is not None:
            return message.error()
        assert message is None, "consumed without being authorized"
    raise AssertionError(f"no error within {timeout_s:.0f} s")


def consume(client: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < count and time.monotonic() < deadline:
        message = client.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        values.append(message.value())
    return values


def test_a_consumer_without_read_on_its_group_is_refused(
    admin: AdminClient, bootstrap: str, topic: str
) -> None:
    group = unique("no-read")
    # It may find the group's coordinator (DESCRIBE) and read the topic, not join the group.
    grant(
        admin,
        allow("alice", ResourceType.TOPIC, topic, AclOperation.READ),
        allow("alice", ResourceType.GROUP, group, AclOperation.DESCRIBE),
    )
    with consumer(bootstrap, "alice", group) as client:
        client.subscribe([topic])
        assert first_error(client).code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_with_read_on_the_group_and_the_topic_a_consumer_consumes_and_commits(
    admin: AdminClient, bootstrap: str, topic: str
) -> None:
    group = unique("reader")
    grant(
        admin,
        allow("alice", ResourceType.TOPIC, topic, AclOperation.READ),
        allow("alice", ResourceType.GROUP, group, AclOperation.READ),
    )
    with consumer(bootstrap, "alice", group, **{"auto.offset.reset": "earliest"}) as client:
        client.subscribe([topic])
        assert consume(client, RECORDS) == [b"v%d" % index for index in range(RECORDS)]
        client.commit(asynchronous=False)
        [committed] = client.committed([TopicPartition(topic, 0)], timeout=DEADLINE_S)
        assert (committed.offset, committed.error) == (RECORDS, None)


def test_offset_fetch_leaves_out_the_topics_the_principal_may_not_describe(
    admin: AdminClient, bootstrap: str
) -> None:
    group, seen, hidden = unique("offsets"), unique("seen"), unique("hidden")
    for name in (seen, hidden):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(DEADLINE_S)
    with consumer(bootstrap, "admin", group) as client:  # commits without joining the group
        client.commit(
            offsets=[TopicPartition(seen, 0, 3), TopicPartition(hidden, 0, 4)], asynchronous=False
        )
    grant(
        admin,
        allow("bob", ResourceType.GROUP, group, AclOperation.DESCRIBE),
        allow("bob", ResourceType.TOPIC, seen, AclOperation.DESCRIBE),
    )
    bobs = AdminClient(settings(bootstrap, "bob"))
    [future] = bobs.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=DEADLINE_S
    ).values()
    every = future.result(DEADLINE_S).topic_partitions
    assert [(tp.topic, tp.offset) for tp in every] == [(seen, 3)]
    # Asked by name, the hidden topic answers TOPIC_AUTHORIZATION_FAILED.
    with consumer(bootstrap, "bob", group) as client:
        named = client.committed([TopicPartition(seen, 0), TopicPartition(hidden, 0)], DEADLINE_S)
        assert named[0].offset == 3 and named[0].error is None
        assert named[1].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_transactional_producer_without_write_on_its_id_cannot_initialize(
    admin: AdminClient, bootstrap: str
) -> None:
    transactional_id = unique("tx-denied")
    # It may find the transaction coordinator (DESCRIBE), not get a producer id (WRITE).
    grant(
        admin,
        allow("alice", ResourceType.TRANSACTIONAL_ID, transactional_id, AclOperation.DESCRIBE),
    )
    producer = Producer(settings(bootstrap, "alice", **{"transactional.id": transactional_id}))
    with pytest.raises(KafkaException) as failed:
        producer.init_transactions(DEADLINE_S)
    assert failed.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_with_the_right_acls_a_consume_transform_produce_transaction_commits(
    admin: AdminClient, bootstrap: str, topic: str
) -> None:
    transactional_id, group, output = unique("tx"), unique("txg"), unique("out")
    admin.create_topics([NewTopic(output, 1, 1)])[output].result(DEADLINE_S)
    grant(
        admin,
        allow("alice", ResourceType.TRANSACTIONAL_ID, transactional_id, AclOperation.WRITE),
        allow("alice", ResourceType.TOPIC, output, AclOperation.WRITE),
        allow("alice", ResourceType.TOPIC, topic, AclOperation.READ),
        allow("alice", ResourceType.GROUP, group, AclOperation.READ),
    )
    producer = Producer(settings(bootstrap, "alice", **{"transactional.id": transactional_id}))
    producer.init_transactions(DEADLINE_S)
    with consumer(bootstrap, "alice", group, **{"auto.offset.reset": "earliest"}) as client:
        client.subscribe([topic])
        values = consume(client, RECORDS)
        producer.begin_transaction()
        for value in values:
            producer.produce(output, value=value.upper())
        producer.send_offsets_to_transaction(
            client.position(client.assignment()), client.consumer_group_metadata(), DEADLINE_S
        )
        producer.commit_transaction(DEADLINE_S)
        [committed] = client.committed([TopicPartition(topic, 0)], timeout=DEADLINE_S)
        assert committed.offset == RECORDS
    with consumer(
        bootstrap, "admin", unique("check"), **{"isolation.level": "read_committed"}
    ) as reader:
        reader.assign([TopicPartition(output, 0, OFFSET_BEGINNING)])
        assert consume(reader, RECORDS) == [b"V%d" % index for index in range(RECORDS)]
