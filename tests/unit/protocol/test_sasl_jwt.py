"""JWS, JWKS and KIP-768's signed token validator: every algorithm verifies, and each way a
token can be wrong (signature, key, algorithm, expiry, audience, issuer, subject) is refused
with `invalid_token` and a reason for the log."""

from __future__ import annotations

import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from moldau.protocol.sasl.jwt import (
    JsonWebKeySet,
    JwtError,
    decode_jws,
    parse_jwks,
    verify_signature,
)
from moldau.protocol.sasl.token_validation import InvalidToken, SignedTokenValidator
from tests.jwt_tokens import IdentityProvider, b64, jwk, new_key, sign

SMALL_RSA = rsa.generate_private_key(public_exponent=65537, key_size=1024)
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]


@pytest.fixture(scope="module")
def provider() -> IdentityProvider:
    provider = IdentityProvider.with_keys("rsa-1", "rsa-2")
    provider.add("ec-1", "ES256")
    return provider


def now_ms() -> int:
    return int(time.time() * 1000)


def part(value: object) -> str:
    return b64(json.dumps(value).encode())


def validator(provider: IdentityProvider, **settings) -> SignedTokenValidator:  # type: ignore[no-untyped-def]
    key_set = parse_jwks(provider.jwks().encode())
    return SignedTokenValidator(lambda: key_set, **settings)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_verifies_with_its_key_and_not_another(algorithm: str) -> None:
    key = new_key(algorithm)
    token = sign({"sub": "alice"}, key, algorithm=algorithm, kid="k")
    jws = decode_jws(token)
    (good,) = parse_jwks(json.dumps({"keys": [jwk("k", key)]}).encode()).keys
    (other,) = parse_jwks(json.dumps({"keys": [jwk("k", new_key(algorithm))]}).encode()).keys
    assert verify_signature(jws, good)
    assert not verify_signature(jws, other)
    signed, _, signature = token.rpartition(".")
    tampered = decode_jws(f"{signed}.{'B' if signature[0] == 'A' else 'A'}{signature[1:]}")
    assert not verify_signature(tampered, good)


def test_a_valid_token_gives_its_subject_scope_and_expiry(provider: IdentityProvider) -> None:
    token = provider.token("rsa-2", sub=" alice ", aud=["kafka", "x"], scope="produce")
    accepted = validator(provider, expected_audience=["kafka"], expected_issuer=provider.issuer)(
        token, now_ms()
    )
    assert accepted.principal == "alice"
    assert accepted.scope == {"produce"}
    assert abs(accepted.expires_at_ms - (time.time() * 1000 + 3_600_000)) < 5_000
    ec_token = provider.token("ec-1", sub="bob", scp=["a", "b"])
    assert validator(provider, scope_claim="scp")(ec_token, now_ms()).scope == {"a", "b"}


def refusal(provider: IdentityProvider, token: str, **settings) -> InvalidToken:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidToken) as caught:
        validator(provider, **settings)(token, now_ms())
    assert caught.value.status == "invalid_token"
    assert caught.value.error_json() == '{"status":"invalid_token"}'
    return caught.value


def test_each_wrong_token_is_refused_with_a_reason(provider: IdentityProvider) -> None:
    stranger = sign({"sub": "eve", "iat": 1, "exp": 4e9}, new_key(), kid="rsa-1")
    assert "signature does not verify" in str(refusal(provider, stranger))
    expired = provider.token("rsa-1", sub="alice", lifetime_s=-60)
    assert "expired" in str(refusal(provider, expired))
    within_skew = provider.token("rsa-1", sub="alice", lifetime_s=-10)
    assert validator(provider, clock_skew_s=30)(within_skew, now_ms()).principal == "alice"
    early = provider.token("rsa-1", sub="alice", nbf=int(time.time()) + 600)
    assert "not valid yet" in str(refusal(provider, early))
    audience = provider.token("rsa-1", sub="alice", aud="billing")
    assert "audience" in str(refusal(provider, audience, expected_audience=["kafka"]))
    assert "expected.audience is not set" in str(refusal(provider, audience))
    no_audience = provider.token("rsa-1", sub="alice")
    assert "audience" in str(refusal(provider, no_audience, expected_audience=["kafka"]))
    issuer = provider.token("rsa-1", sub="alice", iss="https://evil")
    assert "issuer" in str(refusal(provider, issuer, expected_issuer=provider.issuer))
    assert "'iat'" in str(refusal(provider, provider.token("rsa-1", sub="alice", iat=None)))
    assert "'exp'" in str(refusal(provider, provider.token("rsa-1", sub="alice", exp=None)))
    assert "principal" in str(refusal(provider, provider.token("rsa-1", sub=" ")))
    assert "principal" in str(refusal(provider, provider.token("rsa-1", client="alice")))


