"""Appends on one thread while flushes, retention, reads and compaction run on others."""

from __future__ import annotations

import threading

from moldau.clock import ManualClock
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import OsFileSystem
from moldau.storage.log_loader import load_partition_log
from moldau.storage.log_retention import delete_old_segments
from moldau.types import TopicPartition

BATCHES = 3000


def test_background_work_never_corrupts_concurrent_appends(tmp_path) -> None:
    clock = ManualClock()
    config = LogConfig(
        segment_bytes=8 * 1024,
        index_interval_bytes=256,
        cleanup_policy=("compact", "delete"),
        min_cleanable_dirty_ratio=0.0,
        retention_bytes=64 * 1024,
        file_delete_delay_ms=0,
    )
    log = load_partition_log(
        OsFileSystem(), str(tmp_path / "c-0"), TopicPartition("c", 0), config, clock=clock
    )
    done = threading.Event()
    errors: list[BaseException] = []
    flushed: list[int] = []

    def appender() -> None:
        try:
            for i in range(BATCHES):
                raw = build_batch(
                    [NewRecord(key=b"k%d" % (i % 50), value=b"v%d" % i)], timestamp=clock.now_ms()
                )
                result = log.append_as_leader(raw, leader_epoch=0)
                assert result.first_offset == i
                log.update_high_watermark(result.last_offset + 1)
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    def background(work) -> None:  # type: ignore[no-untyped-def]
        try:
            while not done.is_set():
                work()
        except BaseException as error:
            errors.append(error)

    def read_tail() -> None:
        start = max(log.log_start_offset, log.high_watermark - 20)
        try:
            result = log.read(start, max_bytes=4096, max_offset=log.high_watermark)
        except Exception as error:  # the start may move under us: only that error is allowed
            from moldau.protocol.errors import ErrorCode, KafkaError

            assert isinstance(error, KafkaError) and error.code is ErrorCode.offset_out_of_range
            return
        for found in iter_batches(result.read_bytes()):
            assert found.is_valid()

    workers = [
        threading.Thread(target=appender),
        threading.Thread(target=background, args=(lambda: flushed.append(log.flush()),)),
        threading.Thread(target=background, args=(lambda: delete_old_segments(log),)),
        threading.Thread(target=background, args=(lambda: clean_log(log),)),
        threading.Thread(target=background, args=(read_tail,)),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert flushed == sorted(flushed)  # the durable offset never goes back
    assert log.flush() == BATCHES
    data = log.read(log.log_start_offset, max_bytes=1 << 30, max_offset=BATCHES).read_bytes()
    values = {}
    for found in iter_batches(data):
        assert found.is_valid()
        for record in decode_records(found.data):
            values[record.offset] = record.value
    assert values and max(values) == BATCHES - 1
    for offset, value in values.items():
        assert value == b"v%d" % offset
    latest = {i % 50: i for i in range(BATCHES)}
    assert all(offset in values for offset in latest.values() if offset >= log.log_start_offset)
