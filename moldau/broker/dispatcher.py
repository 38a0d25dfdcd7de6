"""From a request frame to a response: decode, find the handler, check versions, encode.

Unsupported versions of ApiVersions are answered with a v0 UNSUPPORTED_VERSION response carrying
our ranges (KIP-511); other unknown keys, unsupported versions and malformed bodies close the
connection, as Kafka does. A handler that fails unexpectedly answers UNKNOWN_SERVER_ERROR when the
response has a top-level error code, and otherwise closes the connection.

On a SASL listener a connection is served only ApiVersions, SaslHandshake and SaslAuthenticate
until it has authenticated (after a v0 SaslHandshake its frames are bare tokens); any other
request closes it, as Kafka's SaslServerAuthenticator does. A connection whose session has
expired (`connections.max.reauth.ms`, an OAUTHBEARER token's expiry) is closed on its next
request unless that request re-authenticates (`moldau.broker.authentication`).

Every request a handler serves is counted here, and the time until its answer is encoded
(`observability.RequestMetrics`, two clock reads and a few integer additions).

Client quotas are applied here, in one place (`moldau.broker.quotas.QuotaUsage`): on the
broker's listeners, a request of a client some quota holds back is timed, its usage recorded
when the handler returns and when its answer is known (at once, or when its Deferred or task
completes), the throttle time set in the answer and the connection muted for it. While no
quota is set, a request costs two attribute reads more.

A metadata change (`forward=True`) that reaches a broker which is not the active controller goes
there inside an Envelope naming the client's principal and address (KIP-590,
`moldau.broker.envelope`); the controller's Envelope handler serves the inner request through
`serve_forwarded`, on a connection that has the client's principal and host.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from moldau.broker.envelope import envelope_request
from moldau.broker.quotas import ClientQuota, QuotaUsage
from moldau.broker.registry import (
    BROKER,
    HandlerSpec,
    RequestContext,
    Scope,
    handler_for,
    supported_versions,
)
from moldau.broker.responses import Response
from moldau.net.connection import Applying, CloseConnection, ConnectionInfo
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import (
    MalformedRequest,
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_response,
    frame_response,
    response_schema,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.produce_response import encode_produce_response

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)
_INT32 = struct.Struct(">i")


class Dispatcher:
    """Serves one kind of listener: the broker's (clients) or the controller's (`scope`)."""

    def __init__(self, node: BrokerServices, scope: Scope = BROKER) -> None:
        self._node = node
        self.scope = scope
        # Client quotas hold back clients on the broker's listeners only.
        self._client_quotas = node.client_quotas if scope == BROKER else None
        self._metrics = node.request_metrics

    def __call__(self, frame: bytes | memoryview, info: ConnectionInfo) -> Any:
        if not info.authenticated:
            session = self._node.security.authenticator(info)
            if session.raw_tokens:
                return session.raw_token(frame)
        elif info.session_expires_at is not None and _expired(info.session_expires_at, frame):
            raise CloseConnection(
                "its SASL session expired (connections.max.reauth.ms or its token's expiry)"
            )
        try:
            header = decode_request_header(frame, served=self._serves)
        except MalformedRequest as exc:
            raise CloseConnection(f"malformed request header: {exc}") from None
        if not info.authenticated and header.api_key not in _BEFORE_AUTHENTICATION:
            raise CloseConnection(
                f"unexpected request (API key {header.api_key}) before SASL authentication"
            )
        spec = handler_for(header.api_key, self.scope)
        if spec is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == ApiKey.API_VERSIONS:
                return _unsupported_api_versions(header, self.scope)
            raise CloseConnection(
                f"unsupported version {header.api_version} of API {header.api_key}"
            )
        try:
            request = decode_request(header, frame)
        except MalformedRequest as exc:
            raise CloseConnection(str(exc)) from None
        if spec.forward and self.scope == BROKER and self._node.must_forward:
            started = self._metrics.taken(header.api_key)
            return self._forward(header, envelope_request(frame, info), started=started)
        quotas = self._client_quotas
        if quotas is not None and quotas.enforced and info.authenticated:
            quota = quotas.of_client(info.principal, header.client_id)
            if quota is not None and quota.covers(header.api_key, request):
                return self._serve_under_quota(spec, header, info, request, quota, len(frame))
        return self.serve(spec, header, request, info)

    def _serves(self, api_key: int, api_version: int) -> bool:
        spec = handler_for(api_key, self.scope)
        return spec is not None and spec.min_version <= api_version <= spec.max_version

    def serve(
        self, spec: HandlerSpec, header: RequestHeader, request: Any, info: ConnectionInfo
    ) -> Any:
        """The handler's answer to a decoded request no client quota covers, encoded: a frame,
        chunks or None, or one of them later (a `Deferred` or an awaitable). A failure is
        answered as `_failure` says."""
        metrics = self._metrics
        started = metrics.taken(header.api_key)
        try:
            result = spec.function(RequestContext(header, self._node, info, self.scope), request)
        except Exception as exc:
            answer = self._failure(header, exc)
            metrics.answered(header.api_key, started)
            return answer
        if type(result) is not dict:  # the common answer first: a dict to encode
            if isinstance(result, Deferred):
                return self._finish_deferred(header, result, started=started)
            if inspect.isawaitable(result):
                return self._later(spec, self._finish_async(header, result, started=started))
        answer = self._encode(header, result)
        metrics.answered(header.api_key, started)
        return answer

    @staticmethod
    def _later(spec: HandlerSpec, answer: Awaitable[Any]) -> Any:
        """A handler's answer still to come; the connection's later requests wait for it to be
        applied when the handler's API is applied in order (`HandlerSpec.in_order`)."""
        return Applying(answer) if spec.in_order else answer

    def _serve_under_quota(
        self,
        spec: HandlerSpec,
        header: RequestHeader,
        info: ConnectionInfo,
        request: Any,
        quota: ClientQuota,
        request_bytes: int,
    ) -> Any:
        """Serve a request that counts against the client's quotas: timed (request_percentage),
        and settled with its answer (`QuotaUsage.settle`)."""
        context = RequestContext(header, self._node, info, self.scope, quota)
        metrics = self._metrics
        started = metrics.taken(header.api_key)
        try:
            result = spec.function(context, request)
        except Exception as exc:
            answer = self._failure(header, exc)
            metrics.answered(header.api_key, started)
            return answer
        usage = QuotaUsage(quota, header, request, request_bytes=request_bytes, mute=info.mute)
        usage.handled(time.perf_counter() - started)
        if isinstance(result, Deferred):
            return self._finish_deferred(header, result, usage, started=started)
        if inspect.isawaitable(result):
            return self._later(spec, self._finish_async(header, result, usage, started=started))
        answer = self._encode(header, result, usage)
        metrics.answered(header.api_key, started)
        return answer

    def _finish_deferred(
        self,
        header: RequestHeader,
        deferred: Deferred,
        usage: QuotaUsage | None = None,
        *,
        started: float,
    ) -> Deferred:
        """The encoded response, settled in the same call chain as the handler's `Deferred`:
        the connection writes it with no loop iteration in between."""
        encoded = Deferred()
        metrics = self._metrics

        def resolved(body: Any) -> None:
            try:
                response = self._encode(header, body, usage)
            except Exception as failure:  # an encoder bug: the connection logs and closes
                encoded.fail(failure)
                return
            metrics.answered(header.api_key, started)
            encoded.resolve(response)

        def failed(error: BaseException) -> None:
            if not isinstance(error, Exception):
                encoded.fail(error)
                return
            try:
                response = self._failure(header, error)
            except Exception as failure:  # CloseConnection, or no error_code to answer with
                encoded.fail(failure)
                return
            metrics.answered(header.api_key, started)
            encoded.resolve(response)

        deferred.then(resolved, failed)
        return encoded

    async def serve_forwarded(
        self, spec: HandlerSpec, header: RequestHeader, request: Any, info: ConnectionInfo
    ) -> bytes:
        """`serve` for a request that came inside an Envelope (`handlers/envelope.py`): its
        response once ready, header and body without the size prefix. Raises CloseConnection
        where the client's own connection would have been closed."""
        outcome = self.serve(spec, header, request, info)
        if isinstance(outcome, Applying):
            outcome = outcome.pending
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if isinstance(outcome, Deferred):
            outcome = await _settled(outcome)
        if not isinstance(outcome, bytes):  # no answer (acks=0) or chunks (Fetch): not forwarded
            raise CloseConnection(f"API {header.api_key} has no answer to forward")
        return outcome[4:]

    async def _forward(
        self, header: RequestHeader, envelope: dict[str, Any], *, started: float
    ) -> Any:
        """Pass a metadata change to the active controller in an Envelope naming the client's
        principal and address (KIP-590, `moldau.broker.envelope`), and its answer back."""
        channel = self._node.controller_channel
        assert channel is not None  # (a node that forwards has a channel: `must_forward`)
        try:
            answer = await channel.forward(envelope)
        except KafkaError as exc:  # the Envelope's error, in the client's API's answer
            failure = self._failure(header, exc)
            self._metrics.answered(header.api_key, started)
            return failure
        self._metrics.answered(header.api_key, started)
        return _INT32.pack(len(answer)) + _INT32.pack(header.correlation_id) + answer[4:]

    async def _finish_async(
        self,
        header: RequestHeader,
        pending: Any,
        usage: QuotaUsage | None = None,
        *,
        started: float,
    ) -> Any:
        """The encoded answer of an awaitable handler, or a `Deferred` of it when the handler
        ends with one (applied, waiting for something else)."""
        try:
            result = await pending
        except CloseConnection:
            raise
        except Exception as exc:
            answer = self._failure(header, exc)
            self._metrics.answered(header.api_key, started)
            return answer
        if isinstance(result, Deferred):
            return self._finish_deferred(header, result, usage, started=started)
        answer = self._encode(header, result, usage)
        self._metrics.answered(header.api_key, started)
        return answer

    def _encode(self, header: RequestHeader, result: Any, usage: QuotaUsage | None = None) -> Any:
        try:
            if usage is not None:
                result = usage.settle(result)
            return self._encode_result(header, result)
        except Exception as exc:  # a handler answered what its version cannot carry: a bug
            log.exception(
                "cannot encode the answer to API %s v%s", header.api_key, header.api_version
            )
            return self._failure(header, KafkaError(ErrorCode.unknown_server_error, str(exc)))

    def _encode_result(self, header: RequestHeader, result: Any) -> Any:
        if result is None:
            return None
        if isinstance(result, Response):
            return _frame_chunks(header, result.chunks)
        if header.api_key == ApiKey.PRODUCE:  # the hot path: a hand-written encoder
            body = encode_produce_response(header.api_version, result)
            if body is not None:
                return frame_response(
                    header.api_key, header.api_version, header.correlation_id, body
                )
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)

    def _failure(self, header: RequestHeader, exc: Exception) -> Any:
        if isinstance(exc, CloseConnection):
            raise exc
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.unknown_server_error
        if not isinstance(exc, KafkaError):
            log.exception("handler for API %s v%s failed", header.api_key, header.api_version)
        schema = response_schema(header.api_key, header.api_version)
        fields = getattr(schema, "__dataclass_fields__", {})
        if "error_code" in fields:
            answer: dict[str, Any] = {"error_code": code}
            if "error_message" in fields:
                answer["error_message"] = str(exc)
            return encode_response(
                header.api_key, header.api_version, header.correlation_id, answer
            )
        raise CloseConnection(f"cannot answer API {header.api_key}: {exc}")


