"""ListOffsets by timestamp and MAX_TIMESTAMP: headers answer what they can without reading a
batch, reading one is bounded by the topic's batch limits, and a batch that cannot be read within
them answers its first offset."""

from __future__ import annotations

import time

from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, TimestampType, build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log_retention import delete_records
from tests.bombs import EMPTY_RECORD, LOOKUP_BOMB_RECORDS, claiming, empty_records_zstd

from .helpers import open_log

BASE = 1_700_000_000_000


def _records(*deltas: int) -> list[NewRecord]:
    return [NewRecord(value=b"x", timestamp=BASE + delta) for delta in deltas]


def test_a_batch_whose_records_share_one_timestamp_is_answered_from_its_header(
    filesystem, clock
) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(
        build_batch(_records(0, 0, 0), compression=CompressionType.ZSTD), leader_epoch=0
    )
    log.append_as_leader(
        build_batch(_records(5, 7), timestamp_type=TimestampType.LOG_APPEND_TIME), leader_epoch=0
    )
    for read_records in (False, True):
        found = log.offset_for_timestamp(BASE - 100, read_records=read_records)
        assert (found.offset, found.timestamp, found.exact) == (0, BASE, True)
        found = log.offset_for_timestamp(BASE + 1, read_records=read_records)
        assert (found.offset, found.exact) == (3, True)


def test_a_batch_spanning_the_target_is_read_unless_reading_is_deferred(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(build_batch(_records(0, 10, 20, 30), base_offset=0), leader_epoch=2)
    deferred = log.offset_for_timestamp(BASE + 15, read_records=False)
    assert (deferred.offset, deferred.exact) == (0, False)
    found = log.offset_for_timestamp(BASE + 15)
    assert (found.offset, found.timestamp, found.exact, found.leader_epoch) == (
        2,
        BASE + 20,
        True,
        2,
    )
    top = log.max_timestamp_offset(read_records=False)
    assert (top.offset, top.exact) == (0, False)
    top = log.max_timestamp_offset()
    assert (top.offset, top.timestamp, top.exact) == (3, BASE + 30, True)


def test_a_batch_whose_header_overstates_its_timestamps_is_read_past(filesystem, clock) -> None:
    # every record at BASE, the header's max one second later: nothing in it reaches BASE + 500
    lying = claiming(
        EMPTY_RECORD * 3, 3, codec=CompressionType.NONE, timestamp=BASE, max_timestamp=BASE + 1000
    )
    log = open_log(filesystem, clock)
    log.append_as_leader(lying, leader_epoch=0)
    log.append_as_leader(build_batch(_records(600)), leader_epoch=0)
    found = log.offset_for_timestamp(BASE + 500)
    assert (found.offset, found.timestamp) == (3, BASE + 600)


def test_a_stored_bomb_is_not_read_beyond_the_topics_limits(filesystem, clock) -> None:
    # the 9.6 M-record batch, stored where max.message.bytes allowed it (or before the
    # limits existed), then looked up with the topic's limits back at their default
    payload = empty_records_zstd(EMPTY_RECORD, LOOKUP_BOMB_RECORDS)
    bomb = claiming(payload, LOOKUP_BOMB_RECORDS, timestamp=BASE, max_timestamp=BASE + 1000)
    log = open_log(filesystem, clock, LogConfig(max_message_bytes=100 << 20))
    log.append_as_leader(bomb, leader_epoch=0)
    log.update_config(LogConfig())
    started = time.perf_counter()
    found = log.offset_for_timestamp(BASE + 500)
    top = log.max_timestamp_offset()
    assert time.perf_counter() - started < 0.1
    assert (found.offset, found.timestamp, found.exact) == (0, BASE + 1000, True)
    assert (top.offset, top.timestamp) == (0, BASE + 1000)


def test_lookups_answer_from_the_log_start_offset(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(build_batch(_records(0, 0, 0, 0)), leader_epoch=0)
    log.append_as_leader(
        build_batch(_records(0, 0), timestamp_type=TimestampType.LOG_APPEND_TIME), leader_epoch=0
    )
    log.update_high_watermark(6)
    delete_records(log, 5)
    found = log.offset_for_timestamp(BASE - 1)
    assert found.offset == 5
