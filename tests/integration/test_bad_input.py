"""Hostile and malformed input gets Kafka's error code or a closed connection — never a crash.

Each test talks raw bytes to a real server and then proves, with a well-behaved request on a
fresh connection, that the server still serves everyone else.
"""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch


def _connect(server) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None if the server closed the connection."""
    header = _recv_exactly(sock, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">i", header)
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _api_versions_ok(server) -> None:
    with _connect(server) as sock:
        sock.sendall(
            encode_request(
                18, 3, 1, "probe", {"client_software_name": "probe", "client_software_version": "1"}
            )
        )
        frame = _read_frame(sock)
        assert frame is not None, "server stopped answering well-behaved clients"
        correlation_id, response = decode_response(18, 3, frame)
        assert correlation_id == 1
        assert response.error_code == ErrorCode.none
        assert any(key.api_key == 0 for key in response.api_keys)


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture(scope="module")
def server(module_server_factory):
    return module_server_factory(socket_request_max_bytes="1048576")


def test_frame_larger_than_socket_request_max_bytes_closes_the_connection(server) -> None:
    with _connect(server) as sock:
        sock.sendall(struct.pack(">i", 2**31 - 1) + b"\x00" * 16)
        assert _closed_by_server(sock)
    _api_versions_ok(server)


def test_negative_frame_size_closes_the_connection(server) -> None:
    with _connect(server) as sock:
        sock.sendall(struct.pack(">i", -5))
        assert _closed_by_server(sock)
    _api_versions_ok(server)


def test_truncated_frame_then_hang_up_leaves_server_healthy(server) -> None:
    with _connect(server) as sock:
        frame = encode_request(18, 3, 1, "x", {})
        sock.sendall(frame[: len(frame) // 2])
    _api_versions_ok(server)


def test_unknown_api_key_closes_the_connection(server) -> None:
    with _connect(server) as sock:
        body = struct.pack(">hhih", 999, 0, 5, -1)
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_by_server(sock)
    _api_versions_ok(server)


def test_unsupported_api_versions_version_gets_v0_response_with_ranges(server) -> None:
    with _connect(server) as sock:
        body = struct.pack(">hhih", 18, 99, 77, -1) + b"\x00\x00"
        sock.sendall(struct.pack(">i", len(body)) + body)
        frame = _read_frame(sock)
        assert frame is not None
        correlation_id, response = decode_response(18, 0, frame)
        assert correlation_id == 77
        assert response.error_code == ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[18] == (0, 4)
        assert ranges[0][0] == 0


def test_produce_v2_is_advertised_but_refused(server) -> None:
    with _connect(server) as sock:
        # acks int16, timeout int32, empty topic array: a well-formed v2 body.
        body = struct.pack(">hhih", 0, 2, 3, -1) + struct.pack(">hii", 1, 1000, 0)
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_by_server(sock)
    _api_versions_ok(server)


def test_garbage_body_closes_the_connection(server) -> None:
    with _connect(server) as sock:
        body = struct.pack(">hhih", 3, 12, 5, -1) + b"\x00" + b"\xff" * 40
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_by_server(sock)
    _api_versions_ok(server)


def _produce(sock: socket.socket, topic: str, records: bytes, correlation_id: int = 11):
    sock.sendall(
        encode_request(
            0,
            9,
            correlation_id,
            "bad-producer",
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
    )
    frame = _read_frame(sock)
    assert frame is not None
    _, response = decode_response(0, 9, frame)
    return response.responses[0].partition_responses[0]


def _create_topic(server, name: str) -> None:
    with _connect(server) as sock:
        sock.sendall(
            encode_request(
                3, 12, 1, "setup", {"topics": [{"name": name}], "allow_auto_topic_creation": True}
            )
        )
        frame = _read_frame(sock)
        assert frame is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with _connect(server) as sock:
            sock.sendall(encode_request(3, 12, 2, "setup", {"topics": [{"name": name}]}))
            frame = _read_frame(sock)
            assert frame is not None
            _, response = decode_response(3, 12, frame)
            if response.topics[0].error_code == ErrorCode.none:
                return
        time.sleep(0.05)
    pytest.fail(f"topic {name} was not created")


def test_bad_crc_wrong_magic_and_bad_counts_get_kafka_errors_and_log_is_untouched(server) -> None:
    _create_topic(server, "bad-batches")
    good = build_batch([NewRecord(key=b"k", value=b"v")])
    with _connect(server) as sock:
        corrupted = bytearray(good)
        corrupted[-1] ^= 0xFF
        assert (
            _produce(sock, "bad-batches", bytes(corrupted)).error_code == ErrorCode.corrupt_message
        )
        wrong_magic = bytearray(good)
        wrong_magic[16] = 1
        assert (
            _produce(sock, "bad-batches", bytes(wrong_magic)).error_code
            == ErrorCode.corrupt_message
        )
        assert _produce(sock, "bad-batches", good[:30]).error_code == ErrorCode.corrupt_message
        accepted = _produce(sock, "bad-batches", good)
        assert accepted.error_code == ErrorCode.none
        assert accepted.base_offset == 0, "rejected batches must not have taken offsets"


def test_thousand_idle_connections_do_not_stop_service(server) -> None:
    sockets = []
    try:
        for _ in range(1000):
            sockets.append(_connect(server))
        _api_versions_ok(server)
    finally:
        for sock in sockets:
            sock.close()


def test_client_that_never_reads_does_not_block_others(server) -> None:
    _create_topic(server, "never-read")
    big = build_batch([NewRecord(key=b"k", value=b"x" * 900_000)])
    with _connect(server) as sock:
        assert _produce(sock, "never-read", big).error_code == ErrorCode.none
    # A 30 KB client id makes each request large, so kernel socket buffers cannot absorb them all.
    fetch = encode_request(
        1,
        11,
        1,
        "greedy" * 5000,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 2_000_000,
            "isolation_level": 0,
            "topics": [
                {
                    "topic": "never-read",
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 2_000_000}
                    ],
                }
            ],
        },
    )
    with _connect(server) as greedy:
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.settimeout(2)
        sent = 0
        try:
            for _ in range(2000):  # 60 MB of requests, 1.8 GB of responses without back-pressure
                greedy.sendall(fetch)
                sent += 1
        except (TimeoutError, BlockingIOError):
            pass  # the server stopped reading from us: back-pressure works
        assert sent < 2000, "server kept reading although nothing was read back"
        _api_versions_ok(server)


def test_fuzzed_requests_for_every_api_never_break_the_server(server) -> None:
    """Mutate valid requests of every advertised API and version; the server must survive."""
    rng = random.Random(1234)
    with _connect(server) as sock:
        sock.sendall(encode_request(18, 0, 1, "fuzz", {}))
        frame = _read_frame(sock)
        assert frame is not None
        _, versions = decode_response(18, 0, frame)
    sent = 0
    for api in versions.api_keys:
        for version in range(api.min_version, api.max_version + 1):
            try:
                base = encode_request(api.api_key, version, 5, "fuzz", {})
            except Exception:
                continue
            for _ in range(4):
                mutated = bytearray(base[4:])
                for _ in range(rng.randint(1, 6)):
                    position = rng.randrange(8, len(mutated)) if len(mutated) > 8 else 0
                    mutated[position] = rng.randrange(256)
                if rng.random() < 0.3:
                    mutated += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
                with _connect(server) as sock:
                    sock.settimeout(0.5)
                    sock.sendall(struct.pack(">i", len(mutated)) + mutated)
                    try:
                        _read_frame(sock)
                    except TimeoutError:
                        pass  # a long-poll (Fetch) may legitimately wait
                sent += 1
    assert sent > 100
    _api_versions_ok(server)
