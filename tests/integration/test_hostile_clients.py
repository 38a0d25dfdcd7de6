"""No client can take a node down: the attacks a hardening campaign found, each against a real
server, each followed by proof that the server lives, stayed within its memory bound and kept
answering a well-behaved client.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode

from .conftest import MoldauServer


def _connect(server: MoldauServer, *, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_frame(sock: socket.socket) -> bytes | None:
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


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _healthy_round_trip_s(server: MoldauServer) -> float:
    """Seconds a new client waits for its ApiVersions answer; fails if it gets none."""
    started = time.monotonic()
    with _connect(server) as sock:
        sock.sendall(encode_request(18, 3, 1, "probe", {"client_software_name": "probe"}))
        frame = _read_frame(sock)
    assert frame is not None, "the server stopped answering well-behaved clients"
    _, response = decode_response(18, 3, frame)
    assert response.error_code == ErrorCode.none
    return time.monotonic() - started


def _rss_mb(server: MoldauServer) -> float:
    assert server.process is not None
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def _no_tracebacks(server: MoldauServer) -> None:
    output = server.output_tail(10_000)
    assert "Traceback" not in output, output[-4000:]


@pytest.fixture(scope="module")
def server(module_server_factory) -> MoldauServer:
    return module_server_factory()


def _frame(api_key: int, version: int, body: bytes, *, flexible: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 6) + b"attack"
    if flexible:
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


# --- 1. lengths the native decoder would trust -------------------------------------------------


def test_the_21_byte_metadata_frame_closes_only_its_connection(server: MoldauServer) -> None:
    with _connect(server) as sock:
        sock.sendall(bytes.fromhex("000000110003000c0000000200017800ffffffff0f"))
        assert _closed_by_server(sock)
    assert _healthy_round_trip_s(server) < 1.0
    _no_tracebacks(server)


@pytest.mark.parametrize(
    ("api_key", "version", "body", "flexible"),
    [
        (3, 12, b"\xff\xff\xff\xff\x0f\x00\x00\x00", True),  # Metadata topics: 2^32 - 2
        (3, 4, b"\x7f\xff\xff\xff\x00", False),  # Metadata topics: 2^31 - 1, non-flexible
        (
            1,
            12,
            struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + b"\xf0\xff\xff\xff\x0f",
            True,
        ),
        (0, 9, b"\x00\x00\x01\x00\x00\x13\x88" + b"\xfe\xff\xff\xff\x0f", True),
        (19, 7, b"\xff\xff\xff\xff\x07", True),  # CreateTopics topics
        (32, 4, b"\xff\xff\xff\xff\x0f", True),  # DescribeConfigs resources
    ],
    ids=[
        "metadata-v12",
        "metadata-v4",
        "fetch-v12",
        "produce-v9",
        "create-topics-v7",
        "describe-configs-v4",
    ],
)
def test_arrays_claiming_more_elements_than_bytes_close_the_connection(
    server: MoldauServer, api_key: int, version: int, body: bytes, flexible: bool
) -> None:
    with _connect(server) as sock:
        sock.sendall(_frame(api_key, version, body, flexible=flexible))
        assert _closed_by_server(sock)
    assert _healthy_round_trip_s(server) < 1.0
    _no_tracebacks(server)


# --- 2. nulls where the schema allows none ------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "body", "flexible"),
    [
        (0, 3, struct.pack(">hhii", -1, 1, 5000, -1), False),  # Produce: null topic_data
        (0, 9, b"\x00" + struct.pack(">hi", 1, 5000) + b"\x00\x00", True),
        (2, 1, struct.pack(">ii", -1, -1), False),  # ListOffsets: null topics
        (2, 7, struct.pack(">ib", -1, 0) + b"\x00\x00", True),
        (55, 0, b"\x00\x00", True),  # DescribeQuorum: null topics
        (9, 8, b"\x00\x00\x00", True),  # OffsetFetch v8: null groups
        (
            11,
            5,
            struct.pack(">hii", -1, 10000, 10000)
            + b"\x00\x00"
            + b"\x00\x00"
            + struct.pack(">i", -1),
            False,
        ),
    ],
    ids=[
        "produce-v3",
        "produce-v9",
        "list-offsets-v1",
        "list-offsets-v7",
        "describe-quorum-v0",
        "offset-fetch-v8",
        "join-group-v5",
    ],
)
def test_a_null_the_schema_does_not_allow_closes_the_connection_without_a_traceback(
    server: MoldauServer, api_key: int, version: int, body: bytes, flexible: bool
) -> None:
    with _connect(server) as sock:
        sock.sendall(_frame(api_key, version, body, flexible=flexible))
        assert _closed_by_server(sock)
    assert _healthy_round_trip_s(server) < 1.0
    _no_tracebacks(server)


def test_a_null_the_schema_allows_is_answered(server: MoldauServer) -> None:
    """Metadata v12 with null topics means every topic: an answer, not a closed connection."""
    with _connect(server) as sock:
        sock.sendall(_frame(3, 12, b"\x00\x00\x00\x00", flexible=True))
        frame = _read_frame(sock)
    assert frame is not None
    _, response = decode_response(3, 12, frame)
    assert response.brokers
    _no_tracebacks(server)