def test_unsigned_symmetric_and_critical_tokens_are_refused(provider: IdentityProvider) -> None:
    claims = part({"sub": "alice", "iat": 1, "exp": 4e9})
    unsigned = f"{part({'alg': 'none'})}.{claims}."
    assert "'none'" in str(refusal(provider, unsigned))
    hmac = f"{part({'alg': 'HS256', 'kid': 'rsa-1'})}.{claims}.c2ln"
    assert "'HS256'" in str(refusal(provider, hmac))
    _, key = provider.keys["rsa-1"]
    critical = sign({"sub": "a", "iat": 1, "exp": 4e9}, key, kid="rsa-1", header={"crit": ["x"]})
    assert "crit" in str(refusal(provider, critical))
    wrong_family = sign({"sub": "a", "iat": 1, "exp": 4e9}, key, algorithm="ES256", kid="rsa-1")
    assert "no key of the JWKS" in str(refusal(provider, wrong_family))


def test_an_unknown_kid_asks_for_the_key_set_again(provider: IdentityProvider) -> None:
    asked: list[str] = []
    key_set = parse_jwks(provider.jwks().encode())
    check = SignedTokenValidator(lambda: key_set, missing_key=asked.append)
    rotated = IdentityProvider.with_keys("rsa-9")
    with pytest.raises(InvalidToken, match="kid 'rsa-9'"):
        check(rotated.token("rsa-9", sub="alice"), now_ms())
    assert asked == ["rsa-9"]
    _, key = provider.keys["rsa-1"]
    without_kid = sign({"sub": "alice", "iat": 1, "exp": 4e9}, key)
    assert check(without_kid, now_ms()).principal == "alice"  # any key that verifies
    assert asked == ["rsa-9"]


@pytest.mark.parametrize(
    "token",
    ["", "a.b", "a.b.c.d", "!!.e30.", "e30.e30", "bnVsbA.e30.", "e30.W10.",
     "e30." + b64(b"[" * 100_000) + ".", "e30." + b64(b'{"exp":NaN}') + ".",
     "e30." + b64(bytes([0xFF, 0xFE])) + "."],
)  # fmt: skip
def test_malformed_tokens_are_jwt_errors_only(token: str) -> None:
    with pytest.raises(JwtError):
        decode_jws(token)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"[]", "not a JSON object"),
        (b"{}", "no 'keys' list"),
        (b'{"keys":[{"kty":"RSA","kid":"a","n":"AQAB"}]}', "has no 'e'"),
        (json.dumps({"keys": [{**jwk("a", SMALL_RSA), "kid": "a"}]}).encode(), "at least 2048"),
        (b'{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}]}', "key None"),
        (b'{"keys":[{"kty":"EC","crv":"secp256k1","x":"AQ","y":"AQ"}]}', "curve"),
        (b'{"keys":[{"kty":"RSA","kid":5}]}', "must be strings"),
    ],
)
def test_a_broken_jwks_says_which_key(document: bytes, message: str) -> None:
    with pytest.raises(JwtError, match=message):
        parse_jwks(document)


def test_keys_of_other_types_are_left_out() -> None:
    key_set = parse_jwks(b'{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"OKP","crv":"Ed25519"}]}')
    assert key_set == JsonWebKeySet((), skipped=2)
