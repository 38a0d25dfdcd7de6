"""The running registry: its HTTP listeners (uvicorn on the caller's event loop), the log
(`SchemaLog`), the writer election, and the one place commands are applied or forwarded.

    async with RegistryService(client_config={"bootstrap.servers": ...},
                               listeners=parse_listeners("http://127.0.0.1:8081")) as registry:
        print(registry.urls)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import h11
import uvicorn
from starlette.requests import Request
from starlette.responses import Response

from moldau.registry.app import build_app, respond
from moldau.registry.election import WriterElection
from moldau.registry.errors import RegistryError
from moldau.registry.http_client import http_request
from moldau.registry.listeners import RegistryListener
from moldau.registry.operations import Change, Operations
from moldau.registry.store import BROKERS_WAIT_S, SCHEMAS_TOPIC, SchemaLog

__all__ = ["RegistryService"]

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0  # how long a request waits for the registry to have read `_schemas`
WRITE_TIMEOUT_S = 30.0  # how long a command waits for a writer, its records and their replay
_FORWARDED_HEADER = "x-forwarded-by"


class RegistryService:
    def __init__(
        self,
        *,
        client_config: Mapping[str, Any],
        listeners: Sequence[RegistryListener],
        topic: str = SCHEMAS_TOPIC,
        brokers_wait_s: float = BROKERS_WAIT_S,
    ) -> None:
        """`brokers_wait_s`: how long the first instance waits for brokers to replicate a new
        `_schemas` on (`SchemaLog`); 0 on a single-node cluster, which has no others."""
        self.client_config = {"client.id": "moldau-schema-registry", **client_config}
        self.listeners = list(listeners)
        self.log = SchemaLog(self.client_config, topic=topic, brokers_wait_s=brokers_wait_s)
        self.operations = Operations(self.log.state)
        self.election: WriterElection | None = None
        self.urls: list[str] = []
        self._servers: list[uvicorn.Server] = []
        self._sockets: list[socket.socket] = []
        self._ticks: list[asyncio.Task[None]] = []
        self._write_lock = asyncio.Lock()

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Bind every listener (OSError when one cannot be bound), then serve; reading
        `_schemas` and the election go on in the background."""
        app = build_app(self)
        for listener in self.listeners:
            sock = _bind(listener)
            self._sockets.append(sock)
            host, port = sock.getsockname()[:2]
            self.urls.append(
                RegistryListener(listener.host if host in ("0.0.0.0", "::") else host, port).url
            )
        for sock in self._sockets:
            config = uvicorn.Config(
                app,
                lifespan="off",
                log_level="warning",
                access_log=False,
                timeout_keep_alive=30,
                timeout_graceful_shutdown=3,
                h11_max_incomplete_event_size=64 * 1024,
            )
            config.load()
            server = uvicorn.Server(config)
            server.lifespan = config.lifespan_class(config)
            await server.startup(sockets=[sock])
            self._servers.append(server)
            self._ticks.append(asyncio.create_task(server.main_loop(), name="schema-registry-http"))
        await self.log.start()
        self.election = WriterElection(self.client_config, url=self.urls[0])
        self.election.start()

    async def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        for task in self._ticks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.shutdown()
        self._servers.clear()
        self._ticks.clear()
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        if self.election is not None:
            await self.election.stop()
            self.election = None
        await self.log.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- requests ------------------------------------------------------------------------

    async def until_ready(self) -> None:
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                await self.log.ready.wait()
        except TimeoutError:
            raise RegistryError.timeout(f"the registry has not read {self.log.topic} yet") from None

    async def write(
        self, request: Request, body: bytes, command: Callable[[Operations], Change]
    ) -> Response:
        """Apply `command` here if this instance is the writer, else forward the request to
        the writer (once: a forwarded request is never forwarded again)."""
        await self.until_ready()
        election = self.election
        assert election is not None
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await election.elected.wait()
        except TimeoutError:
            raise RegistryError.forwarding_error("no writer has been elected") from None
        if election.is_writer or request.headers.get(_FORWARDED_HEADER):
            return respond(await self._apply(command))
        writer_url = election.writer_url
        assert writer_url is not None
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            answer = await http_request(
                writer_url,
                method=request.method,
                target=target,
                body=body,
                headers=[(_FORWARDED_HEADER, "moldau-schema-registry")],
                timeout=WRITE_TIMEOUT_S,
            )
        except (OSError, TimeoutError, h11.ProtocolError) as error:
            raise RegistryError.forwarding_error(
                f"{writer_url}: {error or type(error).__name__}"
            ) from None
        if answer.status < 300:
            with contextlib.suppress(TimeoutError, Exception):
                await self.log.catch_up(WRITE_TIMEOUT_S)  # read-your-writes on this node
        return Response(answer.body, status_code=answer.status, media_type=answer.content_type)

    async def _apply(self, command: Callable[[Operations], Change]) -> Any:
        async with self._write_lock:
            try:
                await self.log.catch_up(WRITE_TIMEOUT_S)
            except TimeoutError:
                raise RegistryError.timeout(f"reading {self.log.topic} to its end") from None
            except Exception as error:
                raise RegistryError.store_error(str(error)) from None
            change = command(self.operations)  # (RegistryError: refused)
            if not change.records:
                return change.result
            try:
                offset = await self.log.write(change.records, WRITE_TIMEOUT_S)
                await self.log.wait_applied(offset, WRITE_TIMEOUT_S)
            except TimeoutError:
                raise RegistryError.timeout(f"writing to {self.log.topic}") from None
            except Exception as error:
                raise RegistryError.store_error(str(error)) from None
            return change.result

    def log_unexpected(self, request: Request, error: Exception) -> None:
        log.error("schema registry: %s %s failed", request.method, request.url.path, exc_info=error)


def _bind(listener: RegistryListener) -> socket.socket:
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listener.host, listener.port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
