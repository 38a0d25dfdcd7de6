"""PartitionLog: append, read, roll, flush, offsets, over an in-memory file system."""

from __future__ import annotations

import struct
import threading

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import BatchHeader, TimestampType, iter_batches
from moldau.storage.config import LogConfig

from .helpers import DIRECTORY, batch, open_log, values_from


def test_append_assigns_offsets_and_rewrites_base_offset_and_epoch(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    first = log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=4)
    second = log.append_as_leader(batch(b"d"), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    data = log.read(0, max_bytes=1 << 20, max_offset=4).read_bytes()
    headers = [b.header for b in iter_batches(data)]
    assert [h.base_offset for h in headers] == [0, 3]
    assert {h.partition_leader_epoch for h in headers} == {4}
    assert all(b.is_valid() for b in iter_batches(data))
    assert values_from(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_log_file_is_the_batches_exactly(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    raw = batch(b"x" * 100)
    log.append_as_leader(raw, leader_epoch=0)
    log.flush()
    stored = filesystem.read_file(f"{DIRECTORY}/00000000000000000000.log")
    assert stored[8:12] == raw[8:12] and stored[16:] == raw[16:]


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b[:-1], ErrorCode.corrupt_message),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), ErrorCode.corrupt_message),
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.corrupt_message),
    ],
)
def test_bad_batches_are_refused_and_leave_the_log_untouched(
    filesystem, clock, mutate, code
) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"ok"), leader_epoch=0)
    good = batch(b"second")
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(good + mutate(batch(b"bad")), leader_epoch=0)
    assert caught.value.code is code
    assert log.log_end_offset == 1
    assert values_from(log) == [(0, b"ok")]


def test_batch_over_max_message_bytes_is_message_too_large(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(max_message_bytes=500))
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(batch(b"x" * 600), leader_epoch=0)
    assert caught.value.code is ErrorCode.message_too_large
    assert log.log_end_offset == 0


def test_timestamps_outside_the_window_are_invalid(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(message_timestamp_after_max_ms=1000))
    future = clock.now_ms() + 5000
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(batch(b"x", base_timestamp=future), leader_epoch=0)
    assert caught.value.code is ErrorCode.invalid_timestamp


