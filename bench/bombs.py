"""Decompression bombs against a real broker: what each attack costs, and whether others are served.

The attacks of the hardening issue (items 5 and 6), each on a fresh `moldau server`:

- `produce`: a ~1.5 KB zstd batch of 2,396,000 empty records (16.8 MB decoded) produced over and
  over to a compacted topic and to a topic with `compression.type=gzip` (both decode records);
- `within-limits`: requests of 40 batches of ~60 bytes of zstd, each declaring 140,000 keyed
  records (under the 149,798 a batch may hold), to a compacted topic;
- `list-offsets`: a ~6 KB zstd batch of 9,580,000 records (67 MB decoded) stored on a topic whose
  `max.message.bytes` allows it, then ListOffsets by timestamp and MAX_TIMESTAMP over and over;
- `cleaner`: a 128 KB zstd batch that inflates to 4 GiB of zeros stored on a delete-policy topic
  switched to `cleanup.policy=compact`, next to a healthy compacted topic with duplicate keys.

While an attack runs, a healthy client sends ApiVersions and a small produce on its own
connection; the script prints the slowest of its answers, the broker's CPU seconds and its peak
RSS (VmHWM in /proc/PID/status), and what the attacker was answered. Figures only, no verdicts.

    .venv/bin/python bench/bombs.py [--seconds 10] [--attacks produce,within-limits,list-offsets,cleaner]
"""

from __future__ import annotations

