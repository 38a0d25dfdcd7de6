"""Envelope (key 58) v0, on the controller listener (KIP-590): a client's metadata change that a
broker passes on to the active controller, with the client's principal and address.

The sender needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as
Kafka's ControllerApis): only a broker may speak for a client. The inner request is served as if
the client had sent it on this connection, with the client's principal and host in its place
(`moldau.broker.envelope`, which also holds the byte format), so its own checks are the
client's; the answer carries its response, header and body, in `response_data`. Errors are
Kafka's EnvelopeUtils': a principal that does not parse PRINCIPAL_DESERIALIZATION_FAILURE; a client
address of neither 4 nor 16 bytes, or an inner API that is not forwarded to the controller,
INVALID_REQUEST; an inner request that does not parse (header, version or body)
UNSUPPORTED_VERSION, which tells it apart from a malformed envelope. A failure of the inner API
is answered inside the envelope, as its own answer; one that would have closed the client's
connection is UNKNOWN_SERVER_ERROR here (the broker closes the client's connection then). A
node that is not the active controller answers NOT_CONTROLLER on the envelope itself, so that the
broker finds the new one and sends it again.
Moldau's brokers send it from `Dispatcher._forward`.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.dispatcher import Dispatcher
from moldau.broker.envelope import forwarded_connection
from moldau.broker.registry import CONTROLLER, HandlerSpec, RequestContext, handler, handler_for
from moldau.metadata.acls import AclOperation
from moldau.net.connection import CloseConnection
from moldau.protocol.adapter import (
    MalformedRequest,
    RequestHeader,
    decode_request,
    decode_request_header,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.ENVELOPE, 0, 0, scopes=(CONTROLLER,))
async def handle_envelope(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    if not ctx.controller.is_active:  # the envelope's own NOT_CONTROLLER: the broker asks again
        raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")
    connection = forwarded_connection(ctx.connection, request)
    header, spec, inner = _inner_request(request.request_data)
    dispatcher = Dispatcher(ctx.node, CONTROLLER)
    try:
        response = await dispatcher.serve_forwarded(spec, header, inner, connection)
    except CloseConnection as exc:
        raise KafkaError(ErrorCode.unknown_server_error, str(exc)) from None
    return {"response_data": response, "error_code": ErrorCode.none}


def _inner_request(frame: bytes) -> tuple[RequestHeader, HandlerSpec, Any]:
    try:
        header = decode_request_header(frame)
    except MalformedRequest as exc:
        raise KafkaError(ErrorCode.unsupported_version, f"the forwarded header: {exc}") from None
    spec = handler_for(header.api_key, CONTROLLER)
    if spec is None or not spec.forward:
        raise KafkaError(
            ErrorCode.invalid_request, f"API key {header.api_key} is not forwarded to controllers"
        )
    if not spec.min_version <= header.api_version <= spec.max_version:
        raise KafkaError(
            ErrorCode.unsupported_version,
            f"version {header.api_version} of API {header.api_key} is not served here",
        )
    try:
        return header, spec, decode_request(header, frame)
    except MalformedRequest as exc:
        raise KafkaError(ErrorCode.unsupported_version, f"the forwarded request: {exc}") from None
