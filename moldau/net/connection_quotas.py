"""Kafka's connection limits, checked when a connection arrives.

- `max.connections.per.ip` (with `max.connections.per.ip.overrides`, `host:count,...`): a
  connection beyond its address's limit is closed at once, as Kafka drops it.
- `max.connections` for the node and `listener.name.<listener>.max.connections` per listener:
  a connection beyond either is closed at once (Kafka's acceptor instead leaves it waiting in
  the socket backlog until a slot frees). Connections on the inter-broker listener do not
  count against the node's limit, so replication is never locked out by clients; Kafka closes
  another listener's least recently used connection in that case, Moldau only admits it.

`admit(listener, host)` says why a connection is refused (None: admitted, and counted until
`release`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

UNLIMITED = 2**31 - 1


class ConnectionQuotas:
    def __init__(
        self,
        *,
        max_connections: int = UNLIMITED,
        per_ip: int = UNLIMITED,
        per_ip_overrides: Mapping[str, int] | None = None,
        per_listener: Mapping[str, int] | None = None,
        exempt_listener: str | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.per_listener = dict(per_listener or {})
        self.exempt_listener = exempt_listener
        self._by_ip: Counter[str] = Counter()
        self._by_listener: Counter[str] = Counter()
        self._counted = 0  # connections counted against `max_connections`

    def admit(self, listener: str, host: str) -> str | None:
        ip_limit = self.per_ip_overrides.get(host, self.per_ip)
        if self._by_ip[host] >= ip_limit:
            return f"{host} has {self._by_ip[host]} connections (max.connections.per.ip {ip_limit})"
        listener_limit = self.per_listener.get(listener, UNLIMITED)
        if self._by_listener[listener] >= listener_limit:
            return (
                f"listener {listener} has {self._by_listener[listener]} connections "
                f"(listener.name.{listener.lower()}.max.connections {listener_limit})"
            )
        counted = listener != self.exempt_listener
        if counted and self._counted >= self.max_connections:
            return (
                f"the node has {self._counted} connections (max.connections {self.max_connections})"
            )
        self._by_ip[host] += 1
        self._by_listener[listener] += 1
        self._counted += counted
        return None

    def release(self, listener: str, host: str) -> None:
        self._by_ip[host] -= 1
        if self._by_ip[host] <= 0:
            del self._by_ip[host]
        self._by_listener[listener] -= 1
        if listener != self.exempt_listener:
            self._counted -= 1

    def count(self, host: str) -> int:
        return self._by_ip[host]


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count` pairs separated by commas; ValueError
    for one that is not. A host may be an address or a name (resolved by the caller)."""
    overrides: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, separator, count = item.rpartition(":")
        if not separator or not host:
            raise ValueError(f"{item!r} is not host:count")
        try:
            limit = int(count)
        except ValueError:
            raise ValueError(f"{item!r}: {count!r} is not a number of connections") from None
        if limit < 0:
            raise ValueError(f"{item!r}: the number of connections must not be negative")
        overrides[host.strip("[]")] = limit
    return overrides
