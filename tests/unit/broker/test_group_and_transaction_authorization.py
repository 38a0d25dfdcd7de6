"""What the group, offset and transaction handlers refuse or hide under an authorizer, for the
cases real clients hardly reach (broker-to-broker requests, admin listings): each handler runs
with a node whose authorizer holds a few ACLs, and its answer is encoded for the version."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.broker.authorization import NodeAuthorization
from moldau.broker.registry import RequestContext, handler_for, load_handlers
from moldau.config.authorization import AuthorizerSettings
from moldau.metadata.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from moldau.net.connection import ConnectionInfo
from moldau.protocol.adapter import (
    RequestHeader,
    build_entity,
    decode_response,
    encode_response,
    request_schema,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
Op = AclOperation
BOB = "User:bob"


def allow(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=BOB,
        host="*",
        operation=operation,
        permission=AclPermission.ALLOW,
    )


class FakeNode:
    """A node with an authorizer over `acls` and stand-ins for the coordinators."""

    node_id = 1

    def __init__(self, *acls: AclBinding, **parts: Any) -> None:
        table = {index: binding for index, binding in enumerate(acls)}
        settings = AuthorizerSettings(super_users=frozenset(), allow_if_no_acl=False)
        self.authorization = NodeAuthorization(settings, lambda: table)
        topic = SimpleNamespace(name="orders", topic_id=uuid.UUID(int=7), partitions={0: None})
        self.metadata_image = SimpleNamespace(
            topics={"orders": topic}, topics_by_id={topic.topic_id: topic}
        )
        self.group_coordinator: Any = None
        self.transaction_coordinator: Any = None
        self.internal_topics = SimpleNamespace(ready=lambda name: True)
        for name, value in parts.items():
            setattr(self, name, value)

    def broker_endpoints(self, listener_name: str) -> list[dict[str, Any]]:
        return [{"node_id": 1, "host": "broker.example", "port": 9092, "rack": None}]


def call(node: FakeNode, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
    """Run the handler for bob's request of `version`; its answer encoded and decoded back."""
    load_handlers()
    spec = handler_for(api_key)
    assert spec is not None and spec.min_version <= version <= spec.max_version
    schema = request_schema(api_key, version)
    assert schema is not None
    connection = ConnectionInfo("10.0.0.5", 5000, "SASL", "SASL_PLAINTEXT", False, principal=BOB)
    header = RequestHeader(int(api_key), version, 1, "client", 0)
    ctx = RequestContext(header=header, node=node, connection=connection)  # type: ignore[arg-type]
    result = spec.function(ctx, build_entity(schema, body))
    if inspect.isawaitable(result):
        result = asyncio.run(result)  # type: ignore[arg-type]
    frame = encode_response(int(api_key), version, 1, result)
    return decode_response(int(api_key), version, frame[4:])[1]


def codes_by_partition(
    topics: Any, partitions: str = "partitions", code: str = "error_code"
) -> dict[tuple[str, int], int]:
    return {
        (topic.name, partition.partition_index): getattr(partition, code)
        for topic in topics
        for partition in getattr(topic, partitions)
    }


# --- transactions ---------------------------------------------------------------------------


