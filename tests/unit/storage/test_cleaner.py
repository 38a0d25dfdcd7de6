"""Compaction: latest value per key, tombstones, dirty ratio, lag, transactions, atomic swap, and a
cleaner that survives any batch."""

from __future__ import annotations

import logging
import time

from moldau.clock import ManualClock
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import (
    ControlRecordType,
    NewRecord,
    build_batch,
    build_control_batch,
    iter_batches,
)
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.log_loader import load_partition_log
from moldau.storage.log_manager import LogManager
from moldau.storage.log_retention import delete_expired_segments
from moldau.storage.results import AppendOrigin
from moldau.types import TopicPartition
from tests.bombs import claiming, zstd_zeros

from .helpers import DIRECTORY, open_log

COMPACT = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=600,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=10_000,
    file_delete_delay_ms=0,
)


def keyed(key: bytes, value: bytes | None, clock: ManualClock, **kwargs) -> bytes:
    return build_batch([NewRecord(key=key, value=value)], timestamp=clock.now_ms(), **kwargs)


def live_records(log) -> dict[int, tuple[bytes | None, bytes | None]]:
    from moldau.protocol.record_reader import decode_records
    from moldau.protocol.records import iter_batches

    data = log.read(
        log.log_start_offset, max_bytes=1 << 30, max_offset=log.log_end_offset
    ).read_bytes()
    out = {}
    for found in iter_batches(data):
        assert found.is_valid()
        if found.header.is_control:
            continue
        for record in decode_records(found.data):
            out[record.offset] = (record.key, record.value)
    return out


def test_compaction_keeps_the_latest_value_of_each_key_with_its_offset(filesystem, clock) -> None:
    log = open_log(filesystem, clock, COMPACT)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(60):
        key = b"k%d" % (i % 5)
        offset = log.append_as_leader(keyed(key, b"v%d" % i, clock), leader_epoch=0).first_offset
        expected[key] = (offset, b"v%d" % i)
    log.update_high_watermark(log.log_end_offset)
    before = log.size_bytes
    assert clean_log(log) > 0
    assert log.size_bytes < before
    survivors = live_records(log)
    cleanable_end = log.active_segment.base_offset
    for key, (offset, value) in expected.items():
        if offset < cleanable_end:
            assert survivors[offset] == (key, value)
    keys_below = [k for o, (k, _v) in survivors.items() if o < cleanable_end]
    assert len(keys_below) == len(set(keys_below))  # one record per key in the cleaned part
    assert log.log_end_offset == 60
    offsets = sorted(survivors)
    assert offsets == sorted(set(offsets))


