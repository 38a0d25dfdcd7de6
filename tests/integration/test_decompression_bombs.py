"""Decompression bombs against a real server (hardening issue, items 5 and 6).

Each test builds the issue's exact batch, sends it, and proves that the server answers the right
error, keeps answering a healthy client on another connection within a second while the attack
runs, and stays under RSS_BOUND_MB (VmHWM of its process: the peak over its whole life). Before the
fix these batches cost 0.4-1.5 GB and blocked the event loop 4-20 s, and the 4 GiB one killed the
log cleaner for good. Longer attacks with figures: `bench/bombs.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from tests.bombs import (
    EMPTY_RECORD,
    KEYED_EMPTY_RECORD,
    LOOKUP_BOMB_RECORDS,
    PRODUCE_BOMB_RECORDS,
    claiming,
    empty_records_zstd,
    zstd_zeros,
)

from .healthy_client import HealthyClient
from .wire import Connection, alter_topic, create_topic, fetch, list_offsets, produce

RSS_BOUND_MB = 160  # idle is ~60 MB; before the fix: 433, 685, 1526 and 144 MB
ANSWER_BOUND_S = 1.0


def _now() -> int:
    return int(time.time() * 1000)


def _peak_rss_mb(server: Any) -> float:
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM line")


def _records_in(connection: Connection, topic: str) -> int:
    """Records of partition 0 from its log start, counted from their batches' headers."""
    start = list_offsets(connection, topic, 0, -2).offset
    data = fetch(connection, topic, 0, start, max_bytes=10_000_000).records or b""
    return sum(batch.header.records_count for batch in iter_batches(data))


@pytest.fixture(scope="module")
def server(module_server_factory):
    server = module_server_factory()
    with Connection(server.host, server.port) as connection:
        create_topic(connection, "healthy", {})
    return server


@pytest.mark.parametrize(
    ("topic", "configs", "record"),
    [
        ("compacted", {"cleanup.policy": "compact"}, KEYED_EMPTY_RECORD),
        ("recompressed", {"compression.type": "gzip"}, EMPTY_RECORD),
    ],
    ids=["compacted", "recompressed"],
)
def test_millions_of_empty_records_in_a_small_batch_are_refused_at_once(
    server, topic, configs, record
) -> None:
    # item 5: a 1.5 KB zstd batch of 2,396,000 empty records (16.8 MB decoded)
    payload = empty_records_zstd(record, PRODUCE_BOMB_RECORDS)
    now = _now()
    bomb = claiming(payload, PRODUCE_BOMB_RECORDS, timestamp=now, max_timestamp=now)
    assert len(bomb) < 1600
    with Connection(server.host, server.port) as attacker:
        create_topic(attacker, topic, configs)
        with HealthyClient(server.host, server.port, "healthy") as healthy:
            deadline = time.monotonic() + 1.5
            answers = set()
            while time.monotonic() < deadline:
                answers.add(produce(attacker, topic, 0, bomb).error_code)
        assert answers == {ErrorCode.invalid_record}
        assert list_offsets(attacker, topic, 0, -1).offset == 0  # nothing was appended
    healthy.check(ANSWER_BOUND_S)
    assert _peak_rss_mb(server) < RSS_BOUND_MB


