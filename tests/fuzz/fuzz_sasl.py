"""Fuzz target: SaslHandshake and SaslAuthenticate bodies, and the bare tokens after a v0
handshake, through the real `Dispatcher` and the broker's `SaslSession` (PLAIN users and SCRAM
credentials as a SASL listener has them, and OAUTHBEARER with Kafka's unsecured validator, so
that malformed initial responses and tokens reach the parsers and the validator).

Each input is one connection: a series of frames, each chosen by two bytes (handshake,
authenticate or other bytes; version; length) and carrying the bytes that follow as its body
(other bytes are a bare token after a v0 handshake, any request before: only ApiVersions is
served then). Frames are
handed over as a connection would, until the connection would close (`CloseConnection`, or
`ConnectionInfo.closing` after a failure).

Invariants: nothing but `CloseConnection` escapes; no log record at ERROR or with a traceback;
every answer to a request decodes as that API and version with its correlation id; a bare-token
answer is one size-prefixed token; an authenticated connection has the principal of a known
user, or with OAUTHBEARER the subject of a token the connection sent; no answer is larger than
a few KiB (nothing the client sends makes the broker allocate by its size).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import struct
from types import SimpleNamespace
from typing import Any

from moldau.broker.authentication import SaslAuthenticator
from moldau.broker.dispatcher import Dispatcher
from moldau.broker.observability.request_metrics import RequestMetrics
from moldau.broker.registry import handler_for, load_handlers
from moldau.config.sasl import SaslListenerSettings
from moldau.net.connection import CloseConnection, ConnectionInfo
from moldau.protocol.adapter import decode_response
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.sasl.scram import make_credential
from moldau.protocol.sasl.token_validation import UnsecuredTokenValidator
from tests.fuzz.fuzz_handlers import Failure, _Collector

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
CREDENTIALS = {
    ("alice", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "alice-secret", iterations=4096),
    ("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "alice-secret", iterations=4096),
}
MAX_FRAMES = 8
MAX_ANSWER_BYTES = 8192
HANDSHAKE, AUTHENTICATE, RAW = 0, 1, 2


_collector = _Collector()
_dispatcher: Dispatcher | None = None


def setup() -> None:
    global _dispatcher
    load_handlers()
    authenticator = SaslAuthenticator(
        SaslListenerSettings(
            mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
            plain_users=USERS,
            reauthentication_ms=60_000,
            failure_delay_ms=0,  # answered at once: the delay is the event loop's
        ),
        lambda user, mechanism: CREDENTIALS.get((user, mechanism)),
        token_validator=UnsecuredTokenValidator(),
    )
    security = SimpleNamespace(authenticator=lambda info: authenticator.session(info))
    node: Any = SimpleNamespace(
        security=security, must_forward=False, client_quotas=None, request_metrics=RequestMetrics()
    )
    _dispatcher = Dispatcher(node)
    logging.getLogger().addHandler(_collector)
    logging.getLogger().setLevel(logging.WARNING)


def frames_of(data: bytes) -> list[tuple[int, int, bytes]]:
    """(kind, version, body) for each frame the input describes."""
    frames = []
    position = 0
    while position + 2 <= len(data) and len(frames) < MAX_FRAMES:
        choice, length = data[position], data[position + 1]
        position += 2
        body = data[position : position + length]
        position += length
        frames.append((choice % 3, (choice >> 2) % 3, body))
    return frames


def frame_bytes(kind: int, version: int, body: bytes, correlation_id: int) -> bytes:
    if kind == RAW:
        return body
    api_key = ApiKey.SASL_HANDSHAKE if kind == HANDSHAKE else ApiKey.SASL_AUTHENTICATE
    if kind == HANDSHAKE:
        version = min(version, 1)
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)
    if api_key == ApiKey.SASL_AUTHENTICATE and version >= 2:
        header += b"\x00"  # request header v2: no tagged fields
    return header + body


def test_one_input(data: bytes) -> None:
    if _dispatcher is None:
        setup()
    assert _dispatcher is not None
    info = ConnectionInfo(
        client_host="127.0.0.1",
        client_port=1,
        listener_name="SASL",
        security_protocol="SASL_PLAINTEXT",
        zero_copy=True,
        authenticated=False,
        state={},
    )
    _collector.records.clear()
    principals = {f"User:{user}" for user in USERS}
    for correlation_id, (kind, version, body) in enumerate(frames_of(data), start=1):
        frame = frame_bytes(kind, version, body, correlation_id)
        principals |= _token_subjects(body)
        raw = info.authentication is not None and info.authentication.raw_tokens
        try:
            answer = _dispatcher(frame, info)
        except CloseConnection:
            break
        finally:
            if _collector.records:
                record = _collector.records[0]
                raise Failure(f"logged {record.levelname}: {record.getMessage()}")
        _check_answer(answer, frame, raw)
        if info.authenticated and info.principal not in principals:
            raise Failure(f"authenticated as {info.principal}")
        if info.closing:
            break


def _check_answer(answer: Any, frame: bytes, raw: bool) -> None:
    if answer is None:
        return
    if not isinstance(answer, bytes):
        raise Failure(f"answered {type(answer).__name__}, not bytes")
    if len(answer) > MAX_ANSWER_BYTES:
        raise Failure(f"an answer of {len(answer)} bytes")
    (size,) = struct.unpack_from(">i", answer)
    if size != len(answer) - 4:
        raise Failure(f"a frame of {len(answer) - 4} bytes says {size}")
    if raw:
        return
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
    spec = handler_for(api_key)
    if api_key == ApiKey.API_VERSIONS and (spec is None or not 0 <= version <= spec.max_version):
        version = 0  # KIP-511: an unsupported ApiVersions version is answered in v0
    answered_id, _ = decode_response(api_key, version, answer[4:])
    if answered_id != correlation_id:
        raise Failure(f"answered correlation id {answered_id}, not {correlation_id}")


_BEARER = re.compile(rb"auth=[A-Za-z0-9_]+ +([-_.A-Za-z0-9]+)")


def _token_subjects(body: bytes) -> set[str]:
    """The principals the unsecured tokens in a frame may authenticate: `User:<sub>`, read
    without the broker's code."""
    subjects = set()
    for match in _BEARER.finditer(body):
        parts = match.group(1).split(b".")
        if len(parts) != 3:
            continue
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + b"=" * (-len(parts[1]) % 4)))
        except (binascii.Error, ValueError, RecursionError):
            continue
        if isinstance(claims, dict) and isinstance(claims.get("sub"), str):
            subjects.add(f"User:{claims['sub']}")
    return subjects
