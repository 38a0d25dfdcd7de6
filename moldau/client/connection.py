"""One TCP connection to one broker: ApiVersions negotiation, correlation ids, pipelining.

`BrokerConnection.request(api_key, data)` encodes `data` (a dict with the newest field names) at the
highest version both sides support, sends it without waiting for earlier requests to finish, and
resolves with the decoded kio response once the frame with its correlation id comes back. Mirrors
Kafka's `NetworkClient` + `ApiVersions` for a single node.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from kio.schema.index import api_key_map, schema_name_map

from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.tasks import stop_task
from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.framing import FrameDecoder

__all__ = ["BrokerConnection", "Versions", "client_version_range"]

_API_VERSIONS_REQUEST_VERSION: Final = 3
_MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024

# Highest version this client speaks per API where newer versions change the request's shape
# beyond what the adapter fills in (topic ids instead of names: Produce v13, Fetch v13,
# OffsetCommit v10, OffsetFetch v10; Metadata v13 only adds a top-level error code).
CLIENT_MAX_VERSIONS: Final[Mapping[int, int]] = {
    ApiKey.PRODUCE: 12,
    ApiKey.FETCH: 12,
    ApiKey.METADATA: 12,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
}


def _reason(exc: OSError | TimeoutError) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return f"cannot resolve host: {exc.strerror.lower()}"
    if exc.errno is not None:
        return os.strerror(exc.errno).lower()
    return str(exc)


@cache
def client_version_range(api_key: int) -> tuple[int, int]:
    """The (min, max) request versions of `api_key` that kio knows and this client speaks."""
    versions = sorted(schema_name_map[api_key_map[api_key]])
    highest = min(versions[-1], CLIENT_MAX_VERSIONS.get(api_key, versions[-1]))
    return versions[0], highest


@dataclass(frozen=True, slots=True)
class Versions:
    """The broker's supported version range per API key, from its ApiVersions response."""

    ranges: Mapping[int, tuple[int, int]]

    def pick(self, api_key: int) -> int:
        """The highest version both this client and the broker support."""
        client_min, client_max = client_version_range(api_key)
        broker = self.ranges.get(api_key)
        if broker is None:
            raise KafkaException(
                ErrorCode.unsupported_version,
                f"the broker does not support {api_key_map.get(api_key, api_key)} (api key {api_key})",
            )
        low, high = max(client_min, broker[0]), min(client_max, broker[1])
        if low > high:
            raise KafkaException(
                ErrorCode.unsupported_version,
                f"no common version for api key {api_key}: broker {broker[0]}-{broker[1]}, "
                f"client {client_min}-{client_max}",
            )
        return high


