"""An identity provider in miniature for the OAUTHBEARER tests, made with `cryptography`:
signing keys, the JWKS that publishes them, and JWTs signed with them (RS/PS/ES 256-512).

    provider = IdentityProvider.with_keys("rsa-1", "ec-1")
    token = provider.token("rsa-1", sub="alice", aud="kafka")          # RS256, now..+1h
    provider.jwks()                                                    # {"keys": [...]}
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
_CURVES = {"ES256": (ec.SECP256R1, "P-256"), "ES384": (ec.SECP384R1, "P-384"),
           "ES512": (ec.SECP521R1, "P-521")}  # fmt: skip
_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64int(value: int, size: int | None = None) -> str:
    return b64(value.to_bytes(size or (value.bit_length() + 7) // 8, "big"))


def new_key(algorithm: str = "RS256") -> PrivateKey:
    if algorithm in _CURVES:
        return ec.generate_private_key(_CURVES[algorithm][0]())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(kid: str, key: PrivateKey) -> dict[str, Any]:
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        return {"kty": "RSA", "kid": kid, "use": "sig", "n": _b64int(numbers.n),
                "e": _b64int(numbers.e)}  # fmt: skip
    point = public.public_numbers()
    size = (public.curve.key_size + 7) // 8
    crv = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}[public.curve.name]
    return {"kty": "EC", "kid": kid, "use": "sig", "crv": crv,
            "x": _b64int(point.x, size), "y": _b64int(point.y, size)}  # fmt: skip


def sign(claims: dict[str, Any], key: PrivateKey, *, algorithm: str = "RS256",
         kid: str | None = None, header: dict[str, Any] | None = None) -> str:  # fmt: skip
    """A compact JWS of `claims`, signed by `key` with `algorithm`."""
    head = {"alg": algorithm, "typ": "JWT", **({"kid": kid} if kid else {}), **(header or {})}
    signing_input = f"{b64(json.dumps(head).encode())}.{b64(json.dumps(claims).encode())}"
    digest = _HASHES[algorithm[2:]]()
    data = signing_input.encode()
    if isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(digest)))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    elif algorithm.startswith("PS"):
        pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
        signature = key.sign(data, pss, digest)
    else:
        signature = key.sign(data, padding.PKCS1v15(), digest)
    return f"{signing_input}.{b64(signature)}"


@dataclass
class IdentityProvider:
    keys: dict[str, tuple[str, PrivateKey]] = field(default_factory=dict)  # kid -> (alg, key)
    issuer: str = "https://idp.test"

    @classmethod
    def with_keys(cls, *kids: str, algorithm: str = "RS256") -> IdentityProvider:
        return cls({kid: (algorithm, new_key(algorithm)) for kid in kids})

    def add(self, kid: str, algorithm: str = "RS256") -> None:
        self.keys[kid] = (algorithm, new_key(algorithm))

    def jwks(self) -> str:
        return json.dumps({"keys": [jwk(kid, key) for kid, (_, key) in self.keys.items()]})

    def token(self, kid: str, *, lifetime_s: float = 3600, **claims: Any) -> str:
        algorithm, key = self.keys[kid]
        now = time.time()
        body = {"iss": self.issuer, "iat": int(now), "exp": int(now + lifetime_s), **claims}
        return sign({k: v for k, v in body.items() if v is not None}, key,
                    algorithm=algorithm, kid=kid)  # fmt: skip
