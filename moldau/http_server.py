"""The HTTP servers a node hosts beside its Kafka listeners (the schema registry's API, the
metrics and health endpoints): their `http[s]://HOST:PORT[,...]` settings (`listeners_setting`),
their sockets, and uvicorn serving an ASGI app on the node's own event loop (`HttpServers`).

uvicorn bounds a request head's size (`h11_max_incomplete_event_size`, answered 400) and the
idle time between requests (`timeout_keep_alive`), and answers 503 past `limit_concurrency`
connections; it does not bound how long a head may take to arrive, so a client trickling one
header a minute (slowloris) would hold its connection for good. `head_timeout_s` closes a
connection whose request line and headers are not all in that long after it connected or
after its previous answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from moldau.config.values import BrokerConfig, ConfigError

__all__ = [
    "HttpLimits",
    "HttpListener",
    "HttpServers",
    "bind",
    "bound_url",
    "cannot_listen",
    "listeners_setting",
    "parse_listeners",
    "start_http_server",
]

log = logging.getLogger(__name__)


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


def listeners_setting(
    config: BrokerConfig, key: str, *, default: str, standalone: bool
) -> tuple[list[HttpListener], bool]:
    """The listeners the property `key` names, and whether it is set: unset, `default` on a
    single node and none on a node of a larger cluster; empty, none. ConfigError (one line) for
    a malformed value."""
    value = config.get(key)
    explicit = value is not None
    if value is None:
        value = default if standalone else ""
    try:
        return parse_listeners(str(value)), explicit
    except ValueError as error:
        raise ConfigError(
            f"Invalid value {value} for configuration {key}: {error}; expected a "
            "comma-separated list of http[s]://HOST:PORT, or empty for none"
        ) from None


def cannot_listen(
    error: OSError, *, key: str, listeners: list[HttpListener], explicit: bool, what: str
) -> None:
    """Listeners that could not be bound: ConfigError (one line) when `key` named them, else
    (a default port another process holds) a warning that `what` is not served."""
    addresses = ", ".join(listener.url for listener in listeners)
    if explicit:
        raise ConfigError(
            f"{key}: cannot listen on {addresses}: {error.strerror or error}"
        ) from None
    log.warning("no %s on %s (set %s to move it): %s", what, addresses, key, error)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    """What one client may make a server hold. `max_head_bytes`: a request head still
    incomplete past it is refused (400); `max_connections`: connections (and requests in
    progress) before new requests are answered 503; `head_timeout_s`: see the module's
    docstring (None: no deadline)."""

    keep_alive_s: int = 30
    max_head_bytes: int = 64 * 1024
    max_connections: int | None = None
    head_timeout_s: float | None = None


class HttpServers:
    """One ASGI app served on a list of listeners, on the running loop: `bind` them all
    (OSError when one cannot be bound; `urls` then says where each listens), `serve`, `stop`."""

    def __init__(
        self,
        listeners: list[HttpListener],
        *,
        name: str,
        ssl_context: ssl.SSLContext | None = None,
        limits: HttpLimits = HttpLimits(),
    ) -> None:
        """`ssl_context`: the https listeners' (required when there is one)."""
        if ssl_context is None and any(listener.is_tls for listener in listeners):
            raise ValueError("an https listener needs an ssl_context")
        self.listeners = listeners
        self.name = name
        self.ssl_context = ssl_context
        self.limits = limits
        self.urls: list[str] = []
        self._sockets: list[socket.socket] = []
        self._servers: list[uvicorn.Server] = []
        self._tasks: list[asyncio.Task[None]] = []

    def bind(self) -> None:
        for listener in self.listeners:
            sock = bind(listener)
            self._sockets.append(sock)
            self.urls.append(bound_url(listener, sock))

    async def serve(self, app: ASGIApp) -> None:
        for listener, sock in zip(self.listeners, self._sockets, strict=True):
            server = await start_http_server(
                app,
                sock,
                ssl_context=self.ssl_context if listener.is_tls else None,
                limits=self.limits,
            )
            self._servers.append(server)
            self._tasks.append(asyncio.create_task(server.main_loop(), name=self.name))

    async def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.shutdown()
        for sock in self._sockets:
            sock.close()
        self._servers.clear()
        self._tasks.clear()
        self._sockets.clear()
        self.urls.clear()


async def start_http_server(
    app: ASGIApp,
    sock: socket.socket,
    *,
    ssl_context: ssl.SSLContext | None = None,
    limits: HttpLimits = HttpLimits(),
) -> uvicorn.Server:
    """uvicorn serving `app` on a bound, listening socket (TLS with `ssl_context`), on the
    running loop; the caller runs its `main_loop()` and shuts it down."""
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=limits.keep_alive_s,
        timeout_graceful_shutdown=3,
        h11_max_incomplete_event_size=limits.max_head_bytes,
        limit_concurrency=limits.max_connections,
        http=(
            _with_head_deadline(limits.head_timeout_s)
            if limits.head_timeout_s is not None
            else "h11"
        ),
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