import argparse
import itertools
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _harness import Broker, cpu_seconds, header

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.records import NewRecord, build_batch, iter_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the attack batches of the tests
from tests.bombs import (
    EMPTY_RECORD,
    KEYED_EMPTY_RECORD,
    LOOKUP_BOMB_RECORDS,
    PRODUCE_BOMB_RECORDS,
    claiming,
    empty_records_zstd,
    zstd_zeros,
)


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Connection:
    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ids = itertools.count(1)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = next(self.ids)
        self.socket.sendall(encode_request(api_key, version, correlation_id, "bombs", body))
        (size,) = struct.unpack(">i", self._read(4))
        answered, response = decode_response(api_key, version, self._read(size))
        assert answered == correlation_id
        return response

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)

    def produce(self, topic: str, records: bytes) -> Any:
        response = self.request(
            0,
            9,
            {
                "acks": 1,
                "timeout": 30000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
        return response.responses[0].partition_responses[0]

    def list_offsets(self, topic: str, timestamp: int) -> Any:
        response = self.request(
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
                ],
            },
        )
        return response.topics[0].partitions[0]

    def count_records(self, topic: str) -> int:
        """Records (by their batches' counts) in partition 0, read from its log start."""
        start = self.list_offsets(topic, -2).offset
        response = self.request(
            1,
            12,
            {
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 50_000_000,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "fetch_offset": start,
                                "partition_max_bytes": 50_000_000,
                            }
                        ],
                    }
                ],
            },
        )
        records = response.responses[0].partitions[0].records or b""
        return sum(batch.header.records_count for batch in iter_batches(records))

    def create_topic(self, name: str, configs: dict[str, str]) -> None:
        response = self.request(
            19,
            5,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
        assert response.topics[0].error_code == 0, response
        for _ in range(200):  # wait until the partition is led here
            answer = self.list_offsets(name, -1)
            if answer.error_code == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {name} has no leader")

    def alter_topic(self, name: str, configs: dict[str, str]) -> None:
        response = self.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": name,
                        "configs": [
                            {"name": k, "config_operation": 0, "value": v}
                            for k, v in configs.items()
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        assert response.responses[0].error_code == 0, response


class HealthyClient(threading.Thread):
    """ApiVersions and a one-record produce, back to back, timing each answer."""

    def __init__(self, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.connection = Connection(port)
        self.topic = topic
        self.stop = threading.Event()
        self.slowest = 0.0
        self.answers = 0
        self.errors: list[str] = []

    def run(self) -> None:
        batch = build_batch(
            [NewRecord(key=b"k", value=b"healthy")], timestamp=int(time.time() * 1000)
        )
        while not self.stop.is_set():
            for call in (
                lambda: self.connection.request(
                    18, 3, {"client_software_name": "b", "client_software_version": "1"}
                ),
                lambda: self.connection.produce(self.topic, batch),
            ):
                start = time.perf_counter()
                try:
                    call()
                except Exception as error:
                    self.errors.append(repr(error))
                    return
                self.slowest = max(self.slowest, time.perf_counter() - start)
                self.answers += 1
            time.sleep(0.01)


def run_attack(broker: Broker, seconds: float, attack: Any, healthy_topic: str) -> None:
    healthy = HealthyClient(broker.port, healthy_topic)
    cpu_before = cpu_seconds(broker.pid)
    healthy.start()
    start = time.perf_counter()
    results: dict[str, int] = {}
    durations: list[float] = []
    while time.perf_counter() - start < seconds:
        began = time.perf_counter()
        outcome = attack()
        durations.append(time.perf_counter() - began)
        results[outcome] = results.get(outcome, 0) + 1
    healthy.stop.set()
    healthy.join(120)
    wall = time.perf_counter() - start
    print(
        f"  attacker: {len(durations)} requests in {wall:.1f} s, slowest {max(durations):.2f} s, "
        f"answers {results}"
    )
    print(
        f"  healthy client: {healthy.answers} answers, slowest {healthy.slowest * 1000:.0f} ms"
        + (f", errors {healthy.errors}" if healthy.errors else "")
    )
    print(
        f"  broker: {cpu_seconds(broker.pid) - cpu_before:.1f} CPU s, "
        f"peak RSS {peak_rss_mb(broker.pid):.0f} MB"
    )


def attack_produce(seconds: float) -> None:
    payload = empty_records_zstd(EMPTY_RECORD, PRODUCE_BOMB_RECORDS)
    keyed = empty_records_zstd(KEYED_EMPTY_RECORD, PRODUCE_BOMB_RECORDS)
    for topic, configs, data in (
        ("compacted", {"cleanup.policy": "compact"}, keyed),
        ("recompressed", {"compression.type": "gzip"}, payload),
    ):
        with Broker() as broker:
            connection = Connection(broker.port)
            connection.create_topic("healthy", {})
            connection.create_topic(topic, configs)
            now = int(time.time() * 1000)
            bomb = claiming(data, PRODUCE_BOMB_RECORDS, timestamp=now)
            header(f"produce: {len(bomb)} B zstd batch of 2,396,000 records to a {topic} topic")
            print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
            run_attack(
                broker,
                seconds,
                lambda: str(connection.produce(topic, bomb).error_code),  # noqa: B023
                "healthy",
            )


def attack_within_limits(seconds: float) -> None:
    # batches that pass every per-batch limit (140,000 records, under the 149,798 allowed), 40 of
    # them in each request's record set: what bounds a request is the request's budget
    with Broker() as broker:
        connection = Connection(broker.port)
        connection.create_topic("healthy", {})
        connection.create_topic("compacted", {"cleanup.policy": "compact"})
        now = int(time.time() * 1000)
        one = claiming(empty_records_zstd(KEYED_EMPTY_RECORD, 140_000), 140_000, timestamp=now)
        request = one * 40
        header(
            f"within limits: {len(one)} B zstd batches of 140,000 records, 40 in a "
            f"{len(request)} B request, to a compacted topic"
        )
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        run_attack(
            broker,
            seconds,
            lambda: str(connection.produce("compacted", request).error_code),
            "healthy",
        )


def attack_list_offsets(seconds: float) -> None:
    payload = empty_records_zstd(EMPTY_RECORD, LOOKUP_BOMB_RECORDS)
    with Broker() as broker:
        connection = Connection(broker.port)
        connection.create_topic("healthy", {})
        connection.create_topic("stored", {"max.message.bytes": str(100 * 1024 * 1024)})
        now = int(time.time() * 1000)
        # every record at `now`, the header's max one second later: a lookup between the two
        # must look inside the batch
        bomb = claiming(payload, LOOKUP_BOMB_RECORDS, timestamp=now, max_timestamp=now + 1000)
        stored = connection.produce("stored", bomb)
        header(
            f"list-offsets: {len(bomb)} B zstd batch of 9,580,000 records stored "
            f"(produce answered {stored.error_code})"
        )
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        targets = itertools.cycle([now + 500, -3])
        run_attack(
            broker,
            seconds,
            lambda: str(connection.list_offsets("stored", next(targets)).error_code),
            "healthy",
        )


def attack_cleaner(seconds: float) -> None:
    with Broker("log.cleaner.backoff.ms=500") as broker:
        connection = Connection(broker.port)
        connection.create_topic("healthy", {})
        connection.create_topic("victim", {"segment.bytes": "200000"})
        connection.create_topic(
            "compacted",
            {
                "cleanup.policy": "compact",
                "segment.bytes": "2000",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        now = int(time.time() * 1000)
        bomb = claiming(zstd_zeros(4 << 30), 1, timestamp=now)
        stored = connection.produce("victim", bomb)
        # a second batch past segment.bytes rolls the bomb's segment: it becomes cleanable
        filler = build_batch([NewRecord(key=b"k", value=b"x" * 100_000)], timestamp=now)
        connection.produce("victim", filler)
        connection.produce("victim", filler)
        for round_ in range(20):
            records = [NewRecord(key=b"key-%d" % (i % 5), value=b"v%d" % round_) for i in range(10)]
            connection.produce("compacted", build_batch(records, timestamp=now))
        header(
            f"cleaner: {len(bomb)} B zstd batch inflating to 4 GiB (produce answered {stored.error_code})"
        )
        connection.alter_topic("victim", {"cleanup.policy": "compact"})
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        before = connection.count_records("compacted")
        run_attack(broker, seconds, lambda: (time.sleep(0.2), "waiting")[1], "healthy")
        print(
            f"  healthy compacted topic: {before} records before, "
            f"{connection.count_records('compacted')} after"
        )


ATTACKS = {
    "produce": attack_produce,
    "within-limits": attack_within_limits,
    "list-offsets": attack_list_offsets,
    "cleaner": attack_cleaner,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each attack runs")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated subset")
    arguments = parser.parse_args()
    for name in arguments.attacks.split(","):
        ATTACKS[name](arguments.seconds)


if __name__ == "__main__":
    main()
