"""ACL bindings and filters from and to the ACL APIs' fields (Kafka's codes; a code Moldau
does not know becomes UNKNOWN, which validation then refuses)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from moldau.metadata.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)

E = TypeVar("E", bound=IntEnum)


def code(enum: type[E], value: int) -> E:
    try:
        return enum(int(value))
    except ValueError:
        return enum(0)


def binding_of(creation: Any) -> AclBinding:
    return AclBinding(
        resource_type=code(ResourceType, creation.resource_type),
        resource_name=creation.resource_name,
        pattern_type=code(PatternType, creation.resource_pattern_type),
        principal=creation.principal,
        host=creation.host,
        operation=code(AclOperation, creation.operation),
        permission=code(AclPermission, creation.permission_type),
    )


def filter_of(request: Any) -> AclFilter:
    """DescribeAcls' request or one of DeleteAcls' filters."""
    return AclFilter(
        resource_type=code(ResourceType, request.resource_type_filter),
        resource_name=request.resource_name_filter,
        pattern_type=code(PatternType, request.pattern_type_filter),
        principal=request.principal_filter,
        host=request.host_filter,
        operation=code(AclOperation, request.operation),
        permission=code(AclPermission, request.permission_type),
    )


def binding_fields(binding: AclBinding) -> dict[str, Any]:
    """DeleteAcls' matching ACL (without its error fields)."""
    return {
        "resource_type": binding.resource_type,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation,
        "permission_type": binding.permission,
    }
