"""kafka-acls' options as ACLs and filters: what `moldau acl add | remove | list` send, and the
misuses refused before any broker is asked."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from moldau.cli.acl_bindings import (
    AclOptions,
    AclUsageError,
    bindings_to_add,
    filters_to_list,
    filters_to_remove,
    parse_operation,
)
from moldau.cli.main import register_commands
from moldau.client.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    ResourcePatternType,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = AclResourceType.TOPIC, AclResourceType.GROUP
CLUSTER, TRANSACTIONAL_ID = AclResourceType.CLUSTER, AclResourceType.TRANSACTIONAL_ID
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def acl(
    resource_type: AclResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    host: str = "*",
    pattern: ResourcePatternType = LITERAL,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


@pytest.mark.parametrize(
    ("text", "operation"),
    [
        ("Read", Op.READ),
        ("WRITE", Op.WRITE),
        ("idempotentwrite", Op.IDEMPOTENT_WRITE),
        ("IdempotentWrite", Op.IDEMPOTENT_WRITE),
        ("describe_configs", Op.DESCRIBE_CONFIGS),
        ("Cluster-Action", Op.CLUSTER_ACTION),
        (" All ", Op.ALL),
    ],
)
def test_operation_names_are_taken_in_any_case(text: str, operation: AclOperation) -> None:
    assert parse_operation(text) is operation


def test_each_principal_gets_each_operation_from_any_host_by_default() -> None:
    options = AclOptions(
        topics=["orders"],
        allow_principals=["User:alice", "User:bob"],
        deny_principals=["User:mallory"],
        deny_hosts=["10.0.0.9"],
        operations=["Read", "write"],
    )
    assert bindings_to_add(options) == [
        acl(TOPIC, "orders", "User:alice", Op.READ),
        acl(TOPIC, "orders", "User:alice", Op.WRITE),
        acl(TOPIC, "orders", "User:bob", Op.READ),
        acl(TOPIC, "orders", "User:bob", Op.WRITE),
        acl(TOPIC, "orders", "User:mallory", Op.READ, DENY, host="10.0.0.9"),
        acl(TOPIC, "orders", "User:mallory", Op.WRITE, DENY, host="10.0.0.9"),
    ]


def test_without_an_operation_the_acl_is_for_all_of_them() -> None:
    options = AclOptions(groups=["g"], cluster=True, allow_principals=["User:alice"])
    assert bindings_to_add(options) == [
        acl(GROUP, "g", "User:alice", Op.ALL),
        acl(CLUSTER, "kafka-cluster", "User:alice", Op.ALL),
    ]


def test_a_prefixed_pattern_applies_to_every_resource_named() -> None:
    options = AclOptions(
        topics=["logs-"],
        transactional_ids=["etl-"],
        pattern_type="PREFIXED",
        allow_principals=["User:*"],
        allow_hosts=["10.0.0.1", "10.0.0.2"],
        operations=["Write"],
    )
    assert bindings_to_add(options) == [
        acl(TOPIC, "logs-", "User:*", Op.WRITE, host="10.0.0.1", pattern=PREFIXED),
        acl(TOPIC, "logs-", "User:*", Op.WRITE, host="10.0.0.2", pattern=PREFIXED),
        acl(TRANSACTIONAL_ID, "etl-", "User:*", Op.WRITE, host="10.0.0.1", pattern=PREFIXED),
        acl(TRANSACTIONAL_ID, "etl-", "User:*", Op.WRITE, host="10.0.0.2", pattern=PREFIXED),
    ]


def test_producer_grants_write_describe_create_and_with_idempotent_the_cluster() -> None:
    options = AclOptions(
        topics=["t"],
        transactional_ids=["tx"],
        allow_principals=["User:p"],
        producer=True,
        idempotent=True,
    )
    assert bindings_to_add(options) == [
        acl(TOPIC, "t", "User:p", Op.WRITE),
        acl(TOPIC, "t", "User:p", Op.DESCRIBE),
        acl(TOPIC, "t", "User:p", Op.CREATE),
        acl(TRANSACTIONAL_ID, "tx", "User:p", Op.WRITE),
        acl(TRANSACTIONAL_ID, "tx", "User:p", Op.DESCRIBE),
        acl(CLUSTER, "kafka-cluster", "User:p", Op.IDEMPOTENT_WRITE),
    ]


def test_consumer_grants_read_describe_on_the_topic_and_read_on_the_group() -> None:
    options = AclOptions(topics=["t"], groups=["g"], allow_principals=["User:c"], consumer=True)
    assert bindings_to_add(options) == [
        acl(TOPIC, "t", "User:c", Op.READ),
        acl(TOPIC, "t", "User:c", Op.DESCRIBE),
        acl(GROUP, "g", "User:c", Op.READ),
    ]
    both = AclOptions(
        topics=["t"], groups=["g"], allow_principals=["User:c"], consumer=True, producer=True
    )
    topic_operations = [b.operation for b in bindings_to_add(both) if b.resource_type is TOPIC]
    assert topic_operations == [Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ]


def test_remove_selects_exactly_what_add_would_create_under_the_pattern_type_given() -> None:
    options = AclOptions(
        topics=["t"], allow_principals=["User:alice"], operations=["Read"], pattern_type="match"
    )
    assert filters_to_remove(options) == [
        AclBindingFilter(
            resource_type=TOPIC,
            resource_name="t",
            pattern_type=ResourcePatternType.MATCH,
            principal="User:alice",
            host="*",
            operation=Op.READ,
            permission_type=ALLOW,
        )
    ]


def test_list_asks_for_everything_or_for_each_resource_and_principal() -> None:
    assert filters_to_list(AclOptions()) == [AclBindingFilter()]
    assert filters_to_list(AclOptions(), ["User:a"]) == [AclBindingFilter(principal="User:a")]
    assert filters_to_list(AclOptions(topics=["t"], cluster=True, pattern_type="any")) == [
        AclBindingFilter(
            resource_type=TOPIC, resource_name="t", pattern_type=ResourcePatternType.ANY
        ),
        AclBindingFilter(
            resource_type=CLUSTER,
            resource_name="kafka-cluster",
            pattern_type=ResourcePatternType.ANY,
        ),
    ]


ALICE = {"allow_principals": ["User:alice"]}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (AclOptions(**ALICE), "name a resource: --topic NAME"),
        (AclOptions(topics=["t"]), "name a principal with --allow-principal"),
        (AclOptions(topics=["t"], allow_principals=["alice"]), "principal 'alice' is not Type"),
        (AclOptions(topics=["t"], operations=["Reed"], **ALICE), "unknown operation 'Reed'"),
        (
            AclOptions(cluster=True, operations=["Read"], **ALICE),
            "Read does not apply to --cluster",
        ),
        (
            AclOptions(groups=["g"], operations=["Write"], **ALICE),
            "Write does not apply to --group",
        ),
        (AclOptions(topics=["t"], pattern_type="match", **ALICE), "adding ACLs takes literal"),
        (AclOptions(cluster=True, pattern_type="prefixed", **ALICE), "drop --resource-pattern"),
        (AclOptions(topics=[" "], **ALICE), "--topic needs a name"),
        (AclOptions(topics=["t"], allow_hosts=["h"]), "--allow-host needs --allow-principal"),
        (AclOptions(topics=["t"], idempotent=True, **ALICE), "--idempotent goes with --producer"),
        (AclOptions(groups=["g"], producer=True, **ALICE), "--producer needs --topic"),
        (AclOptions(topics=["t"], consumer=True, **ALICE), "--consumer needs --topic and --group"),
        (
            AclOptions(topics=["t"], producer=True, operations=["Read"], **ALICE),
            "drop --operation",
        ),
        (
            AclOptions(topics=["t"], groups=["g"], producer=True, **ALICE),
            "--producer grants nothing on a group",
        ),
    ],
)
def test_misuse_is_one_line_saying_what_to_change(options: AclOptions, message: str) -> None:
    with pytest.raises(AclUsageError, match=message.replace("(", r"\(")) as raised:
        bindings_to_add(options)
    assert "\n" not in str(raised.value)


def test_remove_needs_a_principal_too() -> None:
    with pytest.raises(AclUsageError, match="name a principal"):
        filters_to_remove(AclOptions(topics=["t"]))


@pytest.mark.parametrize("verb", ["add", "remove"])
def test_the_command_fails_with_exit_2_before_asking_a_broker(verb: str) -> None:
    # Port 9 (discard) has no broker: asking one would be exit 3.
    arguments = ["acl", verb, "--allow-principal", "User:alice", "--operation", "Read"]
    result = CliRunner().invoke(register_commands(), [*arguments, "--cluster", "-b", "127.0.0.1:9"])
    assert result.exit_code == 2
    assert "error: operation Read does not apply to --cluster" in result.output
