"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ScramSaslServer and
ScramSaslClient speak them: no channel binding (gs2 header `n,,` or `n,a=<authzid>,`), no
SASLprep (passwords are taken as UTF-8, as Kafka does), iterations at least 4096.

The exchange, client first:

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<nonce>,p=<base64 ClientKey XOR ClientSignature>
    server-final   v=<base64 ServerSignature>       (or e=<error>, which Kafka never sends)

    SaltedPassword = PBKDF2-HMAC(password, salt, iterations)     StoredKey = H(ClientKey)
    ClientKey = HMAC(SaltedPassword, "Client Key")                ServerKey = HMAC(SaltedPassword,
    AuthMessage = client-first-bare "," server-first "," client-final-without-proof   "Server Key")

`ScramServer` goes first-message -> final-message -> complete; any step may raise `ScramFailure`
carrying RFC 5802's `e=` value (`invalid-proof`, `unknown-user`, ...), after which the exchange
is over. Primitives are hashlib's and hmac's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # what Kafka accepts in AlterUserScramCredentials
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The mechanism's number on the wire (Kafka's ScramMechanism: 0 is UNKNOWN).
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {number: name for name, number in MECHANISM_TYPES.items()}
# The longest message either side takes: names, nonces and proofs are short.
MAX_MESSAGE_BYTES = 4096

_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<extensions>(?:,[a-zA-Z]+=[^,]*)*))"
)
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?:,[a-zA-Z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)"
)
_SERVER_FIRST = re.compile(
    r"(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
    r"i=(?P<iterations>[0-9]+)(?:,.*)?"
)
_SERVER_FINAL = re.compile(r"(?:e=(?P<error>[^,]*)|v=(?P<signature>[A-Za-z0-9+/=]+))(?:,.*)?")


class ScramFailure(Exception):
    """The exchange failed; `error` is RFC 5802's server-error-value, `str()` says why."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What the server keeps of a password (never the password itself)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password, salt, iterations)


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, HASHES[mechanism])


def _hash(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], data).digest()


def credential_from_salted_password(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=_hash(mechanism, client_key),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (one PBKDF2 of its cost)."""
    salted = salted_password(mechanism, password.encode(), credential.salt, credential.iterations)
    made = credential_from_salted_password(
        mechanism, salted, credential.salt, credential.iterations
    )
    return hmac.compare_digest(made.stored_key, credential.stored_key)


def make_credential(
    mechanism: str, password: str, *, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def new_nonce() -> str:
    """A random nonce of letters and digits, as Kafka's (RFC 5802 allows any printable but
    the comma)."""
    return secrets.token_hex(20)


def decode_name(name: str) -> str:
    """A saslname: `=2C` is a comma and `=3D` an equals sign; any other `=` is invalid."""
    if re.search(r"=(?!2C|3D)", name):
        raise ScramFailure("invalid-username-encoding", "Invalid username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _text(message: bytes) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramFailure("invalid-encoding", f"a SCRAM message of {len(message)} bytes")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramFailure("invalid-encoding", "a SCRAM message that is not UTF-8") from None


def _base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramFailure("invalid-encoding", f"Invalid base64 in the {what}") from None


@dataclass(frozen=True, slots=True)
class ClientFirst:
    user: str
    authorization_id: str
    nonce: str
    bare: str
    gs2_header: str


def parse_client_first(message: bytes) -> ClientFirst:
    text = _text(message)
    if text[:2] in ("y,", "p="):
        raise ScramFailure("channel-binding-not-supported", "Channel binding is not supported")
    match = _CLIENT_FIRST.fullmatch(text)
    if match is None:
        raise ScramFailure("invalid-encoding", "Invalid SCRAM client first message format")
    if match["extensions"]:
        raise ScramFailure(
            "extensions-not-supported", "Unsupported extensions will not be processed"
        )
    authzid = match["authzid"] or ""
    return ClientFirst(
        user=decode_name(match["name"]),
        authorization_id=decode_name(authzid) if authzid else "",
        nonce=match["nonce"],
        bare=match["bare"],
        gs2_header=text[: match.start("bare")],
    )


class ScramServer:
    """The server side of one exchange. `lookup(user)` is the stored credential or None."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: str | None = None,
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce or new_nonce()
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self.user: str | None = None  # once the exchange is complete
        self.complete = False

    def receive(self, message: bytes) -> bytes:
        """The client's next message in; the server's answer out."""
        if self.complete:
            raise ScramFailure("other-error", "The SCRAM exchange is already complete")
        if self._first is None:
            return self._receive_first(message)
        return self._receive_final(message)

    def _receive_first(self, message: bytes) -> bytes:
        first = parse_client_first(message)
        credential = self._lookup(first.user)
        if credential is None:
            raise ScramFailure("unknown-user", "Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != first.user:
            raise ScramFailure(
                "other-error",
                "Authentication failed: Client requested an authorization id that is different "
                "from username",
            )
        if credential.iterations < MIN_ITERATIONS:
            raise ScramFailure(
                "other-error",
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism}",
            )
        self._first, self._credential = first, credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = (
            f"r={first.nonce}{self._server_nonce},s={salt},i={credential.iterations}"
        )
        return self._server_first.encode()

    def _receive_final(self, message: bytes) -> bytes:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        match = _CLIENT_FINAL.fullmatch(_text(message))
        if match is None:
            raise ScramFailure("invalid-encoding", "Invalid SCRAM client final message format")
        if _base64(match["binding"], "channel binding") != first.gs2_header.encode():
            raise ScramFailure("channel-bindings-dont-match", "Invalid channel binding")
        # Kafka checks that the nonce ends with the server-first one, not that it equals it:
        # librdkafka 2.0 sends its own nonce once more in front, and Kafka accepts that.
        if not match["nonce"].endswith(first.nonce + self._server_nonce):
            raise ScramFailure("other-error", "Invalid client nonce in the final client message.")
        proof = _base64(match["proof"], "client proof")
        auth_message = f"{first.bare},{self._server_first},{match['without_proof']}".encode()
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFailure("invalid-proof", "Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_hash(self.mechanism, client_key), credential.stored_key):
            raise ScramFailure("invalid-proof", "Invalid client credentials")
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        self.complete = True
        self.user = first.user
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side: `first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(
        self, mechanism: str, user: str, password: str, *, nonce: str | None = None
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._password = password.encode()
        self._nonce = nonce or new_nonce()
        self._bare = f"n={encode_name(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise ScramFailure("invalid-encoding", f"Invalid SCRAM server first message {text!r}")
        if not match["nonce"].startswith(self._nonce) or match["nonce"] == self._nonce:
            raise ScramFailure("other-error", "The server's nonce does not extend the client's")
        iterations = int(match["iterations"])
        if iterations < MIN_ITERATIONS:
            raise ScramFailure("other-error", f"The server asks for {iterations} iterations")
        salt = _base64(match["salt"], "salt")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c=biws,r={match['nonce']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _hash(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = _hmac(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        match = _SERVER_FINAL.fullmatch(_text(server_final))
        if match is None:
            raise ScramFailure("invalid-encoding", "Invalid SCRAM server final message")
        if match["error"] is not None:
            raise ScramFailure(match["error"], f"The server refused: {match['error']}")
        signature = _base64(match["signature"], "server signature")
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramFailure("invalid-proof", "The server's signature does not match")
