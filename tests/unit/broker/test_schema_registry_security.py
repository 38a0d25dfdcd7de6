"""The hosted registry's security settings and its authority over a node's users and ACLs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.broker.schema_registry import HostedRegistry
from moldau.broker.schema_registry_security import NodeRegistryAuthority
from moldau.config.cluster import ClusterLayout, check_properties
from moldau.config.values import BrokerConfig, ConfigError
from moldau.metadata.acls import (
    AclBinding,
    AclOperation,
    AclPermission,
    Authorizer,
    PatternType,
    ResourceType,
)
from moldau.protocol.sasl import scram
from moldau.registry.security import Access, topic_of_subject
from tests.certificates import make_certificates


def hosted(**properties: str) -> HostedRegistry:
    config = BrokerConfig(properties)
    return HostedRegistry.of(config, ClusterLayout.from_config(config))


def test_https_listeners_take_the_nodes_key_or_their_own(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="https listener but no key"):
        hosted(**{"schema.registry.listeners": "https://127.0.0.1:0"})
    certificates = make_certificates(tmp_path)
    own = hosted(
        **{
            "schema.registry.listeners": "https://127.0.0.1:0",
            "schema.registry.ssl.keystore.type": "PEM",
            "schema.registry.ssl.keystore.location": certificates.path("server.pem"),
            "schema.registry.ssl.client.authentication": "REQUIRED",
        }
    )
    assert own.security.server is not None and own.security.forwarding is not None
    assert own.security.server.verify_mode.name == "CERT_REQUIRED"
    assert not own.security.basic
    plain = hosted(**{"schema.registry.authentication.method": "BASIC"})
    assert plain.security.server is None and plain.security.basic


def test_registry_tls_keys_are_checked_like_the_nodes() -> None:
    good = {
        "schema.registry.ssl.keystore.location": "/k.pem",
        "schema.registry.ssl.protocol": "TLSv1.3",
    }
    assert check_properties(BrokerConfig(good)) == []
    with pytest.raises(ConfigError, match=r"schema\.registry\.ssl\.keystore\.colour is not"):
        check_properties(BrokerConfig({"schema.registry.ssl.keystore.colour": "blue"}))


def node(*, acls: list[AclBinding] | None = None, scram_users: dict[str, str] | None = None) -> Any:
    credentials = {
        (user, "SCRAM-SHA-512"): scram.make_credential("SCRAM-SHA-512", password)
        for user, password in (scram_users or {}).items()
    }
    listener = SimpleNamespace(settings=SimpleNamespace(plain_users={"alice": "alice-secret"}))
    authorization = (
        None
        if acls is None
        else SimpleNamespace(current=lambda: Authorizer(acls, super_users={"User:admin"}))
    )
    return SimpleNamespace(
        security=SimpleNamespace(sasl={"CLEAR": listener}),
        scram_credential=lambda user, mechanism: credentials.get((user, mechanism)),
        authorization=authorization,
    )


def test_passwords_are_checked_against_plain_and_scram_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    authority = NodeRegistryAuthority(node(scram_users={"carol": "carol-secret"}))
    assert authority.authenticate("alice", "alice-secret")
    assert not authority.authenticate("alice", "alice-secre")
    assert not authority.authenticate("nobody", "alice-secret")
    derivations = []
    real = scram.password_matches

    def counted(*arguments: Any) -> bool:
        derivations.append(arguments[0])
        return real(*arguments)

    monkeypatch.setattr("moldau.broker.schema_registry_security.password_matches", counted)
    assert authority.authenticate("carol", "carol-secret")
    assert authority.authenticate("carol", "carol-secret")  # remembered: no second PBKDF2
    assert not authority.authenticate("carol", "carol-secrets")
    assert derivations == ["SCRAM-SHA-512", "SCRAM-SHA-512"]


def test_permissions_come_from_the_acls_of_the_subjects_topic() -> None:
    def allow(
        principal: str, operation: AclOperation, resource: ResourceType, name: str
    ) -> AclBinding:
        return AclBinding(
            resource_type=resource,
            resource_name=name,
            pattern_type=PatternType.LITERAL,
            principal=principal,
            host="*",
            operation=operation,
            permission=AclPermission.ALLOW,
        )

    acls = [
        allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders"),
        allow("User:bob", AclOperation.READ, ResourceType.TOPIC, "orders"),
    ]
    authority = NodeRegistryAuthority(node(acls=acls))
    assert topic_of_subject("orders-value") == topic_of_subject("orders-key") == "orders"
    assert topic_of_subject("com.acme.Order") == "com.acme.Order"
    assert topic_of_subject("-value") == "-value"
    assert authority.allowed("alice", "10.0.0.1", Access.WRITE, "orders-value")
    assert authority.allowed("alice", "10.0.0.1", Access.READ, "orders-key")
    assert authority.allowed("bob", "10.0.0.1", Access.READ, "orders-value")
    assert not authority.allowed("bob", "10.0.0.1", Access.WRITE, "orders-value")
    assert not authority.allowed("alice", "10.0.0.1", Access.READ, "payments-value")
    assert not authority.allowed("alice", "10.0.0.1", Access.ADMIN, None)
    assert authority.allowed("admin", "10.0.0.1", Access.ADMIN, None)
    assert NodeRegistryAuthority(node()).allowed("anyone", "h", Access.ADMIN, None)
