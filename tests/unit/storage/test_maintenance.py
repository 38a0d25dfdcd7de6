"""Retention, DeleteRecords and truncation."""

from __future__ import annotations

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log_retention import (
    delete_expired_segments,
    delete_old_segments,
    delete_records,
)
from moldau.storage.memory_filesystem import MemoryFileSystem

from .helpers import DIRECTORY, batch, open_log, values_from


def fill(log, count: int, clock: ManualClock, *, step_ms: int = 0) -> None:
    for i in range(count):
        log.append_as_leader(batch(b"v%03d" % i, base_timestamp=clock.now_ms()), leader_epoch=0)
        clock.advance(step_ms)
    log.update_high_watermark(log.log_end_offset)


def test_time_retention_deletes_old_segments_and_advances_log_start(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=400, retention_ms=10_000, file_delete_delay_ms=0)
    log = open_log(filesystem, clock, config)
    fill(log, 30, clock, step_ms=1000)
    segments_before = len(log.segments)
    deleted = delete_old_segments(log, clock.now_ms())
    assert deleted > 0 and len(log.segments) == segments_before - deleted
    assert log.log_start_offset == log.segments[0].base_offset > 0
    newest_deleted_ts = 1_700_000_000_000 + (log.log_start_offset - 1) * 1000
    assert clock.now_ms() - newest_deleted_ts > 10_000
    assert values_from(log, log.log_start_offset)[0][0] == log.log_start_offset
    with pytest.raises(KafkaError) as caught:
        log.read(0, max_bytes=100, max_offset=log.log_end_offset)
    assert caught.value.code is ErrorCode.offset_out_of_range
    delete_expired_segments(log, clock.now_ms())
    names = filesystem.listdir(DIRECTORY)
    assert "00000000000000000000.log" not in names
    assert not any(n.endswith(".deleted") for n in names)


def test_size_retention_keeps_at_most_retention_bytes(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=400, retention_bytes=1000, retention_ms=-1)
    log = open_log(filesystem, clock, config)
    fill(log, 60, clock)
    delete_old_segments(log, clock.now_ms())
    assert log.size_bytes - log.active_segment.size < 1000 + 400
    assert log.size_bytes >= 1000 - 400


def test_retention_never_deletes_above_the_high_watermark(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=400, retention_ms=0)
    log = open_log(filesystem, clock, config)
    for i in range(30):
        log.append_as_leader(batch(b"v%03d" % i, base_timestamp=clock.now_ms()), leader_epoch=0)
    clock.advance(100)
    assert delete_old_segments(log) == 0  # high watermark still 0
    log.update_high_watermark(5)
    delete_old_segments(log)
    assert log.log_start_offset <= 5


def test_a_reader_of_a_deleted_segment_still_completes(tmp_path, clock) -> None:
    from moldau.storage.filesystem import OsFileSystem
    from moldau.storage.log_loader import load_partition_log
    from moldau.types import TopicPartition

    config = LogConfig(segment_bytes=400, retention_ms=1, file_delete_delay_ms=60_000)
    log = load_partition_log(
        OsFileSystem(), str(tmp_path / "t-0"), TopicPartition("t", 0), config, clock=clock
    )
    fill(log, 20, clock)
    held = log.read(0, max_bytes=10_000, max_offset=log.log_end_offset)
    expected = held.read_bytes()
    clock.advance(10)
    assert delete_old_segments(log) > 0
    import os

    region = held.regions[0]
    assert os.pread(region.fileno(), region.length, region.position) == expected[: region.length]
    assert held.read_bytes() == expected
    assert any(n.endswith(".log.deleted") for n in os.listdir(tmp_path / "t-0"))
    clock.advance(60_000)
    delete_expired_segments(log)
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))


