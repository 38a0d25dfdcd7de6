"""Fetches that wait for data (Kafka's delayed fetch), over raw sockets.

A fetch with fewer than `min_bytes` ready is parked until an append makes them ready, its
`max_wait` passes, or its partition goes away; responses on a connection still leave in request
order while one of its fetches waits.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch, iter_batches

from .support import unique_topic, wait_until

FETCH_VERSION = 12


def _connect(server: Any) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_frame(sock: socket.socket) -> bytes:
    header = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", header)
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return bytes(data)


def _call(sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> Any:
    sock.sendall(encode_request(api_key, version, 1, "fetch-wait", body))
    _, response = decode_response(api_key, version, _read_frame(sock))
    return response


def _create_topic(server: Any, name: str) -> None:
    with _connect(server) as sock:
        created = _call(
            sock,
            19,
            7,
            {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
             "timeout": 10_000},
        )  # fmt: skip
        assert created.topics[0].error_code == ErrorCode.none

        def has_leader() -> bool:
            metadata = _call(sock, 3, 12, {"topics": [{"name": name}]})
            partitions = metadata.topics[0].partitions
            return bool(partitions) and partitions[0].leader_id >= 0

        wait_until(has_leader, timeout=10, message=f"{name} has no leader")


def _produce(server: Any, topic: str, value: bytes) -> int:
    with _connect(server) as sock:
        response = _call(
            sock,
            0,
            9,
            {"acks": 1, "timeout": 5000,
             "topic_data": [{"name": topic, "partition_data": [
                 {"index": 0, "records": build_batch([NewRecord(key=None, value=value)])}]}]},
        )  # fmt: skip
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.none
    return int(partition.base_offset)


def _fetch_request(topic: str, offset: int, *, max_wait_ms: int, min_bytes: int) -> dict[str, Any]:
    return {
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
    }


def _values(partition: Any) -> list[bytes]:
    records = partition.records or b""
    return [record.value for batch in iter_batches(records) for record in batch.records()]


@pytest.fixture(scope="module")
def server(module_server_factory: Any) -> Any:
    return module_server_factory()


def test_a_parked_fetch_answers_when_a_record_arrives_and_keeps_response_order(server) -> None:
    topic = unique_topic("fetch-wait-order")
    _create_topic(server, topic)
    with _connect(server) as sock:
        # A fetch at the end of the empty partition that may wait 20 s, then ApiVersions behind it.
        sock.sendall(
            encode_request(
                1,
                FETCH_VERSION,
                7,
                "fetch-wait",
                _fetch_request(topic, 0, max_wait_ms=20_000, min_bytes=1),
            )
        )
        sock.sendall(encode_request(18, 3, 8, "fetch-wait", {}))
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # ApiVersions is answered, but must wait its turn
            sock.recv(1)
        sock.settimeout(30)
        produced_at = time.monotonic()
        offset = _produce(server, topic, b"wake up")
        fetch_id, fetch = decode_response(1, FETCH_VERSION, _read_frame(sock))
        waited = time.monotonic() - produced_at
        versions_id, versions = decode_response(18, 3, _read_frame(sock))
    assert (fetch_id, versions_id) == (7, 8)
    partition = fetch.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert (offset, partition.high_watermark) == (0, 1)
    assert _values(partition) == [b"wake up"]
    assert versions.error_code == ErrorCode.none
    assert waited < 10, f"the parked fetch answered {waited:.1f} s after the append"


def test_a_fetch_short_of_min_bytes_answers_with_what_there_is_at_max_wait(server) -> None:
    topic = unique_topic("fetch-wait-min-bytes")
    _create_topic(server, topic)
    _produce(server, topic, b"small")
    with _connect(server) as sock:
        started = time.monotonic()
        response = _call(
            sock, 1, FETCH_VERSION, _fetch_request(topic, 0, max_wait_ms=400, min_bytes=1 << 20)
        )
        waited = time.monotonic() - started
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert _values(partition) == [b"small"]
    assert waited >= 0.35, f"answered after {waited:.2f} s, before max_wait"


def test_a_parked_fetch_answers_an_error_when_its_topic_is_deleted(server) -> None:
    topic = unique_topic("fetch-wait-deleted")
    _create_topic(server, topic)
    with _connect(server) as fetcher, _connect(server) as admin:
        fetcher.sendall(
            encode_request(
                1,
                FETCH_VERSION,
                3,
                "fetch-wait",
                _fetch_request(topic, 0, max_wait_ms=20_000, min_bytes=1),
            )
        )
        deleted = _call(admin, 20, 6, {"topics": [{"name": topic}], "timeout": 10_000})
        assert deleted.responses[0].error_code == ErrorCode.none
        started = time.monotonic()
        _, response = decode_response(1, FETCH_VERSION, _read_frame(fetcher))
        waited = time.monotonic() - started
    partition = response.responses[0].partitions[0]
    assert partition.error_code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
    )
    assert waited < 10, f"answered {waited:.1f} s after the delete"


def test_a_fetch_at_the_end_with_a_newer_leader_epoch_is_answered_at_once(server) -> None:
    topic = unique_topic("fetch-wait-epoch")
    _create_topic(server, topic)
    with _connect(server) as sock:
        metadata = _call(sock, 3, 12, {"topics": [{"name": topic}]})
        leader_epoch = metadata.topics[0].partitions[0].leader_epoch
        request = _fetch_request(topic, 0, max_wait_ms=20_000, min_bytes=1)
        request["topics"][0]["partitions"][0]["current_leader_epoch"] = leader_epoch + 1
        started = time.monotonic()
        response = _call(sock, 1, FETCH_VERSION, request)
        waited = time.monotonic() - started
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.unknown_leader_epoch
    assert waited < 10, f"answered after {waited:.1f} s: the fetch was parked"
