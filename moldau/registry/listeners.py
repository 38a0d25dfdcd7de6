"""`schema.registry.listeners`: where the registry serves its HTTP API.

A comma-separated list of `http://host:port` or `https://host:port` (port 0: any free port;
parsed by `moldau.http_server`, as every HTTP listener of a node). Unset, a single node
(controller and broker in one process, no other voters) serves `http://127.0.0.1:8081`, the
registry's customary port, and a node of a larger cluster serves none; empty turns it off.
"""

from __future__ import annotations

from moldau.http_server import HttpListener, parse_listeners

__all__ = ["DEFAULT_LISTENER", "RegistryListener", "parse_listeners"]

DEFAULT_LISTENER = "http://127.0.0.1:8081"

RegistryListener = HttpListener
