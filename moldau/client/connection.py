"""One TCP connection to one broker: ApiVersions negotiation, correlation ids, pipelining.

`BrokerConnection.request(api_key, data)` encodes `data` (a dict with the newest field names) at the
highest version both sides support, sends it without waiting for earlier requests to finish, and
resolves with the decoded kio response once the frame with its correlation id comes back. Mirrors
Kafka's `NetworkClient` + `ApiVersions` for a single node.

With `sasl` credentials the connection authenticates right after ApiVersions
(`moldau.client.sasl`); when the broker gives the session a lifetime (KIP-368) the connection
re-authenticates in the background once 85% of it has passed, as Kafka's clients do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from kio.schema.index import api_key_map, schema_name_map

from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.sasl import authenticate
from moldau.config.sasl import SaslCredentials
from moldau.protocol.adapter import decode_response, encode_request_pieces
from moldau.protocol.api_keys import ApiKey

__all__ = ["BrokerConnection", "Versions", "client_version_range"]

_API_VERSIONS_REQUEST_VERSION: Final = 3
_MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024
_SCRATCH_BYTES: Final = 256 * 1024
_CLOSE_WAIT_S: Final = 5.0
_REAUTHENTICATE_AT: Final = 0.85  # of a SASL session's lifetime
_SASL_PROBE_TIMEOUT_S: Final = 5.0  # asking a listener that closed us whether it expects SASL

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
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS handshake failed: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {(exc.reason or str(exc)).lower().replace('_', ' ')}"
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


def other_protocol(first_bytes: bytes) -> str | None:
    """The protocol a peer speaks when its first bytes are no Kafka frame size: HTTP (a status
    line or an HTML page) or TLS (a record header: alert or handshake, version 3.x)."""
    if first_bytes[:4] in (b"HTTP", b"<!DO", b"<!do", b"<htm", b"<HTM"):
        return "HTTP"
    if len(first_bytes) >= 2 and first_bytes[0] in (0x15, 0x16) and first_bytes[1] == 0x03:
        return "TLS"
    return None


@dataclass(frozen=True, slots=True)
class Versions:
    """The broker's supported version range per API key, and the cluster's finalized feature
    levels (KIP-584: name -> level; empty before ApiVersions v3), from its ApiVersions response."""

    ranges: Mapping[int, tuple[int, int]]
    features: Mapping[str, int] = field(default_factory=dict)

    def feature(self, name: str) -> int:
        """A finalized feature's level, 0 when it is not finalized."""
        return self.features.get(name, 0)

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


