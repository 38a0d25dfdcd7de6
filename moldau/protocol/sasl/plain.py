"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it: `authzid NUL user NUL password`,
an authorization id, if given, must be the user, and the messages are Kafka's own."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

MAX_MESSAGE_BYTES = 4096
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainFailure(Exception):
    """The exchange failed; `str()` is what Kafka answers. `generic`: Kafka answers its
    generic "invalid credentials" message instead (a malformed message)."""

    def __init__(self, message: str, *, generic: bool = False) -> None:
        super().__init__(message)
        self.generic = generic
        self.reason = message  # what the broker logs


def authenticate_plain(message: bytes, users: Mapping[str, str]) -> str:
    """The user a PLAIN message authenticates, checked against `users` (name -> password)."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise PlainFailure(f"Invalid SASL/PLAIN response of {len(message)} bytes", generic=True)
    try:
        tokens = message.decode("utf-8").split("\x00")
    except UnicodeDecodeError:
        raise PlainFailure("Invalid SASL/PLAIN response: not UTF-8", generic=True) from None
    if len(tokens) != 3:
        raise PlainFailure(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}", generic=True
        )
    authorization_id, user, password = tokens
    if not user:
        raise PlainFailure("Authentication failed: username not specified")
    if not password:
        raise PlainFailure("Authentication failed: password not specified")
    expected = users.get(user)
    # Compared in constant time; an unknown user costs the same comparison.
    matches = hmac.compare_digest(
        password.encode(), (expected if expected is not None else "\x00" + password).encode()
    )
    if expected is None or not matches:
        raise PlainFailure(INVALID_CREDENTIALS)
    if authorization_id and authorization_id != user:
        raise PlainFailure(
            "Authentication failed: Client requested an authorization id that is different "
            "from username"
        )
    return user


def plain_message(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()
