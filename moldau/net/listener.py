"""Listeners: `NAME://host:port` accepting Kafka connections, in the clear or over TLS.

An SSL listener is given a `TlsServer` (its context and principal mapping); each connection then
runs its own TLS session (moldau.net.tls) inside `KafkaConnection`, so the server socket itself
is plain TCP. `require_authentication` (SASL listeners) starts every connection
unauthenticated, its frames capped at MAX_FRAME_SIZE_BEFORE_AUTHENTICATION until SASL
authenticates it (the broker's dispatcher serves only ApiVersions and SASL meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import socket

from moldau.config.cluster import ListenerAddress as Endpoint
from moldau.net.connection import KafkaConnection, Processor
from moldau.net.memory_pool import RequestMemoryPool
from moldau.net.tls import TlsServer

log = logging.getLogger(__name__)

# Before authentication a peer may not make us allocate more than this for one frame (Kafka's
# default `sasl.server.max.receive.size`).
MAX_FRAME_SIZE_BEFORE_AUTHENTICATION = 512 * 1024


class Listener:
    """Accepts connections on one endpoint and owns them until `close()`."""

    def __init__(
        self,
        endpoint: Endpoint,
        processor: Processor,
        *,
        security_protocol: str,
        max_frame_size: int,
        tls: TlsServer | None = None,
        require_authentication: bool = False,
        idle_timeout_s: float | None = None,
        request_timeout_s: float | None = None,
        memory_pool: RequestMemoryPool | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._processor = processor
        self._security_protocol = security_protocol
        self._max_frame_size = max_frame_size
        self._tls = tls
        self._require_authentication = require_authentication
        self._idle_timeout_s = idle_timeout_s
        self._request_timeout_s = request_timeout_s
        self._memory_pool = memory_pool
        self._server: asyncio.Server | None = None
        self.connections: set[KafkaConnection] = set()
        self.bound_port: int = endpoint.port

    def _make_connection(self) -> KafkaConnection:
        connection = KafkaConnection(
            self._processor,
            listener_name=self.endpoint.name,
            security_protocol=self._security_protocol,
            max_frame_size=self._max_frame_size,
            max_frame_size_unauthenticated=(
                MAX_FRAME_SIZE_BEFORE_AUTHENTICATION if self._require_authentication else None
            ),
            on_close=self.connections.discard,
            idle_timeout_s=self._idle_timeout_s,
            request_timeout_s=self._request_timeout_s,
            memory_pool=self._memory_pool,
            tls=self._tls,
        )
        self.connections.add(connection)
        return connection

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.endpoint.host or "0.0.0.0"
        self._server = await loop.create_server(
            self._make_connection,
            host=host,
            port=self.endpoint.port,
            reuse_address=True,
            backlog=1024,
            start_serving=False,  # bound now (the port is known); accepting once the node is ready
        )
        sockets = self._server.sockets or ()
        for sock in sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sockets:
            self.bound_port = sockets[0].getsockname()[1]
        log.info(
            "listening on %s (port %d%s)",
            self.endpoint,
            self.bound_port,
            _security_note(self._tls is not None, self._require_authentication),
        )

    async def start_serving(self) -> None:
        if self._server is not None:
            await self._server.start_serving()

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    def stop_taking_requests(self) -> None:
        """Every connection answers what it has taken and takes no further request."""
        for connection in self.connections:
            connection.stop_taking_requests()

    async def wait_idle(self, timeout_s: float) -> None:
        """Wait (bounded) for in-flight requests on every connection to be answered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while any(c.in_flight for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        self.stop_accepting()
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except TimeoutError:
                pass


def _security_note(tls: bool, sasl: bool) -> str:
    return ", ".join(["", *(["TLS"] if tls else []), *(["SASL"] if sasl else [])])
