"""A node's TLS: what each SSL listener serves with, and how the node itself connects to the
inter-broker and controller listeners of other nodes (Kafka's ChannelBuilders, per listener).

`NodeSecurity.of(config, layout)` reads and loads everything when the node is made, so that a
listener whose key, password or truststore is wrong stops the node before it binds anything
(ConfigError, one line); nothing is served in the clear instead.

Next (SASL): a SASL_SSL listener will get its `TlsServer` here as an SSL one does, plus its
enabled mechanisms; the connection starts unauthenticated and SaslAuthenticate sets the
principal that a TLS certificate sets today.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from moldau.config.cluster import ClusterLayout
from moldau.config.tls import client_context, server_context, tls_settings
from moldau.config.values import BrokerConfig, ConfigError
from moldau.net.principal import PrincipalMappingError, principal_builder
from moldau.net.tls import TlsServer

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class NodeSecurity:
    listeners: dict[str, TlsServer] = field(default_factory=dict)  # SSL listeners by name
    inter_broker: ssl.SSLContext | None = None  # connecting to brokers' inter-broker listener
    controller: ssl.SSLContext | None = None  # connecting to controllers

    @classmethod
    def of(cls, config: BrokerConfig, layout: ClusterLayout) -> NodeSecurity:
        protocols = layout.security_protocols
        servers = {}
        for listener in layout.listeners:
            if protocols.get(listener.name) in TLS_PROTOCOLS:
                servers[listener.name] = listener_tls(config, listener.name)
        return cls(
            listeners=servers,
            inter_broker=_client(config, layout, layout.inter_broker_listener_name),
            controller=_client(
                config,
                layout,
                layout.controller_listener_names[0] if layout.controller_listener_names else None,
            ),
        )


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
