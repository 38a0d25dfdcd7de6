"""The hosted schema registry's security: its https listeners' TLS, and who may do what.

- TLS: `schema.registry.ssl.*` over the node's `ssl.*` (Confluent's registry names these keys
  without the prefix; Kafka's `listener.name.<l>.ssl.*` prefixing works the same way), and
  Confluent's `schema.registry.ssl.client.authentication` (NONE, REQUESTED, REQUIRED) for
  `ssl.client.auth`. The same settings make the context a write is forwarded to another
  instance's https listener with (its truststore, hostname checks).
- `schema.registry.authentication.method=BASIC`: a request's basic credentials must be a SASL
  user of the node's: a PLAIN user of any SASL listener's JAAS config, or a SCRAM-SHA-256/512
  user of the metadata log (a verified password is remembered while the credential stays the
  same, so a request costs one PBKDF2 only the first time).
- Permissions: with an authorizer (`authorizer.class.name`), the user `User:<name>` needs, on
  the topic a subject stands for (`topic_of_subject`: `orders-value` -> `orders`), DESCRIBE to
  read the subject (READ or WRITE imply it, as in Kafka) and WRITE to register, delete or
  configure it; ALTER_CONFIGS on the cluster for the global config and mode. Super users and
  `allow.everyone.if.no.acl.found` apply as for Kafka requests. Without an authorizer every
  authenticated user may do everything.
"""

from __future__ import annotations

import hashlib
import hmac
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.config.cluster import CONFLUENT_CLIENT_AUTHENTICATION, SCHEMA_REGISTRY_PREFIX
from moldau.config.definitions import BROKER_KEYS
from moldau.config.sasl import SCRAM_MECHANISMS
from moldau.config.tls import client_context, server_context, tls_settings_from
from moldau.config.values import BrokerConfig, ConfigError, parse_value
from moldau.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from moldau.protocol.sasl.scram import ScramCredential, password_matches
from moldau.registry.security import Access, topic_of_subject

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["NodeRegistryAuthority", "RegistrySecurity"]

WHERE = " (schema registry)"
_REMEMBERED = 4096  # verified (user, mechanism) passwords kept


@dataclass(frozen=True, slots=True)
class RegistrySecurity:
    server: ssl.SSLContext | None = None  # the https listeners'
    forwarding: ssl.SSLContext | None = None  # reaching another instance's https listener
    basic: bool = False  # schema.registry.authentication.method=BASIC

    @classmethod
    def of(cls, config: BrokerConfig, *, tls: bool) -> RegistrySecurity:
        """ConfigError (one line) when an https listener has no key or its material does not
        load."""
        basic = str(config.get("schema.registry.authentication.method")).upper() == "BASIC"
        if not tls:
            return cls(basic=basic)

        def value(name: str) -> Any:
            raw = config.raw_unknown(SCHEMA_REGISTRY_PREFIX + name)
            if raw is None and name == "ssl.client.auth":
                confluent = config.raw_unknown(
                    SCHEMA_REGISTRY_PREFIX + CONFLUENT_CLIENT_AUTHENTICATION
                )
                raw = confluent.lower() if confluent is not None else None
            return parse_value(BROKER_KEYS[name], raw) if raw is not None else config.get(name)

        settings = tls_settings_from(value, where=WHERE)
        if settings.keystore is None:
            raise ConfigError(
                "schema.registry.listeners has an https listener but no key: set "
                "schema.registry.ssl.keystore.location (or the node's ssl.keystore.location), "
                "with ssl.keystore.type PEM or PKCS12"
            )
        return cls(
            server=server_context(settings, listener_name="schema registry"),
            forwarding=client_context(settings, listener_name="schema registry"),
            basic=basic,
        )

    def authority(self, node: BrokerServices) -> NodeRegistryAuthority | None:
        return NodeRegistryAuthority(node) if self.basic else None


class NodeRegistryAuthority:
    """`moldau.registry.security.Authority` over a node's SASL users and ACLs."""

    def __init__(self, node: BrokerServices) -> None:
        self._node = node
        self._verified: dict[tuple[str, str], tuple[ScramCredential, bytes]] = {}

    def authenticate(self, user: str, password: str) -> bool:
        for authenticator in self._node.security.sasl.values():
            expected = authenticator.settings.plain_users.get(user)
            if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
                return True
        digest = hashlib.sha256(password.encode()).digest()
        for mechanism in SCRAM_MECHANISMS:
            credential = self._node.scram_credential(user, mechanism)
            if credential is None:
                continue
            if self._verified.get((user, mechanism)) == (credential, digest):
                return True
            if password_matches(mechanism, credential, password):
                if len(self._verified) >= _REMEMBERED:
                    self._verified.clear()
                self._verified[(user, mechanism)] = (credential, digest)
                return True
        return False

    def allowed(self, user: str, host: str, access: Access, subject: str | None) -> bool:
        authorization = self._node.authorization
        if authorization is None:
            return True
        authorizer = authorization.current()
        principal = f"User:{user}"
        if access is Access.ADMIN or subject is None:
            return authorizer.authorize(
                principal, host, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
            )
        operation = AclOperation.DESCRIBE if access is Access.READ else AclOperation.WRITE
        return authorizer.authorize(
            principal, host, operation, ResourceType.TOPIC, topic_of_subject(subject)
        )
