"""JSON Web Tokens as an OAUTHBEARER broker reads them: the compact JWS serialization (RFC 7515),
JSON Web Keys and key sets (RFC 7517) and the signature algorithms of RFC 7518 that Kafka's
validator accepts through jose4j: RS256/384/512, PS256/384/512 and ES256/384/512.

    <base64url(header JSON)> "." <base64url(claims JSON)> "." <base64url(signature)>

The signature covers the first two parts as sent (ASCII). ECDSA signatures are R || S, each as
long as the curve's order (32, 48 and 66 bytes), not DER. An unsecured JWS (`"alg":"none"`) has
an empty third part. `decode_jws` only parses; `verify_signature` checks one part against one
key; which keys and claims to trust is `token_validation.py`'s. Every malformed input raises
`JwtError` with a one-line reason (never another exception: the input is the client's).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

# alg -> (key type, hash, curve for EC keys)
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_CURVES: dict[str, tuple[type[ec.EllipticCurve], int]] = {
    "ES256": (ec.SECP256R1, 32),
    "ES384": (ec.SECP384R1, 48),
    "ES512": (ec.SECP521R1, 66),
}
_CURVE_NAMES: dict[str, ec.EllipticCurve] = {
    "P-256": ec.SECP256R1(),
    "P-384": ec.SECP384R1(),
    "P-521": ec.SECP521R1(),
}
SIGNATURE_ALGORITHMS = frozenset(
    f"{family}{bits}" for family in ("RS", "PS", "ES") for bits in _HASHES
)
MIN_RSA_BITS = 2048  # jose4j's floor for RSA verification keys
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


class JwtError(ValueError):
    """A token, key or key set that does not parse or verify; `str()` says why."""


@dataclass(frozen=True, slots=True)
class DecodedJws:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes  # the first two parts, as signed
    signature: bytes

    @property
    def algorithm(self) -> str:
        alg = self.header.get("alg")
        return alg if isinstance(alg, str) else ""

    @property
    def key_id(self) -> str | None:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else None


def base64url_decode(text: str, what: str) -> bytes:
    """Base64url without padding (RFC 7515 section 2); padding is tolerated."""
    stripped = text.rstrip("=")
    if _BASE64URL.fullmatch(stripped) is None:
        raise JwtError(f"the {what} is not base64url")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except (binascii.Error, ValueError):
        raise JwtError(f"the {what} is not base64url") from None


def base64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise JwtError(f"the {what} is not JSON") from None
    if not isinstance(value, dict):
        raise JwtError(f"the {what} is not a JSON object")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # (Python's json takes NaN and Infinity)


def decode_jws(token: str) -> DecodedJws:
    """The three parts of a compact JWS; the signature is not checked here."""
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtError(f"a JWS has 3 dot-separated parts, this token has {len(parts)}")
    header = _json_object(base64url_decode(parts[0], "JWS header"), "JWS header")
    claims = _json_object(base64url_decode(parts[1], "JWT claims"), "JWT claims")
    signature = base64url_decode(parts[2], "JWS signature")
    return DecodedJws(header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)


@dataclass(frozen=True, slots=True)
class JsonWebKey:
    """One public verification key of a key set."""

    key_type: str  # RSA or EC
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey = field(repr=False)
    key_id: str | None = None
    algorithm: str | None = None  # the JWK's own `alg`, when it names one
    use: str | None = None

    def suits(self, algorithm: str) -> bool:
        """The key may verify a signature made with `algorithm`."""
        if self.use not in (None, "sig") or self.algorithm not in (None, algorithm):
            return False
        if algorithm in _CURVES:
            curve, _ = _CURVES[algorithm]
            return isinstance(self.public_key, ec.EllipticCurvePublicKey) and isinstance(
                self.public_key.curve, curve
            )
        return algorithm in SIGNATURE_ALGORITHMS and isinstance(self.public_key, rsa.RSAPublicKey)


@dataclass(frozen=True, slots=True)
class JsonWebKeySet:
    """A JWKS: the keys it holds that Moldau can verify with (others are left out)."""

    keys: tuple[JsonWebKey, ...] = ()
    skipped: int = 0  # keys of other types, private keys' public halves aside

    def candidates(self, algorithm: str, key_id: str | None) -> list[JsonWebKey]:
        """The keys that may have signed a token: the one its `kid` names, or without a `kid`
        every key that suits its algorithm."""
        return [
            key
            for key in self.keys
            if (key_id is None or key.key_id == key_id) and key.suits(algorithm)
        ]

    def key_ids(self) -> set[str]:
        return {key.key_id for key in self.keys if key.key_id is not None}


def _integer(jwk: dict[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise JwtError(f"the key has no '{name}'")
    return int.from_bytes(base64url_decode(value, f"key's '{name}'"), "big")


def parse_jwk(jwk: Any) -> JsonWebKey | None:
    """One key of a set: None for a key type Moldau does not verify with (oct, OKP, ...)."""
    if not isinstance(jwk, dict):
        raise JwtError("a key is not a JSON object")
    kty = jwk.get("kty")
    kid, alg, use = (jwk.get(name) for name in ("kid", "alg", "use"))
    if not all(value is None or isinstance(value, str) for value in (kid, alg, use)):
        raise JwtError("a key's kid, alg and use must be strings")
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    try:
        if kty == "RSA":
            public_key = rsa.RSAPublicNumbers(_integer(jwk, "e"), _integer(jwk, "n")).public_key()
            if public_key.key_size < MIN_RSA_BITS:
                raise JwtError(
                    f"an RSA key of {public_key.key_size} bits (at least {MIN_RSA_BITS})"
                )
        elif kty == "EC":
            crv = jwk.get("crv")
            curve = _CURVE_NAMES.get(crv) if isinstance(crv, str) else None
            if curve is None:
                raise JwtError(f"an EC key on the curve {jwk.get('crv')!r} (P-256, P-384, P-521)")
            numbers = ec.EllipticCurvePublicNumbers(_integer(jwk, "x"), _integer(jwk, "y"), curve)
            public_key = numbers.public_key()
        else:
            return None
    except JwtError as error:
        raise JwtError(f"key {kid!r}: {error}") from None
    except ValueError as error:  # (cryptography: not a point on the curve, a bad exponent)
        raise JwtError(f"key {kid!r}: {error}") from None
    return JsonWebKey(kty, public_key, key_id=kid, algorithm=alg, use=use)


def parse_jwks(data: bytes) -> JsonWebKeySet:
    """A JWKS document (`{"keys": [...]}`); JwtError when it is not one or a key is broken."""
    document = _json_object(data, "JWKS")
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise JwtError("the JWKS has no 'keys' list")
    keys = [parse_jwk(entry) for entry in entries]
    usable = tuple(key for key in keys if key is not None)
    return JsonWebKeySet(usable, skipped=len(keys) - len(usable))


def verify_signature(jws: DecodedJws, key: JsonWebKey) -> bool:
    """The JWS's signature is `key`'s over its signing input (the algorithm is the header's)."""
    algorithm = jws.algorithm
    if not key.suits(algorithm):
        return False
    digest = _HASHES[algorithm[2:]]()
    public_key = key.public_key
    try:
        if isinstance(public_key, ec.EllipticCurvePublicKey):
            _, size = _CURVES[algorithm]
            if len(jws.signature) != 2 * size:
                return False
            r = int.from_bytes(jws.signature[:size], "big")
            s = int.from_bytes(jws.signature[size:], "big")
            public_key.verify(encode_dss_signature(r, s), jws.signing_input, ec.ECDSA(digest))
        elif algorithm.startswith("PS"):
            pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            public_key.verify(jws.signature, jws.signing_input, pss, digest)
        else:
            public_key.verify(jws.signature, jws.signing_input, padding.PKCS1v15(), digest)
    except InvalidSignature:
        return False
    return True
