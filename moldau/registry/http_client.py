"""One HTTP/1.1 request over a fresh connection (h11), in the clear or over TLS: how a registry
instance forwards a write to the writer, and how `RegistryClient` reaches a registry."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import h11

__all__ = ["MAX_ANSWER_BYTES", "HttpAnswer", "http_request", "split_url"]

MAX_ANSWER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: bytes
    content_type: str


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of `http[s]://host:port[/]` (ValueError when it is not one)."""
    scheme, separator, rest = url.strip().partition("://")
    host, colon, port = rest.rstrip("/").rpartition(":")
    scheme = scheme.lower()
    if not separator or scheme not in ("http", "https") or not colon or not port.isdigit():
        raise ValueError(f"{url!r} is not an http://HOST:PORT or https://HOST:PORT address")
    return scheme, host.strip("[]"), int(port)


async def http_request(
    url: str,
    *,
    method: str,
    target: str,
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    ssl_context: ssl.SSLContext | None = None,
    timeout: float,
) -> HttpAnswer:
    """`method target` sent to the server at `url` (https: over TLS with `ssl_context`, the
    system's authorities when None). OSError, TimeoutError or h11.ProtocolError when it cannot
    be reached or answers badly."""
    scheme, host, port = split_url(url)
    context = None
    if scheme == "https":
        context = ssl_context or ssl.create_default_context()
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None
        )
        try:
            connection = h11.Connection(h11.CLIENT)
            request_headers = [
                ("Host", f"{host}:{port}"),
                ("Content-Type", "application/vnd.schemaregistry.v1+json"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
                *headers,
            ]
            writer.write(
                connection.send(h11.Request(method=method, target=target, headers=request_headers))
            )
            writer.write(connection.send(h11.Data(data=body)))
            writer.write(connection.send(h11.EndOfMessage()))
            await writer.drain()
            status, content_type, chunks, size = 0, "application/json", [], 0
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    for name, value in event.headers:
                        if name == b"content-type":
                            content_type = value.decode("latin-1")
                elif isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > MAX_ANSWER_BYTES:
                        raise h11.RemoteProtocolError("answer too large")
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return HttpAnswer(status, b"".join(chunks), content_type)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
