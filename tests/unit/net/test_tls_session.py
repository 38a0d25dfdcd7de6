"""TlsSession without sockets: a client `SSLObject` and the session exchange bytes in memory."""

from __future__ import annotations

import ssl

import pytest

from moldau.net.tls import TlsFailed, TlsSession
from tests.certificates import Certificates, make_certificates


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _server(certificates: Certificates, *, client_auth: ssl.VerifyMode) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.path("server.pem"))
    context.load_verify_locations(certificates.path("ca.pem"))
    context.verify_mode = client_auth
    return context


class _Client:
    def __init__(self, certificates: Certificates, certificate: str | None) -> None:
        context = ssl.create_default_context(cafile=certificates.path("ca.pem"))
        if certificate:
            context.load_cert_chain(certificates.path(f"{certificate}.pem"))
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")

    def step(self) -> bytes:
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.outgoing.read()


def _handshake(client: _Client, session: TlsSession) -> None:
    for _ in range(10):
        sent = client.step()
        if sent:
            session.receive(sent)
        client.incoming.write(session.outgoing())
        if session.established:
            client.step()
            return
    raise AssertionError("the handshake did not complete")


def test_records_flow_both_ways_after_the_handshake(certificates: Certificates) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_REQUIRED))
    client = _Client(certificates, "client")
    _handshake(client, session)
    assert session.version == "TLSv1.3" and session.peer_certificate() is not None
    client.tls.write(b"x" * 100_000)
    assert session.receive(client.outgoing.read()) == b"x" * 100_000
    client.incoming.write(session.send(b"answer"))
    assert client.tls.read(100) == b"answer"


def test_a_client_without_a_certificate_fails_where_one_is_required(
    certificates: Certificates,
) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_REQUIRED))
    client = _Client(certificates, None)
    with pytest.raises(TlsFailed, match="did not return a certificate"):
        _handshake(client, session)


@pytest.mark.parametrize(
    ("certificate", "reason"), [("expired", "expired"), ("foreign", "self-signed")]
)
def test_an_untrusted_client_certificate_fails(
    certificates: Certificates, certificate: str, reason: str
) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_OPTIONAL))
    with pytest.raises(TlsFailed, match=f"certificate verify failed: .*{reason}"):
        _handshake(_Client(certificates, certificate), session)


def test_plaintext_is_refused_as_not_tls(certificates: Certificates) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_NONE))
    with pytest.raises(TlsFailed, match="a plaintext client"):
        session.receive(b"\x00\x00\x00\x15\x00\x12\x00\x03" + bytes(17))


def test_no_certificate_is_anonymous_where_none_is_asked(certificates: Certificates) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_NONE))
    _handshake(_Client(certificates, "client"), session)
    assert session.peer_certificate() is None


def test_the_client_closing_is_seen(certificates: Certificates) -> None:
    session = TlsSession(_server(certificates, client_auth=ssl.CERT_NONE))
    client = _Client(certificates, None)
    _handshake(client, session)
    try:
        client.tls.unwrap()
    except ssl.SSLWantReadError:
        pass
    session.receive(client.outgoing.read())
    assert session.closed
    assert session.close()  # our close_notify
