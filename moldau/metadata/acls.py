"""Access control lists and the decisions made from them, with the semantics of Kafka's
StandardAuthorizer (KIP-801).

An ACL (`AclBinding`) says that a principal, from a host, may (ALLOW) or may not (DENY) perform
an operation on the resources a pattern names: one resource (LITERAL), every resource of its
type (LITERAL `*`), or every resource whose name starts with the pattern (PREFIXED).

`Authorizer.authorize` decides one action:

1. A super user (`super.users`) may do anything.
2. Every ACL whose pattern matches the resource is looked at. The principal must be the
   request's or `User:*`, the host the client's address or `*`.
3. A matching DENY wins. A DENY names its operation exactly (or ALL).
4. Otherwise a matching ALLOW allows. An ALLOW of READ, WRITE, DELETE or ALTER also allows
   DESCRIBE; an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS.
5. Otherwise the action is denied, unless no ACL at all matched the resource and
   `allow.everyone.if.no.acl.found` is true.

`Authorizer.authorize_any` decides whether some resource of a type allows an operation (Kafka's
`authorizeByResourceType`, KIP-679: an idempotent producer may WRITE some topic).

`AclFilter` is the filter of DescribeAcls and DeleteAcls: ANY (or a null field) matches
anything; pattern type MATCH matches the ACLs that would apply to the named resource.
The codes are Kafka's wire values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
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


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka names it
_NO_SUCH_RESOURCE = "hardcode"  # the name Kafka's authorizeByResourceType asks about first

# What an ALLOW of an operation also allows.
_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# The operations each resource type has (Kafka's, for authorized-operations bit sets).
OPERATIONS_BY_RESOURCE: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DELETE,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def all_operations(resource_type: ResourceType) -> int:
    """The bit set of every operation a resource type has."""
    bits = 0
    for operation in OPERATIONS_BY_RESOURCE.get(resource_type, ()):
        bits |= 1 << operation
    return bits


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) to which resources
    (resource type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission


class InvalidAcl(ValueError):
    """An ACL that cannot be stored (Kafka answers INVALID_REQUEST with this message)."""


def validate_binding(binding: AclBinding) -> None:
    """Raise InvalidAcl for an ACL Kafka would refuse to create."""
    if binding.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAcl("Invalid resource type " + binding.resource_type.name)
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl("Invalid pattern type " + binding.pattern_type.name)
    if binding.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAcl("Invalid operation " + binding.operation.name)
    if binding.permission not in (AclPermission.ALLOW, AclPermission.DENY):
        raise InvalidAcl("Invalid permission type " + binding.permission.name)
    if not binding.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        raise InvalidAcl("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
    kind, separator, name = binding.principal.partition(":")
    if not separator or not kind or not name:
        raise InvalidAcl(f"Could not parse principal from `{binding.principal}`")
    if not binding.host:
        raise InvalidAcl("Invalid host: the host must not be empty (use * for any host)")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: `None` and ANY match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission == AclPermission.ANY or self.permission == binding.permission

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            return _pattern_applies(binding, self.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != binding.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name

    def is_invalid(self) -> str | None:
        """Why Kafka would refuse this filter, or None."""
        for name, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission type", self.permission),
        ):
            if value == 0:
                return f"Filter contains UNKNOWN {name}"
        return None


def _pattern_applies(binding: AclBinding, name: str) -> bool:
    """Whether the ACL's pattern names the resource called `name`."""
    if binding.pattern_type == PatternType.PREFIXED:
        return name.startswith(binding.resource_name)
    return binding.resource_name in (name, WILDCARD_RESOURCE)


class Authorizer:
    """Decisions from a fixed set of ACLs (rebuilt when they change); answers are cached, so
    the per-request cost of a repeated action is one dictionary lookup."""

    _CACHE_LIMIT = 65536

    def __init__(
        self,
        acls: Iterable[AclBinding],
        *,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        # (resource type, name) -> literal ACLs; (resource type, prefix) -> prefixed ACLs.
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, set[int]] = {}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in acls:
            self._by_type.setdefault(binding.resource_type, []).append(binding)
            if binding.pattern_type == PatternType.PREFIXED:
                key = (binding.resource_type, binding.resource_name)
                self._prefixed.setdefault(key, []).append(binding)
                lengths = self._prefix_lengths.setdefault(binding.resource_type, set())
                lengths.add(len(binding.resource_name))
            else:
                key = (binding.resource_type, binding.resource_name)
                self._literal.setdefault(key, []).append(binding)
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= self._CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set (1 << operation code) of what the principal may do to the resource, as
        Metadata, DescribeGroups and DescribeCluster report it."""
        bits = 0
        for operation in OPERATIONS_BY_RESOURCE.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do `operation` to at least one resource of the type, as
        Kafka's `Authorizer.authorizeByResourceType` decides:

        - yes if it may do it to a resource named as none is (a super user may; so may anyone
          when no ACL names such a resource and `allow.everyone.if.no.acl.found` is true);
        - no if a DENY names every resource (`*`);
        - yes if an ALLOW names every resource, or a name or prefix that no DENY covers (a
          literal DENY of that name, or a prefixed DENY of one of its prefixes);
        - no otherwise.

        Only the ACLs of the principal (or User:*) from the host (or *) of this operation (or
        ALL) count: unlike `authorize`, no operation implies another here."""
        if self.authorize(principal, host, operation, resource_type, _NO_SUCH_RESOURCE):
            return True
        denied_names: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[AclBinding] = []
        for binding in self._by_type.get(resource_type, ()):
            if (
                binding.principal not in (principal, WILDCARD_PRINCIPAL)
                or binding.host not in (host, WILDCARD_HOST)
                or binding.operation not in (operation, AclOperation.ALL)
            ):
                continue
            literal = binding.pattern_type == PatternType.LITERAL
            if binding.permission == AclPermission.ALLOW:
                allowed.append(binding)
            elif literal and binding.resource_name == WILDCARD_RESOURCE:
                return False
            else:
                (denied_names if literal else denied_prefixes).add(binding.resource_name)
        for binding in allowed:
            name = binding.resource_name
            if binding.pattern_type == PatternType.LITERAL:
                if name == WILDCARD_RESOURCE:
                    return True
                if name in denied_names:
                    continue
            if not any(name[:length] in denied_prefixes for length in range(1, len(name) + 1)):
                return True
        return False

    def _matching(self, resource_type: ResourceType, name: str) -> Iterable[AclBinding]:
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD_RESOURCE:
            yield from self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                yield from self._prefixed.get((resource_type, name[:length]), ())

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        found_resource_acls = False
        allowed = False
        implied_by = _IMPLIED.get(operation, frozenset())
        for binding in self._matching(resource_type, name):
            found_resource_acls = True
            if binding.principal != principal and binding.principal != WILDCARD_PRINCIPAL:
                continue
            if binding.host != host and binding.host != WILDCARD_HOST:
                continue
            if binding.permission == AclPermission.DENY:
                if binding.operation in (operation, AclOperation.ALL):
                    return False
            elif (
                binding.operation in (operation, AclOperation.ALL)
                or binding.operation in implied_by
            ):
                allowed = True
        if allowed:
            return True
        return not found_resource_acls and self.allow_if_no_acl


def new_acl_id() -> uuid.UUID:
    return uuid.uuid4()
