"""The client's TLS settings: librdkafka's names and the Java client's, each checked by a real
handshake over a socket pair against a server context that asks for a client certificate."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException
from moldau.client.tls import ssl_context_of
from tests.certificates import KEY_PASSWORD, Certificates, make_certificates


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _handshake(client: ssl.SSLContext, certificates: Certificates) -> tuple[str | None, str]:
    """(the client certificate's common name as the server saw it, the TLS version)."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certificates.path("server.pem"))
    server.load_verify_locations(certificates.path("ca.pem"))
    server.verify_mode = ssl.CERT_OPTIONAL
    left, right = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(right, server_side=True) as tls:
                seen["peer"] = tls.getpeercert()
        except ssl.SSLError as error:  # the client refused the server's certificate
            seen["error"] = error

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(left, server_hostname="localhost") as tls:
            version = str(tls.version())
    finally:
        thread.join(timeout=10)
    peer = seen.get("peer") or {}
    assert isinstance(peer, dict)
    names = [value for entry in peer.get("subject", ()) for key, value in entry]
    return (names[-1] if names else None), version


def _context(settings: dict[str, object]) -> ssl.SSLContext:
    context = ssl_context_of(ClientConfig({"security.protocol": "SSL", **settings}))
    assert context is not None
    return context


def test_librdkafka_names_verify_the_broker_and_present_a_certificate(
    certificates: Certificates,
) -> None:
    context = _context(
        {
            "ssl.ca.location": certificates.path("ca.pem"),
            "ssl.certificate.location": certificates.path("client.crt"),
            "ssl.key.location": certificates.path("client.key"),
        }
    )
    assert _handshake(context, certificates) == ("client", "TLSv1.3")


def test_java_pem_truststore_and_keystore_files(certificates: Certificates) -> None:
    context = _context(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("client.pem"),
        }
    )
    assert _handshake(context, certificates) == ("client", "TLSv1.3")


def test_java_inline_pem_and_enabled_protocols(certificates: Certificates) -> None:
    context = _context(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certificates.text("ca.pem"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": certificates.text("client.crt"),
            "ssl.keystore.key": certificates.text("client.key"),
            "ssl.enabled.protocols": "TLSv1.2",
        }
    )
    assert _handshake(context, certificates) == ("client", "TLSv1.2")


def test_java_pkcs12_keystore(certificates: Certificates) -> None:
    context = _context(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": certificates.path("client.p12"),
            "ssl.keystore.password": KEY_PASSWORD,
        }
    )
    assert _handshake(context, certificates)[0] == "client"


def test_a_truststore_without_the_brokers_authority_fails_the_handshake(
    certificates: Certificates,
) -> None:
    context = _context(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("foreign-ca.pem"),
        }
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(context, certificates)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl.truststore.location": "ca.pem"}, "ssl.truststore.type is JKS"),
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "client.pem"},
            "ssl.keystore.type is JKS",
        ),
        (
            {"ssl.ca.location": "ca.pem", "ssl.truststore.location": "ca.pem"},
            "ssl.ca.location and ssl.truststore.location are both set",
        ),
        (
            {"ssl.key.location": "client.key", "ssl.keystore.key": "x"},
            "ssl.key.location and ssl.keystore.key are both set",
        ),
        (
            {"ssl.keystore.certificate.chain": "x", "ssl.keystore.key": "y"},
            "need ssl.keystore.type=PEM",
        ),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.2 and TLSv1.3 only"),
        ({"ssl.protocol": "SSLv3"}, "ssl.protocol=SSLv3"),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "missing.pem"},
            "cannot read ssl.truststore.location",
        ),
    ],
)
def test_bad_java_settings_are_one_line_errors(
    certificates: Certificates, settings: dict[str, str], message: str
) -> None:
    directory = Path(certificates.path("ca.pem")).parent
    resolved = {
        name: str(directory / value) if name.endswith("location") else value
        for name, value in settings.items()
    }
    with pytest.raises(ConfigException, match=message):
        _context(resolved)


def test_java_settings_on_a_plaintext_connection_are_refused() -> None:
    with pytest.raises(ConfigException, match=r"security\.protocol is plaintext"):
        ssl_context_of(ClientConfig({"ssl.truststore.location": "/tmp/ca.pem"}))