def test_delete_records_moves_log_start_and_refuses_above_high_watermark(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=400, file_delete_delay_ms=0)
    log = open_log(filesystem, clock, config)
    fill(log, 30, clock)
    assert delete_records(log, 17) == 17
    assert log.log_start_offset == 17
    assert log.segments[0].base_offset <= 17 < log.segments[0].next_offset
    assert values_from(log, 17)[0] == (17, b"v017")
    with pytest.raises(KafkaError) as caught:
        log.read(16, max_bytes=100, max_offset=30)
    assert caught.value.code is ErrorCode.offset_out_of_range
    with pytest.raises(KafkaError):
        delete_records(log, 31)
    assert delete_records(log, -1) == 30


def test_truncate_to_drops_the_tail_and_epochs(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=400)
    log = open_log(filesystem, clock, config)
    for i in range(30):
        log.append_as_leader(batch(b"v%03d" % i), leader_epoch=1 if i < 20 else 2)
    log.update_high_watermark(25)
    assert log.truncate_to(12) == 12
    assert log.log_end_offset == 12 and log.high_watermark == 12
    assert values_from(log) == [(i, b"v%03d" % i) for i in range(12)]
    assert log.leader_epoch_cache.entries == [(1, 0)]
    assert log.append_as_leader(batch(b"again"), leader_epoch=3).first_offset == 12
    assert values_from(log, 12) == [(12, b"again")]


def test_truncate_inside_a_batch_goes_to_its_start(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    log.append_as_leader(batch(b"c", b"d", b"e"), leader_epoch=0)
    assert log.truncate_to(3) == 2


def test_truncate_fully_and_start_at(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    fill(log, 5, clock)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.append_as_leader(batch(b"x"), leader_epoch=0).first_offset == 100
    data = log.read(100, max_bytes=1000, max_offset=101).read_bytes()
    assert [b.header.base_offset for b in iter_batches(data)] == [100]


def test_follower_append_keeps_offsets_and_epochs(filesystem, clock) -> None:
    leader = open_log(filesystem, clock)
    for i in range(5):
        leader.append_as_leader(batch(b"v%d" % i), leader_epoch=7)
    data = leader.read(0, max_bytes=1 << 20, max_offset=5).read_bytes()
    other = MemoryFileSystem()
    follower = open_log(other, clock)
    result = follower.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (0, 4)
    assert follower.read(0, max_bytes=1 << 20, max_offset=5).read_bytes() == data
    assert follower.leader_epoch_cache.entries == [(7, 0)]


def test_epochs_are_recorded_again_after_truncation(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.append_as_leader(batch(b"b"), leader_epoch=5)
    log.truncate_to(1)
    assert log.leader_epoch_cache.entries == [(1, 0)]
    log.append_as_leader(batch(b"c"), leader_epoch=3)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 1)]
    log.truncate_fully_and_start_at(10)
    log.append_as_leader(batch(b"d"), leader_epoch=2)
    assert log.leader_epoch_cache.entries == [(2, 10)]


def test_an_expired_active_segment_is_rolled_and_deleted(filesystem, clock) -> None:
    config = LogConfig(retention_ms=1000, file_delete_delay_ms=0)
    log = open_log(filesystem, clock, config)
    fill(log, 5, clock)
    assert len(log.segments) == 1
    clock.advance(2000)
    assert delete_old_segments(log) == 1
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    assert [s.base_offset for s in log.segments] == [5]
    assert log.read(5, max_bytes=100, max_offset=5).regions == ()
    assert log.append_as_leader(batch(b"new"), leader_epoch=0).first_offset == 5


def test_producer_snapshots_of_deleted_segments_are_removed(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=300, file_delete_delay_ms=0)
    log = open_log(filesystem, clock, config)
    fill(log, 30, clock)
    log.flush()  # writes the snapshots taken at each roll
    snapshots = [n for n in filesystem.listdir(DIRECTORY) if n.endswith(".snapshot")]
    assert len(snapshots) == len(log.segments) - 1
    delete_records(log, 20)
    remaining = [
        int(n.split(".")[0]) for n in filesystem.listdir(DIRECTORY) if n.endswith(".snapshot")
    ]
    assert remaining and min(remaining) >= log.segments[0].base_offset
