"""A write sent to a registry instance that is not the writer goes on to the writer: one HTTP/1.1
request over a fresh connection (h11), its answer relayed as it is."""

from __future__ import annotations

import asyncio
import contextlib

import h11

__all__ = ["forward"]

MAX_ANSWER_BYTES = 64 * 1024 * 1024


async def forward(
    url: str, *, method: str, target: str, body: bytes, timeout: float
) -> tuple[int, bytes, str]:
    """(status, body, content type) of `method target` sent to the instance at `url`
    (OSError, TimeoutError, h11.ProtocolError when it cannot be reached or answers badly)."""
    _, _, rest = url.partition("://")
    host, _, port = rest.rstrip("/").rpartition(":")
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            connection = h11.Connection(h11.CLIENT)
            headers = [
                ("Host", f"{host}:{port}"),
                ("Content-Type", "application/vnd.schemaregistry.v1+json"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
                ("X-Forwarded-By", "moldau-schema-registry"),
            ]
            writer.write(
                connection.send(h11.Request(method=method, target=target, headers=headers))
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
                    return status, b"".join(chunks), content_type
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
