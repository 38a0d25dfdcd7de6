"""The schema registry a node hosts on `schema.registry.listeners` (as Redpanda's brokers do):
a `moldau.registry` service running beside the broker in the node's process and event loop,
a client of the log that reaches this node through one of its own listeners.

Unset, a single node serves `http://127.0.0.1:8081` and a node of a larger cluster serves none;
a default port that is taken is logged and skipped, a configured one that cannot be bound stops
the node at start. A bad value stops it too, with one line (ConfigError), as do https listeners
without a key (`schema.registry.ssl.*` over the node's `ssl.*`: `RegistrySecurity`).

The registry reaches the node on a PLAINTEXT listener when there is one, else on the
inter-broker listener with the node's own TLS settings and SASL credentials, as another broker
would; its principal then needs the `_schemas` topic and the `schema-registry` group (a super
user, as the inter-broker one usually is).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from moldau.broker.schema_registry_security import RegistrySecurity
from moldau.config.cluster import ClusterLayout
from moldau.config.sasl import SASL_PROTOCOLS
from moldau.config.tls import tls_settings
from moldau.config.values import BrokerConfig, ConfigError
from moldau.http_server import cannot_listen, listeners_setting
from moldau.registry.listeners import DEFAULT_LISTENER, RegistryListener

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices
    from moldau.registry.service import RegistryService

__all__ = ["HostedRegistry"]

log = logging.getLogger(__name__)

KEY = "schema.registry.listeners"
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


class HostedRegistry:
    def __init__(
        self,
        listeners: list[RegistryListener],
        *,
        explicit: bool,
        security: RegistrySecurity | None = None,
    ) -> None:
        self.listeners = listeners
        self.explicit = explicit
        self.security = security or RegistrySecurity()
        self.service: RegistryService | None = None

    @classmethod
    def of(cls, config: BrokerConfig, layout: ClusterLayout) -> HostedRegistry:
        listeners, explicit = listeners_setting(
            config, KEY, default=DEFAULT_LISTENER, standalone=layout.standalone
        )
        if listeners and not layout.is_broker:
            raise ConfigError(f"{KEY} is set on a node without the broker role")
        security = RegistrySecurity.of(config, tls=any(listener.is_tls for listener in listeners))
        return cls(listeners, explicit=explicit, security=security)

    @property
    def urls(self) -> list[str]:
        return self.service.urls if self.service is not None else []

    async def start(self, node: BrokerServices) -> None:
        if not self.listeners:
            return
        from moldau.registry.service import RegistryService
        from moldau.registry.store import BROKERS_WAIT_S

        client_config = _client_config(node)
        if client_config is None:
            if self.explicit:
                raise ConfigError(
                    f"{KEY} needs a PLAINTEXT or an inter-broker listener on this node to reach it"
                )
            log.warning("no schema registry: it needs a PLAINTEXT listener on this node")
            return
        service = RegistryService(
            client_config=client_config,
            listeners=self.listeners,
            # (a cluster started all at once: wait for the other brokers to replicate
            # `_schemas` on; a single node has none)
            brokers_wait_s=0 if node.layout.standalone else BROKERS_WAIT_S,
            ssl_context=self.security.server,
            forwarding_ssl_context=self.security.forwarding,
            authority=self.security.authority(node),
        )
        try:
            await service.start()
        except OSError as error:
            await service.stop()
            cannot_listen(
                error,
                key=KEY,
                listeners=self.listeners,
                explicit=self.explicit,
                what="schema registry",
            )
            return
        self.service = service
        for url in service.urls:
            log.info("schema registry listening on %s", url)

    async def stop(self) -> None:
        service, self.service = self.service, None
        if service is not None:
            await service.stop()


def _client_config(node: BrokerServices) -> dict[str, Any] | None:
    """How the registry connects to this node: a PLAINTEXT listener, else the inter-broker one
    with the node's TLS settings and SASL credentials (None: neither exists)."""
    protocols = node.layout.security_protocols
    endpoints = node.advertised_endpoints()
    for endpoint in endpoints:
        if protocols.get(endpoint.name, endpoint.name) == "PLAINTEXT":
            return {"bootstrap.servers": f"{endpoint.host}:{endpoint.port}"}
    name = node.layout.inter_broker_listener_name
    inter_broker = next((e for e in endpoints if e.name == name), None)
    if name is None or inter_broker is None:
        return None
    protocol = protocols.get(name, name)
    settings: dict[str, Any] = {
        "bootstrap.servers": f"{inter_broker.host}:{inter_broker.port}",
        "security.protocol": protocol.lower(),
    }
    credentials = node.security.inter_broker_sasl
    if protocol in SASL_PROTOCOLS and credentials is not None:
        settings["sasl.mechanism"] = credentials.mechanism
        settings["sasl.username"] = credentials.username
        settings["sasl.password"] = credentials.password
    if protocol in _TLS_PROTOCOLS:
        tls = tls_settings(node.config, name)
        if tls.trusted_pem is not None:
            settings["ssl.ca.pem"] = tls.trusted_pem.decode("ascii")
        if tls.keystore is not None:
            settings["ssl.certificate.pem"] = tls.keystore.chain_pem.decode("ascii")
            settings["ssl.key.pem"] = tls.keystore.key_pem.decode("ascii")
            settings["ssl.key.password"] = tls.keystore.password
        if not tls.check_hostname:
            settings["ssl.endpoint.identification.algorithm"] = "none"
    return settings
