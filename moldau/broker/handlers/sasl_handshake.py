"""SaslHandshake (key 17), v0-1: the client names its SASL mechanism (KIP-43, KIP-152).

v1 is followed by SaslAuthenticate requests carrying the tokens; after v0 the tokens travel as
bare size-prefixed frames without request headers (served by the dispatcher through the
connection's `SaslSession`). A mechanism the listener does not enable is
UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes after
`connection.failed.authentication.delay.ms`. On an authenticated connection a handshake begins
a re-authentication (KIP-368). On a listener without SASL the answer is ILLEGAL_SASL_STATE, as
Kafka's. The state machine is `moldau.broker.authentication`.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.SASL_HANDSHAKE, 0, 1, scopes=(BROKER, CONTROLLER))
def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    session = ctx.connection.authentication
    if session is None:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    return session.handshake(request.mechanism, ctx.api_version)