def test_log_append_time_rewrites_max_timestamp_and_crc(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(batch(b"x", b"y"), leader_epoch=0, now_ms=1_800_000_000_000)
    assert result.log_append_time == 1_800_000_000_000
    [found] = list(iter_batches(log.read(0, max_bytes=1000, max_offset=2).read_bytes()))
    assert found.is_valid()
    assert found.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert found.header.max_timestamp == 1_800_000_000_000
    assert {r.timestamp for r in decode_records(found.data)} == {1_800_000_000_000}


def test_control_batches_from_clients_are_refused(filesystem, clock) -> None:
    from moldau.protocol.records import ControlRecordType, build_control_batch

    log = open_log(filesystem, clock)
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(marker, leader_epoch=0)
    assert caught.value.code is ErrorCode.invalid_record


def test_read_respects_max_offset_max_bytes_and_min_one_message(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    sizes = []
    for i in range(10):
        raw = batch(b"v%d" % i * 20)
        sizes.append(len(raw))
        log.append_as_leader(raw, leader_epoch=0)
    result = log.read(2, max_bytes=1 << 20, max_offset=5)
    assert [b.header.base_offset for b in iter_batches(result.read_bytes())] == [2, 3, 4]
    result = log.read(0, max_bytes=sizes[0] * 3 + 5, max_offset=10)
    assert [b.header.base_offset for b in iter_batches(result.read_bytes())] == [0, 1, 2]
    assert result.size == sizes[0] * 3  # whole batches only
    result = log.read(0, max_bytes=10, max_offset=10)
    assert result.size == sizes[0]
    result = log.read(0, max_bytes=10, max_offset=10, min_one_message=False)
    assert result.regions == ()
    assert log.read(10, max_bytes=100, max_offset=10).regions == ()


def test_read_outside_the_log_is_offset_out_of_range(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    with pytest.raises(KafkaError) as caught:
        log.read(2, max_bytes=100, max_offset=2)
    assert caught.value.code is ErrorCode.offset_out_of_range


def test_read_from_inside_a_batch_returns_the_whole_batch(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    log.append_as_leader(batch(b"d"), leader_epoch=0)
    found = list(iter_batches(log.read(1, max_bytes=1000, max_offset=4).read_bytes()))
    assert [b.header.base_offset for b in found] == [0, 3]


def test_segments_roll_on_size_and_reads_cross_them(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for i in range(50):
        log.append_as_leader(batch(b"value-%03d" % i * 5), leader_epoch=0)
    assert len(log.segments) > 5
    assert all(s.size <= 1000 for s in log.segments)
    assert values_from(log) == [(i, b"value-%03d" % i * 5) for i in range(50)]
    for start in (0, 7, 23, 49):
        assert values_from(log, start)[0][0] == start
    names = filesystem.listdir(DIRECTORY)
    assert f"{log.segments[1].base_offset:020d}.log" in names
    assert f"{log.segments[1].base_offset:020d}.index" in names


def test_segments_roll_on_segment_ms(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_ms=1000))
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    clock.advance(1500)
    log.append_as_leader(batch(b"b"), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 1]


@pytest.mark.parametrize("buffer_type", [bytes, bytearray])
def test_index_lookup_is_sparse_and_correct(filesystem, clock, buffer_type) -> None:
    log = open_log(filesystem, clock, LogConfig(index_interval_bytes=200))
    for i in range(200):
        raw = batch(b"%05d" % i, base_timestamp=clock.now_ms() + i)
        log.append_as_leader(buffer_type(raw), leader_epoch=0)
    segment = log.active_segment
    assert 10 < len(segment.offset_index) < 200
    for offset in range(200):
        position, header = segment.find_batch(offset)
        assert header.base_offset == offset
        assert BatchHeader.parse(segment.log.pread(61, position)).base_offset == offset
    assert len(segment.time_index) == len(segment.offset_index)  # timestamps grow every batch
    found = log.offset_for_timestamp(clock.now_ms() + 150)
    assert found is not None and found.offset == 150


def test_roll_trims_index_files(filesystem, clock) -> None:
    log = open_log(
        filesystem,
        clock,
        LogConfig(segment_bytes=2000, segment_index_bytes=8000, index_interval_bytes=10),
    )
    first_index = f"{DIRECTORY}/00000000000000000000.index"
    assert len(filesystem.read_file(first_index)) == 8000  # preallocated
    for _ in range(40):
        log.append_as_leader(batch(b"x" * 50), leader_epoch=0)
    assert len(log.segments) > 1
    trimmed = filesystem.read_file(first_index)
    assert len(trimmed) == len(log.segments[0].offset_index) * 8
    relative = [struct.unpack_from(">i", trimmed, i)[0] for i in range(0, len(trimmed), 8)]
    assert relative == sorted(set(relative))


def test_flush_returns_the_durable_offset_and_survives_a_crash(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    for i in range(5):
        log.append_as_leader(batch(b"%d" % i), leader_epoch=0)
    assert log.flush() == 5
    log.append_as_leader(batch(b"lost"), leader_epoch=0)
    filesystem.crash()
    recovered = open_log(filesystem, clock, recovery_point=5)
    assert recovered.log_end_offset == 5
    assert values_from(recovered) == [(i, b"%d" % i) for i in range(5)]


def test_concurrent_flushes_share_fsyncs(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    barrier = threading.Barrier(8)
    results: list[int] = []

    def flush() -> None:
        barrier.wait()
        results.append(log.flush())

    before = filesystem.fsync_count
    threads = [threading.Thread(target=flush) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [1] * 8
    assert filesystem.fsync_count - before == 1  # one fsync of the .log served all eight
    assert log.flush() == 1 and filesystem.fsync_count - before == 1


def test_appends_proceed_during_an_fsync_and_later_flushes_share_one(
    filesystem, clock, monkeypatch
) -> None:
    from moldau.storage.memory_filesystem import MemoryFile

    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    entered, release = threading.Event(), threading.Event()
    real_fsync = MemoryFile.fsync

    def slow_fsync(self: MemoryFile) -> None:
        if not release.is_set():
            entered.set()
            release.wait()
        real_fsync(self)

    monkeypatch.setattr(MemoryFile, "fsync", slow_fsync)
    results: dict[str, int] = {}
    first = threading.Thread(target=lambda: results.update(first=log.flush()))
    first.start()
    entered.wait()  # the first flush is inside its fsync
    assert log.append_as_leader(batch(b"b"), leader_epoch=0).first_offset == 1  # not blocked
    others = [
        threading.Thread(target=lambda n=n: results.update({n: log.flush()})) for n in ("x", "y")
    ]
    for thread in others:
        thread.start()
    before = filesystem.fsync_count
    release.set()
    for thread in [first, *others]:
        thread.join()
    assert results == {"first": 1, "x": 2, "y": 2}
    assert filesystem.fsync_count - before == 2  # the first flush's, then one for both others


def test_high_watermark_bounds_and_update(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    assert log.high_watermark == 0
    assert log.update_high_watermark(10) == 2
    assert log.last_stable_offset == 2


def test_offset_for_timestamp_and_max_timestamp(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_bytes=300, index_interval_bytes=50))
    base = 1_700_000_000_000
    for i in range(20):
        log.append_as_leader(batch(b"v%d" % i, base_timestamp=base + i * 10), leader_epoch=i // 10)
    found = log.offset_for_timestamp(base + 55)
    assert (found.offset, found.timestamp, found.leader_epoch) == (6, base + 60, 0)
    assert log.offset_for_timestamp(base + 150).leader_epoch == 1
    assert log.offset_for_timestamp(base + 10_000) is None
    top = log.max_timestamp_offset()
    assert (top.offset, top.timestamp) == (19, base + 190)


def test_leader_epochs_are_recorded_and_answer_end_offsets(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.append_as_leader(batch(b"b"), leader_epoch=1)
    log.append_as_leader(batch(b"c"), leader_epoch=3)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 2)]
    assert log.end_offset_for_leader_epoch(1) == (1, 2)
    assert log.end_offset_for_leader_epoch(2) == (1, 2)
    assert log.end_offset_for_leader_epoch(3) == (3, 3)
    assert log.end_offset_for_leader_epoch(0) == (0, 0)  # older than any: the first start
    assert log.end_offset_for_leader_epoch(-1) == (-1, -1)
    text = filesystem.read_file(f"{DIRECTORY}/leader-epoch-checkpoint").decode()
    assert text == "0\n2\n1 0\n3 2\n"


def test_compacted_topic_refuses_records_without_key(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(batch(b"no key"), leader_epoch=0)
    assert caught.value.code is ErrorCode.invalid_record
    assert log.append_as_leader(batch(b"keyed", key=b"k"), leader_epoch=0).first_offset == 0


def test_topic_compression_type_recompresses(filesystem, clock) -> None:
    from moldau.protocol.compression import CompressionType

    log = open_log(filesystem, clock, LogConfig(compression_type="zstd"))
    log.append_as_leader(batch(b"a" * 500, b"b" * 500), leader_epoch=0)
    [found] = list(iter_batches(log.read(0, max_bytes=10_000, max_offset=2).read_bytes()))
    assert found.is_valid()
    assert found.header.compression is CompressionType.ZSTD
    assert [r.value for r in decode_records(found.data)] == [b"a" * 500, b"b" * 500]


def test_writable_and_read_only_buffers_store_the_same_bytes(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    raw = batch(b"same")
    log.append_as_leader(raw, leader_epoch=3)
    handed_over = bytearray(raw)
    log.append_as_leader(handed_over, leader_epoch=3)
    first, second = iter_batches(log.read(0, max_bytes=10_000, max_offset=2).read_bytes())
    assert bytes(first.data)[8:] == bytes(second.data)[8:]
    assert (first.header.base_offset, second.header.base_offset) == (0, 1)
    assert BatchHeader.parse(handed_over).base_offset == 1  # rewritten in place


def test_read_reports_the_offset_after_its_last_batch(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_bytes=400))
    for i in range(20):
        log.append_as_leader(batch(b"v%02d" % i, b"w%02d" % i), leader_epoch=0)
    assert len(log.segments) > 2
    whole = log.read(0, max_bytes=1 << 20, max_offset=40)
    assert whole.next_offset == 40
    assert len(whole.regions) == len(log.segments)  # regions span segments
    bounded = log.read(3, max_bytes=1 << 20, max_offset=10)
    assert bounded.next_offset == 10
    assert [b.header.base_offset for b in iter_batches(bounded.read_bytes())] == [2, 4, 6, 8]
    small = log.read(0, max_bytes=150, max_offset=40)
    last = list(iter_batches(small.read_bytes()))[-1]
    assert small.next_offset == last.header.next_offset
    assert log.read(40, max_bytes=100, max_offset=40).next_offset == 40


def test_max_timestamp_names_the_record_not_the_batch_end(filesystem, clock) -> None:
    from moldau.protocol.records import NewRecord, build_batch

    log = open_log(filesystem, clock)
    base = 1_700_000_000_000
    records = [NewRecord(value=b"x", timestamp=base + t) for t in (5, 90, 20)]
    log.append_as_leader(build_batch(records), leader_epoch=1)
    top = log.max_timestamp_offset()
    assert (top.offset, top.timestamp, top.leader_epoch) == (1, base + 90, 1)


@pytest.mark.parametrize("buffer_type", [bytes, bytearray])
def test_disk_errors_are_kafka_storage_errors(filesystem, clock, monkeypatch, buffer_type) -> None:
    from moldau.storage.memory_filesystem import MemoryFile

    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"ok"), leader_epoch=0)
    log.append_as_leader(batch(b"ok too"), leader_epoch=0)
    log.roll()  # a rolled segment is read from its file (the active one keeps recent batches)

    def failing(*args: object, **kwargs: object) -> int:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(MemoryFile, "pwritev", failing)
    monkeypatch.setattr(MemoryFile, "pwrite", failing)
    monkeypatch.setattr(MemoryFile, "pread", failing)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(buffer_type(batch(b"x")), leader_epoch=0)
    assert caught.value.code is ErrorCode.kafka_storage_error
    with pytest.raises(KafkaError) as caught:
        log.read(0, max_bytes=100, max_offset=2)
    assert caught.value.code is ErrorCode.kafka_storage_error
    assert log.log_end_offset == 2


def test_truncating_at_the_log_end_forgets_an_epoch_begun_there(filesystem, clock) -> None:
    """A leader that began an epoch and appended nothing before losing leadership: as follower
    its last fetched epoch must not be that empty one (every fetch would diverge again)."""
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.assign_leader_epoch(2, log.log_end_offset)
    assert log.leader_epoch_cache.latest_epoch == 2
    assert log.truncate_to(log.log_end_offset) == 1
    assert log.leader_epoch_cache.entries == [(1, 0)]
