"""Kafka's two ways for a broker to accept an OAUTHBEARER token, each a function of the token and
the wall clock:

- `UnsecuredTokenValidator` — Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, its default,
  for development: an unsecured JWS (`"alg":"none"`, no signature) whose principal claim (`sub`)
  is a non-blank string, `exp` a number not yet past (minus the allowed clock skew), `iat`, if
  present, not ahead (plus the skew) and before `exp`, and whose scope holds the required scope.
- `SignedTokenValidator` — Kafka's OAuthBearerValidatorCallbackHandler (KIP-768): a JWS signed
  (RS, PS or ES with SHA-256/384/512) by a key of the identity provider's JWKS, the one its
  `kid` names; `exp` and `iat` present, `exp` not past and `nbf` not ahead (with the clock
  skew), the expected audience and issuer when configured (a token with an audience is refused
  when none is expected, as jose4j does for Kafka), and a non-blank subject claim.

Either returns an `OAuthBearerToken` (principal, scope, when it expires) or raises
`InvalidToken`, whose `status` (`invalid_token` or `insufficient_scope`, RFC 6750) and `scope`
are all the client is told (RFC 7628's JSON error) and whose `str()` is what the broker logs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moldau.protocol.sasl.jwt import (
    SIGNATURE_ALGORITHMS,
    DecodedJws,
    JsonWebKeySet,
    JwtError,
    decode_jws,
    verify_signature,
)

INVALID_TOKEN = "invalid_token"
INSUFFICIENT_SCOPE = "insufficient_scope"
# A NumericDate is seconds since the epoch; later than this (year 5138) is not a date.
_MAX_NUMERIC_DATE = 1e11


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthBearerToken:
    """A token a validator accepted."""

    principal: str
    scope: frozenset[str]
    expires_at_ms: int  # wall clock: it bounds the session (KIP-368)
    issued_at_ms: int | None = None


class InvalidToken(Exception):
    """A token refused: `str()` says why (for the broker's log), `error_json()` is what the
    client is told."""

    def __init__(self, reason: str, *, status: str = INVALID_TOKEN, scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def error_json(self) -> str:
        """RFC 7628 section 3.2.2's error, written as Kafka's OAuthBearerSaslServer writes it."""
        text = '{"status":' + json.dumps(self.status)
        if self.scope is not None:
            text += ', "scope":' + json.dumps(self.scope)
        return text + "}"


TokenValidator = Callable[[str, int], OAuthBearerToken]  # (token, now in ms) -> token


def _decode(token: str) -> DecodedJws:
    try:
        return decode_jws(token)
    except JwtError as error:
        raise InvalidToken(f"malformed token: {error}") from None


def _numeric_date(claims: dict[str, Any], name: str, *, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"the token has no '{name}' claim")
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= _MAX_NUMERIC_DATE
    ):
        raise InvalidToken(f"the '{name}' claim is not a date in seconds")
    return float(value)


def _principal(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidToken(f"no principal name in the token's '{name}' claim")
    return value


def _scope(claims: dict[str, Any], name: str) -> frozenset[str]:
    """A scope claim is one string (one scope, as Kafka reads it) or a list of strings."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise InvalidToken(f"the '{name}' claim is neither a string nor a list of strings")
    if any(not item.strip() for item in items):
        raise InvalidToken(f"the '{name}' claim holds an empty scope")
    return frozenset(item.strip() for item in items)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _check_expiry(expires: float, now_ms: int, skew_ms: int) -> None:
    """Expired on or after `exp` (minus the skew), as Kafka's validators and jose4j judge it."""
    if now_ms - skew_ms >= _ms(expires):
        raise InvalidToken(f"the token expired (exp {expires:.0f}, now {now_ms // 1000})")


class UnsecuredTokenValidator:
    """Kafka's default validator: unsecured tokens, for development only."""

    def __init__(
        self,
        *,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        required_scope: Iterable[str] = (),
        clock_skew_ms: int = 0,
    ) -> None:
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.required_scope = tuple(required_scope)
        self.clock_skew_ms = clock_skew_ms

    def __call__(self, token: str, now_ms: int) -> OAuthBearerToken:
        jws = _decode(token)
        if jws.header.get("alg") != "none":
            raise InvalidToken(
                f'an unsecured token must have "alg":"none", not {_short(jws.header.get("alg"))} '
                "(this listener validates no signature)"
            )
        if jws.signature:
            raise InvalidToken("an unsecured token must not carry a signature")
        claims = jws.claims
        principal = _principal(claims, self.principal_claim)
        scope = _scope(claims, self.scope_claim)
        expires = _numeric_date(claims, "exp", required=True)
        issued = _numeric_date(claims, "iat", required=False)
        assert expires is not None
        skew = self.clock_skew_ms
        if issued is not None and _ms(issued) > now_ms + skew:
            raise InvalidToken(f"the token was issued in the future (iat {issued:.0f})")
        _check_expiry(expires, now_ms, skew)
        if issued is not None and expires <= issued:
            raise InvalidToken(f"the token expires (exp {expires:.0f}) before it was issued")
        for required in self.required_scope:
            if required not in scope:
                raise InvalidToken(
                    f"the token's scope {_short(sorted(scope))} lacks the required scope "
                    f"{required!r}",
                    status=INSUFFICIENT_SCOPE,
                    scope=" ".join(self.required_scope),
                )
        return OAuthBearerToken(
            principal=principal,
            scope=scope,
            expires_at_ms=_ms(expires),
            issued_at_ms=None if issued is None else _ms(issued),
        )


class SignedTokenValidator:
    """KIP-768's validator: `keys()` is the identity provider's current JWKS; `missing_key(kid)`
    is told of a `kid` the JWKS lacks (the JWKS may be stale: the caller refreshes it)."""

    def __init__(
        self,
        keys: Callable[[], JsonWebKeySet],
        *,
        missing_key: Callable[[str], None] = lambda kid: None,
        expected_audience: Iterable[str] = (),
        expected_issuer: str | None = None,
        subject_claim: str = "sub",
        scope_claim: str = "scope",
        clock_skew_s: int = 30,
    ) -> None:
        self._keys = keys
        self._missing_key = missing_key
        self.expected_audience = frozenset(expected_audience)
        self.expected_issuer = expected_issuer
        self.subject_claim = subject_claim
        self.scope_claim = scope_claim
        self.clock_skew_ms = clock_skew_s * 1000

    def __call__(self, token: str, now_ms: int) -> OAuthBearerToken:
        jws = _decode(token)
        self._check_signature(jws)
        claims = jws.claims
        expires = _numeric_date(claims, "exp", required=True)
        issued = _numeric_date(claims, "iat", required=True)
        not_before = _numeric_date(claims, "nbf", required=False)
        assert expires is not None and issued is not None
        skew = self.clock_skew_ms
        _check_expiry(expires, now_ms, skew)
        if not_before is not None and now_ms + skew < _ms(not_before):
            raise InvalidToken(f"the token is not valid yet (nbf {not_before:.0f})")
        self._check_audience(claims.get("aud"))
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise InvalidToken(
                f"the token's issuer {_short(claims.get('iss'))} is not the expected "
                f"{self.expected_issuer!r}"
            )
        scope = _scope(claims, self.scope_claim)
        principal = _principal(claims, self.subject_claim).strip()
        return OAuthBearerToken(
            principal=principal, scope=scope, expires_at_ms=_ms(expires), issued_at_ms=_ms(issued)
        )

    def _check_signature(self, jws: DecodedJws) -> None:
        algorithm = jws.algorithm
        if algorithm not in SIGNATURE_ALGORITHMS:
            raise InvalidToken(
                f"the token's algorithm {_short(jws.header.get('alg'))} is not one of "
                "RS256/384/512, PS256/384/512, ES256/384/512"
            )
        if "crit" in jws.header:
            raise InvalidToken("the token has critical header parameters (crit), not supported")
        key_set = self._keys()
        candidates = key_set.candidates(algorithm, jws.key_id)
        if not candidates:
            kid = jws.key_id
            if kid is not None and kid not in key_set.key_ids():
                self._missing_key(kid)
            raise InvalidToken(
                f"no key of the JWKS ({len(key_set.keys)} known) verifies {algorithm} with "
                f"kid {_short(kid)}"
            )
        if not any(verify_signature(jws, key) for key in candidates):
            raise InvalidToken(f"the token's signature does not verify (kid {_short(jws.key_id)})")

    def _check_audience(self, audience: Any) -> None:
        given = [audience] if isinstance(audience, str) else audience
        if given is not None and (
            not isinstance(given, list) or not all(isinstance(item, str) for item in given)
        ):
            raise InvalidToken("the 'aud' claim is neither a string nor a list of strings")
        if not self.expected_audience:
            if given is not None:
                raise InvalidToken(
                    "the token names an audience (aud) but sasl.oauthbearer.expected.audience "
                    "is not set"
                )
            return
        if not given or self.expected_audience.isdisjoint(given):
            raise InvalidToken(
                f"the token's audience {_short(audience)} is none of the expected "
                f"{sorted(self.expected_audience)}"
            )


def _short(value: Any) -> str:
    """A value from the token for the log: quoted, on one line, not too long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
