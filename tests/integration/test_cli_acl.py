"""`moldau acl add | list | remove` against the server of test_acls.py (Kafka's
StandardAuthorizer; admin a super user, alice and bob not), run as admin over SASL PLAIN; what an
ACL changes is seen by alice's confluent-kafka producer. Also the blocking admin client's ACL
calls."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from moldau.client import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    KafkaException,
    ResourcePatternType,
    SyncAdminClient,
)
from moldau.client.errors import ErrorCode

from .test_acls import (  # the module-scoped server and its fixtures
    bootstrap,  # noqa: F401
    create_topics,
    name,
    produce,
    server,  # noqa: F401
    settings,
)
from .test_cli_support import CliResult, moldau

pytestmark = pytest.mark.timeout(120)


def acl(*arguments: str, brokers: str, user: str = "admin", expect: int = 0) -> CliResult:
    """`moldau acl ...` against `brokers`, authenticated as `user`."""
    user_settings = [f"{key}={value}" for key, value in settings(user).items()]
    options = [option for setting in user_settings for option in ("-X", setting)]
    return moldau("acl", *arguments, *options, bootstrap=brokers, expect=expect)


def test_an_acl_added_lets_alice_write_and_once_removed_no_longer(
    bootstrap: str,  # noqa: F811
) -> None:
    topic = name("cli-acl")
    create_topics(bootstrap, topic)
    write = ["--allow-principal", "User:alice", "--operation", "Write", "--topic", topic]
    added = acl("add", *write, brokers=bootstrap)
    assert added.text.splitlines() == [
        f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
        "patternType=LITERAL)`:",
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
    ]
    assert produce(bootstrap, "alice", topic) == [None, None, None]

    table = acl("list", "--topic", topic, brokers=bootstrap).text.splitlines()
    assert [line.split() for line in table] == [
        ["RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE", "PRINCIPAL", "HOST", "OPERATION",
         "PERMISSION"],
        ["TOPIC", topic, "LITERAL", "User:alice", "*", "WRITE", "ALLOW"],
    ]  # fmt: skip

    removed = acl("remove", *write, "--format", "json", brokers=bootstrap)
    assert removed.json() == [
        {
            "resource_type": "TOPIC",
            "resource_name": topic,
            "pattern_type": "LITERAL",
            "principal": "User:alice",
            "host": "*",
            "operation": "WRITE",
            "permission": "ALLOW",
        }
    ]
    refused = produce(bootstrap, "alice", topic, count=1)
    assert [e.code() if e else None for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_principal_without_cluster_permission_gets_one_error_line(
    bootstrap: str,  # noqa: F811
) -> None:
    refused = acl("list", brokers=bootstrap, user="alice", expect=6)
    assert refused.stderr.splitlines() == [
        "error: DescribeAcls: User:alice is not authorized to DESCRIBE the cluster "
        "(CLUSTER_AUTHORIZATION_FAILED); the principal lacks cluster permission"
    ]


def test_the_blocking_admin_client_creates_describes_and_deletes_acls(
    bootstrap: str,  # noqa: F811
) -> None:
    prefix = name("sync-acl")
    binding = AclBinding(
        resource_type=AclResourceType.TOPIC,
        resource_name=f"{prefix}-",
        pattern_type=ResourcePatternType.PREFIXED,
        principal="User:bob",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.DENY,
    )
    with SyncAdminClient({"bootstrap.servers": bootstrap, **settings("admin")}) as admin:
        admin.create_acls([binding])
        applying = AclBindingFilter(
            resource_type=AclResourceType.TOPIC,
            resource_name=f"{prefix}-orders",
            pattern_type=ResourcePatternType.MATCH,
        )
        assert admin.describe_acls(applying) == [binding]
        assert admin.delete_acls([applying]) == {applying: [binding]}
        assert admin.describe_acls(applying) == []
    alice = SyncAdminClient({"bootstrap.servers": bootstrap, **settings("alice")})
    with alice, pytest.raises(KafkaException) as raised:
        alice.create_acls([binding])
    assert raised.value.code is ErrorCode.cluster_authorization_failed