def test_tombstones_are_kept_until_delete_retention_then_removed(filesystem, clock) -> None:
    log = open_log(filesystem, clock, COMPACT)
    log.append_as_leader(keyed(b"gone", b"value", clock), leader_epoch=0)
    log.append_as_leader(keyed(b"gone", None, clock), leader_epoch=0)
    for i in range(30):
        log.append_as_leader(keyed(b"other%d" % i, b"x" * 20, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    clean_log(log)
    survivors = live_records(log)
    assert 0 not in survivors and survivors[1] == (b"gone", None)
    clock.advance(20_000)
    log.first_dirty_offset = 0  # make the log look dirty again
    clean_log(log)
    assert 1 not in live_records(log)


def test_min_compaction_lag_and_dirty_ratio_hold_cleaning_back(filesystem, clock) -> None:
    config = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=600,
        min_compaction_lag_ms=60_000,
        min_cleanable_dirty_ratio=0.01,
    )
    log = open_log(filesystem, clock, config)
    for i in range(40):
        log.append_as_leader(keyed(b"same", b"v%d" % i, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert clean_log(log) == 0
    clock.advance(60_001)
    assert clean_log(log) > 0
    assert clean_log(log) == 0  # nothing dirty any more


def test_aborted_transactional_records_are_removed_and_markers_kept(filesystem, clock) -> None:
    log = open_log(filesystem, clock, COMPACT)
    txn = dict(producer_id=5, producer_epoch=0, transactional=True)
    log.append_as_leader(keyed(b"t", b"aborted", clock, base_sequence=0, **txn), leader_epoch=0)
    log.append_as_leader(
        build_control_batch(
            ControlRecordType.ABORT, producer_id=5, producer_epoch=0, timestamp=clock.now_ms()
        ),
        leader_epoch=0,
        origin=AppendOrigin.COORDINATOR,
    )
    for i in range(30):
        log.append_as_leader(keyed(b"k%d" % i, b"v" * 20, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    clean_log(log)
    assert 0 not in live_records(log)
    assert log.aborted_transactions(0, 2)  # the index entry is kept with its marker


def test_cleaned_log_survives_restart_and_swap_leaves_no_temporary_files(filesystem, clock) -> None:
    log = open_log(filesystem, clock, COMPACT)
    for i in range(50):
        log.append_as_leader(keyed(b"k%d" % (i % 3), b"v%d" % i, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    clean_log(log)
    expected = live_records(log)
    delete_expired_segments(log, force=True)
    log.close()
    assert not any(
        n.endswith((".cleaned", ".swap", ".deleted")) for n in filesystem.listdir(DIRECTORY)
    )
    filesystem.crash()
    reopened = open_log(filesystem, clock, COMPACT, recovery_point=0)
    assert live_records(reopened) == expected
    assert reopened.log_end_offset == 50


def test_a_reader_of_a_replaced_segment_still_reads_old_bytes(filesystem, clock) -> None:
    log = open_log(
        filesystem, clock, COMPACT.__class__(**{**_fields(COMPACT), "file_delete_delay_ms": 60_000})
    )
    for i in range(50):
        log.append_as_leader(keyed(b"k%d" % (i % 3), b"v%d" % i, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    held = log.read(0, max_bytes=1 << 20, max_offset=50)
    before = held.read_bytes()
    clean_log(log)
    assert held.read_bytes() == before


def _fields(config: LogConfig) -> dict:
    from dataclasses import fields

    return {f.name: getattr(config, f.name) for f in fields(config)}


def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(filesystem, clock) -> None:
    config = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=600,
        min_cleanable_dirty_ratio=0.99,
        max_compaction_lag_ms=10_000,
    )
    log = open_log(filesystem, clock, config)
    for i in range(40):
        log.append_as_leader(keyed(b"same", b"v%d" % i, clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    log.first_dirty_offset = log.segments[1].base_offset  # most of the range looks clean
    assert clean_log(log) == 0
    clock.advance(10_001)
    assert clean_log(log) > 0


def _four_gibibyte_bomb(clock: ManualClock) -> bytes:
    """The issue's batch: 128 KB of zstd declaring one record, inflating to 4 GiB of zeros."""
    return claiming(zstd_zeros(4 << 30), 1, timestamp=clock.now_ms())


def _log_with_a_bomb(filesystem, clock):
    """A delete-policy log that stored the bomb among keyed batches, then became compacted."""
    filesystem.makedirs("/data")
    log = load_partition_log(
        filesystem, DIRECTORY, TopicPartition("victim", 0), LogConfig(), clock=clock
    )
    for i in range(10):
        log.append_as_leader(keyed(b"k%d" % (i % 2), b"before-%d" % i, clock), leader_epoch=0)
    bomb_offset = log.append_as_leader(_four_gibibyte_bomb(clock), leader_epoch=0).first_offset
    for i in range(10):
        log.append_as_leader(keyed(b"k%d" % (i % 2), b"after-%d" % i, clock), leader_epoch=0)
    log.roll()
    log.append_as_leader(keyed(b"k0", b"active", clock), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    log.update_config(COMPACT)
    return log, bomb_offset


def test_a_stored_bomb_is_kept_as_it_is_and_the_rest_compacted(filesystem, clock) -> None:
    log, bomb_offset = _log_with_a_bomb(filesystem, clock)
    bomb = _four_gibibyte_bomb(clock)
    reported: list[tuple[int, str]] = []
    started = time.perf_counter()
    assert clean_log(log, on_unreadable=lambda offset, reason: reported.append((offset, reason)))
    assert time.perf_counter() - started < 2
    assert [offset for offset, _reason in reported] == [bomb_offset]
    assert "invalid record length 0" in reported[0][1]
    stored = log.read(bomb_offset, max_bytes=1, max_offset=bomb_offset + 1).read_bytes()
    assert stored[16:] == bomb[16:]  # byte for byte but its offset and epoch
    data = log.read(0, max_bytes=1 << 30, max_offset=log.log_end_offset).read_bytes()
    cleaned = [b for b in iter_batches(data) if b.header.base_offset != bomb_offset]
    values = [r.value for b in cleaned for r in decode_records(b.data)]
    assert values == [b"after-8", b"after-9", b"active"]


def test_the_cleaner_reports_the_partition_once_and_cleans_the_others(
    filesystem, clock, caplog
) -> None:
    logs = LogManager(["/d1"], fs=filesystem, clock=clock)
    logs.startup()
    victim = logs.get_or_create_log(TopicPartition("victim", 0), LogConfig())
    healthy = logs.get_or_create_log(TopicPartition("healthy", 0), COMPACT)
    for i in range(10):
        victim.append_as_leader(keyed(b"k", b"v%d" % i, clock), leader_epoch=0)
    victim.append_as_leader(_four_gibibyte_bomb(clock), leader_epoch=0)
    victim.roll()
    victim.update_config(COMPACT)
    for log in (victim, healthy):
        for i in range(30):
            log.append_as_leader(keyed(b"k%d" % (i % 3), b"v%d" % i, clock), leader_epoch=0)
        log.update_high_watermark(log.log_end_offset)
    with caplog.at_level(logging.WARNING, logger="moldau.storage.cleaner"):
        healthy_before = healthy.size_bytes
        assert logs.cleaner.clean_once() > 0
        for i in range(30):
            healthy.append_as_leader(keyed(b"k%d" % (i % 3), b"w%d" % i, clock), leader_epoch=0)
        healthy.update_high_watermark(healthy.log_end_offset)
        assert logs.cleaner.clean_once() > 0
    assert healthy.size_bytes < healthy_before
    assert list(logs.cleaner.uncleanable) == [TopicPartition("victim", 0)]
    assert "batch at offset 10 cannot be read" in logs.cleaner.uncleanable[victim.topic_partition]
    warnings = [r for r in caplog.records if "uncleanable partition victim-0" in r.getMessage()]
    assert len(warnings) == 1  # once, not every pass
    logs.shutdown()
    # after a restart the next pass over the victim meets the batch again, and cleans on
    again = LogManager(["/d1"], fs=filesystem, clock=clock)
    again.startup()
    victim = again.get_or_create_log(TopicPartition("victim", 0), COMPACT)
    for i in range(30):
        victim.append_as_leader(keyed(b"k%d" % (i % 3), b"x%d" % i, clock), leader_epoch=0)
    victim.update_high_watermark(victim.log_end_offset)
    before = victim.size_bytes
    assert again.cleaner.clean_once() > 0
    assert victim.size_bytes < before
    assert list(again.cleaner.uncleanable) == [TopicPartition("victim", 0)]
    again.shutdown()


def test_a_partition_whose_cleaning_fails_is_left_alone_and_the_others_cleaned(
    filesystem, clock, caplog, monkeypatch
) -> None:
    logs = LogManager(["/d1"], fs=filesystem, clock=clock)
    logs.startup()
    broken = logs.get_or_create_log(TopicPartition("broken", 0), COMPACT)
    healthy = logs.get_or_create_log(TopicPartition("healthy", 0), COMPACT)
    for log in (broken, healthy):
        for i in range(30):
            log.append_as_leader(keyed(b"k%d" % (i % 3), b"v%d" % i, clock), leader_epoch=0)
        log.update_high_watermark(log.log_end_offset)
    attempts = []

    def fail(*args, **kwargs):
        attempts.append(1)
        raise OSError("disk says no")

    monkeypatch.setattr(broken.segments[0], "batches", fail)
    with caplog.at_level(logging.WARNING, logger="moldau.storage.cleaner"):
        before = healthy.size_bytes
        logs.cleaner.clean_once()
        logs.cleaner.clean_once()
    assert healthy.size_bytes < before
    assert attempts == [1]  # not tried again in the second pass
    assert "no longer cleaned" in logs.cleaner.uncleanable[broken.topic_partition]
    assert len([r for r in caplog.records if "uncleanable partition" in r.getMessage()]) == 1
    logs.shutdown()


def test_the_cleaner_thread_outlives_a_failed_pass(filesystem, clock, monkeypatch) -> None:
    logs = LogManager(["/d1"], fs=filesystem, clock=clock)
    logs.startup()
    passes = []

    def clean_once(now_ms=None):
        passes.append(1)
        raise RuntimeError("a pass that fails outright")

    monkeypatch.setattr(logs.cleaner, "clean_once", clean_once)
    logs.cleaner.backoff_seconds = 0.01
    logs.start_cleaner()
    deadline = time.monotonic() + 5
    while len(passes) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(passes) >= 3
    assert logs.cleaner._thread is not None and logs.cleaner._thread.is_alive()
    logs.shutdown()
