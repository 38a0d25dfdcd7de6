"""The running registry: its HTTP listeners (uvicorn on the caller's event loop, https ones with
the given `ssl_context`), the log (`SchemaLog`), the writer election, the one place commands are
applied or forwarded, and the permission checks of an `Authority` (`security.py`), when given.

    async with RegistryService(client_config={"bootstrap.servers": ...},
                               listeners=parse_listeners("http://127.0.0.1:8081")) as registry:
        print(registry.urls)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import h11
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp

from moldau.http_server import HttpServers
from moldau.registry.app import build_app, respond
from moldau.registry.election import WriterElection
from moldau.registry.errors import RegistryError
from moldau.registry.http_client import http_request
from moldau.registry.listeners import RegistryListener
from moldau.registry.operations import Change, Operations
from moldau.registry.security import Access, Authority, BasicAuthentication, user_of
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
        ssl_context: ssl.SSLContext | None = None,
        forwarding_ssl_context: ssl.SSLContext | None = None,
        authority: Authority | None = None,
    ) -> None:
        """`brokers_wait_s`: how long the first instance waits for brokers to replicate a new
        `_schemas` on (`SchemaLog`); 0 on a single-node cluster, which has no others.
        `ssl_context`: the https listeners' (required when there is one);
        `forwarding_ssl_context`: how a write reaches an https writer (default: the system's
        authorities). `authority`: who may do what (None: everyone everything)."""
        self.http = HttpServers(
            list(listeners), name="schema-registry-http", ssl_context=ssl_context
        )  # (ValueError: an https listener without a context)
        self.client_config = {"client.id": "moldau-schema-registry", **client_config}
        self.listeners = list(listeners)
        self.ssl_context = ssl_context
        self.forwarding_ssl_context = forwarding_ssl_context
        self.authority = authority
        self.log = SchemaLog(self.client_config, topic=topic, brokers_wait_s=brokers_wait_s)
        self.operations = Operations(self.log.state)
        self.state = self.log.state
        self.election: WriterElection | None = None
        self._write_lock = asyncio.Lock()

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Bind every listener (OSError when one cannot be bound), then serve; reading
        `_schemas` and the election go on in the background."""
        app: ASGIApp = build_app(self)
        if self.authority is not None:
            app = BasicAuthentication(app, authority=self.authority)
        self.http.bind()
        await self.http.serve(app)
        await self.log.start()
        self.election = WriterElection(self.client_config, url=self.urls[0])
        self.election.start()

    @property
    def urls(self) -> list[str]:
        """Where the listeners listen, once bound."""
        return self.http.urls

    async def stop(self) -> None:
        await self.http.stop()
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
        if self.log.ready.is_set():
            return
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
        if election.is_writer:
            return respond(await self._apply(command))
        if request.headers.get(_FORWARDED_HEADER):
            # Sent here as to the writer, which this node no longer is (or a client's own
            # header): only the writer applies a write, so a retry finds the new one.
            raise RegistryError.forwarding_error("this node is not the writer; retry")
        writer_url = election.writer_url
        assert writer_url is not None
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            answer = await http_request(
                writer_url,
                method=request.method,
                target=target,
                body=body,
                headers=[
                    (_FORWARDED_HEADER, "moldau-schema-registry"),
                    *(
                        ("Authorization", value)
                        for value in request.headers.getlist("authorization")
                    ),
                ],
                ssl_context=self.forwarding_ssl_context,
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

    # --- permissions -----------------------------------------------------------------------

    def allowed(self, request: Request, access: Access, subject: str | None) -> bool:
        user = user_of(request)
        if self.authority is None or user is None:
            return True
        host = request.client.host if request.client is not None else ""
        return self.authority.allowed(user, host, access, subject)

    def require(self, request: Request, access: Access, subject: str | None) -> None:
        """RegistryError 40301 unless the request's user may do `access` to `subject`."""
        if not self.allowed(request, access, subject):
            raise RegistryError.forbidden(user_of(request) or "", access.value, subject)

    def log_unexpected(self, request: Request, error: Exception) -> None:
        log.error("schema registry: %s %s failed", request.method, request.url.path, exc_info=error)
