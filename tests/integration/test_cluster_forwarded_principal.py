"""A client's metadata change reaches the controller as the client (KIP-590): a broker-only node
and a controller-only node in this process (`moldau.Server`), SASL PLAIN on both listeners.
alice creates a topic through the broker, which forwards it in an Envelope over its own SASL
connection to the controller; the controller's CreateTopics handler (wrapped in a spy) sees
`User:alice` from the client's address, not the broker. Under Kafka's authorizer, with the
nodes' principals super users, alice's own ACLs decide."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.broker.registry import CONTROLLER, RequestContext, load_handlers
from moldau.protocol.api_keys import ApiKey

from .cluster import LOOPBACK, controller_and_broker_in_process

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:broker;User:controller",
}


@pytest.fixture
def seen_by_the_controller(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(principal, client host) of each CreateTopics the controller listener serves."""
    seen: list[tuple[str, str]] = []
    controller_handlers = load_handlers()[CONTROLLER]
    spec = controller_handlers[ApiKey.CREATE_TOPICS]

    def spy(ctx: RequestContext, request: Any) -> Any:
        seen.append((ctx.principal, ctx.client_host))
        return spec.function(ctx, request)

    monkeypatch.setitem(
        controller_handlers, ApiKey.CREATE_TOPICS, dataclasses.replace(spec, function=spy)
    )
    return seen


def controller_and_broker(tmp_path: Path, extra: dict[str, str]) -> AbstractContextManager[str]:
    """The two nodes running, SASL PLAIN on both listeners; the broker's bootstrap address."""
    common = {
        "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": (
            f'{PLAIN} required username="controller" password="controller-secret" '
            'user_controller="controller-secret";'
        ),
        "broker.heartbeat.interval.ms": "500",
        **extra,
    }
    broker = {
        "listener.name.broker.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.broker.plain.sasl.jaas.config": (
            f'{PLAIN} required username="broker" password="broker-secret" '
            'user_broker="broker-secret" user_alice="alice-secret";'
        ),
    }
    return controller_and_broker_in_process(tmp_path, common=common, broker=broker)


def admin_client(bootstrap: str, user: str) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }
    )


def create_topic(admin: AdminClient, name: str) -> None:
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)


def test_a_topic_created_through_a_broker_reaches_the_controller_as_the_client(
    tmp_path: Path, seen_by_the_controller: list[tuple[str, str]]
) -> None:
    with controller_and_broker(tmp_path, {}) as bootstrap:
        create_topic(admin_client(bootstrap, "alice"), "alices")
        assert seen_by_the_controller == [("User:alice", LOOPBACK)]


def test_under_an_authorizer_the_controller_checks_the_clients_acls_not_the_brokers(
    tmp_path: Path,
) -> None:
    with controller_and_broker(tmp_path, AUTHORIZER) as bootstrap:
        alice = admin_client(bootstrap, "alice")
        with pytest.raises(KafkaException) as refused:
            create_topic(alice, "alices")
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        grant = AclBinding(
            ResourceType.TOPIC, "alices", ResourcePatternType.LITERAL,
            "User:alice", "*", AclOperation.CREATE, AclPermissionType.ALLOW,
        )  # fmt: skip
        admin = admin_client(bootstrap, "broker")  # (a super user)
        admin.create_acls([grant])[grant].result(30)
        create_topic(alice, "alices")
