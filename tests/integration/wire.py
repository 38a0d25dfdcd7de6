"""Raw Kafka requests over a socket, for tests that must see the exact bytes on the wire.

Requests are encoded and responses decoded with kio's generated message types (through
`moldau.protocol.adapter`); record data is passed through untouched.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from types import TracebackType
from typing import Any

from moldau.protocol.adapter import decode_response, encode_request


class Connection:
    def __init__(self, host: str, port: int, *, timeout: float = 30.0) -> None:
        self._socket = socket.create_connection((host, port), timeout=timeout)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_ids = itertools.count(1)

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self._socket.close()

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = next(self._correlation_ids)
        self._socket.sendall(encode_request(api_key, version, correlation_id, "wire-test", body))
        (size,) = struct.unpack(">i", self._read(4))
        answered_id, response = decode_response(api_key, version, self._read(size))
        assert answered_id == correlation_id
        return response

    def pipeline(self, requests: list[tuple[int, int, dict[str, Any]]]) -> list[Any]:
        """Send every (api key, version, body) back to back before reading any answer, as a
        client with several requests in flight does; the answers in request order."""
        sent = []
        for api_key, version, body in requests:
            correlation_id = next(self._correlation_ids)
            sent.append((api_key, version, correlation_id))
            self._socket.sendall(
                encode_request(api_key, version, correlation_id, "wire-test", body)
            )
        answers = []
        for api_key, version, correlation_id in sent:
            (size,) = struct.unpack(">i", self._read(4))
            answered_id, response = decode_response(api_key, version, self._read(size))
            assert answered_id == correlation_id
            answers.append(response)
        return answers

    def exchange(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        """Send `frame` exactly as given (size prefix included); (correlation id, answer)."""
        self._socket.sendall(frame)
        (size,) = struct.unpack(">i", self._read(4))
        return decode_response(api_key, version, self._read(size))

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return bytes(data)


def produce(connection: Connection, topic: str, partition: int, records: bytes) -> Any:
    """Produce v9, acks=all; returns the partition's response (error_code, base_offset, ...)."""
    response = connection.request(
        0,
        9,
        {
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


def fetch(
    connection: Connection, topic: str, partition: int, offset: int, *, max_bytes: int
) -> Any:
    """Fetch v12 (no wait); returns the partition's data (error_code, records, ...)."""
    response = connection.request(
        1,
        12,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
        },
    )
    [topic_response] = response.responses
    [partition_response] = topic_response.partitions
    return partition_response


def create_topic(
    connection: Connection,
    name: str,
    configs: dict[str, str] | None = None,
    *,
    timeout_s: float = 10,
) -> None:
    """CreateTopics v5 (one partition, topic configs as given), then wait until it has a leader."""
    response = connection.request(
        19,
        5,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout": 30_000,
        },
    )
    assert response.topics[0].error_code == 0, response
    deadline = time.monotonic() + timeout_s
    while list_offsets(connection, name, 0, -1).error_code != 0:
        assert time.monotonic() < deadline, f"topic {name} got no leader"
        time.sleep(0.05)


def alter_topic(connection: Connection, name: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs v1: set `configs` on topic `name`."""
    response = connection.request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": name,
                    "configs": [
                        {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()
                    ],
                }
            ],
        },
    )
    assert response.responses[0].error_code == 0, response


def list_offsets(connection: Connection, topic: str, partition: int, timestamp: int) -> Any:
    """ListOffsets v7 for one partition; returns its answer (error_code, offset, timestamp)."""
    response = connection.request(
        2,
        7,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp}],
                }
            ],
        },
    )
    return response.topics[0].partitions[0]


def create_topics(connection: Connection, topics: dict[str, int]) -> list[Any]:
    """CreateTopics v7 of `name -> partitions` (replication factor 1); the per-topic results."""
    response = connection.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": count,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for name, count in topics.items()
            ],
            "timeout": 30_000,
            "validate_only": False,
        },
    )
    return list(response.topics)


def create_partitions(connection: Connection, topic: str, count: int) -> Any:
    """CreatePartitions v3: grow `topic` to `count`; the topic's result."""
    response = connection.request(
        37,
        3,
        {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout": 30_000,
            "validate_only": False,
        },
    )
    [result] = response.results
    return result


def describe_log_dirs(connection: Connection) -> list[Any]:
    """DescribeLogDirs v4 of every partition; the per-directory results."""
    return list(connection.request(35, 4, {"topics": None}).results)


GROUP_KEY = 0
TRANSACTION_KEY = 1


def find_coordinator(
    connection: Connection, key: str, key_type: int = GROUP_KEY, *, timeout_s: float = 30.0
) -> Any:
    """FindCoordinator v4 for `key`, asked again while the answer is COORDINATOR_NOT_AVAILABLE
    (the first request for a group or a transactional id creates its internal topic); the
    coordinator's entry (node_id, host, port, error_code)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = connection.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
        [coordinator] = answer.coordinators
        if coordinator.error_code != 15 or time.monotonic() > deadline:  # COORDINATOR_NOT_AVAILABLE
            return coordinator
        time.sleep(0.05)  # polling pace


def commit_offset(
    connection: Connection, group: str, topic: str, partition: int, offset: int
) -> Any:
    """OffsetCommit v8 outside any generation (a "simple" commit); the partition's result."""
    response = connection.request(
        8,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
    )
    [topic_response] = response.topics
    [partition_response] = topic_response.partitions
    return partition_response


class ResponsivenessProbe:
    """A healthy client: ApiVersions every 20 ms on its own connection, in a thread; `slowest`
    is its slowest answer so far (seconds), `failures` the requests that got no answer."""

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)
        self.slowest = 0.0
        self.answers = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ResponsivenessProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        # The work under test may finish before the probe's first round trip on a busy
        # machine: give the probe a deadline to be answered at least once before it stops.
        deadline = time.monotonic() + 10.0
        while self.answers == 0 and not self.failures and time.monotonic() < deadline:
            time.sleep(0.01)
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        connection: Connection | None = None
        while not self._stop.wait(0.02):
            started = time.monotonic()
            try:
                if connection is None:
                    connection = Connection(*self._address, timeout=5.0)
                connection.request(
                    18, 3, {"client_software_name": "probe", "client_software_version": "1"}
                )
            except OSError as error:
                self.failures.append(repr(error))
                connection = None
                continue
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.answers += 1

    def check(self, limit_s: float = 1.0) -> None:
        assert not self.failures, f"the healthy client got no answer: {self.failures[:3]}"
        assert self.answers > 0, "the healthy client got no answer at all"
        assert self.slowest < limit_s, f"the healthy client waited {self.slowest:.2f} s"


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
