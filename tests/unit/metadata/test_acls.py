"""The authorizer's decisions (Kafka's StandardAuthorizer semantics) and ACL filters."""

from __future__ import annotations

import itertools

import pytest

from moldau.metadata.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    Authorizer,
    InvalidAcl,
    PatternType,
    ResourceType,
    validate_binding,
)

Op = AclOperation
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
ALLOW = AclPermission.ALLOW
DENY = AclPermission.DENY


def acl(
    name,
    operation,
    permission=ALLOW,
    *,
    principal="User:alice",
    host="*",
    pattern=LITERAL,
    resource_type=TOPIC,
):
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission=permission,
    )


# The ACLs of the matrix below.
MATRIX_ACLS = [
    acl("orders", Op.READ),  # alice reads orders
    acl("orders", Op.WRITE, principal="User:bob"),  # bob writes orders
    acl("logs-", Op.ALL, pattern=PREFIXED, principal="User:carol"),  # carol owns logs-*
    acl("logs-secret", Op.READ, DENY, principal="User:carol"),  # but may not read logs-secret
    acl("*", Op.DESCRIBE, principal="User:*"),  # anyone describes any topic
    acl("public", Op.READ, principal="User:*", host="10.0.0.1"),  # anyone from 10.0.0.1
    acl("app", Op.READ, resource_type=GROUP),  # alice's group
]

PRINCIPALS = ["User:alice", "User:bob", "User:carol", "User:mallory"]
RESOURCES = [
    (TOPIC, "orders"),
    (TOPIC, "logs-app"),
    (TOPIC, "logs-secret"),
    (TOPIC, "public"),
    (GROUP, "app"),
    (GROUP, "other"),
]
OPERATIONS = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]

# Everything allowed in the matrix (host 127.0.0.1 unless noted); all else is denied.
ALLOWED = {
    ("User:alice", TOPIC, "orders", Op.READ),
    ("User:bob", TOPIC, "orders", Op.WRITE),
    ("User:alice", GROUP, "app", Op.READ),
    ("User:alice", GROUP, "app", Op.DESCRIBE),  # READ implies DESCRIBE
    *(
        ("User:carol", TOPIC, name, operation)
        for name in ("logs-app", "logs-secret")
        for operation in OPERATIONS
        if (name, operation) != ("logs-secret", Op.READ)
    ),
    *(
        (principal, TOPIC, name, Op.DESCRIBE)
        for principal in PRINCIPALS
        for _, name in RESOURCES[:4]
    ),
}


@pytest.mark.parametrize(
    "principal,resource,operation",
    list(itertools.product(PRINCIPALS, RESOURCES, OPERATIONS)),
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_the_matrix_of_principals_resources_and_operations(principal, resource, operation):
    authorizer = Authorizer(MATRIX_ACLS, allow_if_no_acl=True)
    resource_type, name = resource
    expected = (principal, resource_type, name, operation) in ALLOWED
    if resource == (GROUP, "other"):
        expected = True  # no ACL names it and allow.everyone.if.no.acl.found=true
    assert authorizer.authorize(principal, "127.0.0.1", operation, resource_type, name) is expected


def test_the_host_must_match_unless_the_acl_names_any_host():
    authorizer = Authorizer(MATRIX_ACLS)
    assert authorizer.authorize("User:mallory", "10.0.0.1", Op.READ, TOPIC, "public")
    assert not authorizer.authorize("User:mallory", "10.0.0.2", Op.READ, TOPIC, "public")


def test_deny_overrides_allow_whatever_the_order():
    for acls in (
        [acl("t", Op.ALL), acl("t", Op.WRITE, DENY)],
        [acl("t", Op.WRITE, DENY), acl("t", Op.ALL)],
        [acl("t", Op.WRITE), acl("t", Op.ALL, DENY, principal="User:*")],
        [acl("t", Op.WRITE, pattern=PREFIXED), acl("*", Op.WRITE, DENY)],
    ):
        assert not Authorizer(acls).authorize("User:alice", "h", Op.WRITE, TOPIC, "t")


def test_a_deny_names_its_operation_exactly():
    # A DENY of READ does not deny DESCRIBE, which an ALLOW of READ implies.
    authorizer = Authorizer([acl("t", Op.ALL), acl("t", Op.READ, DENY)])
    assert authorizer.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "t")


@pytest.mark.parametrize(
    "granted,implied",
    [
        (Op.READ, Op.DESCRIBE),
        (Op.WRITE, Op.DESCRIBE),
        (Op.DELETE, Op.DESCRIBE),
        (Op.ALTER, Op.DESCRIBE),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS),
    ],
)
def test_what_an_allow_implies(granted, implied):
    authorizer = Authorizer([acl("t", granted)])
    assert authorizer.authorize("User:alice", "h", implied, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", Op.CREATE, TOPIC, "t")


def test_no_acl_for_the_resource_follows_allow_everyone_if_no_acl_found():
    acls = [acl("named", Op.READ)]
    assert Authorizer(acls, allow_if_no_acl=True).authorize("User:x", "h", Op.READ, TOPIC, "else")
    assert not Authorizer(acls).authorize("User:x", "h", Op.READ, TOPIC, "else")
    # An ACL for the resource, even another principal's, means the default no longer applies.
    assert not Authorizer(acls, allow_if_no_acl=True).authorize(
        "User:x", "h", Op.READ, TOPIC, "named"
    )


def test_super_users_may_do_anything():
    authorizer = Authorizer([acl("t", Op.ALL, DENY, principal="User:*")], super_users={"User:root"})
    assert authorizer.authorize("User:root", "h", Op.DELETE, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", Op.DELETE, TOPIC, "t")


def test_prefixes_match_only_names_that_start_with_them():
    authorizer = Authorizer(
        [acl("a", Op.READ, pattern=PREFIXED), acl("abc-", Op.WRITE, pattern=PREFIXED)]
    )
    assert authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "a")
    assert authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "abc-1")
    assert authorizer.authorize("User:alice", "h", Op.WRITE, TOPIC, "abc-1")
    assert not authorizer.authorize("User:alice", "h", Op.WRITE, TOPIC, "abc")
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "ba")
    # A pattern is not a glob: a literal "*" is the wildcard, a prefixed "*" is a prefix.
    assert not Authorizer([acl("*", Op.READ, pattern=PREFIXED)]).authorize(
        "User:alice", "h", Op.READ, TOPIC, "x"
    )


