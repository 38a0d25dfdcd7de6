"""The ACLs and ACL filters that kafka-acls' options name (Kafka's `AclCommand`): resources
(`--topic`, `--group`, `--cluster`, `--transactional-id`) under one pattern type, principals and
hosts to allow or deny, operations (`All` when none is given), and the `--producer` /
`--consumer` shorthands. Pure: `moldau acl` (acl.py) sends what this builds. A misuse raises
`AclUsageError`, one line saying what to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from moldau.client.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    ResourcePatternType,
)

__all__ = [
    "AclOptions",
    "AclUsageError",
    "bindings_to_add",
    "filters_to_list",
    "filters_to_remove",
    "operation_name",
    "parse_operation",
    "parse_pattern_type",
]

Op = AclOperation

# kafka-acls' spelling of the operations it takes.
_OPERATION_NAMES: Final = {
    Op.ALL: "All",
    Op.READ: "Read",
    Op.WRITE: "Write",
    Op.CREATE: "Create",
    Op.DELETE: "Delete",
    Op.ALTER: "Alter",
    Op.DESCRIBE: "Describe",
    Op.CLUSTER_ACTION: "ClusterAction",
    Op.DESCRIBE_CONFIGS: "DescribeConfigs",
    Op.ALTER_CONFIGS: "AlterConfigs",
    Op.IDEMPOTENT_WRITE: "IdempotentWrite",
}
_OPERATIONS_BY_KEY: Final = {name.lower(): op for op, name in _OPERATION_NAMES.items()}

# The operations an ACL on each resource type may name (Kafka's `AclEntry.supportedOperations`,
# and All), in kafka-acls' order.
_RESOURCE_OPERATIONS: Final[dict[AclResourceType, tuple[AclOperation, ...]]] = {
    AclResourceType.TOPIC: (
        Op.ALL, Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
        Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
    ),
    AclResourceType.GROUP: (
        Op.ALL, Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
    ),
    AclResourceType.CLUSTER: (
        Op.ALL, Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE,
    ),
    AclResourceType.TRANSACTIONAL_ID: (Op.ALL, Op.DESCRIBE, Op.WRITE),
}  # fmt: skip

# The option that names each resource type, for messages.
_FLAGS: Final = {
    AclResourceType.TOPIC: "--topic",
    AclResourceType.GROUP: "--group",
    AclResourceType.CLUSTER: "--cluster",
    AclResourceType.TRANSACTIONAL_ID: "--transactional-id",
}

_PRODUCER_TOPIC: Final = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
_PRODUCER_TRANSACTIONAL_ID: Final = (Op.WRITE, Op.DESCRIBE)
_CONSUMER_TOPIC: Final = (Op.READ, Op.DESCRIBE)
_CONSUMER_GROUP: Final = (Op.READ,)


class AclUsageError(ValueError):
    """Options that name no ACL, or one Kafka would not take: the message says what to change."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AclOptions:
    """kafka-acls' options, as given (operations and pattern type by name)."""

    topics: Sequence[str] = ()
    groups: Sequence[str] = ()
    cluster: bool = False
    transactional_ids: Sequence[str] = ()
    pattern_type: str = "literal"
    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[str] = ()
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class _Pattern:
    resource_type: AclResourceType
    name: str
    pattern_type: ResourcePatternType


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


def operation_name(operation: AclOperation) -> str:
    """kafka-acls' name of an operation (`IdempotentWrite`)."""
    return _OPERATION_NAMES.get(operation, operation.name)


def parse_operation(text: str) -> AclOperation:
    """`Read`, `read`, `IdempotentWrite`, `idempotent_write` or `IDEMPOTENT-WRITE`."""
    key = text.strip().replace("_", "").replace("-", "").lower()
    if key not in _OPERATIONS_BY_KEY:
        names = ", ".join(_OPERATION_NAMES.values())
        raise AclUsageError(f"unknown operation '{text}'; the operations are {names}")
    return _OPERATIONS_BY_KEY[key]


def parse_pattern_type(text: str, *, adding: bool = False) -> ResourcePatternType:
    """literal or prefixed; when selecting ACLs also any (any pattern type, the name exactly)
    or match (every ACL that applies to the named resource)."""
    allowed = ("literal", "prefixed") if adding else ("any", "match", "literal", "prefixed")
    key = text.strip().lower()
    if key not in allowed:
        what = "adding ACLs takes" if adding else "the pattern types are"
        raise AclUsageError(
            f"--resource-pattern-type '{text}' is not valid: {what} {', '.join(allowed)}"
        )
    return ResourcePatternType[key.upper()]


