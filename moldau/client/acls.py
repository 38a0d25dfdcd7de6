"""ACLs through the admin API: CreateAcls, DescribeAcls and DeleteAcls (KIP-140; prefixed
patterns KIP-290), as Kafka's `Admin.createAcls / describeAcls / deleteAcls`.

`AclBinding` is one ACL: a resource pattern (type, name, pattern type) and an entry (principal,
host, operation, permission). `AclBindingFilter` selects ACLs: a `None` field or an ANY code
matches anything, pattern type MATCH the ACLs that apply to the resource named. The enums hold
Kafka's public wire codes; their names are confluent-kafka's, except `AclResourceType` (its
`ResourceType`), since `ResourceType` here names config resources (CLUSTER is 4 in both).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from moldau.client.cluster import Cluster
from moldau.client.errors import check_error
from moldau.protocol.api_keys import ApiKey

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "ResourcePatternType",
    "create_acls",
    "delete_acls",
    "describe_acls",
]

CLUSTER_NAME: Final = "kafka-cluster"  # the name of the one CLUSTER resource
WILDCARD_HOST: Final = "*"


class AclResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ResourcePatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name exactly
    MATCH = 2  # filters only: the ACLs that apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """One ACL: `principal` ("User:alice", "User:*"), from `host` ("*" for any), may (ALLOW)
    or may not (DENY) perform `operation` on the resources the pattern names."""

    resource_type: AclResourceType
    resource_name: str
    pattern_type: ResourcePatternType = ResourcePatternType.LITERAL
    principal: str
    host: str = WILDCARD_HOST
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"ACL {self.permission_type.name} {self.principal} from {self.host} "
            f"{self.operation.name} on {self.resource_type.name} "
            f"'{self.resource_name}' ({self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBindingFilter:
    """The ACLs a DescribeAcls or DeleteAcls asks for; the defaults match every ACL."""

    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: ResourcePatternType = ResourcePatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __str__(self) -> str:
        fields = (
            self.resource_type.name,
            "any name" if self.resource_name is None else f"'{self.resource_name}'",
            self.pattern_type.name,
            self.principal or "any principal",
            f"from {self.host or 'any host'}",
            self.operation.name,
            self.permission_type.name,
        )
        return "ACL filter " + " ".join(fields)


async def create_acls(cluster: Cluster, bindings: Sequence[AclBinding]) -> None:
    """Create the ACLs (one that exists already stays as it is); raises KafkaException for the
    first one refused (SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST)."""
    response = await cluster.request(
        ApiKey.CREATE_ACLS,
        {
            "creations": [
                {
                    "resource_type": int(b.resource_type),
                    "resource_name": b.resource_name,
                    "resource_pattern_type": int(b.pattern_type),
                    "principal": b.principal,
                    "host": b.host,
                    "operation": int(b.operation),
                    "permission_type": int(b.permission_type),
                }
                for b in bindings
            ]
        },
    )
    for binding, result in zip(bindings, response.results, strict=True):
        check_error(result.error_code, result.error_message, context=str(binding))


async def describe_acls(cluster: Cluster, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """The ACLs matching the filter, in the broker's order; the broker's refusal (DescribeAcls'
    only error code) raises KafkaException."""
    response = await cluster.request(ApiKey.DESCRIBE_ACLS, filter_fields(acl_filter))
    check_error(response.error_code, response.error_message, context="DescribeAcls")
    return [_binding_of(resource, acl) for resource in response.resources for acl in resource.acls]


async def delete_acls(
    cluster: Cluster, filters: Sequence[AclBindingFilter]
) -> dict[AclBindingFilter, list[AclBinding]]:
    """Delete every ACL matching any of the filters; returns the ACLs each filter deleted (a
    filter given twice is sent once). Raises KafkaException for the first filter refused."""
    unique = list(dict.fromkeys(filters))
    response = await cluster.request(
        ApiKey.DELETE_ACLS, {"filters": [filter_fields(f) for f in unique]}
    )
    deleted: dict[AclBindingFilter, list[AclBinding]] = {}
    for acl_filter, result in zip(unique, response.filter_results, strict=True):
        check_error(result.error_code, result.error_message, context=str(acl_filter))
        bindings = []
        for matching in result.matching_acls:
            binding = _binding_of(matching, matching)
            check_error(matching.error_code, matching.error_message, context=str(binding))
            bindings.append(binding)
        deleted[acl_filter] = bindings
    return deleted


def filter_fields(acl_filter: AclBindingFilter) -> dict[str, Any]:
    """DescribeAcls' request fields, which are also each of DeleteAcls' filters."""
    return {
        "resource_type_filter": int(acl_filter.resource_type),
        "resource_name_filter": acl_filter.resource_name,
        "pattern_type_filter": int(acl_filter.pattern_type),
        "principal_filter": acl_filter.principal,
        "host_filter": acl_filter.host,
        "operation": int(acl_filter.operation),
        "permission_type": int(acl_filter.permission_type),
    }


def _binding_of(resource: Any, entry: Any) -> AclBinding:
    """An ACL from the response fields of its resource pattern and of its entry."""
    return AclBinding(
        resource_type=_code(AclResourceType, resource.resource_type),
        resource_name=resource.resource_name,
        pattern_type=_code(ResourcePatternType, resource.pattern_type),
        principal=entry.principal,
        host=entry.host,
        operation=_code(AclOperation, entry.operation),
        permission_type=_code(AclPermissionType, entry.permission_type),
    )


E = TypeVar("E", bound=enum.IntEnum)


def _code(kind: type[E], value: Any) -> E:
    """A code this client does not know reads as UNKNOWN (0)."""
    try:
        return kind(int(value))
    except ValueError:
        return kind(0)