def test_authorized_operations_are_a_bit_set_of_the_resource_types_operations():
    authorizer = Authorizer([acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS)])
    bits = authorizer.authorized_operations("User:alice", "h", TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (
        1 << Op.DESCRIBE_CONFIGS
    )


def write_anything(acls, *, principal="User:alice", host="h", **settings):
    authorizer = Authorizer(acls, **settings)
    return authorizer.authorize_any(principal, host, Op.WRITE, TOPIC)


@pytest.mark.parametrize(
    "acls,expected",
    [
        ([], False),
        ([acl("orders", Op.WRITE)], True),
        ([acl("logs-", Op.WRITE, pattern=PREFIXED)], True),
        ([acl("*", Op.WRITE)], True),
        ([acl("orders", Op.ALL)], True),
        ([acl("orders", Op.WRITE, principal="User:*")], True),
        # Only this operation counts, only this principal's ACLs, only from this host.
        ([acl("orders", Op.READ)], False),
        ([acl("orders", Op.WRITE, principal="User:bob")], False),
        ([acl("orders", Op.WRITE, host="10.0.0.1")], False),
        ([acl("orders", Op.WRITE, resource_type=GROUP)], False),
        # A DENY that covers the ALLOW dominates it; one that covers other names does not.
        ([acl("orders", Op.WRITE), acl("orders", Op.WRITE, DENY)], False),
        ([acl("orders", Op.WRITE), acl("ord", Op.WRITE, DENY, pattern=PREFIXED)], False),
        (
            [
                acl("logs-", Op.WRITE, pattern=PREFIXED),
                acl("logs-", Op.ALL, DENY, pattern=PREFIXED),
            ],
            False,
        ),
        ([acl("logs-", Op.WRITE, pattern=PREFIXED), acl("logs-a", Op.WRITE, DENY)], True),
        ([acl("orders", Op.WRITE), acl("orders-x", Op.WRITE, DENY, pattern=PREFIXED)], True),
        ([acl("orders", Op.WRITE), acl("orders", Op.READ, DENY)], True),
        ([acl("a", Op.WRITE), acl("orders", Op.WRITE), acl("a", Op.WRITE, DENY)], True),
        # A DENY of every topic dominates anything, a wildcard ALLOW any DENY of some topics.
        ([acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY, principal="User:*")], False),
        ([acl("*", Op.WRITE), acl("*", Op.WRITE, DENY)], False),
        ([acl("*", Op.WRITE), acl("o", Op.WRITE, DENY, pattern=PREFIXED)], True),
    ],
)
def test_authorize_any_is_kafkas_authorize_by_resource_type(acls, expected):
    assert write_anything(acls) is expected


def test_authorize_any_lets_super_users_and_the_no_acl_default_through():
    denied_everywhere = [acl("*", Op.WRITE, DENY, principal="User:*")]
    assert write_anything(denied_everywhere, principal="User:root", super_users={"User:root"})
    assert write_anything([], allow_if_no_acl=True)
    # The default applies while no ACL would name a topic nobody has named.
    assert not write_anything([acl("*", Op.READ, principal="User:bob")], allow_if_no_acl=True)


@pytest.mark.parametrize(
    "binding,message",
    [
        (acl("t", Op.ANY), "Invalid operation"),
        (acl("t", Op.READ, AclPermission.ANY), "Invalid permission"),
        (acl("t", Op.READ, pattern=PatternType.MATCH), "Invalid pattern type"),
        (acl("t", Op.READ, resource_type=ResourceType.ANY), "Invalid resource type"),
        (acl("", Op.READ), "Resource name"),
        (acl("t", Op.READ, principal="alice"), "Could not parse principal"),
        (acl("other", Op.ALTER, resource_type=ResourceType.CLUSTER), "kafka-cluster"),
    ],
)
def test_acls_kafka_refuses_to_create(binding, message):
    with pytest.raises(InvalidAcl, match=message):
        validate_binding(binding)


def test_filters_match_as_describe_and_delete_acls_do():
    literal = acl("orders", Op.READ)
    wildcard = acl("*", Op.READ)
    prefixed = acl("ord", Op.WRITE, pattern=PREFIXED)
    other = acl("orders", Op.READ, principal="User:bob", resource_type=GROUP)
    everything = [literal, wildcard, prefixed, other]

    def matching(**fields):
        return [b for b in everything if AclFilter(**fields).matches(b)]

    assert matching() == everything
    assert matching(resource_type=TOPIC, resource_name="orders") == [literal]
    assert matching(
        resource_name="orders", pattern_type=PatternType.MATCH, resource_type=TOPIC
    ) == [
        literal,
        wildcard,
        prefixed,
    ]
    assert matching(pattern_type=PREFIXED) == [prefixed]
    assert matching(principal="User:bob") == [other]
    assert matching(operation=Op.WRITE, permission=ALLOW) == [prefixed]
    assert matching(permission=DENY) == []
    assert AclFilter(operation=Op.UNKNOWN).is_invalid() is not None
    assert AclFilter().is_invalid() is None
