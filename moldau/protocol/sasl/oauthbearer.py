"""SASL/OAUTHBEARER (RFC 7628) as Kafka speaks it (KIP-255): one message from the client, and
one more round when its token is refused.

    client initial response  n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A ...]^A
    server, token accepted   (empty: the exchange is complete)
    server, token refused    {"status":"invalid_token"}          (RFC 7628 3.2.2, a challenge)
    client                   ^A                                  (acknowledges the error)
    server                   the exchange fails; that JSON is Kafka's error message

(^A is the byte 0x01.) Kafka's grammar (OAuthBearerClientInitialResponse): only the `n,` gs2
header (no channel binding); an authorization id, if given, must be the token's principal; keys
are letters and values printable ASCII, space, tab, CR or LF; `auth` carries the token (scheme
Bearer, any case; the token `[-_.A-Za-z0-9]+`) and every other key is a SASL extension
(KIP-342), which both of Kafka's validators accept. The token is judged by a `TokenValidator`
(`token_validation.py`).

`OAuthBearerServer` goes initial response -> complete, or -> error sent -> failed. A message
that does not parse raises `OAuthBearerFailure(generic=True)`: Kafka answers it with its generic
message, since the client learns nothing from the details.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.sasl.jwt import base64url_encode
from moldau.protocol.sasl.token_validation import InvalidToken, OAuthBearerToken, TokenValidator

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
ACKNOWLEDGE_ERROR = b"\x01"  # the client's answer to the server's error (RFC 7628 3.2.3)
INVALID_MESSAGE = "Invalid OAUTHBEARER client first message"

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # any ASCII but ',' and '=' unescaped
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01"
    rf"(?P<pairs>(?:{_KEY.pattern}={_VALUE.pattern}\x01)*)\x01"
)
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_.A-Za-z0-9]+)")


class OAuthBearerFailure(Exception):
    """The exchange failed: `str()` is what Kafka answers, `reason` what the broker logs.
    `generic`: Kafka answers its generic "invalid credentials" message instead."""

    def __init__(self, message: str, *, reason: str | None = None, generic: bool = False):
        super().__init__(message)
        self.reason = reason or message
        self.generic = generic


@dataclass(frozen=True, slots=True)
class InitialResponse:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def parse_initial_response(message: bytes) -> InitialResponse:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise OAuthBearerFailure(f"{INVALID_MESSAGE}: not UTF-8", generic=True) from None
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise OAuthBearerFailure(INVALID_MESSAGE, generic=True)
    pairs: dict[str, str] = {}
    for pair in match["pairs"].split(SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        pairs[key] = value  # (a repeated key: the last one counts, as in Kafka)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise OAuthBearerFailure(f"{INVALID_MESSAGE}: 'auth' not specified", generic=True)
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise OAuthBearerFailure(f"{INVALID_MESSAGE}: invalid 'auth' format", generic=True)
    if auth_match["scheme"].lower() != "bearer":
        raise OAuthBearerFailure(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme'][:40]}",
            generic=True,
        )
    return InitialResponse(auth_match["token"], match["authzid"] or "", pairs)


def initial_response(
    token: str, *, authorization_id: str = "", extensions: Mapping[str, str] | None = None
) -> bytes:
    """The client's message; ValueError for an extension RFC 7628 cannot carry."""
    pairs = [f"auth=Bearer {token}"]
    for key, value in (extensions or {}).items():
        if key == "auth" or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise ValueError(f"the SASL extension {key}={value!r} cannot be sent (RFC 7628)")
        pairs.append(f"{key}={value}")
    authzid = f"a={authorization_id}" if authorization_id else ""
    return f"n,{authzid},{SEPARATOR}{SEPARATOR.join(pairs)}{SEPARATOR}{SEPARATOR}".encode()


def unsecured_token(claims: Mapping[str, Any]) -> str:
    """An unsecured JWS (RFC 7515 appendix A.5) of `claims`: what librdkafka's and Kafka's
    clients make for development when no identity provider is configured."""
    header = base64url_encode(b'{"alg":"none"}')
    body = base64url_encode(json.dumps(dict(claims), separators=(",", ":")).encode())
    return f"{header}.{body}."


class OAuthBearerServer:
    """The server side of one exchange: `validate(token, now_ms)` judges the token."""

    def __init__(self, validate: TokenValidator, now_ms: Callable[[], int]) -> None:
        self._validate = validate
        self._now_ms = now_ms
        self.complete = False
        self.token: OAuthBearerToken | None = None  # once complete
        self.extensions: dict[str, str] = {}
        self.rejection: InvalidToken | None = None  # the token was refused: one round left

    @property
    def user(self) -> str | None:
        return self.token.principal if self.token is not None else None

    def receive(self, message: bytes) -> bytes:
        """The client's message in; the server's answer out."""
        if self.complete:
            raise OAuthBearerFailure("The OAUTHBEARER exchange is already complete")
        if self.rejection is not None:
            # RFC 7628: the client acknowledges the error with ^A. Whatever it sends, the
            # exchange is over (Kafka would parse anything else as a new first message).
            raise OAuthBearerFailure(self.rejection.error_json(), reason=str(self.rejection))
        initial = parse_initial_response(message)
        try:
            token = self._validate(initial.token, self._now_ms())
        except InvalidToken as invalid:
            self.rejection = invalid
            return invalid.error_json().encode()
        if initial.authorization_id and initial.authorization_id != token.principal:
            raise OAuthBearerFailure(
                "Authentication failed: Client requested an authorization id "
                f"({initial.authorization_id}) that is different from the token's principal "
                f"name ({token.principal})"
            )
        self.token, self.extensions, self.complete = token, initial.extensions, True
        return b""
