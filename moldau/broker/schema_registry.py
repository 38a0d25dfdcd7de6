"""The schema registry a node hosts on `schema.registry.listeners` (as Redpanda's brokers do):
a `moldau.registry` service running beside the broker in the node's process and event loop,
a client of the log that reaches this node through its own first PLAINTEXT listener.

Unset, a single node serves `http://127.0.0.1:8081` and a node of a larger cluster serves none;
a default port that is taken is logged and skipped, a configured one that cannot be bound stops
the node at start. A bad value stops it too, with one line (ConfigError).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig, ConfigError
from moldau.registry.listeners import DEFAULT_LISTENER, RegistryListener, parse_listeners

if TYPE_CHECKING:
    from moldau.broker.node import Node
    from moldau.registry.service import RegistryService

__all__ = ["HostedRegistry"]

log = logging.getLogger(__name__)

KEY = "schema.registry.listeners"


class HostedRegistry:
    def __init__(self, listeners: list[RegistryListener], *, explicit: bool) -> None:
        self.listeners = listeners
        self.explicit = explicit
        self.service: RegistryService | None = None

    @classmethod
    def of(cls, config: BrokerConfig, layout: ClusterLayout) -> HostedRegistry:
        value = config.get(KEY)
        explicit = value is not None
        if value is None:
            value = DEFAULT_LISTENER if layout.standalone else ""
        try:
            listeners = parse_listeners(str(value))
        except ValueError as error:
            raise ConfigError(
                f"Invalid value {value} for configuration {KEY}: {error}; expected a "
                "comma-separated list of http://HOST:PORT, or empty for none"
            ) from None
        if listeners and not layout.is_broker:
            raise ConfigError(f"{KEY} is set on a node without the broker role")
        return cls(listeners, explicit=explicit)

    @property
    def urls(self) -> list[str]:
        return self.service.urls if self.service is not None else []

    async def start(self, node: Node) -> None:
        if not self.listeners:
            return
        from moldau.registry.service import RegistryService
        from moldau.registry.store import BROKERS_WAIT_S

        plaintext = [
            endpoint
            for endpoint in node.advertised_endpoints()
            if node.layout.security_protocols.get(endpoint.name, endpoint.name) == "PLAINTEXT"
        ]
        if not plaintext:
            if self.explicit:
                raise ConfigError(f"{KEY} needs a PLAINTEXT listener on this node to reach it")
            log.warning("no schema registry: it needs a PLAINTEXT listener on this node")
            return
        bootstrap = f"{plaintext[0].host}:{plaintext[0].port}"
        service = RegistryService(
            client_config={"bootstrap.servers": bootstrap},
            listeners=self.listeners,
            # (a cluster started all at once: wait for the other brokers to replicate
            # `_schemas` on; a single node has none)
            brokers_wait_s=0 if node.layout.standalone else BROKERS_WAIT_S,
        )
        try:
            await service.start()
        except OSError as error:
            await service.stop()
            addresses = ", ".join(listener.url for listener in self.listeners)
            if self.explicit:
                raise ConfigError(
                    f"{KEY}: cannot listen on {addresses}: {error.strerror or error}"
                ) from None
            log.warning("no schema registry on %s (set %s to move it): %s", addresses, KEY, error)
            return
        self.service = service
        for url in service.urls:
            log.info("schema registry listening on %s", url)

    async def stop(self) -> None:
        service, self.service = self.service, None
        if service is not None:
            await service.stop()
