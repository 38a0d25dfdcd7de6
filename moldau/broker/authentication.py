"""SASL authentication of one connection, as Kafka's SaslServerAuthenticator (KIP-43, KIP-152,
KIP-368). `SaslAuthenticator` is one SASL listener's (its mechanisms, PLAIN users, where SCRAM
credentials are looked up); `SaslSession` is one connection's state machine:

    handshake --SaslHandshake v1--> authenticate --SaslAuthenticate...--> complete
        |  \\--SaslHandshake v0--> raw tokens (KIP-43: frames without headers) --> complete
        +-- ApiVersions: answered, stays in handshake
    complete --SaslHandshake (a session begun with SaslAuthenticate v1+)--> reauthenticate
    reauthenticate --SaslAuthenticate...--> complete (the same principal, a new lifetime)
    any failure --> failed: the answer waits connection.failed.authentication.delay.ms, then
                    the connection closes (`ConnectionInfo.closing`)

Until complete, the dispatcher serves only ApiVersions, SaslHandshake and SaslAuthenticate;
anything else closes the connection. When complete, the principal (`User:<name>`) is set on the
connection for authorization and the small pre-authentication frame cap is lifted. A session
ends, as Kafka's does, after `connections.max.reauth.ms` (begun with SaslAuthenticate v1+) or
when its credential expires (an OAUTHBEARER token's `exp`, whatever the version), whichever is
first; v1+ clients are told it in `session_lifetime_ms`. A request after the end closes the
connection unless it starts a re-authentication.

Every failure is logged in one line (peer, listener, mechanism, the reason) and answered with
Kafka's error code and message; what a client learns is no more than Kafka tells it. An
OAUTHBEARER token refused is answered first with RFC 7628's JSON error (the line is logged
then); the client's acknowledgement fails the exchange with that JSON as the message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.config.sasl import OAUTHBEARER, SaslListenerSettings
from moldau.net.connection import ConnectionInfo
from moldau.net.deferred import Deferred
from moldau.net.principal import USER
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.oauthbearer import OAuthBearerFailure, OAuthBearerServer
from moldau.protocol.sasl.plain import PlainFailure, authenticate_plain
from moldau.protocol.sasl.scram import ScramCredential, ScramFailure, ScramServer
from moldau.protocol.sasl.token_validation import TokenValidator

log = logging.getLogger(__name__)

HANDSHAKE, AUTHENTICATE, RAW_TOKENS, COMPLETE, REAUTHENTICATE, FAILED = (
    "handshake",
    "authenticate",
    "raw tokens",
    "complete",
    "reauthenticate",
    "failed",
)
CredentialLookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism)


class SaslAuthenticator:
    """One SASL listener's authentication: its settings, the SCRAM credential store and, with
    OAUTHBEARER, the token validator (`moldau.protocol.sasl.token_validation`)."""

    def __init__(
        self,
        settings: SaslListenerSettings,
        scram_credentials: CredentialLookup,
        *,
        token_validator: TokenValidator | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if OAUTHBEARER in settings.mechanisms and token_validator is None:
            raise ValueError("a listener enabling OAUTHBEARER needs a token validator")
        self.settings = settings
        self.clock = clock
        self._scram_credentials = scram_credentials
        self._token_validator = token_validator

    def session(self, info: ConnectionInfo) -> SaslSession:
        if info.authentication is None:
            info.authentication = SaslSession(self, info)
        session: SaslSession = info.authentication
        return session

    def exchange(self, mechanism: str) -> _Exchange:
        if mechanism == "PLAIN":
            return _PlainExchange(self.settings.plain_users)
        if mechanism == OAUTHBEARER:
            assert self._token_validator is not None
            return _OAuthBearerExchange(OAuthBearerServer(self._token_validator, self.clock.now_ms))
        lookup = self._scram_credentials
        return _ScramExchange(ScramServer(mechanism, lambda user: lookup(user, mechanism)))


class _Exchange:
    complete = False
    user: str | None = None
    expires_at_ms: int | None = None  # wall clock: when the credential expires, if it does
    rejection: str | None = None  # refused, with one round left (OAUTHBEARER's error)

    def receive(self, token: bytes) -> bytes:
        raise NotImplementedError


class _PlainExchange(_Exchange):
    def __init__(self, users: Any) -> None:
        self._users = users

    def receive(self, token: bytes) -> bytes:
        self.user = authenticate_plain(token, self._users)
        self.complete = True
        return b""


class _ScramExchange(_Exchange):
    def __init__(self, server: ScramServer) -> None:
        self._server = server

    def receive(self, token: bytes) -> bytes:
        answer = self._server.receive(token)
        self.complete, self.user = self._server.complete, self._server.user
        return answer


class _OAuthBearerExchange(_Exchange):
    def __init__(self, server: OAuthBearerServer) -> None:
        self._server = server

    def receive(self, token: bytes) -> bytes:
        server = self._server
        answer = server.receive(token)
        self.complete, self.user = server.complete, server.user
        if server.token is not None:
            self.expires_at_ms = server.token.expires_at_ms
        if server.rejection is not None:
            self.rejection = f"{server.rejection} ({server.rejection.status})"
        return answer


class AuthenticationFailed(Exception):
    """A failed step: `message` is what Kafka answers, `reason` what the broker logs."""

    def __init__(self, code: ErrorCode, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


class SaslSession:
    """One connection's SASL state (see the module's transition table)."""

    def __init__(self, authenticator: SaslAuthenticator, info: ConnectionInfo) -> None:
        self._authenticator = authenticator
        self._info = info
        self.state = HANDSHAKE
        self.mechanism: str | None = None
        self._exchange: _Exchange | None = None
        self._reauthenticates = False  # begun with SaslAuthenticate v1+: may re-authenticate
        self._user: str | None = None
        self._credential_expires_at_ms: int | None = None
        self._failure_logged = False

    @property
    def mechanisms(self) -> list[str]:
        return list(self._authenticator.settings.mechanisms)

    @property
    def raw_tokens(self) -> bool:
        return self.state == RAW_TOKENS

    # --- SaslHandshake ---------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> dict[str, Any] | Deferred:
        mechanisms = self.mechanisms
        if self.state == COMPLETE:
            if not self._reauthenticates:
                return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": mechanisms}
            if mechanism != self.mechanism:
                return self._fail(
                    {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": mechanisms},
                    f"re-authentication with {mechanism} instead of {self.mechanism}",
                )
            self.state = REAUTHENTICATE
            self._exchange = self._authenticator.exchange(mechanism)
            return {"error_code": ErrorCode.none, "mechanisms": mechanisms}
        if self.state != HANDSHAKE:
            return self._fail(
                {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": mechanisms},
                f"a SaslHandshake in state {self.state}",
            )
        if mechanism not in mechanisms:
            return self._fail(
                {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": mechanisms},
                f"Unsupported SASL mechanism {mechanism}",
            )
        self.mechanism = mechanism
        self._exchange = self._authenticator.exchange(mechanism)
        self.state = AUTHENTICATE if version >= 1 else RAW_TOKENS
        return {"error_code": ErrorCode.none, "mechanisms": mechanisms}

    # --- SaslAuthenticate ------------------------------------------------------------------------

    def authenticate(self, token: bytes, version: int) -> dict[str, Any] | Deferred:
        if self.state == COMPLETE:  # (Kafka's KafkaApis answers this, and keeps the connection)
            return _authenticate_answer(
                ErrorCode.illegal_sasl_state,
                "SaslAuthenticate request received after successful authentication",
            )
        if self.state not in (AUTHENTICATE, REAUTHENTICATE):
            return self._fail(
                _authenticate_answer(
                    ErrorCode.illegal_sasl_state,
                    "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.",
                ),
                f"a SaslAuthenticate in state {self.state}",
            )
        try:
            answer = self._step(token)
        except AuthenticationFailed as failure:
            return self._fail(_authenticate_answer(failure.code, failure.message), failure.reason)
        lifetime_ms = 0
        if self.state == COMPLETE:
            if version >= 1:  # (v0 clients cannot re-authenticate)
                self._reauthenticates = True
            lifetime_ms = self._start_session(reauthenticates=version >= 1)
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "auth_bytes": answer,
            "session_lifetime": lifetime_ms,
        }

    # --- raw tokens (after a v0 SaslHandshake, KIP-43) -------------------------------------------

    def raw_token(self, token: bytes | memoryview) -> bytes | Deferred:
        """A frame that is a bare token: the answer framed the same way, or on failure nothing
        (the connection closes after the delay: v0 has no way to say why)."""
        try:
            answer = self._step(bytes(token))
        except AuthenticationFailed as failure:
            return self._fail(None, failure.reason)
        if self.state == COMPLETE:
            self._start_session(reauthenticates=False)
        return len(answer).to_bytes(4, "big") + answer

    # --- steps -----------------------------------------------------------------------------------

    def _step(self, token: bytes) -> bytes:
        exchange, mechanism = self._exchange, self.mechanism
        assert exchange is not None and mechanism is not None
        try:
            answer = exchange.receive(bytes(token))
        except (PlainFailure, OAuthBearerFailure) as failure:
            message = (
                _generic(mechanism, self.state == REAUTHENTICATE)
                if failure.generic
                else str(failure)
            )
            raise AuthenticationFailed(
                ErrorCode.sasl_authentication_failed, message, failure.reason
            ) from None
        except ScramFailure as failure:
            raise AuthenticationFailed(
                ErrorCode.sasl_authentication_failed,
                _generic(mechanism, self.state == REAUTHENTICATE),
                f"{failure} (e={failure.error})",
            ) from None
        if exchange.rejection is not None and not self._failure_logged:
            self._log_failure(exchange.rejection)  # (now: the client may never acknowledge)
        if exchange.complete:
            assert exchange.user is not None
            self._credential_expires_at_ms = exchange.expires_at_ms
            self._completed(exchange.user)
        return answer

    def _completed(self, user: str) -> None:
        info = self._info
        principal = USER + user
        if self.state == REAUTHENTICATE and principal != info.principal:
            raise AuthenticationFailed(
                ErrorCode.sasl_authentication_failed,
                f"Cannot change principals during re-authentication from {info.principal}: "
                f"{principal}",
                f"re-authenticated as {principal} instead of {info.principal}",
            )
        self._exchange = None
        self._user = user
        self.state = COMPLETE
        if info.set_authenticated is not None:
            info.set_authenticated(principal)
        else:
            info.authenticated, info.principal = True, principal
        log.debug("%s authenticated as %s with %s", _peer(info), principal, self.mechanism)

    def _start_session(self, *, reauthenticates: bool) -> int:
        """The session's lifetime in ms as Kafka's authenticator computes it (0: unlimited):
        `connections.max.reauth.ms` for a client that can re-authenticate, bounded by when the
        credential expires for any client."""
        max_ms = self._authenticator.settings.reauthentication_ms if reauthenticates else 0
        expires_at_ms = self._credential_expires_at_ms
        if expires_at_ms is None and max_ms <= 0:
            self._info.session_expires_at = None
            return 0
        lifetime_ms = max_ms
        if expires_at_ms is not None:
            left_ms = max(0, expires_at_ms - self._authenticator.clock.now_ms())
            lifetime_ms = min(left_ms, max_ms) if max_ms > 0 else left_ms
        self._info.session_expires_at = time.monotonic() + lifetime_ms / 1000
        return lifetime_ms

    def _log_failure(self, reason: str) -> None:
        info = self._info
        log.info(
            "failed authentication with %s on %s (%s%s): %s",
            _peer(info),
            info.listener_name,
            self.mechanism or "no mechanism",
            f", {self.state}" if self.state == REAUTHENTICATE else "",
            reason,
        )
        self._failure_logged = True

    def _fail(self, answer: Any, reason: str) -> Deferred | Any:
        """Log one line (unless the refusal was logged already), then answer after the delay
        and close (Kafka's delayed close)."""
        info = self._info
        if not self._failure_logged:
            self._log_failure(reason)
        self.state = FAILED
        self._exchange = None
        info.closing = True
        delay_s = self._authenticator.settings.failure_delay_ms / 1000
        if delay_s <= 0:
            return answer
        deferred = Deferred()
        asyncio.get_running_loop().call_later(delay_s, deferred.resolve, answer)
        return deferred


def _authenticate_answer(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}


def _generic(mechanism: str, reauthenticating: bool = False) -> str:
    during = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"


def _peer(info: ConnectionInfo) -> str:
    return f"{info.client_host}:{info.client_port}"