def test_a_stored_batch_of_millions_of_records_is_looked_up_off_the_event_loop(server) -> None:
    # item 5: a zstd batch of 9,580,000 empty records (67 MB decoded); every record at `now`,
    # the header's max timestamp a second later, so a lookup in between must read the batch
    payload = empty_records_zstd(EMPTY_RECORD, LOOKUP_BOMB_RECORDS)
    now = _now()
    bomb = claiming(payload, LOOKUP_BOMB_RECORDS, timestamp=now, max_timestamp=now + 1000)
    with Connection(server.host, server.port) as attacker:
        create_topic(attacker, "defaults", {})
        assert produce(attacker, "defaults", 0, bomb).error_code == ErrorCode.invalid_record
        # stored where max.message.bytes allows it (as before the limits existed)
        create_topic(attacker, "stored", {"max.message.bytes": str(100 << 20)})
        assert produce(attacker, "stored", 0, bomb).error_code == ErrorCode.none
        with HealthyClient(server.host, server.port, "healthy") as healthy:
            started = time.monotonic()
            answer = list_offsets(attacker, "stored", 0, now + 500)  # reads all 9.58 M records
            assert time.monotonic() - started > 0.2  # it did read them, in a worker thread
        assert (answer.error_code, answer.offset) == (ErrorCode.none, -1)
        healthy.check(ANSWER_BOUND_S)
        # the topic's limits back at their defaults: the batch is no longer read at all
        alter_topic(attacker, "stored", {"max.message.bytes": "1048588"})
        started = time.monotonic()
        by_time = list_offsets(attacker, "stored", 0, now + 500)
        by_max = list_offsets(attacker, "stored", 0, -3)
        assert time.monotonic() - started < ANSWER_BOUND_S
        assert (by_time.offset, by_time.timestamp) == (0, now + 1000)  # the batch's start
        assert (by_max.offset, by_max.timestamp) == (0, now + 1000)
        # a partition named twice in one request is refused, as Kafka refuses it
        twice = attacker.request(
            2,
            7,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "name": "stored",
                        "partitions": [{"partition_index": 0, "timestamp": now}] * 2,
                    }
                ],
            },
        )
        assert {p.error_code for p in twice.topics[0].partitions} == {ErrorCode.invalid_request}
    assert _peak_rss_mb(server) < RSS_BOUND_MB


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.1)


def _warnings_in(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count("uncleanable partition victim-0")


def test_a_stored_four_gibibyte_bomb_does_not_stop_compaction(start_server) -> None:
    # item 6: 128 KB of zstd inflating to 4 GiB, stored on a delete-policy topic that then
    # becomes compacted
    server = start_server(log_cleaner_backoff_ms="200")
    now = _now()
    bomb = claiming(zstd_zeros(4 << 30), 1, timestamp=now, max_timestamp=now)
    assert 128 << 10 < len(bomb) < 132 << 10
    filler = build_batch([NewRecord(key=b"f", value=b"x" * 100_000)], timestamp=now)

    def duplicates(connection: Connection, topic: str, rounds: int) -> None:
        for round_ in range(rounds):
            records = [NewRecord(key=b"key-%d" % (i % 5), value=b"v%d" % round_) for i in range(10)]
            assert (
                produce(connection, topic, 0, build_batch(records, timestamp=_now())).error_code
                == 0
            )

    with Connection(server.host, server.port) as connection:
        create_topic(connection, "healthy", {})
        create_topic(connection, "victim", {"segment.bytes": "200000"})
        compacted = {
            "cleanup.policy": "compact",
            "segment.bytes": "1000",
            "min.cleanable.dirty.ratio": "0.01",
        }
        create_topic(connection, "compacted", compacted)
        assert produce(connection, "victim", 0, bomb).error_code == ErrorCode.none
        for _ in range(2):  # past segment.bytes: the bomb's segment rolls and becomes cleanable
            produce(connection, "victim", 0, filler)
        duplicates(connection, "compacted", 20)
        with HealthyClient(server.host, server.port, "healthy") as healthy:
            alter_topic(
                connection,
                "victim",
                {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
            )
            _wait_for(lambda: _records_in(connection, "compacted") < 100, 20, "compaction")
            _wait_for(lambda: _warnings_in(server.log_path) == 1, 5, "the warning")
            time.sleep(1)  # more passes: the warning is not repeated
        healthy.check(ANSWER_BOUND_S)
        assert _warnings_in(server.log_path) == 1
        kept = fetch(connection, "victim", 0, 0, max_bytes=1).records
        assert kept[16:] == bomb[16:], "the batch is kept byte for byte"
    assert _peak_rss_mb(server) < RSS_BOUND_MB

    server.restart()
    with Connection(server.host, server.port) as connection:
        before = _records_in(connection, "compacted")
        duplicates(connection, "compacted", 20)
        produce(connection, "victim", 0, filler)  # new dirty data: the victim is cleaned again
        _wait_for(lambda: _warnings_in(server.log_path) == 2, 20, "the batch met again")
        _wait_for(lambda: _records_in(connection, "compacted") < before + 100, 20, "compaction")
    assert _peak_rss_mb(server) < RSS_BOUND_MB
