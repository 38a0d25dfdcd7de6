"""Certificates for the TLS tests, made with the `cryptography` package (no openssl binary).

`make_certificates(directory)` writes, as PEM files:

- `ca.pem` — a certificate authority (the trust store of servers and clients);
- `server.pem` (key + chain, Kafka's `ssl.keystore.location` form), `server.crt`, `server.key`
  — signed by the CA, SANs 127.0.0.1, ::1 and localhost;
- `client.pem`/`.crt`/`.key` — a client certificate of the CA (CN=client,OU=test,O=Moldau);
- `expired.*` — a client certificate of the CA that expired yesterday;
- `foreign.*` and `foreign-ca.pem` — a client certificate of another CA;
- `server-encrypted.pem` and `server-encrypted.key` — the server's key encrypted (PKCS#8) with
  `KEY_PASSWORD`;
- `server.p12`, `client.p12` — key and chain as PKCS#12, protected by `KEY_PASSWORD`.

Keys are EC P-256: fast to make, so every test module can have its own.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "changeit-7"
CLIENT_PRINCIPAL = "User:CN=client,OU=test,O=Moldau"
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Certificates:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    def text(self, name: str) -> str:
        return (self.directory / name).read_text()


def _name(common_name: str, unit: str = "test") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Moldau"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _authority(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, "authority"))
        .issuer_name(_name(common_name, "authority"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def _leaf(
    common_name: str,
    authority: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    *,
    server: bool,
    expired: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    authority_key, authority_certificate = authority
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = (
        (now - 10 * _DAY, now - _DAY) if expired else (now - _DAY, now + 30 * _DAY)
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(authority_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
    return key, builder.sign(authority_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    authority = _authority("Moldau Test CA")
    foreign_authority = _authority("Another CA")
    ca_pem = _pem(authority[1])
    (directory / "ca.pem").write_bytes(ca_pem)
    (directory / "foreign-ca.pem").write_bytes(_pem(foreign_authority[1]))
    leaves = {
        "server": _leaf("localhost", authority, server=True),
        "client": _leaf("client", authority, server=False),
        "expired": _leaf("expired", authority, server=False, expired=True),
        "foreign": _leaf("foreign", foreign_authority, server=False),
    }
    for name, (key, certificate) in leaves.items():
        issuer = foreign_authority if name == "foreign" else authority
        chain = _pem(certificate) + _pem(issuer[1])
        (directory / f"{name}.crt").write_bytes(chain)
        (directory / f"{name}.key").write_bytes(_key_pem(key))
        (directory / f"{name}.pem").write_bytes(_key_pem(key) + chain)
    for name in ("server", "client"):
        key, certificate = leaves[name]
        (directory / f"{name}.p12").write_bytes(
            pkcs12.serialize_key_and_certificates(
                name.encode(),
                key,
                certificate,
                [authority[1]],
                serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
            )
        )
    server_key, server_certificate = leaves["server"]
    (directory / "server-encrypted.key").write_bytes(_key_pem(server_key, KEY_PASSWORD))
    (directory / "server-encrypted.pem").write_bytes(
        _key_pem(server_key, KEY_PASSWORD) + _pem(server_certificate) + ca_pem
    )
    return Certificates(directory)