def bindings_to_add(options: AclOptions) -> list[AclBinding]:
    """The ACLs `moldau acl add` creates, in option order, each once."""
    requested = _requested(options, adding=True)
    bindings = [AclBinding(**_fields(p, entry)) for p, entries in requested for entry in entries]
    return list(dict.fromkeys(bindings))


def filters_to_remove(options: AclOptions) -> list[AclBindingFilter]:
    """The filters `moldau acl remove` deletes with: each ACL `add` would create, under the
    pattern type given (any or match select more than one resource pattern)."""
    filters = [
        AclBindingFilter(**_fields(pattern, entry))
        for pattern, entries in _requested(options, adding=False)
        for entry in entries
    ]
    return list(dict.fromkeys(filters))


def filters_to_list(options: AclOptions, principals: Sequence[str] = ()) -> list[AclBindingFilter]:
    """The filters `moldau acl list` describes with: every ACL of the resources named (all
    resources when none is), of the principals named (all when none is)."""
    named: list[str | None] = [_principal(p) for p in principals] or [None]
    patterns = _patterns(options, _pattern_type(options, adding=False), required=False)
    if not patterns:
        return [AclBindingFilter(principal=p) for p in named]
    return [
        AclBindingFilter(
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            principal=principal,
        )
        for pattern in patterns
        for principal in named
    ]


# --- building ----------------------------------------------------------------------------------


def _requested(options: AclOptions, *, adding: bool) -> list[tuple[_Pattern, list[_Entry]]]:
    """Each resource pattern with the entries the options give it (kafka-acls'
    `getResourceFilterToAcls`), checked as kafka-acls checks them."""
    _check_shorthands(options)
    pattern_type = _pattern_type(options, adding=adding)
    if options.producer or options.consumer:
        requested = _shorthand_acls(options, pattern_type)
    else:
        patterns = _patterns(options, pattern_type, required=True)
        operations = [parse_operation(o) for o in options.operations] or [Op.ALL]
        entries = _entries(options, operations)
        requested = [(pattern, entries) for pattern in patterns]
    for pattern, entries in requested:
        _check_operations(pattern.resource_type, [e.operation for e in entries])
    return requested


def _shorthand_acls(
    options: AclOptions, pattern_type: ResourcePatternType
) -> list[tuple[_Pattern, list[_Entry]]]:
    by_pattern: dict[_Pattern, list[_Entry]] = {}

    def grant(
        resource_type: AclResourceType, names: Sequence[str], operations: Sequence[AclOperation]
    ) -> None:
        for name in names:
            pattern = _Pattern(resource_type, _resource_name(resource_type, name), pattern_type)
            by_pattern.setdefault(pattern, []).extend(_entries(options, operations))

    if options.producer:
        grant(AclResourceType.TOPIC, options.topics, _PRODUCER_TOPIC)
        grant(
            AclResourceType.TRANSACTIONAL_ID, options.transactional_ids, _PRODUCER_TRANSACTIONAL_ID
        )
        if options.idempotent:  # the cluster is one resource, named literally
            cluster = _Pattern(AclResourceType.CLUSTER, CLUSTER_NAME, ResourcePatternType.LITERAL)
            by_pattern[cluster] = _entries(options, [Op.IDEMPOTENT_WRITE])
    if options.consumer:
        grant(AclResourceType.TOPIC, options.topics, _CONSUMER_TOPIC)
        grant(AclResourceType.GROUP, options.groups, _CONSUMER_GROUP)
    return [(pattern, list(dict.fromkeys(entries))) for pattern, entries in by_pattern.items()]


