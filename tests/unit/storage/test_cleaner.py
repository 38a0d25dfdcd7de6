"""Compaction: latest value per key, tombstones, dirty ratio, lag, transactions, atomic swap."""

from __future__ import annotations

from moldau.clock import ManualClock
from moldau.protocol.records import ControlRecordType, NewRecord, build_batch, build_control_batch
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.results import AppendOrigin

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
    log.delete_expired_segments(force=True)
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
