"""Cluster-level admin APIs against a real `moldau server`: ACLs without an authorizer, leader
elections, the metadata quorum, partition reassignments, client quotas, topic partitions
(KIP-966) and SCRAM credentials, through confluent-kafka, kafka-python and raw requests."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka import errors as kafka_errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaPythonResourceType

from moldau.protocol.errors import ErrorCode

from . import rdkafka
from .support import DEADLINE_S
from .wire import Connection


@pytest.fixture(scope="module")
def admin(server):
    return rdkafka.admin_client(server.bootstrap_servers)


@pytest.fixture(scope="module")
def python_admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def wire(server):
    with Connection(server.host, server.port) as connection:
        yield connection


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=DEADLINE_S)
    return raised.value.args[0]


# ACLs: no authorizer, so SECURITY_DISABLED as Kafka answers.

TOPIC_READ = AclBinding(
    ResourceType.TOPIC,
    "orders",
    ResourcePatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
ANY_ACL = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def test_confluent_acl_calls_fail_with_security_disabled(admin):
    [create_future] = admin.create_acls([TOPIC_READ], request_timeout=DEADLINE_S).values()
    assert error_of(create_future).code() == KafkaError.SECURITY_DISABLED

    # librdkafka drops DescribeAcls' top-level error code (against Kafka too): an empty list.
    assert admin.describe_acls(ANY_ACL, request_timeout=DEADLINE_S).result(DEADLINE_S) == []

    [delete_future] = admin.delete_acls([ANY_ACL], request_timeout=DEADLINE_S).values()
    assert error_of(delete_future).code() == KafkaError.SECURITY_DISABLED


def test_kafka_python_describe_acls_raises_security_disabled(python_admin):
    acl_filter = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY
        ),
    )
    with pytest.raises(kafka_errors.SecurityDisabledError):
        python_admin.describe_acls(acl_filter)
    acl = ACL(
        principal="User:bob",
        host="*",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(KafkaPythonResourceType.TOPIC, "payments"),
    )
    result = python_admin.create_acls([acl])
    assert result["succeeded"] == []
    assert result["failed"] == [kafka_errors.SecurityDisabledError]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acl_requests_answer_security_disabled_at_every_version(wire, version):
    acl_filter = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    described = wire.request(29, version, acl_filter)
    assert described.error_code == ErrorCode.security_disabled
    assert described.error_message == "No Authorizer is configured on the broker"
    assert described.resources == ()

    creation = {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    created = wire.request(30, version, {"creations": [creation, creation]})
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")
    ] * 2

    deleted = wire.request(31, version, {"filters": [acl_filter]})
    [result] = deleted.filter_results
    assert result.error_code == ErrorCode.security_disabled
    assert result.error_message == "No Authorizer is configured."
    assert result.matching_acls == ()
