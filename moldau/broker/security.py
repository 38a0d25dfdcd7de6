"""A node's security: what each TLS and SASL listener serves with, and how the node itself
connects to the inter-broker and controller listeners of other nodes (Kafka's ChannelBuilders,
per listener).

`NodeSecurity.of(config, layout, scram_credentials=...)` reads and loads everything when the
node is made, so that a listener whose key, password, truststore, mechanisms or JAAS users are
wrong stops the node before it binds anything (ConfigError, one line); nothing is served in the
clear or unauthenticated instead.

- SSL and SASL_SSL listeners get a `TlsServer`; SASL_PLAINTEXT and SASL_SSL listeners a
  `SaslAuthenticator` (their enabled mechanisms, PLAIN users from JAAS, SCRAM credentials from
  the metadata image through `scram_credentials`, OAUTHBEARER's token validator: Kafka's
  unsecured one, or KIP-768's over a `JwksSource`, whose refreshes run between `start()` and
  `stop()`).
- When the inter-broker (controller) listener is SSL or SASL_SSL the node connects to it with
  TLS; when it is SASL, it authenticates with `sasl.mechanism.inter.broker.protocol`
  (`sasl.mechanism.controller.protocol`) and the username and password of that listener's JAAS
  config for the mechanism, as Kafka's brokers do.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field

from moldau.broker.authentication import CredentialLookup, SaslAuthenticator, SaslSession
from moldau.broker.jwks import JwksSource
from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.config.cluster import ClusterLayout
from moldau.config.oauthbearer import (
    JwksValidatorSettings,
    OAuthBearerSettings,
    check_validator_keys,
)
from moldau.config.sasl import (
    SASL_PROTOCOLS,
    SaslCredentials,
    node_credentials,
    sasl_listener_settings,
)
from moldau.config.tls import client_context, listener_overrides, server_context, tls_settings
from moldau.config.values import BrokerConfig, ConfigError
from moldau.net.connection import CloseConnection, ConnectionInfo
from moldau.net.connection_quotas import UNLIMITED, ConnectionQuotas, parse_overrides
from moldau.net.principal import PrincipalMappingError, principal_builder
from moldau.net.tls import TlsServer
from moldau.protocol.sasl.token_validation import (
    SignedTokenValidator,
    TokenValidator,
    UnsecuredTokenValidator,
)

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class NodeSecurity:
    listeners: dict[str, TlsServer] = field(default_factory=dict)  # TLS listeners by name
    inter_broker: ssl.SSLContext | None = None  # connecting to brokers' inter-broker listener
    controller: ssl.SSLContext | None = None  # connecting to controllers
    sasl: dict[str, SaslAuthenticator] = field(default_factory=dict)  # SASL listeners by name
    inter_broker_sasl: SaslCredentials | None = None
    controller_sasl: SaslCredentials | None = None
    jwks: tuple[JwksSource, ...] = ()  # OAUTHBEARER validators' key sets, refreshed

    @classmethod
    def of(
        cls,
        config: BrokerConfig,
        layout: ClusterLayout,
        *,
        scram_credentials: CredentialLookup | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> NodeSecurity:
        protocols = layout.security_protocols
        servers = {}
        authenticators = {}
        sources = []
        lookup = scram_credentials or (lambda user, mechanism: None)
        for listener in layout.listeners:
            if protocols.get(listener.name) in TLS_PROTOCOLS:
                servers[listener.name] = listener_tls(config, listener.name)
            if protocols.get(listener.name) in SASL_PROTOCOLS:
                settings = sasl_listener_settings(config, listener.name)
                validator = None
                if settings.oauthbearer is not None:
                    validator, source = token_validator(settings.oauthbearer, listener.name)
                    sources += [source] if source is not None else []
                authenticators[listener.name] = SaslAuthenticator(
                    settings, lookup, token_validator=validator, clock=clock
                )
        check_validator_keys(config, _validating(authenticators))
        inter_broker = layout.inter_broker_listener_name
        controller = (
            layout.controller_listener_names[0] if layout.controller_listener_names else None
        )
        inter_broker_sasl = _credentials(
            config, layout, inter_broker, "sasl.mechanism.inter.broker.protocol"
        )
        if inter_broker_sasl is not None and inter_broker in authenticators:
            enabled = authenticators[inter_broker].settings.mechanisms
            if inter_broker_sasl.mechanism not in enabled:
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol={inter_broker_sasl.mechanism} is not "
                    f"enabled on the inter-broker listener {inter_broker} "
                    f"({','.join(enabled)}); add it to its sasl.enabled.mechanisms"
                )
        return cls(
            listeners=servers,
            inter_broker=_client(config, layout, inter_broker),
            controller=_client(config, layout, controller),
            sasl=authenticators,
            inter_broker_sasl=inter_broker_sasl,
            controller_sasl=_credentials(
                config, layout, controller, "sasl.mechanism.controller.protocol"
            ),
            jwks=tuple(sources),
        )

    async def start(self) -> None:
        """Begin fetching and refreshing the OAUTHBEARER validators' key sets."""
        for source in self.jwks:
            await source.start()

    async def stop(self) -> None:
        for source in self.jwks:
            await source.stop()

    def authenticator(self, info: ConnectionInfo) -> SaslSession:
        """The SASL session of a connection that has not authenticated yet."""
        authenticator = self.sasl.get(info.listener_name)
        if authenticator is None:  # (never from a listener: it authenticates only SASL's)
            raise CloseConnection(f"unauthenticated on {info.listener_name}, which has no SASL")
        return authenticator.session(info)


