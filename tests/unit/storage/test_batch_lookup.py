"""LogSegment.find_batch: the remembered last batch and the chunked scan from an index entry
answer exactly what a batch-by-batch scan of the file answers; reads answered from the recent
batches kept in memory return the bytes of the file."""

from __future__ import annotations

import random

import pytest

from moldau.protocol.records import BatchHeader, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.segment import RECENT_BYTES_MAX, LogSegment

from .helpers import batch, open_log


def _expected(segment: LogSegment, offset: int) -> tuple[int, BatchHeader] | None:
    """(position, header) of the first batch whose last offset is >= `offset`, by reading every
    batch of the file."""
    data = segment.log.pread(segment.size, 0)
    position = 0
    for found in iter_batches(data):
        if found.header.last_offset >= offset:
            return position, found.header
        position += found.header.size
    return None


def _found(segment: LogSegment, offset: int) -> tuple[int, BatchHeader] | None:
    return segment.find_batch(offset)


def _check_every_offset(segment: LogSegment) -> None:
    for offset in range(segment.base_offset, segment.next_offset + 3):
        assert _found(segment, offset) == _expected(segment, offset), offset
    for offset in range(segment.base_offset, segment.next_offset):
        for max_bytes in (1, 700, 1 << 20):
            region, _next, _go_on = segment.read(
                offset, max_offset=segment.next_offset, max_bytes=max_bytes, min_one_message=True
            )
            assert region is not None, offset
            on_disk = segment.log.pread(region.length, region.position)
            assert region.read_bytes() == on_disk, (offset, max_bytes)


@pytest.mark.parametrize("index_interval_bytes", [1, 300, 4096])
def test_lookup_matches_a_full_scan_for_batches_of_mixed_sizes(
    filesystem, clock, index_interval_bytes
) -> None:
    rng = random.Random(index_interval_bytes)
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=index_interval_bytes))
    for index in range(120):
        values = [b"v" * rng.choice([1, 50, 900, 6000]) for _ in range(rng.randint(1, 4))]
        raw = batch(*values)
        # bytes are written with a new prefix; a bytearray is rewritten in place
        log.append_as_leader(raw if index % 2 else bytearray(raw), leader_epoch=index // 7)
    _check_every_offset(log.active_segment)


def test_lookup_when_the_batch_is_larger_than_the_scan_chunk(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=100))
    for size in (10, 5000, 10, 20_000, 10, 10):
        log.append_as_leader(batch(b"x" * size, b"y"), leader_epoch=0)
    _check_every_offset(log.active_segment)


def test_lookup_after_truncation_reopen_and_roll(filesystem, clock) -> None:
    config = LogConfig(index_interval_bytes=500)
    log = open_log(filesystem, clock, config)
    for index in range(40):
        log.append_as_leader(batch(b"%03d" % index, b"second"), leader_epoch=0)
    segment = log.active_segment
    _check_every_offset(segment)

    log.truncate_to(61)  # inside a batch of two records: the whole batch goes
    assert segment.next_offset == 60
    _check_every_offset(segment)
    log.append_as_leader(batch(b"after truncation"), leader_epoch=0)
    _check_every_offset(segment)
    assert _found(segment, 60) == _expected(segment, 60) is not None

    log.close()
    reopened = open_log(filesystem, clock, config)
    _check_every_offset(reopened.active_segment)

    reopened.roll()
    reopened.append_as_leader(batch(b"new segment"), leader_epoch=0)
    for segment in reopened.segments:
        _check_every_offset(segment)


def test_a_corrupt_length_ends_the_scan_instead_of_looping(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=1 << 20))
    for index in range(3):
        log.append_as_leader(batch(b"%d" % index), leader_epoch=0)
    segment = log.active_segment
    second = _expected(segment, 1)
    assert second is not None
    segment.log.pwrite(b"\xff\xff\xff\xf0", second[0] + 8)  # batch length -16
    segment._tail = segment._recent = None  # as loaded from disk: nothing remembered
    assert segment.find_batch(2) is None
    assert _found(segment, 0) == _expected(segment, 0)


def _read_from(log, offset: int):  # type: ignore[no-untyped-def]
    return log.read(offset, max_bytes=1 << 20, max_offset=log.log_end_offset)


def test_a_read_of_the_last_small_batch_has_the_file_bytes_without_reading(
    filesystem, clock
) -> None:
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=100))
    for index, size in enumerate((10, 300, RECENT_BYTES_MAX, 10, RECENT_BYTES_MAX + 1, 10)):
        raw = batch(b"x" * size, b"%d" % index)
        appended = log.append_as_leader(raw if index % 2 else bytearray(raw), leader_epoch=0)
        (region,) = _read_from(log, appended.first_offset).regions
        on_disk = log.active_segment.log.pread(region.length, region.position)
        assert region.read_bytes() == on_disk
        batch_size = len(raw)
        assert (region.data is not None) == (batch_size <= RECENT_BYTES_MAX), size
        assert region.data is None or region.data == on_disk
    # A read from an earlier offset spans several batches: read from the file.
    (region,) = _read_from(log, 0).regions
    assert region.data is None
    assert region.read_bytes() == log.active_segment.log.pread(log.active_segment.size, 0)

    end = log.log_end_offset
    log.truncate_to(end - 2)  # drops the last batch (two records)
    assert log.active_segment.find_batch(end - 2) is None
    appended = log.append_as_leader(batch(b"written where the last batch was"), leader_epoch=0)
    (region,) = _read_from(log, appended.first_offset).regions
    assert region.data == log.active_segment.log.pread(region.length, region.position)
    assert b"written where" in region.data

    log.roll()
    appended = log.append_as_leader(batch(b"in the new segment"), leader_epoch=0)
    (region,) = _read_from(log, appended.first_offset).regions
    assert region.data is not None
    assert region.data == log.active_segment.log.pread(region.length, region.position)
    (old,) = _read_from(log, appended.first_offset - 1).regions[:1]
    assert old.data is None  # the rolled segment forgot its last batch


def test_the_recent_batches_kept_in_memory_stay_within_their_bound(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=100))
    for index in range(300):
        log.append_as_leader(batch(b"r" * (index % 97 * 13)), leader_epoch=0)
        recent = log.active_segment._recent
        assert recent is not None
        assert len(recent.data) <= RECENT_BYTES_MAX
        assert recent.start + len(recent.data) == recent.end == log.active_segment.size
    _check_every_offset(log.active_segment)
