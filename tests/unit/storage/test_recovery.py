"""Recovery after crashes: torn writes, lost unsynced data, bit rot, interrupted swaps."""

from __future__ import annotations

import random

import pytest

from moldau.storage.config import LogConfig

from .helpers import DIRECTORY, batch, open_log, values_from


@pytest.mark.parametrize("seed", range(20))
def test_torn_tail_is_truncated_to_the_last_whole_batch(filesystem, clock, seed) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    log = open_log(filesystem, clock, config)
    for i in range(30):
        log.append_as_leader(batch(b"durable-%d" % i), leader_epoch=0)
    durable = log.flush()
    for i in range(30):
        log.append_as_leader(batch(b"maybe-%d" % i * 3), leader_epoch=0)
    filesystem.crash(tear=True, rng=random.Random(seed))
    recovered = open_log(filesystem, clock, config, recovery_point=durable)
    values = values_from(recovered)
    assert [o for o, _ in values] == list(range(len(values)))  # contiguous
    assert values[:30] == [(i, b"durable-%d" % i) for i in range(30)]
    assert all(v == b"maybe-%d" % (o - 30) * 3 for o, v in values[30:])
    assert recovered.log_end_offset == len(values)
    # the recovered log accepts appends where it ended
    result = recovered.append_as_leader(batch(b"after"), leader_epoch=0)
    assert result.first_offset == len(values)


def test_corrupt_byte_truncates_from_that_batch_on(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    sizes = []
    for i in range(10):
        raw = batch(b"v%d" % i)
        sizes.append(len(raw))
        log.append_as_leader(raw, leader_epoch=0)
    log.flush()
    filesystem.corrupt(f"{DIRECTORY}/00000000000000000000.log", sum(sizes[:6]) + 40)
    filesystem.crash()
    recovered = open_log(filesystem, clock, recovery_point=0)
    assert recovered.log_end_offset == 6
    assert [o for o, _ in values_from(recovered)] == list(range(6))


def test_clean_shutdown_loads_without_scanning_and_keeps_everything(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=500)
    log = open_log(filesystem, clock, config)
    for i in range(40):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=2)
    log.close()
    reopened = open_log(filesystem, clock, config, recovery_point=40, clean_shutdown=True)
    assert reopened.log_end_offset == 40
    assert len(reopened.segments) == len(log.segments)
    assert values_from(reopened, 17)[0] == (17, b"v17")
    assert reopened.leader_epoch_cache.entries == [(2, 0)]


def test_index_garbage_is_detected_and_rebuilt(filesystem, clock) -> None:
    config = LogConfig(segment_bytes=800, index_interval_bytes=50)
    log = open_log(filesystem, clock, config)
    for i in range(40):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=0)
    log.close()
    index_path = f"{DIRECTORY}/00000000000000000000.index"
    filesystem.write_file_atomic(index_path, b"\x00\x00\x00\x05\x7f\xff\xff\xff")
    reopened = open_log(filesystem, clock, config, recovery_point=40, clean_shutdown=True)
    assert values_from(reopened) == [(i, b"v%d" % i) for i in range(40)]


def test_interrupted_swap_is_completed_on_load(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_bytes=300))
    for i in range(12):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=0)
    log.close()
    original = filesystem.read_file(f"{DIRECTORY}/00000000000000000000.log")
    filesystem.write_file_atomic(f"{DIRECTORY}/00000000000000000000.log.swap", original)
    filesystem.write_file_atomic(f"{DIRECTORY}/00000000000000000003.log.cleaned", b"junk")
    reopened = open_log(filesystem, clock, LogConfig(segment_bytes=300), recovery_point=12)
    names = filesystem.listdir(DIRECTORY)
    assert not any(n.endswith((".swap", ".cleaned")) for n in names)
    assert values_from(reopened) == [(i, b"v%d" % i) for i in range(12)]


def test_empty_directory_after_crash_before_any_fsync(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"never flushed"), leader_epoch=0)
    filesystem.crash()
    recovered = open_log(filesystem, clock)
    assert recovered.log_end_offset == 0
    assert recovered.append_as_leader(batch(b"new"), leader_epoch=0).first_offset == 0


def test_a_stale_index_entry_of_a_trusted_segment_is_caught(filesystem, clock) -> None:
    import struct

    config = LogConfig(segment_bytes=800, index_interval_bytes=50)
    log = open_log(filesystem, clock, config)
    for i in range(40):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=0)
    log.close()
    index_path = f"{DIRECTORY}/00000000000000000000.index"
    entries = bytearray(filesystem.read_file(index_path))
    relative, position = struct.unpack_from(">ii", entries, len(entries) - 8)
    struct.pack_into(">ii", entries, len(entries) - 8, relative, position + 7)  # mid-batch
    filesystem.write_file_atomic(index_path, bytes(entries))
    reopened = open_log(filesystem, clock, config, recovery_point=40, clean_shutdown=True)
    assert values_from(reopened) == [(i, b"v%d" % i) for i in range(40)]
    assert reopened.segments[0].offset_index.lookup(39)[1] == position  # rebuilt correctly


def test_reopening_a_log_and_leading_it_in_the_same_epoch_writes_no_checkpoint(
    filesystem, clock
) -> None:
    log = open_log(filesystem, clock)
    log.assign_leader_epoch(3, 0)  # a new, empty partition: epoch 3 from offset 0
    log.close()
    writes: list[str] = []
    write = filesystem.write_file_atomic

    def counting(path: str, data: bytes) -> None:
        writes.append(path)
        write(path, data)

    filesystem.write_file_atomic = counting  # type: ignore[method-assign]
    reopened = open_log(filesystem, clock)
    assert reopened.leader_epoch_cache.entries == []  # nothing at or past the log end
    reopened.assign_leader_epoch(3, 0)
    assert reopened.leader_epoch_cache.entries == [(3, 0)]
    assert writes == []  # the file already says so: a restart costs no fsync
    reopened.assign_leader_epoch(4, 0)
    assert [path.rsplit("/", 1)[1] for path in writes] == ["leader-epoch-checkpoint"]