def test_write_txn_markers_without_cluster_action_refuse_every_partition() -> None:
    # (the node has no replica manager: writing a marker would fail the test)
    response = call(
        FakeNode(allow(ResourceType.TOPIC, "orders", Op.ALL)),
        ApiKey.WRITE_TXN_MARKERS,
        1,
        {
            "markers": [
                {
                    "producer_id": 5,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
    )
    [marker] = response.markers
    assert codes_by_partition(marker.topics) == {
        ("orders", 0): E.cluster_authorization_failed,
        ("orders", 1): E.cluster_authorization_failed,
    }


ADD_V4 = {
    "transactions": [
        {
            "transactional_id": "tx",
            "producer_id": 5,
            "producer_epoch": 0,
            "verify_only": True,
            "topics": [{"name": "orders", "partitions": [0]}],
        }
    ]
}


def test_add_partitions_to_txn_from_a_broker_needs_cluster_action() -> None:
    node = FakeNode(allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE))
    with pytest.raises(KafkaError) as refused:  # the dispatcher answers it top level
        call(node, ApiKey.ADD_PARTITIONS_TO_TXN, 4, ADD_V4)
    assert refused.value.code == E.cluster_authorization_failed


def test_add_partitions_to_txn_from_a_broker_is_not_checked_per_transaction() -> None:
    class Coordinator:
        async def add_partitions(self, **request: Any) -> dict[str, Any]:
            return {"partitions": dict.fromkeys(request["partitions"], E.none)}

    node = FakeNode(
        allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION),
        transaction_coordinator=Coordinator(),
    )
    response = call(node, ApiKey.ADD_PARTITIONS_TO_TXN, 4, ADD_V4)
    [result] = response.results_by_transaction
    [topic] = result.topic_results
    assert [p.partition_error_code for p in topic.results_by_partition] == [E.none]


def add_v3(*topics: str) -> dict[str, Any]:
    return {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 5,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": name, "partitions": [0]} for name in topics],
    }


def test_add_partitions_to_txn_from_a_client_needs_write_on_the_id_and_the_topics() -> None:
    def errors(node: FakeNode, *topics: str) -> dict[tuple[str, int], int]:
        response = call(node, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_v3(*topics))
        results = response.results_by_topic_v3_and_below
        return codes_by_partition(results, "results_by_partition", "partition_error_code")

    topic_only = FakeNode(allow(ResourceType.TOPIC, "orders", Op.WRITE))
    assert errors(topic_only, "orders") == {("orders", 0): E.transactional_id_authorization_failed}
    # Authorization before existence: "secret" does not exist, and bob may not know it.
    both = FakeNode(
        allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE),
        allow(ResourceType.TOPIC, "orders", Op.WRITE),
    )
    assert errors(both, "orders", "secret") == {
        ("orders", 0): E.operation_not_attempted,
        ("secret", 0): E.topic_authorization_failed,
    }


class ProducerIds:
    async def generate(self) -> int:
        return 42


@pytest.mark.parametrize(
    "acls,expected",
    [
        ((), E.cluster_authorization_failed),
        ((allow(ResourceType.TOPIC, "orders", Op.READ),), E.cluster_authorization_failed),
        ((allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),), E.none),
        ((allow(ResourceType.TOPIC, "logs-", Op.WRITE, PatternType.PREFIXED),), E.none),
    ],
)
def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(
    acls: tuple[AclBinding, ...], expected: int
) -> None:
    node = FakeNode(*acls, producer_id_manager=ProducerIds())
    body = {"transactional_id": None, "transaction_timeout": 60_000}
    response = call(node, ApiKey.INIT_PRODUCER_ID, 5, body)
    assert response.error_code == expected
    assert response.producer_id == (42 if expected == E.none else -1)


def transaction(transactional_id: str) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "producer_id": 1, "transaction_state": "Ongoing"}


def test_list_and_describe_transactions_show_only_ids_the_principal_may_describe() -> None:
    class Coordinator:
        def list_transactions(self, **filters: Any) -> tuple[int, list[dict[str, Any]]]:
            return E.none, [transaction("mine"), transaction("theirs")]

        def describe_transactions(self, ids: list[str]) -> list[dict[str, Any]]:
            topics = [
                {"topic": "orders", "partitions": [0]},
                {"topic": "secret", "partitions": [1]},
            ]
            return [{**transaction(id_), "error_code": E.none, "topics": topics} for id_ in ids]

    node = FakeNode(
        allow(ResourceType.TRANSACTIONAL_ID, "mine", Op.DESCRIBE),
        allow(ResourceType.TOPIC, "orders", Op.READ),
        transaction_coordinator=Coordinator(),
    )
    listed = call(node, ApiKey.LIST_TRANSACTIONS, 1, {})
    assert [state.transactional_id for state in listed.transaction_states] == ["mine"]
    described = call(
        node, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["theirs", "mine"]}
    )
    theirs, mine = described.transaction_states
    assert (theirs.transactional_id, theirs.error_code) == (
        "theirs",
        E.transactional_id_authorization_failed,
    )
    assert mine.error_code == E.none
    assert [topic.topic for topic in mine.topics] == ["orders"]  # not the secret one


# --- groups -----------------------------------------------------------------------------------


def listed_group(group_id: str) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "protocol_type": "consumer",
        "group_state": "Empty",
        "group_type": "classic",
    }


