"""The SCRAM server and client against RFC 7677's SCRAM-SHA-256 example, and the ways an
exchange is refused (with RFC 5802's `e=` values)."""

from __future__ import annotations

import base64

import pytest

from moldau.protocol.sasl.plain import PlainFailure, authenticate_plain, plain_message
from moldau.protocol.sasl.scram import (
    ScramClient,
    ScramCredential,
    ScramFailure,
    ScramServer,
    make_credential,
)

# RFC 7677, section 3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return make_credential("SCRAM-SHA-256", "pencil", iterations=4096, salt=SALT)


def rfc_server() -> ScramServer:
    credentials = {"user": rfc_credential()}
    return ScramServer("SCRAM-SHA-256", credentials.get, nonce=SERVER_NONCE)


def test_the_server_answers_rfc_7677s_example_exactly() -> None:
    server = rfc_server()
    assert server.receive(CLIENT_FIRST) == SERVER_FIRST
    assert server.receive(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.user == "user"


def test_the_client_sends_rfc_7677s_example_exactly() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == CLIENT_FIRST
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_client_and_the_server_agree_on_both_mechanisms(mechanism: str) -> None:
    credentials = {"ali,ce=": make_credential(mechanism, "sécret", iterations=4096)}
    server = ScramServer(mechanism, credentials.get)
    client = ScramClient(mechanism, "ali,ce=", "sécret")
    client.verify(server.receive(client.final(server.receive(client.first()))))
    assert server.user == "ali,ce="


def test_a_wrong_password_is_an_invalid_proof() -> None:
    server = rfc_server()
    client = ScramClient("SCRAM-SHA-256", "user", "pen", nonce=CLIENT_NONCE)
    final = client.final(server.receive(client.first()))
    with pytest.raises(ScramFailure) as failure:
        server.receive(final)
    assert failure.value.error == "invalid-proof"
    assert not server.complete


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"n,,n=nobody,r=abc", "unknown-user"),
        (b"y,,n=user,r=abc", "channel-binding-not-supported"),
        (b"p=tls-unique,,n=user,r=abc", "channel-binding-not-supported"),
        (b"n,,n=user,r=abc,tokenauth=true", "extensions-not-supported"),
        (b"n,,n=us=er,r=abc", "invalid-username-encoding"),
        (b"n,,r=abc", "invalid-encoding"),
        (b"\xff\xfe", "invalid-encoding"),
        (b"n,," + b"n=user,r=" + b"a" * 5000, "invalid-encoding"),
    ],
)
def test_a_bad_first_message_is_refused(message: bytes, error: str) -> None:
    with pytest.raises(ScramFailure) as failure:
        rfc_server().receive(message)
    assert failure.value.error == error


@pytest.mark.parametrize(
    ("final", "error"),
    [
        (CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel-bindings-dont-match"),
        (CLIENT_FINAL.replace(b"hNlF$k0,", b"hNlF$k1,"), "other-error"),
        (CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"), "other-error"),
        (CLIENT_FINAL.replace(b"p=", b"p=!"), "invalid-encoding"),
        (CLIENT_FINAL.replace(b"p=dHzb", b"p=dHz"), "invalid-encoding"),
        (CLIENT_FINAL.replace(b"p=dHzb", b"p=AAAA"), "invalid-proof"),
        (CLIENT_FINAL.split(b",p=")[0] + b",p=AAAA", "invalid-proof"),
        (b"garbage", "invalid-encoding"),
    ],
)
def test_a_bad_final_message_is_refused(final: bytes, error: str) -> None:
    server = rfc_server()
    server.receive(CLIENT_FIRST)
    with pytest.raises(ScramFailure) as failure:
        server.receive(final)
    assert failure.value.error == error


def test_an_authorization_id_other_than_the_user_is_refused() -> None:
    with pytest.raises(ScramFailure, match="authorization id"):
        rfc_server().receive(b"n,a=admin,n=user,r=abc")


def test_too_few_stored_iterations_are_refused() -> None:
    weak = {"user": make_credential("SCRAM-SHA-256", "pencil", iterations=1000)}
    with pytest.raises(ScramFailure, match="less than the minimum 4096"):
        ScramServer("SCRAM-SHA-256", weak.get).receive(CLIENT_FIRST)


def test_the_client_refuses_a_server_error_or_a_wrong_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    client.final(SERVER_FIRST)
    with pytest.raises(ScramFailure) as failure:
        client.verify(b"e=invalid-proof")
    assert failure.value.error == "invalid-proof"
    with pytest.raises(ScramFailure):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))
    with pytest.raises(ScramFailure):  # a server nonce that does not extend the client's
        ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc").final(SERVER_FIRST)


def test_plain_checks_users_and_answers_kafkas_messages() -> None:
    users = {"alice": "alice-secret"}
    assert authenticate_plain(plain_message("alice", "alice-secret"), users) == "alice"
    assert authenticate_plain(b"alice\x00alice\x00alice-secret", users) == "alice"
    cases = [
        (plain_message("alice", "wrong"), "Authentication failed: Invalid username or password"),
        (plain_message("bob", "x"), "Authentication failed: Invalid username or password"),
        (plain_message("", "x"), "Authentication failed: username not specified"),
        (plain_message("alice", ""), "Authentication failed: password not specified"),
        (b"bob\x00alice\x00alice-secret", "different from username"),
        (b"alice", "expected 3 tokens, got 1"),
    ]
    for message, text in cases:
        with pytest.raises(PlainFailure, match=text):
            authenticate_plain(message, users)
