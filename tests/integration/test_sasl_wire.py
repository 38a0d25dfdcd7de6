"""SASL on the wire, against a real `moldau server`: Kafka's state machine byte by byte, the
v0 handshake's bare tokens (KIP-43), the failure delay, KIP-368 sessions that end and are
renewed, the pre-authentication frame cap, and 1,000 unauthenticated connections announcing
1 GB frames."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from moldau.client.connection import BrokerConnection
from moldau.config.sasl import SaslCredentials
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.plain import plain_message
from moldau.protocol.sasl.scram import ScramClient

from .conftest import MoldauServer, ServerFactory
from .test_sasl_listeners import PLAIN_USERS, format_with_scram
from .test_tls_listeners import _rss_kb, listener_port, log_lines, poll_until
from .wire import Connection

FAILURE_DELAY_MS = 300
SESSION_MS = 2000


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory, tmp_path_factory) -> MoldauServer:
    data_dir = tmp_path_factory.mktemp("sasl-wire")
    format_with_scram(data_dir, "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    return module_server_factory(
        log_dirs=str(data_dir),
        listeners="PLAINTEXT://127.0.0.1:0,CLEAR://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLEAR:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.clear.plain.sasl.jaas.config": PLAIN_USERS,
            "connection.failed.authentication.delay.ms": str(FAILURE_DELAY_MS),
            "connections.max.reauth.ms": str(SESSION_MS),
        },
    )


@pytest.fixture(scope="module")
def port(server: MoldauServer) -> int:
    return listener_port(server, "CLEAR")


def closed(connection: Connection) -> bool:
    try:
        return connection._socket.recv(1) == b""
    except (ConnectionError, TimeoutError, OSError):
        return True


def authenticate_plain(connection: Connection, user: str, password: str, version: int = 2):
    handshake = connection.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake.error_code == ErrorCode.none
    return connection.request(
        ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": plain_message(user, password)}
    )


def metadata(connection: Connection):
    return connection.request(
        ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}
    )


def test_only_api_versions_and_sasl_are_served_before_authentication(port: int) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        versions = connection.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
        assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        with pytest.raises(ConnectionError):
            metadata(connection)


def test_a_session_authenticated_with_plain_is_served_and_gets_its_lifetime(port: int) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        answer = authenticate_plain(connection, "admin", "admin-secret")
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() * 1000 == SESSION_MS
        assert metadata(connection).brokers
        again = connection.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"x"})
        assert again.error_code == ErrorCode.illegal_sasl_state  # and the connection stays
        assert metadata(connection).brokers


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed(
    port: int,
) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        started = time.monotonic()
        answer = connection.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert time.monotonic() - started >= FAILURE_DELAY_MS / 1000
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert closed(connection)


def test_a_wrong_password_is_answered_after_the_delay_with_kafkas_message(
    server: MoldauServer, port: int
) -> None:
    before = len(log_lines(server, "failed authentication"))
    with Connection("127.0.0.1", port, timeout=5) as connection:
        started = time.monotonic()
        answer = authenticate_plain(connection, "admin", "nope")
        assert time.monotonic() - started >= FAILURE_DELAY_MS / 1000
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert closed(connection)
    assert len(poll_until(lambda: log_lines(server, "failed authentication")[before:], "log")) == 1


def test_sasl_authenticate_before_the_handshake_is_an_illegal_state(port: int) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        answer = connection.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00a\x00b"})
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert closed(connection)


def test_a_v0_handshake_takes_bare_tokens_kip_43(port: int) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        answer = connection.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})
        assert answer.error_code == ErrorCode.none
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        raw = connection._socket
        raw.sendall(struct.pack(">i", len(client.first())) + client.first())
        server_first = connection._read(struct.unpack(">i", connection._read(4))[0])
        final = client.final(server_first)
        raw.sendall(struct.pack(">i", len(final)) + final)
        client.verify(connection._read(struct.unpack(">i", connection._read(4))[0]))
        assert metadata(connection).brokers


def test_a_session_past_its_lifetime_is_closed_unless_renewed(port: int) -> None:
    with (
        Connection("127.0.0.1", port, timeout=5) as expiring,
        Connection("127.0.0.1", port, timeout=5) as renewed,
    ):
        assert authenticate_plain(expiring, "admin", "admin-secret").error_code == 0
        assert authenticate_plain(renewed, "admin", "admin-secret").error_code == 0
        ends = time.monotonic() + SESSION_MS / 1000
        while time.monotonic() < ends - SESSION_MS / 1000 * 0.4:  # served until near its end
            assert metadata(renewed).brokers
        answer = authenticate_plain(renewed, "admin", "admin-secret")  # KIP-368
        assert answer.error_code == ErrorCode.none and answer.session_lifetime
        poll_until(lambda: time.monotonic() > ends + 0.05, "the end of the first sessions")
        with pytest.raises(ConnectionError):
            metadata(expiring)
        assert metadata(renewed).brokers


def test_re_authentication_as_another_user_closes_the_connection(port: int) -> None:
    with Connection("127.0.0.1", port, timeout=5) as connection:
        assert authenticate_plain(connection, "admin", "admin-secret").error_code == 0
        answer = authenticate_plain(connection, "carol", 'carol;"secret')
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals" in answer.error_message
        assert closed(connection)


def test_the_frame_cap_applies_until_authentication(port: int) -> None:
    big = {"topics": [{"name": "t" * 200, "topic_id": None}] * 3000}  # about 600 KB
    with Connection("127.0.0.1", port, timeout=5) as connection:
        connection._socket.sendall(struct.pack(">i", 600 * 1024) + b"\x00" * 1024)
        assert closed(connection)
    with Connection("127.0.0.1", port, timeout=10) as connection:
        assert authenticate_plain(connection, "admin", "admin-secret").error_code == 0
        big["allow_auto_topic_creation"] = False
        assert connection.request(ApiKey.METADATA, 12, big) is not None


def test_a_thousand_unauthenticated_one_gigabyte_frames_leave_the_broker_small(
    server: MoldauServer, port: int
) -> None:
    assert server.process is not None
    rss_before = _rss_kb(server.process.pid)
    sockets = []
    for _ in range(1000):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(struct.pack(">i", 1 << 30) + b"\x00\x12\x00\x03" + b"x" * 60)
        sockets.append(sock)
    rss_peak = _rss_kb(server.process.pid)
    for sock in sockets:
        sock.settimeout(10)
        try:
            assert sock.recv(1) == b"", "an oversized unauthenticated frame was not refused"
        except ConnectionResetError:
            pass
        sock.close()
    rss_after = _rss_kb(server.process.pid)
    print(f"RSS {rss_before} -> {rss_peak} (1,000 connections) -> {rss_after} KiB")
    assert rss_peak < 200 * 1024 and rss_after < 200 * 1024
    with Connection("127.0.0.1", port, timeout=5) as connection:
        assert authenticate_plain(connection, "admin", "admin-secret").error_code == 0


def metadata_requests_for(port: int, credentials: SaslCredentials, seconds: float) -> int:
    """How many Metadata requests one `moldau.client` connection has answered in `seconds`."""

    async def use() -> int:
        connection = await BrokerConnection.open("127.0.0.1", port, sasl=credentials)
        answered = 0
        try:
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:
                await connection.request(ApiKey.METADATA, {"topics": []})
                answered += 1
                await asyncio.sleep(0.05)  # a client's pace, not a synchronization
        finally:
            await connection.close()
        return answered

    return asyncio.run(use())


def test_moldau_client_connections_re_authenticate_before_their_session_ends(
    server: MoldauServer, port: int
) -> None:
    before = len(log_lines(server, "session expired"))
    alice = SaslCredentials("SCRAM-SHA-256", "alice", "alice-secret")
    assert metadata_requests_for(port, alice, SESSION_MS / 1000 * 2.5) > 20
    assert len(log_lines(server, "session expired")) == before