class Groups:
    """A group coordinator that knows two groups."""

    def list_groups(self, **filters: Any) -> dict[str, Any]:
        return {"error_code": E.none, "groups": [listed_group("mine"), listed_group("theirs")]}

    def describe_group(self, group_id: str) -> dict[str, Any]:
        return {
            "error_code": E.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": "Empty",
            "protocol_type": "consumer",
            "protocol_data": "",
            "members": [],
        }

    def fetch_offsets(self, *, group_id: str, topics: Any, **options: Any) -> dict[str, Any]:
        committed = [("orders", [0]), ("secret", [0])] if topics is None else topics
        partition = {"committed_offset": 7, "committed_leader_epoch": -1, "metadata": ""}
        return {
            "group_id": group_id,
            "error_code": E.none,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {"partition_index": index, "error_code": E.none, **partition}
                        for index in indexes
                    ],
                }
                for name, indexes in committed
            ],
        }


def test_list_groups_shows_what_the_principal_may_describe_unless_it_describes_the_cluster():
    mine = allow(ResourceType.GROUP, "mine", Op.READ)
    node = FakeNode(mine, group_coordinator=Groups())
    assert [group.group_id for group in call(node, ApiKey.LIST_GROUPS, 5, {}).groups] == ["mine"]
    cluster = allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)
    node = FakeNode(mine, cluster, group_coordinator=Groups())
    everything = call(node, ApiKey.LIST_GROUPS, 5, {}).groups
    assert [group.group_id for group in everything] == ["mine", "theirs"]


def test_describe_groups_refuses_others_and_reports_authorized_operations_when_asked():
    node = FakeNode(allow(ResourceType.GROUP, "mine", Op.READ), group_coordinator=Groups())
    body = {"groups": ["mine", "theirs"], "include_authorized_operations": True}
    mine, theirs = call(node, ApiKey.DESCRIBE_GROUPS, 5, body).groups
    assert mine.error_code == E.none
    assert mine.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert theirs.error_code == E.group_authorization_failed
    assert theirs.authorized_operations == -(2**31)
    body["include_authorized_operations"] = False
    assert call(node, ApiKey.DESCRIBE_GROUPS, 5, body).groups[0].authorized_operations == -(2**31)


def test_offset_fetch_hides_or_refuses_topics_the_principal_may_not_describe():
    node = FakeNode(
        allow(ResourceType.GROUP, "mine", Op.DESCRIBE),
        allow(ResourceType.TOPIC, "orders", Op.READ),
        group_coordinator=Groups(),
    )

    def fetch(topics: Any) -> Any:
        body = {"groups": [{"group_id": "mine", "topics": topics}]}
        [group] = call(node, ApiKey.OFFSET_FETCH, 8, body).groups
        return group

    every = fetch(None)
    assert codes_by_partition(every.topics) == {("orders", 0): E.none}
    named = fetch([{"name": name, "partition_indexes": [0]} for name in ("orders", "secret")])
    assert codes_by_partition(named.topics) == {
        ("orders", 0): E.none,
        ("secret", 0): E.topic_authorization_failed,
    }
    assert {p.committed_offset for t in named.topics for p in t.partitions} == {7, -1}
    body = {"groups": [{"group_id": "theirs", "topics": None}]}
    [theirs] = call(node, ApiKey.OFFSET_FETCH, 8, body).groups
    assert theirs.error_code == E.group_authorization_failed


def test_find_coordinator_answers_each_key_the_principal_may_describe():
    node = FakeNode(
        allow(ResourceType.GROUP, "mine", Op.DESCRIBE),
        allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE),
    )
    node.group_coordinator = SimpleNamespace(is_coordinator_for=lambda key: True)
    node.transaction_coordinator = node.group_coordinator
    body = {"key_type": 0, "coordinator_keys": ["mine", "theirs"]}
    mine, theirs = call(node, ApiKey.FIND_COORDINATOR, 4, body).coordinators
    assert (mine.error_code, mine.node_id) == (E.none, 1)
    assert (theirs.error_code, theirs.node_id) == (E.group_authorization_failed, -1)
    body = {"key_type": 1, "coordinator_keys": ["tx", "other"]}
    codes = [c.error_code for c in call(node, ApiKey.FIND_COORDINATOR, 4, body).coordinators]
    assert codes == [E.none, E.transactional_id_authorization_failed]
