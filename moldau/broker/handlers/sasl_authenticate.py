"""SaslAuthenticate (key 36), v0-2: one SASL token each way (KIP-152).

v1 adds `session_lifetime_ms` (KIP-368: the session ends after `connections.max.reauth.ms`
unless re-authenticated; 0 when it never does); v2 is flexible. A failed exchange is
SASL_AUTHENTICATION_FAILED with Kafka's message, answered after
`connection.failed.authentication.delay.ms`, and the connection closes. Out of turn it is
ILLEGAL_SASL_STATE. The state machine is `moldau.broker.authentication`.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.SASL_AUTHENTICATE, 0, 2, scopes=(BROKER, CONTROLLER))
def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    session = ctx.connection.authentication
    if session is None:
        return {
            "error_code": ErrorCode.illegal_sasl_state,
            "error_message": "SaslAuthenticate on a listener without SASL",
            "auth_bytes": b"",
            "session_lifetime": 0,
        }
    return session.authenticate(request.auth_bytes, ctx.api_version)
