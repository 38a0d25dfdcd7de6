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
past 16 KiB (400), 5 s to send a head, 30 s idle between requests (`LIMITS`, applied by
`moldau.http_server`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

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
from moldau.http_server import (
    HttpLimits,
    HttpListener,
    HttpServers,
    cannot_listen,
    listeners_setting,
)

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["DEFAULT_LISTENER", "KEY", "HostedHttp", "render"]

log = logging.getLogger(__name__)

KEY = "http.listeners"
DEFAULT_LISTENER = "http://127.0.0.1:9644"
LIMITS = HttpLimits(
    keep_alive_s=30, max_head_bytes=16 * 1024, max_connections=64, head_timeout_s=5.0
)


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
        self._servers = HttpServers(
            listeners, name="node-http", ssl_context=ssl_context, limits=LIMITS
        )
        self._started = False
        self._renderer: ThreadPoolExecutor | None = None

    @classmethod
    def of(cls, config: BrokerConfig, layout: ClusterLayout) -> HostedHttp:
        """ConfigError (one line) for a malformed value or an https listener without a key."""
        listeners, explicit = listeners_setting(
            config, KEY, default=DEFAULT_LISTENER, standalone=layout.standalone
        )
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
            self._servers.bind()
        except OSError as error:
            await self.stop()
            cannot_listen(
                error,
                key=KEY,
                listeners=self.listeners,
                explicit=self.explicit,
                what="metrics and health endpoints",
            )
            return
        self._renderer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")
        await self._servers.serve(build_app(node, self._renderer))
        for url in self.urls:
            log.info("metrics and health endpoints on %s", url)

    @property
    def urls(self) -> list[str]:
        """Where the listeners listen, once bound."""
        return self._servers.urls

    async def stop(self) -> None:
        await self._servers.stop()
        if self._renderer is not None:
            self._renderer.shutdown(wait=False, cancel_futures=True)
            self._renderer = None


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