class _ResponseReader(asyncio.BufferedProtocol):
    """Reads size-prefixed response frames with as few copies as the kernel allows.

    Small frames arrive in a reusable scratch buffer and are copied out once, a few at a time
    per read. A frame larger than half the scratch buffer gets a buffer of its own, exactly its
    size, and the socket reads go straight into it: a 1 MB Fetch answer is copied by the kernel
    and by nobody else (a `StreamReader` and a frame decoder copied it three times).
    """

    def __init__(self, connection: BrokerConnection) -> None:
        self._connection = connection
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = 0  # first byte of the scratch buffer not yet parsed
        self._end = 0  # end of the bytes read into the scratch buffer
        self._frame: bytearray | None = None  # a large frame being read into its own buffer
        self._filled = 0
        self._writable = asyncio.Event()
        self._writable.set()
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._scratch) - self._end < _SCRATCH_BYTES // 4:  # room for a useful read
            pending = self._end - self._start
            self._scratch[:pending] = bytes(self._view[self._start : self._end])
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._connection._dispatch(memoryview(frame).toreadonly())
            return
        self._end += nbytes
        self._split_frames()

    def _split_frames(self) -> None:
        view = self._view
        while self._end - self._start >= 4:
            start = self._start
            size = int.from_bytes(view[start : start + 4], "big", signed=True)
            if size < 0 or size > _MAX_RESPONSE_BYTES:
                address = self._connection.address
                other = other_protocol(bytes(view[start : start + 4]))
                self._connection._fail_all(
                    KafkaException(
                        ErrorCode.corrupt_message,
                        f"{address} answers {other}, not the Kafka protocol"
                        if other
                        else f"broker {address} sent a frame of {size} bytes",
                    )
                )
                self._abort()
                return
            body = start + 4
            if self._end - body >= size:  # complete in the scratch buffer
                self._start = body + size
                self._connection._dispatch(bytes(view[body : body + size]))
                continue
            if size > _SCRATCH_BYTES // 2:  # large: read the rest into a buffer of its own
                frame = bytearray(size)
                self._filled = self._end - body
                frame[: self._filled] = view[body : self._end]
                self._frame = frame
                self._start = self._end = 0
            return

    def _abort(self) -> None:
        transport = self._connection._transport
        if transport is not None:
            transport.abort()

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc is not None else ""
        self._connection._fail_all(
            KafkaException(
                ErrorCode.network_exception,
                f"broker {self._connection.address} closed the connection{reason}",
            )
        )
        self._writable.set()
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def drain(self) -> None:
        await self._writable.wait()


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
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        asks_why_closed: bool = False,
    ) -> None:
        self.host = host
        self.ssl_context = ssl_context  # TLS (security.protocol=SSL) when set
        self.sasl = sasl  # SASL credentials (security.protocol=SASL_*) when set
        self._reauthenticate_at: float | None = None  # loop time
        self._reauthentication: asyncio.Task[None] | None = None
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions = Versions({})
        self._transport: asyncio.Transport | None = None
        self._stream: _ResponseReader | None = None
        self._correlation_ids = itertools.count(1)
        self._in_flight: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed_error: Exception | None = None
        self._served = False  # a request other than the version negotiation was answered
        # A client's connection (not a node's own, which knows its listeners) asks a listener
        # that closed it at its first request whether it expects SASL (`wrong_listener.py`).
        self.asks_why_closed = asks_why_closed

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._transport is not None and self._closed_error is None

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
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        asks_why_closed: bool = False,
    ) -> BrokerConnection:
        connection = cls(
            host,
            port,
            node_id=node_id,
            client_id=client_id,
            request_timeout=request_timeout,
            ssl_context=ssl_context,
            sasl=sasl,
            asks_why_closed=asks_why_closed,
        )
        await connection._connect(connect_timeout)
        return connection

    async def _connect(self, timeout: float) -> None:
        stream = _ResponseReader(self)
        try:
            async with asyncio.timeout(timeout):
                transport, _ = await asyncio.get_running_loop().create_connection(
                    lambda: stream,
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None,
                    ssl_handshake_timeout=timeout if self.ssl_context is not None else None,
                )
        except (OSError, TimeoutError) as exc:
            raise KafkaException(
                ErrorCode.network_exception, f"{self.address} ({_reason(exc)})"
            ) from None
        self._transport, self._stream = transport, stream
        try:
            await self._negotiate_versions()
            if self.sasl is not None:
                await self._authenticate()
        except BaseException:
            await self.close()
            raise

    async def _authenticate(self) -> None:
        assert self.sasl is not None
        lifetime_s = await authenticate(self, self.sasl)
        self._reauthenticate_at = None
        if lifetime_s > 0:
            loop = asyncio.get_running_loop()
            self._reauthenticate_at = loop.time() + lifetime_s * _REAUTHENTICATE_AT

    def _maybe_reauthenticate(self) -> None:
        """Start re-authenticating when the session nears its end (requests go on meanwhile:
        the broker serves them until the session ends)."""
        if self._reauthenticate_at is None or self._reauthentication is not None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._reauthenticate_at:
            return
        self._reauthenticate_at = None

        async def reauthenticate() -> None:
            try:
                await self._authenticate()
            except Exception as error:  # the broker closes the connection when it ends
                self._fail_all(
                    KafkaException(
                        ErrorCode.sasl_authentication_failed,
                        f"re-authentication with {self.address} failed: {error}",
                    )
                )
            finally:
                self._reauthentication = None

        self._reauthentication = loop.create_task(reauthenticate())

    async def _negotiate_versions(self) -> None:
        version = _API_VERSIONS_REQUEST_VERSION
        for _attempt in range(2):
            data = {"client_software_name": "moldau", "client_software_version": "0.1.0"}
            try:
                frame = await self._round_trip(ApiKey.API_VERSIONS, version, data, raw=True)
            except KafkaException as exc:
                if (
                    exc.code is ErrorCode.network_exception
                    and exc.message
                    and (exc.message.endswith("closed the connection"))
                ):
                    # A TLS listener hangs up on a plaintext client without a word.
                    raise KafkaException(
                        ErrorCode.network_exception,
                        f"{self.address} closed the connection before answering ApiVersions "
                        "(a TLS listener does that to a plaintext client)",
                    ) from None
                raise
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
                },
                {
                    str(f.name): int(f.max_version_level)
                    for f in getattr(response, "finalized_features", None) or ()
                },
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
        if self._reauthenticate_at is not None:
            self._maybe_reauthenticate()
        if version is None:
            version = self.versions.pick(api_key)
        try:
            response = await self._round_trip(
                api_key, version, data, timeout=timeout, expect_response=expect_response
            )
        except KafkaException as exc:
            if (
                self.asks_why_closed
                and self.sasl is None
                and not self._served
                and exc.code is ErrorCode.network_exception
                and api_key != ApiKey.SASL_HANDSHAKE  # (the question asked below)
            ):
                # Closed at the first request: a SASL listener does that to a client without
                # SASL settings (ApiVersions is all it serves before authentication).
                raise await self._sasl_expected_error(exc) from None
            raise
        self._served = True
        return response

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
        assert self._transport is not None and self._stream is not None
        correlation_id = next(self._correlation_ids)
        frame = encode_request_pieces(api_key, version, correlation_id, self.client_id, data)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._in_flight[correlation_id] = (api_key, -1 if raw else version, future)
        for piece in frame:  # record batches: the caller's buffers, not joined into a copy
            self._transport.write(piece)
        if not expect_response:
            await self._stream.drain()
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

    def _dispatch(self, frame: bytes | memoryview) -> None:
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
        if self._closed_error is None:
            self._closed_error = error
        for _api_key, _version, future in self._in_flight.values():
            if not future.done():
                future.set_exception(error)
        self._in_flight.clear()

    async def _sasl_expected_error(self, closed: KafkaException) -> Exception:
        """After the listener closed this connection of a client without SASL settings at its
        first request: ILLEGAL_SASL_STATE naming the mechanisms when the listener is a SASL one
        (a new connection's SaslHandshake for no mechanism is answered with them), else
        `closed`."""
        try:
            probe = await BrokerConnection.open(
                self.host,
                self.port,
                client_id=self.client_id,
                request_timeout=min(self.request_timeout, _SASL_PROBE_TIMEOUT_S),
                connect_timeout=_SASL_PROBE_TIMEOUT_S,
                ssl_context=self.ssl_context,
            )
        except KafkaException:
            return closed
        try:
            answer = await probe.request(ApiKey.SASL_HANDSHAKE, {"mechanism": ""}, version=1)
        except KafkaException:
            return closed
        finally:
            await probe.close()
        if answer.error_code != ErrorCode.unsupported_sasl_mechanism or not answer.mechanisms:
            return closed
        return KafkaException(
            ErrorCode.illegal_sasl_state,
            f"{self.address} is a SASL listener (mechanisms {', '.join(answer.mechanisms)}) "
            "and closed the connection of a client without SASL settings",
        )

    async def close(self) -> None:
        self._fail_all(KafkaException(ErrorCode.network_exception, "connection closed"))
        reauthentication, self._reauthentication = self._reauthentication, None
        if reauthentication is not None and reauthentication is not asyncio.current_task():
            reauthentication.cancel()
            with contextlib.suppress(BaseException):
                await reauthentication
        transport, stream = self._transport, self._stream
        if transport is not None and stream is not None:
            transport.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await asyncio.shield(stream.lost)
