"""OAUTHBEARER in the broker's SASL session: the principal, a session bounded by the token's
expiry (KIP-368, as Kafka computes it), the JSON error round logged once, and the JWKS source:
a file read at start, rotated keys picked up when a token names an unknown kid."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from moldau.broker.authentication import SaslAuthenticator
from moldau.broker.jwks import JwksSource
from moldau.clock import ManualClock
from moldau.config.oauthbearer import JwksValidatorSettings
from moldau.config.sasl import SaslListenerSettings
from moldau.config.values import ConfigError
from moldau.net.connection import ConnectionInfo
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.oauthbearer import ACKNOWLEDGE_ERROR, initial_response, unsecured_token
from moldau.protocol.sasl.token_validation import InvalidToken, UnsecuredTokenValidator
from tests.jwt_tokens import IdentityProvider

CLOCK_MS = 1_700_000_000_000


def connection() -> ConnectionInfo:
    return ConnectionInfo(
        client_host="127.0.0.1",
        client_port=5000,
        listener_name="CLIENTS",
        security_protocol="SASL_PLAINTEXT",
        zero_copy=True,
        authenticated=False,
        state={},
    )


def authenticator(reauthentication_ms: int = 0) -> tuple[SaslAuthenticator, ManualClock]:
    clock = ManualClock(CLOCK_MS)
    settings = SaslListenerSettings(
        mechanisms=("OAUTHBEARER",), reauthentication_ms=reauthentication_ms, failure_delay_ms=0
    )
    validator = UnsecuredTokenValidator(required_scope=["kafka"])
    return SaslAuthenticator(
        settings, lambda u, m: None, token_validator=validator, clock=clock
    ), clock


def message(lifetime_s: int, sub: str = "alice", scope: list[str] | None = None) -> bytes:
    claims = {"sub": sub, "exp": CLOCK_MS // 1000 + lifetime_s, "scope": scope or ["kafka"]}
    return initial_response(unsecured_token(claims))


@pytest.mark.parametrize(
    ("reauthentication_ms", "version", "lifetime_ms"),
    # (v0 has no session_lifetime_ms field, and its clients cannot re-authenticate)
    [(0, 1, 600_000), (60_000, 1, 60_000), (3_600_000, 2, 600_000), (60_000, 0, 600_000)],
)
def test_the_session_ends_with_the_token_or_connections_max_reauth_ms(
    reauthentication_ms: int, version: int, lifetime_ms: int
) -> None:
    auth, _ = authenticator(reauthentication_ms)
    info = connection()
    session = auth.session(info)
    assert session.handshake("OAUTHBEARER", 1)["error_code"] == ErrorCode.none  # type: ignore[index]
    before = time.monotonic()
    answer = session.authenticate(message(600), version)
    assert answer["error_code"] == ErrorCode.none and answer["session_lifetime"] == lifetime_ms  # type: ignore[index]
    assert info.authenticated and info.principal == "User:alice"
    assert info.session_expires_at is not None  # (a v0 session too ends with its token)
    ends_in = info.session_expires_at - before
    assert abs(ends_in - lifetime_ms / 1000) < 1


def test_re_authenticating_with_a_new_token_extends_the_session() -> None:
    auth, clock = authenticator()
    info = connection()
    session = auth.session(info)
    session.handshake("OAUTHBEARER", 1)
    assert session.authenticate(message(60), 2)["session_lifetime"] == 60_000  # type: ignore[index]
    clock.advance(50_000)
    session.handshake("OAUTHBEARER", 1)
    assert session.authenticate(message(3600), 2)["session_lifetime"] == 3_600_000 - 50_000  # type: ignore[index]
    session.handshake("OAUTHBEARER", 1)
    refused = session.authenticate(message(3600, sub="mallory"), 2)
    assert refused["error_code"] == ErrorCode.sasl_authentication_failed  # type: ignore[index]
    assert "Cannot change principals" in refused["error_message"]  # type: ignore[index]


def test_a_refused_token_is_answered_with_the_json_error_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth, _ = authenticator()
    info = connection()
    session = auth.session(info)
    session.handshake("OAUTHBEARER", 1)
    with caplog.at_level(logging.INFO, logger="moldau.broker.authentication"):
        challenge = session.authenticate(message(600, scope=["other"]), 2)
        assert challenge["error_code"] == ErrorCode.none and not info.closing  # type: ignore[index]
        assert challenge["auth_bytes"] == b'{"status":"insufficient_scope", "scope":"kafka"}'  # type: ignore[index]
        failed = session.authenticate(ACKNOWLEDGE_ERROR, 2)
    assert failed["error_code"] == ErrorCode.sasl_authentication_failed  # type: ignore[index]
    assert failed["error_message"] == '{"status":"insufficient_scope", "scope":"kafka"}'  # type: ignore[index]
    assert info.closing and not info.authenticated
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert "(OAUTHBEARER)" in lines[0] and "lacks the required scope 'kafka'" in lines[0]


def test_a_malformed_message_gets_kafkas_generic_answer() -> None:
    auth, _ = authenticator()
    session = auth.session(connection())
    session.handshake("OAUTHBEARER", 1)
    answer = session.authenticate(b"n,,auth=Bearer x", 2)
    assert answer["error_message"] == (  # type: ignore[index]
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )


def jwks_settings(path: Path) -> JwksValidatorSettings:
    return JwksValidatorSettings(jwks_url=path.as_uri(), refresh_ms=3_600_000)


def test_a_jwks_file_is_read_at_start_and_a_broken_one_stops_the_node(tmp_path: Path) -> None:
    provider = IdentityProvider.with_keys("k1")
    path = tmp_path / "jwks.json"
    path.write_text(provider.jwks())
    assert JwksSource(jwks_settings(path)).keys().key_ids() == {"k1"}
    path.write_text(json.dumps({"keys": []}))
    with pytest.raises(ConfigError, match="holds no RSA or EC key"):
        JwksSource(jwks_settings(path))
    with pytest.raises(ConfigError, match="No such file"):
        JwksSource(jwks_settings(tmp_path / "missing.json"))


def test_an_unknown_kid_reads_the_key_set_again_at_most_so_often(tmp_path: Path) -> None:
    from moldau.broker.security import token_validator

    provider = IdentityProvider.with_keys("k1")
    path = tmp_path / "jwks.json"
    path.write_text(provider.jwks())
    settings = jwks_settings(path)

    async def scenario() -> None:
        validator, source = token_validator(settings, "CLIENTS")
        assert source is not None
        await source.start()
        try:
            provider.add("k2")
            path.write_text(provider.jwks())  # the provider rotates its keys
            rotated = provider.token("k2", sub="alice")
            with pytest.raises(InvalidToken, match="kid 'k2'"):
                validator(rotated, int(time.time() * 1000))
            for _ in range(100):
                if "k2" in source.keys().key_ids():
                    break
                await asyncio.sleep(0.01)
            assert validator(rotated, int(time.time() * 1000)).principal == "alice"
            fetches = source.fetches
            source.expedite("k3")  # (again within the interval: no fetch)
            await asyncio.sleep(0.05)
            assert source.fetches == fetches
        finally:
            await source.stop()

    asyncio.run(scenario())
