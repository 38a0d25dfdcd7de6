"""The authorizer settings, as Kafka reads them: `authorizer.class.name`, `super.users`,
`allow.everyone.if.no.acl.found`. Checked at start, so a node configured for an authorizer it
does not have stops with one line instead of running with everything allowed."""

from __future__ import annotations

from dataclasses import dataclass

from moldau.config.values import BrokerConfig, ConfigError

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str]
    allow_if_no_acl: bool

    @classmethod
    def of(cls, config: BrokerConfig) -> AuthorizerSettings | None:
        """None when `authorizer.class.name` is empty; ConfigError for an authorizer Moldau
        does not have or a malformed `super.users`."""
        name = str(config.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name != STANDARD_AUTHORIZER:
            raise ConfigError(
                f"authorizer.class.name={name} is not an authorizer Moldau has; use "
                f"{STANDARD_AUTHORIZER} (ACLs in the metadata log) or leave it empty"
            )
        return cls(
            parse_super_users(config.get("super.users")),
            bool(config.get("allow.everyone.if.no.acl.found")),
        )


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`)."""
    users = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        kind, separator, name = item.partition(":")
        if not separator or not kind or not name:
            raise ConfigError(
                f"super.users: {item!r} is not a principal of the form Type:name (User:admin)"
            )
        users.add(item)
    return frozenset(users)
