"""`schema.registry.listeners`: where the registry serves its HTTP API.

A comma-separated list of `http://host:port` or `https://host:port` (port 0: any free port).
Unset, a single node (controller and broker in one process, no other voters) serves
`http://127.0.0.1:8081`, the registry's customary port, and a node of a larger cluster serves
none; empty turns it off.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LISTENER", "RegistryListener", "parse_listeners"]

DEFAULT_LISTENER = "http://127.0.0.1:8081"


@dataclass(frozen=True, slots=True)
class RegistryListener:
    host: str
    port: int
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def is_tls(self) -> bool:
        return self.scheme == "https"


def parse_listeners(value: str) -> list[RegistryListener]:
    """The listeners named by `value` (ValueError saying what is wrong and what is expected)."""
    listeners = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        scheme, separator, rest = item.partition("://")
        if not separator or scheme.lower() not in ("http", "https"):
            raise ValueError(f"{item!r} is not an http://HOST:PORT or https://HOST:PORT address")
        host, colon, port = rest.rstrip("/").rpartition(":")
        host = host.strip("[]")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"{item!r} has no valid port (0-65535)")
        listeners.append(RegistryListener(host or "0.0.0.0", int(port), scheme.lower()))
    return listeners
