"""Client settings, named and defaulted as librdkafka / confluent-kafka name them.

A settings mapping (`{"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}`) becomes a
`ClientConfig`; unknown names and malformed values raise `ConfigException` naming the setting.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Final

from moldau.client.errors import ConfigException

__all__ = ["DEFAULTS", "ClientConfig", "parse_bootstrap_servers"]

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"

DEFAULTS: Final[Mapping[str, Any]] = {
    # common
    "bootstrap.servers": DEFAULT_BOOTSTRAP,
    "client.id": "moldau",
    "request.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
    "metadata.max.age.ms": 300000,
    "retries": 2147483647,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    # producer
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1000000,
    "batch.num.messages": 10000,
    "compression.type": "none",
    "message.timeout.ms": 300000,
    "message.max.bytes": 1000000,
    "partitioner": "murmur2_random",
    "max.in.flight.requests.per.connection": 5,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
    # consumer
    "group.id": None,
    "group.instance.id": None,
    "auto.offset.reset": "latest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "isolation.level": "read_committed",
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 500,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576,
    "allow.auto.create.topics": False,
    "client.rack": "",  # KIP-392: read from a replica in this rack when the broker offers one
    "partition.assignment.strategy": "range",
    "group.protocol": "classic",  # or consumer: KIP-848 (moldau.client.consumer_group)
    "group.remote.assignor": None,  # group.protocol=consumer: the coordinator's assignor
    # security (moldau.client.tls, moldau.client.sasl): plaintext, ssl, sasl_plaintext, sasl_ssl
    "security.protocol": "plaintext",
    "sasl.mechanism": "GSSAPI",
    "sasl.username": None,
    "sasl.password": None,
    "sasl.jaas.config": None,
    "sasl.oauthbearer.config": None,
    "enable.sasl.oauthbearer.unsecure.jwt": False,
    "oauth_cb": None,  # confluent-kafka's token callback: oauth_cb(sasl.oauthbearer.config)
    "ssl.ca.location": None,
    "ssl.ca.pem": None,
    "ssl.certificate.location": None,
    "ssl.certificate.pem": None,
    "ssl.key.location": None,
    "ssl.key.pem": None,
    "ssl.key.password": None,
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    # the Java client's names (moldau.client.tls): PEM or PKCS12 stores, protocol versions
    "ssl.keystore.type": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.keystore.key": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.certificates": None,
    "ssl.truststore.password": None,
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.protocol": "TLSv1.3",
    "ssl.cipher.suites": None,
    "ssl.endpoint.identification.algorithm": "https",
    "enable.ssl.certificate.verification": True,
}

_ALIASES: Final[Mapping[str, str]] = {
    "metadata.broker.list": "bootstrap.servers",
    "compression.codec": "compression.type",
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "oauth.cb": "oauth_cb",  # (a keyword argument's underscores become dots)
}


class ClientConfig:
    """Validated client settings; read them with `get_int`, `get_str`, `get_bool`."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        values = dict(DEFAULTS)
        merged = dict(settings or {})
        merged.update({name.replace("_", "."): value for name, value in overrides.items()})
        for name, value in merged.items():
            canonical = _ALIASES.get(name, name)
            if canonical not in DEFAULTS:
                close = difflib.get_close_matches(name, DEFAULTS, n=1)
                hint = f"did you mean '{close[0]}'?" if close else "see the client's README"
                raise ConfigException(f"unknown client setting '{name}' ({hint})")
            values[canonical] = value
        self._values = values

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def get(self, name: str) -> Any:
        return self._values[_ALIASES.get(name, name)]

    def get_str(self, name: str) -> str:
        value = self.get(name)
        return "" if value is None else str(value)

    def get_optional_str(self, name: str) -> str | None:
        value = self.get(name)
        return None if value in (None, "") else str(value)

    def get_int(self, name: str) -> int:
        value = self.get(name)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigException(f"setting '{name}' must be an integer, got {value!r}") from None

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigException(f"setting '{name}' must be true or false, got {value!r}")

    @property
    def bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_bootstrap_servers(self.get_str("bootstrap.servers"))

    @property
    def request_timeout(self) -> float:
        return self.get_int("request.timeout.ms") / 1000


def parse_bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """`"host:port,host2:port2"` (optionally `PLAINTEXT://host:port`) as (host, port) pairs."""
    servers = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, separator, port = item.rpartition(":")
        if not separator:
            host, port = item, "9092"
        host = host.strip("[]") or "127.0.0.1"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigException(
                f"bootstrap server '{item}' is not host:port (example: 127.0.0.1:9092)"
            )
        servers.append((host, int(port)))
    if not servers:
        raise ConfigException("no bootstrap servers given (example: -b 127.0.0.1:9092)")
    return servers
