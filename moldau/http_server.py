"""The HTTP servers a node hosts beside its Kafka listeners (the schema registry's API, the
metrics and health endpoints): their `http[s]://HOST:PORT[,...]` settings, their sockets, and
uvicorn serving an ASGI app on the node's own event loop.

uvicorn bounds a request head's size (`h11_max_incomplete_event_size`, answered 400) and the
idle time between requests (`timeout_keep_alive`), and answers 503 past `limit_concurrency`
connections; it does not bound how long a head may take to arrive, so a client trickling one
header a minute (slowloris) would hold its connection for good. `head_timeout_s` closes a
connection whose request line and headers are not all in that long after it connected or
after its previous answer.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HttpListener", "bind", "bound_url", "parse_listeners", "start_http_server"]


@dataclass(frozen=True, slots=True)
class HttpListener:
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


def parse_listeners(value: str) -> list[HttpListener]:
    """The listeners named by `value`, a comma-separated list of `http://HOST:PORT` or
    `https://HOST:PORT` (port 0: any free port; no host: every address); ValueError saying
    what is wrong and what is expected."""
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
        listeners.append(HttpListener(host or "0.0.0.0", int(port), scheme.lower()))
    return listeners


def bind(listener: HttpListener, *, backlog: int = 128) -> socket.socket:
    """A listening, non-blocking socket on the listener's address (OSError if it cannot be
    bound)."""
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listener.host, listener.port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def bound_url(listener: HttpListener, sock: socket.socket) -> str:
    """The URL a client reaches a bound listener at (its port once bound, its host as
    configured when it listens on every address)."""
    host, port = sock.getsockname()[:2]
    shown = listener.host if host in ("0.0.0.0", "::") else host
    return HttpListener(shown, port, listener.scheme).url


async def start_http_server(
    app: ASGIApp,
    sock: socket.socket,
    *,
    ssl_context: ssl.SSLContext | None = None,
    keep_alive_s: int = 30,
    max_head_bytes: int = 64 * 1024,
    max_connections: int | None = None,
    head_timeout_s: float | None = None,
) -> uvicorn.Server:
    """uvicorn serving `app` on a bound, listening socket (TLS with `ssl_context`), on the
    running loop; the caller runs its `main_loop()` and shuts it down. `max_head_bytes`: the
    largest request line and headers (400 beyond); `max_connections`: connections (and
    requests in progress) before new requests are answered 503; `head_timeout_s`: see the
    module's docstring (None: no deadline)."""
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=keep_alive_s,
        timeout_graceful_shutdown=3,
        h11_max_incomplete_event_size=max_head_bytes,
        limit_concurrency=max_connections,
        http=_with_head_deadline(head_timeout_s) if head_timeout_s is not None else "h11",
        ws="none",
    )
    config.load()
    config.ssl = ssl_context  # (an SSLContext built in memory: uvicorn would read files)
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    return server


def _with_head_deadline(timeout_s: float) -> type[H11Protocol]:
    class HeadDeadlineProtocol(_HeadDeadline):
        head_timeout_s = timeout_s

    return HeadDeadlineProtocol


class _HeadDeadline(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head has not arrived whole
    within `head_timeout_s` of the connection or of the previous answer. h11 is IDLE on the
    client's side until a whole head has been read."""

    head_timeout_s: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()