def token_validator(
    settings: OAuthBearerSettings, listener_name: str
) -> tuple[TokenValidator, JwksSource | None]:
    """A listener's OAUTHBEARER validator and, for KIP-768's, the key set it reads (ConfigError:
    a JWKS file that cannot be read)."""
    if not isinstance(settings, JwksValidatorSettings):
        return (
            UnsecuredTokenValidator(
                principal_claim=settings.principal_claim,
                scope_claim=settings.scope_claim,
                required_scope=settings.required_scope,
                clock_skew_ms=settings.clock_skew_ms,
            ),
            None,
        )
    source = JwksSource(settings, listener_name=listener_name)
    validator = SignedTokenValidator(
        source.keys,
        missing_key=source.expedite,
        expected_audience=settings.expected_audience,
        expected_issuer=settings.expected_issuer,
        subject_claim=settings.subject_claim,
        scope_claim=settings.scope_claim,
        clock_skew_s=settings.clock_skew_s,
    )
    return validator, source


def _validating(authenticators: dict[str, SaslAuthenticator]) -> set[str]:
    """The listeners whose OAUTHBEARER tokens are checked against a JWKS."""
    return {
        name
        for name, authenticator in authenticators.items()
        if isinstance(authenticator.settings.oauthbearer, JwksValidatorSettings)
    }


def listener_tls(config: BrokerConfig, listener_name: str) -> TlsServer:
    settings = tls_settings(config, listener_name)
    try:
        principal_of = principal_builder(settings.principal_mapping_rules)
    except PrincipalMappingError as error:
        raise ConfigError(
            f"ssl.principal.mapping.rules: {error} (listener {listener_name})"
        ) from None
    return TlsServer(
        context=server_context(settings, listener_name=listener_name),
        principal_of=principal_of,
    )


def _client(
    config: BrokerConfig, layout: ClusterLayout, listener_name: str | None
) -> ssl.SSLContext | None:
    if listener_name is None or layout.security_protocols.get(listener_name) not in TLS_PROTOCOLS:
        return None
    return client_context(tls_settings(config, listener_name), listener_name=listener_name)


def _credentials(
    config: BrokerConfig, layout: ClusterLayout, listener_name: str | None, setting: str
) -> SaslCredentials | None:
    if listener_name is None or layout.security_protocols.get(listener_name) not in SASL_PROTOCOLS:
        return None
    return node_credentials(
        config,
        listener_name,
        setting=setting,
        controller=setting == "sasl.mechanism.controller.protocol",
    )


def connection_quotas(config: BrokerConfig, layout: ClusterLayout) -> ConnectionQuotas:
    """The node's connection limits (`moldau.net.connection_quotas`); ConfigError for
    overrides that do not parse, as Kafka refuses them. Host names in the overrides are
    resolved once, here."""
    per_ip = int(config.get("max.connections.per.ip"))
    try:
        named = parse_overrides(str(config.get("max.connections.per.ip.overrides") or ""))
    except ValueError as error:
        raise ConfigError(f"max.connections.per.ip.overrides: {error}") from None
    if per_ip == 0 and not named:
        raise ConfigError(
            "max.connections.per.ip is 0, which is allowed only with "
            "max.connections.per.ip.overrides (nobody could connect)"
        )
    overrides = {}
    for host, limit in named.items():
        try:
            overrides[socket.gethostbyname(host)] = limit
        except OSError as error:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve {host}: {error}"
            ) from None
    per_listener = {}
    for property_name, (listener, key) in listener_overrides(config).items():
        if key == "max.connections":
            limit = int(config.raw_unknown(property_name) or UNLIMITED)
            if limit < 0:
                raise ConfigError(f"{property_name} must not be negative")
            per_listener[listener] = limit
    return ConnectionQuotas(
        max_connections=int(config.get("max.connections")),
        per_ip=per_ip,
        per_ip_overrides=overrides,
        per_listener=per_listener,
        exempt_listener=layout.inter_broker_listener_name,
    )
