"""The admin client's ACL calls: the fields sent, the ACLs read back, the errors raised."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as Fields
from typing import Any

import pytest

from moldau.client.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    ResourcePatternType,
    create_acls,
    delete_acls,
    describe_acls,
)
from moldau.client.errors import ErrorCode, KafkaException
from moldau.protocol.api_keys import ApiKey

READ_ORDERS = AclBinding(
    resource_type=AclResourceType.TOPIC,
    resource_name="orders",
    principal="User:alice",
    operation=AclOperation.READ,
    permission_type=AclPermissionType.ALLOW,
)


class FakeCluster:
    """Answers each request with the next prepared response and remembers what was sent."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.sent: list[tuple[int, Any]] = []

    async def request(self, api_key: int, data: Any) -> Any:
        self.sent.append((api_key, data))
        return self.responses.pop(0)


def test_create_sends_each_binding_and_raises_the_first_refusal() -> None:
    cluster = FakeCluster(Fields(results=[Fields(error_code=0, error_message=None)]))
    asyncio.run(create_acls(cluster, [READ_ORDERS]))
    assert cluster.sent == [
        (
            ApiKey.CREATE_ACLS,
            {
                "creations": [
                    {
                        "resource_type": 2,
                        "resource_name": "orders",
                        "resource_pattern_type": 3,
                        "principal": "User:alice",
                        "host": "*",
                        "operation": 3,
                        "permission_type": 3,
                    }
                ]
            },
        )
    ]
    refused = FakeCluster(
        Fields(results=[Fields(error_code=31, error_message="Cluster authorization")])
    )
    with pytest.raises(KafkaException) as raised:
        asyncio.run(create_acls(refused, [READ_ORDERS]))
    assert raised.value.code is ErrorCode.cluster_authorization_failed
    assert raised.value.message == (
        "ACL ALLOW User:alice from * READ on TOPIC 'orders' (LITERAL): Cluster authorization"
    )


def test_describe_reads_every_acl_of_every_resource_pattern() -> None:
    answer = Fields(
        error_code=0,
        error_message=None,
        resources=[
            Fields(
                resource_type=2,
                resource_name="orders",
                pattern_type=3,
                acls=[
                    Fields(principal="User:alice", host="*", operation=3, permission_type=3),
                    Fields(principal="User:bob", host="h", operation=99, permission_type=2),
                ],
            )
        ],
    )
    cluster = FakeCluster(answer)
    described = asyncio.run(describe_acls(cluster, AclBindingFilter(principal="User:alice")))
    assert described[0] == READ_ORDERS
    assert (described[1].operation, described[1].permission_type) == (
        AclOperation.UNKNOWN,  # a code this client does not know
        AclPermissionType.DENY,
    )
    assert cluster.sent[0][1] == {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": "User:alice",
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }


def test_describe_raises_the_brokers_refusal() -> None:
    disabled = Fields(error_code=54, error_message="No Authorizer is configured", resources=[])
    with pytest.raises(KafkaException) as raised:
        asyncio.run(describe_acls(FakeCluster(disabled), AclBindingFilter()))
    assert raised.value.code is ErrorCode.security_disabled
    assert raised.value.message == "DescribeAcls: No Authorizer is configured"


def test_delete_returns_what_each_filter_deleted_and_sends_a_repeated_filter_once() -> None:
    by_topic = AclBindingFilter(
        resource_type=AclResourceType.TOPIC,
        resource_name="orders",
        pattern_type=ResourcePatternType.LITERAL,
    )
    matching = Fields(
        error_code=0,
        error_message=None,
        resource_type=2,
        resource_name="orders",
        pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    cluster = FakeCluster(
        Fields(
            filter_results=[
                Fields(error_code=0, error_message=None, matching_acls=[matching]),
                Fields(error_code=0, error_message=None, matching_acls=[]),
            ]
        )
    )
    deleted = asyncio.run(delete_acls(cluster, [by_topic, AclBindingFilter(), by_topic]))
    assert deleted == {by_topic: [READ_ORDERS], AclBindingFilter(): []}
    assert len(cluster.sent[0][1]["filters"]) == 2
    refused = FakeCluster(
        Fields(filter_results=[Fields(error_code=54, error_message="No", matching_acls=[])])
    )
    with pytest.raises(KafkaException, match="SECURITY_DISABLED: ACL filter TOPIC 'orders'"):
        asyncio.run(delete_acls(refused, [by_topic]))
