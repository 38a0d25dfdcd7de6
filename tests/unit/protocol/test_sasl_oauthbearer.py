"""SASL/OAUTHBEARER's messages (RFC 7628 as Kafka parses them), the server's exchange with its
error round, and Kafka's unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.protocol.sasl.oauthbearer import (
    ACKNOWLEDGE_ERROR,
    OAuthBearerFailure,
    OAuthBearerServer,
    initial_response,
    parse_initial_response,
    unsecured_token,
)
from moldau.protocol.sasl.token_validation import InvalidToken, UnsecuredTokenValidator
from tests.jwt_tokens import b64

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000


def token(**claims: object) -> str:
    return unsecured_token({"sub": "alice", "iat": NOW_S, "exp": NOW_S + 3600, **claims})


def test_an_initial_response_with_authzid_and_extensions_round_trips() -> None:
    message = initial_response(
        token(), authorization_id="alice", extensions={"traceId": "a b=c", "logicalCluster": "x"}
    )
    assert message.startswith(b"n,a=alice,\x01auth=Bearer ey") and message.endswith(b"\x01\x01")
    parsed = parse_initial_response(message)
    assert parsed.token == token() and parsed.authorization_id == "alice"
    assert parsed.extensions == {"traceId": "a b=c", "logicalCluster": "x"}
    lowercase = b"n,,\x01auth=bearer abc.def.\x01\x01"
    assert parse_initial_response(lowercase).token == "abc.def."


@pytest.mark.parametrize(
    ("message", "detail"),
    [
        (b"", ""),
        (b"y,,\x01auth=Bearer t\x01\x01", ""),  # channel binding
        (b"n,,auth=Bearer t\x01\x01", ""),
        (b"n,,\x01auth=Bearer t\x01", ""),  # no final ^A
        (b"n,,\x01auth=Bearer t\x01\x01\x01", ""),
        (b"n,a=,\x01auth=Bearer t\x01\x01", ""),  # an empty authzid
        (b"n,,\x01x1=y\x01auth=Bearer t\x01\x01", ""),  # a key of letters only
        (b"n,,\x01host=\x00\x01auth=Bearer t\x01\x01", ""),
        (b"n,,\x01host=server\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Bearer a=b\x01\x01", "invalid 'auth' format"),  # Kafka's token charset
        (b"n,,\x01auth=Basic YWxpY2U\x01\x01", "Invalid scheme"),
        (b"n,,\x01auth=Bearer \xff\x01\x01", "not UTF-8"),
    ],
)
def test_malformed_initial_responses_are_kafkas_generic_failure(
    message: bytes, detail: str
) -> None:
    with pytest.raises(OAuthBearerFailure) as caught:
        parse_initial_response(message)
    assert caught.value.generic and detail in str(caught.value)


def test_extensions_rfc_7628_cannot_carry_are_refused_by_the_client() -> None:
    for extensions in ({"auth": "x"}, {"trace-id": "x"}, {"t": "\x01"}, {"t": ""}):
        with pytest.raises(ValueError, match="cannot be sent"):
            initial_response("t", extensions=extensions)


@given(st.binary(max_size=300))
@settings(max_examples=400, deadline=None)
def test_any_bytes_parse_or_fail_as_the_mechanism_fails(message: bytes) -> None:
    try:
        parse_initial_response(message)
    except OAuthBearerFailure:
        pass


def server(**options: object) -> OAuthBearerServer:
    return OAuthBearerServer(UnsecuredTokenValidator(**options), lambda: NOW_MS)  # type: ignore[arg-type]


def test_a_valid_token_completes_the_exchange_with_its_principal() -> None:
    exchange = server()
    assert exchange.receive(initial_response(token(), extensions={"traceId": "1"})) == b""
    assert exchange.complete and exchange.user == "alice"
    assert exchange.token is not None and exchange.token.expires_at_ms == NOW_MS + 3_600_000
    assert exchange.extensions == {"traceId": "1"}
    with pytest.raises(OAuthBearerFailure, match="already complete"):
        exchange.receive(ACKNOWLEDGE_ERROR)


def test_a_refused_token_is_answered_with_the_json_error_then_fails_with_it() -> None:
    exchange = server()
    answer = exchange.receive(initial_response(token(exp=NOW_S - 1)))
    assert answer == b'{"status":"invalid_token"}' and not exchange.complete
    assert exchange.rejection is not None and "expired" in str(exchange.rejection)
    with pytest.raises(OAuthBearerFailure) as caught:
        exchange.receive(ACKNOWLEDGE_ERROR)
    assert str(caught.value) == '{"status":"invalid_token"}' and not caught.value.generic
    assert "expired" in caught.value.reason


def test_an_authorization_id_must_be_the_tokens_principal() -> None:
    assert server().receive(initial_response(token(), authorization_id="alice")) == b""
    with pytest.raises(OAuthBearerFailure, match=r"authorization id \(bob\) .* name \(alice\)"):
        server().receive(initial_response(token(), authorization_id="bob"))


def refused(validator: UnsecuredTokenValidator, jwt: str, now_ms: int = NOW_MS) -> InvalidToken:
    with pytest.raises(InvalidToken) as caught:
        validator(jwt, now_ms)
    return caught.value


def test_the_unsecured_validator_checks_what_kafkas_does() -> None:
    check = UnsecuredTokenValidator()
    assert check(token(), NOW_MS).principal == "alice"
    assert check(token(iat=None), NOW_MS).issued_at_ms is None
    assert "expired" in str(refused(check, token(exp=NOW_S)))
    assert "'exp'" in str(refused(check, token(exp=None)))
    assert "'exp'" in str(refused(check, token(exp="soon")))
    assert "'exp'" in str(refused(check, token(exp=True)))
    assert "'exp'" in str(refused(check, token(exp=1e12)))
    infinite = token().split(".")[0] + "." + b64(b'{"sub":"alice","exp":1e400}') + "."
    assert "'exp'" in str(refused(check, infinite))
    assert "future" in str(refused(check, token(iat=NOW_S + 1)))
    assert "principal" in str(refused(check, token(sub="  ")))
    assert "principal" in str(refused(check, token(sub=7)))
    skewed = UnsecuredTokenValidator(clock_skew_ms=2000)
    assert skewed(token(exp=NOW_S - 1, iat=NOW_S - 2), NOW_MS).principal == "alice"
    assert skewed(token(iat=NOW_S + 1), NOW_MS).principal == "alice"
    assert "before it was issued" in str(refused(skewed, token(iat=NOW_S + 1, exp=NOW_S + 1)))
    signed = token().rstrip(".") + ".c2ln"
    assert "signature" in str(refused(check, signed))
    with_alg = unsecured_token({"sub": "a", "exp": NOW_S + 1}).replace(
        "eyJhbGciOiJub25lIn0", "eyJhbGciOiJSUzI1NiJ9"
    )
    assert "'RS256'" in str(refused(check, with_alg))
    assert "malformed" in str(refused(check, "not-a-token"))


def test_the_unsecured_validator_names_a_missing_scope_as_insufficient() -> None:
    check = UnsecuredTokenValidator(
        principal_claim="azp", scope_claim="roles", required_scope=("produce", "consume")
    )
    granted = check(token(azp="app", roles=["produce", " consume "]), NOW_MS)
    assert granted.principal == "app" and granted.scope == {"produce", "consume"}
    missing = refused(check, token(azp="app", roles=["produce"]))
    assert missing.status == "insufficient_scope" and "'consume'" in str(missing)
    assert missing.error_json() == '{"status":"insufficient_scope", "scope":"produce consume"}'
    one_string = refused(check, token(azp="app", roles="produce consume"))  # one scope, as Kafka
    assert one_string.status == "insufficient_scope"
    assert "neither a string nor a list" in str(refused(check, token(azp="app", roles=5)))
