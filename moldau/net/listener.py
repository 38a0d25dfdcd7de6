"""Listeners: `NAME://host:port` accepting Kafka connections, in the clear or over TLS.

An SSL listener is given a `TlsServer` (its context and principal mapping); each connection then
runs its own TLS session (moldau.net.tls) inside `KafkaConnection`, so the server socket itself
is plain TCP. `require_authentication` (SASL listeners) starts every connection
unauthenticated, its frames capped at MAX_FRAME_SIZE_BEFORE_AUTHENTICATION until SASL
authenticates it (the broker's dispatcher serves only ApiVersions and SASL meanwhile).

`start` binds and listens at once, as Kafka's acceptor does, and the node accepts once it is
ready (`start_serving`): a port another process holds fails the start. (A socket bound but not
yet listening, as asyncio's `start_serving=False` leaves it, lets a second process with
SO_REUSEADDR bind the same port, and under uvloop both then serve it, sharing its connections.)
"""

from __future__ import annotations

import asyncio
import logging
import socket

from moldau.config.cluster import ListenerAddress as Endpoint
from moldau.net.connection import KafkaConnection, Processor
from moldau.net.connection_quotas import ConnectionQuotas
from moldau.net.memory_pool import RequestMemoryPool
from moldau.net.tls import TlsServer
from moldau.net.turns import TurnScheduler

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
        quotas: ConnectionQuotas | None = None,
        turns: TurnScheduler | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._turns = turns
        self._quotas = quotas
        self._processor = processor
        self._security_protocol = security_protocol
        self._max_frame_size = max_frame_size
        self._tls = tls
        self._require_authentication = require_authentication
        self._idle_timeout_s = idle_timeout_s
        self._request_timeout_s = request_timeout_s
        self._memory_pool = memory_pool
        self._servers: list[asyncio.Server] = []
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
            quotas=self._quotas,
            turns=self._turns,
        )
        self.connections.add(connection)
        return connection

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.endpoint.host or "0.0.0.0"
        sockets = await loop.run_in_executor(None, _listen, host, self.endpoint.port, BACKLOG)
        self.bound_port = sockets[0].getsockname()[1]
        for sock in sockets:
            self._servers.append(
                await loop.create_server(
                    self._make_connection, sock=sock, backlog=BACKLOG, start_serving=False
                )
            )
        log.info(
            "listening on %s (port %d%s)",
            self.endpoint,
            self.bound_port,
            _security_note(self._tls is not None, self._require_authentication),
        )

    async def start_serving(self) -> None:
        for server in self._servers:
            await server.start_serving()

    def stop_accepting(self) -> None:
        for server in self._servers:
            server.close()

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
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except TimeoutError:
                pass


BACKLOG = 1024


def _listen(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for every address `host` resolves to (SO_REUSEADDR, so a restart binds
    while old connections linger in TIME_WAIT; TCP_NODELAY for the connections it accepts)."""
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, protocol, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, protocol)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:  # every address on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError as error:
                raise OSError(
                    error.errno,
                    f"error while attempting to bind on address {address!r}: "
                    f"{error.strerror.lower() if error.strerror else error}",
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise OSError(f"{host!r} resolves to no address to listen on")
    return sockets


def _security_note(tls: bool, sasl: bool) -> str:
    return ", ".join(["", *(["TLS"] if tls else []), *(["SASL"] if sasl else [])])