def _entries(options: AclOptions, operations: Sequence[AclOperation]) -> list[_Entry]:
    """Each principal, from each host (`*` unless hosts are given), for each operation."""
    if options.allow_hosts and not options.allow_principals:
        raise AclUsageError("--allow-host needs --allow-principal")
    if options.deny_hosts and not options.deny_principals:
        raise AclUsageError("--deny-host needs --deny-principal")
    if not options.allow_principals and not options.deny_principals:
        raise AclUsageError(
            "name a principal with --allow-principal or --deny-principal (e.g. User:alice, "
            "or User:* for every user)"
        )
    entries = []
    for principals, hosts, permission in (
        (options.allow_principals, options.allow_hosts, AclPermissionType.ALLOW),
        (options.deny_principals, options.deny_hosts, AclPermissionType.DENY),
    ):
        for principal in principals:
            for operation in operations:
                for host in hosts or [WILDCARD_HOST]:
                    entries.append(
                        _Entry(_principal(principal), _host(host), operation, permission)
                    )
    return list(dict.fromkeys(entries))


def _patterns(
    options: AclOptions, pattern_type: ResourcePatternType, *, required: bool
) -> list[_Pattern]:
    patterns = [
        _Pattern(resource_type, _resource_name(resource_type, name), pattern_type)
        for resource_type, names in (
            (AclResourceType.TOPIC, options.topics),
            (AclResourceType.GROUP, options.groups),
            (AclResourceType.TRANSACTIONAL_ID, options.transactional_ids),
        )
        for name in names
    ]
    if options.cluster:
        if pattern_type is ResourcePatternType.PREFIXED:
            raise AclUsageError(
                f"--cluster names the one cluster resource ({CLUSTER_NAME}): drop "
                "--resource-pattern-type prefixed"
            )
        patterns.append(_Pattern(AclResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    if required and not patterns:
        raise AclUsageError(
            "name a resource: --topic NAME, --group NAME, --cluster or --transactional-id ID"
        )
    return list(dict.fromkeys(patterns))


def _fields(pattern: _Pattern, entry: _Entry) -> dict[str, Any]:
    """An `AclBinding`'s fields, which name one ACL in an `AclBindingFilter` too."""
    return {
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission_type,
    }


# --- checks ------------------------------------------------------------------------------------


def _check_shorthands(options: AclOptions) -> None:
    """kafka-acls' rules for --producer, --consumer and --idempotent."""
    if options.idempotent and not options.producer:
        raise AclUsageError("--idempotent goes with --producer")
    if not (options.producer or options.consumer):
        return
    if options.operations:
        raise AclUsageError(
            "--producer and --consumer choose the operations themselves: drop --operation"
        )
    if options.deny_principals or options.deny_hosts:
        raise AclUsageError(
            "--producer and --consumer only allow: drop --deny-principal/--deny-host"
        )
    if options.cluster:
        raise AclUsageError(
            "--producer and --consumer take no --cluster (--producer --idempotent grants the "
            "cluster's IdempotentWrite)"
        )
    if options.producer and not options.topics:
        raise AclUsageError("--producer needs --topic")
    if options.consumer and not (options.topics and options.groups):
        raise AclUsageError("--consumer needs --topic and --group")
    if options.groups and not options.consumer:
        raise AclUsageError("--producer grants nothing on a group: drop --group or add --consumer")
    if options.transactional_ids and not options.producer:
        raise AclUsageError(
            "--consumer grants nothing on a transactional id: drop --transactional-id or add "
            "--producer"
        )


def _check_operations(resource_type: AclResourceType, operations: Sequence[AclOperation]) -> None:
    valid = _RESOURCE_OPERATIONS[resource_type]
    for operation in operations:
        if operation not in valid:
            raise AclUsageError(
                f"operation {operation_name(operation)} does not apply to "
                f"{_FLAGS[resource_type]}; its operations are "
                + ", ".join(operation_name(o) for o in valid)
            )


def _pattern_type(options: AclOptions, *, adding: bool) -> ResourcePatternType:
    return parse_pattern_type(options.pattern_type, adding=adding)


def _resource_name(resource_type: AclResourceType, name: str) -> str:
    name = name.strip()
    if not name:
        raise AclUsageError(f"{_FLAGS[resource_type]} needs a name ('*' for all)")
    return name


def _principal(text: str) -> str:
    """`Type:name` as Kafka parses it (`User:alice`, `User:*`)."""
    principal = text.strip()
    kind, separator, name = principal.partition(":")
    if not separator or not kind or not name:
        raise AclUsageError(
            f"principal '{text}' is not Type:name (e.g. User:alice, or User:* for every user)"
        )
    return principal


def _host(text: str) -> str:
    host = text.strip()
    if not host:
        raise AclUsageError("a host cannot be empty ('*' for any host)")
    return host
