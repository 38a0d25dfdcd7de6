"""LogManager: startup and recovery of every partition, checkpoints, clean shutdown, deletion."""

from __future__ import annotations

import uuid

from moldau.clock import ManualClock
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition

from .helpers import batch, values_from

A = TopicPartition("alpha", 0)
B = TopicPartition("beta", 3)


def manager(filesystem: MemoryFileSystem, clock: ManualClock, dirs=("/d1", "/d2")) -> LogManager:
    return LogManager(list(dirs), fs=filesystem, clock=clock)


def test_logs_are_spread_over_dirs_and_reopened_after_clean_shutdown() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock)
    logs.startup()
    a = logs.get_or_create_log(A, LogConfig(), topic_id=uuid.UUID(int=1))
    b = logs.get_or_create_log(B, LogConfig())
    assert logs.log_dir_of(A) != logs.log_dir_of(B)
    for i in range(5):
        a.append_as_leader(batch(b"a%d" % i), leader_epoch=0)
    b.append_as_leader(batch(b"b0"), leader_epoch=0)
    a.update_high_watermark(5)
    logs.shutdown()
    d1 = logs.log_dir_of(A)
    assert filesystem.exists(f"{d1}/{CLEAN_SHUTDOWN_FILE}")
    text = filesystem.read_file(f"{d1}/recovery-point-offset-checkpoint").decode()
    assert text == "0\n1\nalpha 0 5\n"
    assert (
        filesystem.read_file(f"{d1}/replication-offset-checkpoint").decode() == "0\n1\nalpha 0 5\n"
    )
    metadata = filesystem.read_file(f"{d1}/alpha-0/partition.metadata").decode()
    assert metadata == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"

    again = manager(filesystem, clock)
    again.startup()
    assert {log.topic_partition for log in again.logs()} == {A, B}
    reopened = again.get_log(A)
    assert reopened.high_watermark == 5
    assert reopened.topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert values_from(reopened) == [(i, b"a%d" % i) for i in range(5)]
    assert not filesystem.exists(f"{d1}/{CLEAN_SHUTDOWN_FILE}")  # a crash from now on is unclean


def test_unclean_shutdown_recovers_flushed_data() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    log = logs.get_or_create_log(A, LogConfig(segment_bytes=500, flush_ms=1000))
    for i in range(20):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=1)
    assert logs.flush_dirty(clock.now_ms()) == 0
    assert logs.flush_dirty(clock.now_ms() + 1000) == 1  # flush.ms elapsed
    log.append_as_leader(batch(b"unflushed"), leader_epoch=1)
    filesystem.crash()
    again = manager(filesystem, clock, dirs=("/d1",))
    again.startup()
    recovered = again.get_log(A)
    assert recovered.log_end_offset == 20
    assert values_from(recovered)[-1] == (19, b"v19")


def test_delete_log_renames_then_removes_after_the_delay() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    log = logs.get_or_create_log(A, LogConfig(file_delete_delay_ms=1000))
    log.append_as_leader(batch(b"x"), leader_epoch=0)
    held = log.read(0, max_bytes=1000, max_offset=1)
    assert logs.delete_log(A)
    assert logs.get_log(A) is None
    names = filesystem.listdir("/d1")
    assert "alpha-0" not in names and any(n.endswith("-delete") for n in names)
    assert held.read_bytes()  # the reader still completes
    clock.advance(1001)
    logs.run_retention()
    assert not any(n.endswith("-delete") for n in filesystem.listdir("/d1"))


def test_run_retention_applies_each_logs_config_and_checkpoints_log_start() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    log = logs.get_or_create_log(A, LogConfig(segment_bytes=300, retention_ms=1000))
    keep = logs.get_or_create_log(B, LogConfig(segment_bytes=300, retention_ms=-1))
    for target in (log, keep):
        for i in range(20):
            target.append_as_leader(
                batch(b"v%d" % i, base_timestamp=clock.now_ms()), leader_epoch=0
            )
        target.update_high_watermark(20)
    clock.advance(5000)
    assert logs.run_retention() > 0
    assert log.log_start_offset > 0 and keep.log_start_offset == 0
    text = filesystem.read_file("/d1/log-start-offset-checkpoint").decode()
    assert f"alpha 0 {log.log_start_offset}" in text


def test_get_or_create_updates_config_of_an_existing_log() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    first = logs.get_or_create_log(A, LogConfig())
    second = logs.get_or_create_log(A, LogConfig(retention_ms=5))
    assert first is second and second.config.retention_ms == 5


def test_log_config_from_topic_config_names() -> None:
    from moldau.config.values import BrokerConfig

    mapping = BrokerConfig({}).topic_config(
        {"cleanup.policy": ["compact", "delete"], "segment.bytes": 2048}
    )
    config = LogConfig.from_topic_config(mapping)
    assert config.segment_bytes == 2048
    assert config.compact and config.delete
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.max_message_bytes == 1048588


def test_segments_after_a_lost_segment_are_dropped_so_offsets_stay_contiguous() -> None:
    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    log = logs.get_or_create_log(A, LogConfig(segment_bytes=500))
    for i in range(20):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=1)
    filesystem.crash()  # nothing was ever fsynced
    again = manager(filesystem, clock, dirs=("/d1",))
    again.startup()
    recovered = again.get_log(A)
    assert recovered.log_end_offset == 0
    assert len(recovered.segments) == 1


def test_cleaner_thread_compacts_and_checkpoints_its_progress() -> None:
    from moldau.protocol.records import NewRecord, build_batch

    filesystem, clock = MemoryFileSystem(), ManualClock()
    logs = manager(filesystem, clock, dirs=("/d1",))
    logs.startup()
    config = LogConfig(
        cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.1
    )
    log = logs.get_or_create_log(A, config)
    for i in range(40):
        raw = build_batch(
            [NewRecord(key=b"k%d" % (i % 2), value=b"v%d" % i)], timestamp=clock.now_ms()
        )
        log.append_as_leader(raw, leader_epoch=0)
    log.update_high_watermark(40)
    before = log.size_bytes
    assert logs.cleaner.clean_once() > 0  # the pass the background thread runs
    assert log.size_bytes < before
    text = filesystem.read_file("/d1/cleaner-offset-checkpoint").decode()
    assert text == f"0\n1\nalpha 0 {log.first_dirty_offset}\n" and log.first_dirty_offset > 0
    logs.start_cleaner()
    logs.shutdown()  # stops the thread
    assert logs.cleaner._thread is None
    again = manager(filesystem, clock, dirs=("/d1",))
    again.startup()
    assert again.get_log(A).first_dirty_offset == log.first_dirty_offset