_SASL_KEYS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_BEFORE_AUTHENTICATION = _SASL_KEYS | {ApiKey.API_VERSIONS}


def _expired(expires_at: float, frame: bytes | memoryview) -> bool:
    """The session has ended and this request does not re-authenticate."""
    if time.monotonic() < expires_at:
        return False
    return len(frame) < 2 or int.from_bytes(frame[0:2], "big", signed=True) not in _SASL_KEYS


def _settled(deferred: Deferred) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def resolved(value: Any) -> None:
        if not future.done():
            future.set_result(value)

    def failed(error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    deferred.then(resolved, failed)
    return future


def _frame_chunks(header: RequestHeader, chunks: list[Any]) -> list[Any]:
    """Prefix a chunked body with the frame size and response header."""
    schema = response_schema(header.api_key, header.api_version)
    response_header = _INT32.pack(header.correlation_id) + (b"\x00" if schema.__flexible__ else b"")
    size = len(response_header)
    for chunk in chunks:
        size += len(chunk) if isinstance(chunk, bytes | bytearray | memoryview) else chunk.length
    return [_INT32.pack(size) + response_header, *chunks]


def _unsupported_api_versions(header: RequestHeader, scope: Scope) -> bytes:
    return encode_response(
        ApiKey.API_VERSIONS,
        0,
        header.correlation_id,
        {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": [
                {"api_key": key, "min_version": low, "max_version": high}
                for key, low, high in supported_versions(scope)
            ],
        },
    )