class BrokerConnection:
    """A pipelined connection to one broker; use `await BrokerConnection.open(...)`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "moldau",
        request_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions = Versions({})
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_ids = itertools.count(1)
        self._in_flight: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._read_task: asyncio.Task[None] | None = None
        self._closed_error: Exception | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._writer is not None and self._closed_error is None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "moldau",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> BrokerConnection:
        connection = cls(
            host, port, node_id=node_id, client_id=client_id, request_timeout=request_timeout
        )
        await connection._connect(connect_timeout)
        return connection

    async def _connect(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        except (OSError, TimeoutError) as exc:
            raise KafkaException(
                ErrorCode.network_exception, f"{self.address} ({_reason(exc)})"
            ) from None
        self._read_task = asyncio.create_task(self._read_loop(), name=f"read {self.address}")
        try:
            await self._negotiate_versions()
        except BaseException:
            await self.close()
            raise

    async def _negotiate_versions(self) -> None:
        version = _API_VERSIONS_REQUEST_VERSION
        for _attempt in range(2):
            data = {"client_software_name": "moldau", "client_software_version": "0.1.0"}
            frame = await self._round_trip(ApiKey.API_VERSIONS, version, data, raw=True)
            error = int.from_bytes(frame[4:6], "big", signed=True)
            if error == ErrorCode.unsupported_version.value:
                # KIP-511: the answer is a v0 body listing the broker's ApiVersions range.
                _, response = decode_response(ApiKey.API_VERSIONS, 0, frame)
                ranges = {int(k.api_key): int(k.max_version) for k in response.api_keys}
                version = min(ranges.get(ApiKey.API_VERSIONS, 0), _API_VERSIONS_REQUEST_VERSION)
                continue
            _, response = decode_response(ApiKey.API_VERSIONS, version, frame)
            if response.error_code != ErrorCode.none:
                raise KafkaException(response.error_code, f"ApiVersions from {self.address}")
            self.versions = Versions(
                {
                    int(k.api_key): (int(k.min_version), int(k.max_version))
                    for k in response.api_keys
                }
            )
            return
        raise KafkaException(ErrorCode.unsupported_version, f"ApiVersions with {self.address}")

    async def request(
        self,
        api_key: int,
        data: Mapping[str, Any],
        *,
        version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send one request and return the decoded kio response (None if no response is due)."""
        if version is None:
            version = self.versions.pick(api_key)
        return await self._round_trip(
            api_key, version, data, timeout=timeout, expect_response=expect_response
        )

    async def forward(self, frame: bytes | memoryview, *, timeout: float | None = None) -> bytes:
        """Send a whole request frame as it came (without its size prefix) under a correlation
        id of this connection; return the response frame (without its size prefix) as it came
        back, its first four bytes this connection's correlation id. A broker forwarding a
        client's request to the controller keeps the request's version and bytes this way."""
        if self._closed_error is not None:
            raise self._closed_error
        assert self._writer is not None
        correlation_id = next(self._correlation_ids)
        data = bytearray(frame)
        data[4:8] = correlation_id.to_bytes(4, "big", signed=True)
        api_key = int.from_bytes(data[0:2], "big", signed=True)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._in_flight[correlation_id] = (api_key, -1, future)
        self._writer.write(len(data).to_bytes(4, "big") + data)
        try:
            async with asyncio.timeout(timeout or self.request_timeout):
                return bytes(await future)
        except TimeoutError:
            self._in_flight.pop(correlation_id, None)
            raise KafkaException(
                ErrorCode.request_timed_out,
                f"no answer from broker {self.address} to a forwarded request",
            ) from None

    async def _round_trip(
        self,
        api_key: int,
        version: int,
        data: Mapping[str, Any],
        *,
        timeout: float | None = None,
        expect_response: bool = True,
        raw: bool = False,
    ) -> Any:
        if self._closed_error is not None:
            raise self._closed_error
        assert self._writer is not None
        correlation_id = next(self._correlation_ids)
        frame = encode_request(api_key, version, correlation_id, self.client_id, data)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._in_flight[correlation_id] = (api_key, -1 if raw else version, future)
        self._writer.write(frame)
        if not expect_response:
            await self._writer.drain()
            return None
        try:
            async with asyncio.timeout(timeout or self.request_timeout):
                return await future
        except TimeoutError:
            self._in_flight.pop(correlation_id, None)
            raise KafkaException(
                ErrorCode.request_timed_out,
                f"no answer from broker {self.address} to api key {api_key} "
                f"within {timeout or self.request_timeout:.0f} s",
            ) from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        decoder = FrameDecoder(_MAX_RESPONSE_BYTES)
        error: Exception
        try:
            while True:
                chunk = await self._reader.read(256 * 1024)
                if not chunk:
                    error = KafkaException(
                        ErrorCode.network_exception,
                        f"broker {self.address} closed the connection",
                    )
                    break
                for frame in decoder.feed(chunk):
                    self._dispatch(frame)
        except asyncio.CancelledError:
            error = KafkaException(ErrorCode.network_exception, "connection closed")
        except Exception as exc:
            error = KafkaException(
                ErrorCode.network_exception, f"connection to {self.address} failed: {exc}"
            )
        self._fail_all(error)

    def _dispatch(self, frame: bytes) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._in_flight.pop(correlation_id, None)
        if entry is None:
            return  # the request timed out and nobody waits for it any more
        api_key, version, future = entry
        if future.done():
            return
        if version < 0:
            future.set_result(frame)
            return
        try:
            _, response = decode_response(api_key, version, frame)
        except Exception as exc:
            future.set_exception(
                KafkaException(
                    ErrorCode.corrupt_message,
                    f"cannot decode response to api key {api_key} v{version}: {exc}",
                )
            )
            return
        future.set_result(response)

    def _fail_all(self, error: Exception) -> None:
        self._closed_error = error
        for _api_key, _version, future in self._in_flight.values():
            if not future.done():
                future.set_exception(error)
        self._in_flight.clear()

    async def close(self) -> None:
        if self._read_task is not None:
            with contextlib.suppress(Exception):
                await stop_task(self._read_task)
            self._read_task = None
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        self._fail_all(KafkaException(ErrorCode.network_exception, "connection closed"))
