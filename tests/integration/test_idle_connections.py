"""connections.max.idle.ms: a connection with no requests for that long is closed by the broker;
one that keeps sending stays open past it."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode

IDLE_MS = 1000


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    sock.sendall(encode_request(18, 3, correlation_id, "idle-test", {}))
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    answered, response = decode_response(18, 3, _recv_exactly(sock, size))
    assert (answered, response.error_code) == (correlation_id, ErrorCode.none)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed a connection that was in use"
        data += chunk
    return bytes(data)


def _closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_connections_close_and_busy_ones_stay_open(start_server: Any) -> None:
    server = start_server(connections_max_idle_ms=str(IDLE_MS))
    busy = socket.create_connection((server.host, server.port), timeout=10)
    idle = socket.create_connection((server.host, server.port), timeout=10)
    with busy, idle:
        _api_versions(idle, 1)
        last_request = time.monotonic()
        closed_at = None
        # The busy connection sends a request every IDLE_MS / 4 for 2.5 idle timeouts, while the
        # other is watched for the broker's close.
        for correlation_id in range(1, 11):
            _api_versions(busy, correlation_id)
            pace_until = time.monotonic() + IDLE_MS / 4000
            while closed_at is None and (remaining := pace_until - time.monotonic()) > 0:
                if _closed_by_server(idle, remaining):
                    closed_at = time.monotonic()
            if closed_at is not None and (remaining := pace_until - time.monotonic()) > 0:
                time.sleep(remaining)  # pacing the busy client, not waiting for the broker
        if closed_at is None:
            assert _closed_by_server(idle, 10), "the idle connection was never closed"
            closed_at = time.monotonic()
        idle_s = closed_at - last_request
        assert IDLE_MS / 1000 * 0.9 <= idle_s <= IDLE_MS / 1000 * 3, f"closed after {idle_s:.2f} s"
        _api_versions(busy, 11)  # still open after 2.5 idle timeouts of traffic
