"""The node's HTTP endpoints on `http.listeners`: `/metrics` (Prometheus' text format, or
OpenMetrics when the scraper asks for it), `/health` (200 while the process serves HTTP at all)
and `/ready` (200 once the node serves its clients, 503 with the reason before: `readiness`).
Every other path is 404, any method but GET and HEAD 405.

Unset, `http.listeners` is `http://127.0.0.1:9644` on a single node (Redpanda's admin port) and
none on a node of a larger cluster; empty turns it off. A default port that is taken is logged
and skipped; a configured listener that cannot be bound stops the node at start, and so does a
malformed value or an https listener without a key (https uses the node's `ssl.*` settings), in
one line (ConfigError). The listeners start before the rest of the node, so `/ready` answers
while the node recovers its logs and joins its cluster.

`/metrics` copies what it reports on the node's loop (`snapshot.py`) and builds and formats the
families in one worker thread of its own (`collector.py`), so a scrape of many partitions holds
the loop only for the copy.

A hostile client can hold little: 64 connections (503 beyond), a request head still incomplete
past 16 KiB (400), 5 s to send a head, 30 s idle between requests (`moldau.http_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import uvicorn
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from moldau.broker.observability.collector import SnapshotCollector
from moldau.broker.observability.readiness import NodeState, readiness
from moldau.broker.observability.snapshot import NodeSnapshot, take_snapshot
from moldau.config.cluster import ClusterLayout
from moldau.config.tls import server_context, tls_settings_from
from moldau.config.values import BrokerConfig, ConfigError
from moldau.http_server import HttpListener, bind, bound_url, parse_listeners, start_http_server

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["DEFAULT_LISTENER", "KEY", "HostedHttp"]

log = logging.getLogger(__name__)

KEY = "http.listeners"
DEFAULT_LISTENER = "http://127.0.0.1:9644"
MAX_CONNECTIONS = 64
MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 5.0
KEEP_ALIVE_S = 30


class HostedHttp:
    def __init__(
        self,
        listeners: list[HttpListener],
        *,
        explicit: bool,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.listeners = listeners
        self.explicit = explicit
        self.ssl_context = ssl_context
        self.urls: list[str] = []
        self._started = False
        self._servers: list[uvicorn.Server] = []
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._renderer: ThreadPoolExecutor | None = None

    @classmethod
    def of(cls, config: BrokerConfig, layout: ClusterLayout) -> HostedHttp:
        """ConfigError (one line) for a malformed value or an https listener without a key."""
        value = config.get(KEY)
        explicit = value is not None
        if value is None:
            value = DEFAULT_LISTENER if layout.standalone else ""
        try:
            listeners = parse_listeners(str(value))
        except ValueError as error:
            raise ConfigError(
                f"Invalid value {value} for configuration {KEY}: {error}; expected a "
                "comma-separated list of http[s]://HOST:PORT, or empty for none"
            ) from None
        context = None
        if any(listener.is_tls for listener in listeners):
            settings = tls_settings_from(config.get, where=f" ({KEY})")
            if settings.keystore is None:
                raise ConfigError(
                    f"{KEY} has an https listener but the node has no key: set "
                    "ssl.keystore.location (with ssl.keystore.type PEM or PKCS12), or use http"
                )
            context = server_context(settings, listener_name=KEY)
        return cls(listeners, explicit=explicit, ssl_context=context)

    async def start(self, node: BrokerServices) -> None:
        """Serve (once; later calls do nothing). ConfigError when a configured listener cannot
        be bound."""
        if self._started or not self.listeners:
            return
        self._started = True
        try:
            for listener in self.listeners:
                sock = bind(listener)
                self._sockets.append(sock)
                self.urls.append(bound_url(listener, sock))
        except OSError as error:
            await self.stop()
            addresses = ", ".join(listener.url for listener in self.listeners)
            if self.explicit:
                raise ConfigError(
                    f"{KEY}: cannot listen on {addresses}: {error.strerror or error}"
                ) from None
            log.warning("no metrics and health endpoints on %s (set %s): %s", addresses, KEY, error)
            return
        self._renderer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")
        app = build_app(node, self._renderer)
        for listener, sock in zip(self.listeners, self._sockets, strict=True):
            server = await start_http_server(
                app,
                sock,
                ssl_context=self.ssl_context if listener.is_tls else None,
                keep_alive_s=KEEP_ALIVE_S,
                max_head_bytes=MAX_HEAD_BYTES,
                max_connections=MAX_CONNECTIONS,
                head_timeout_s=HEAD_TIMEOUT_S,
            )
            self._servers.append(server)
            self._tasks.append(asyncio.create_task(server.main_loop(), name="node-http"))
        for url in self.urls:
            log.info("metrics and health endpoints on %s", url)

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
        if self._renderer is not None:
            self._renderer.shutdown(wait=False, cancel_futures=True)
            self._renderer = None
        self._servers.clear()
        self._tasks.clear()
        self._sockets.clear()
        self.urls.clear()


def build_app(node: BrokerServices, renderer: ThreadPoolExecutor) -> Starlette:
    # (async endpoints: they run on the node's loop, where what they read lives)
    async def metrics(request: Request) -> Response:
        snapshot = take_snapshot(node)
        accept = request.headers.get("accept", "")
        loop = asyncio.get_running_loop()
        body, content_type = await loop.run_in_executor(renderer, render, snapshot, accept)
        return Response(body, headers={"Content-Type": content_type})

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def ready(request: Request) -> Response:
        serving, reason = readiness(NodeState.of(node))
        return PlainTextResponse(reason + "\n", status_code=200 if serving else 503)

    return Starlette(
        routes=[
            Route("/metrics", metrics, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
        ]
    )


def render(snapshot: NodeSnapshot, accept: str) -> tuple[bytes, str]:
    """The exposition of a snapshot and of this process, in the format `accept` asks for (text
    unless OpenMetrics), with its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    ProcessCollector(registry=registry)
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
