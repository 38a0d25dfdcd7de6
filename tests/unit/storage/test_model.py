"""Property test: random append / read / roll / DeleteRecords / retention / compaction / truncate /
crash+recover sequences agree with a simple in-memory model of the log."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.storage.caching_filesystem import CachingFileSystem
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem
from moldau.storage.log_retention import delete_old_segments, delete_records
from moldau.storage.memory_filesystem import MemoryFileSystem

from .helpers import open_log

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=120,
    segment_index_bytes=400,
    cleanup_policy=("compact", "delete"),
    retention_ms=-1,
    min_cleanable_dirty_ratio=0.0,
    file_delete_delay_ms=0,
)
KEYS = [b"a", b"b", b"c", b"d"]


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = MemoryFileSystem()
        self.filesystem = self.wrap(self.memory)
        self.clock = ManualClock()
        self.log = open_log(self.filesystem, self.clock, CONFIG)
        self.records: dict[int, tuple[bytes, bytes]] = {}  # offset -> (key, value)
        self.batch_starts: list[int] = []
        self.log_start = 0
        self.end = 0
        self.flushed = 0
        self.counter = 0

    def wrap(self, memory: MemoryFileSystem) -> FileSystem:
        return memory

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    def append(self, keys: list[bytes]) -> None:
        values = []
        for key in keys:
            self.counter += 1
            values.append((key, b"value-%d" % self.counter))
        raw = build_batch(
            [NewRecord(key=k, value=v) for k, v in values], timestamp=self.clock.now_ms()
        )
        result = self.log.append_as_leader(raw, leader_epoch=0)
        assert result.first_offset == self.end
        self.batch_starts.append(self.end)
        for index, item in enumerate(values):
            self.records[self.end + index] = item
        self.end += len(values)
        assert result.last_offset == self.end - 1

    @rule(data=st.data())
    def read_from(self, data: st.DataObject) -> None:
        if self.end == self.log_start:
            return
        offset = data.draw(st.integers(self.log_start, self.end - 1))
        expected = {o: kv for o, kv in self.records.items() if o >= offset}
        assert self._read(offset) == expected

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.flushed = self.log.flush()
        assert self.flushed == self.end

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        self.log.update_high_watermark(self.end)
        offset = data.draw(st.integers(self.log_start, self.end))
        assert delete_records(self.log, offset) == max(offset, self.log_start)
        self.log_start = max(offset, self.log_start)
        self.records = {o: kv for o, kv in self.records.items() if o >= self.log_start}

    @rule()
    def retention_by_size(self) -> None:
        self.log.update_high_watermark(self.end)
        self.log.update_config(replace(CONFIG, retention_bytes=800))
        delete_old_segments(self.log)
        self.log.update_config(CONFIG)
        new_start = self.log.log_start_offset
        assert self.log_start <= new_start <= self.end
        assert self.log.size_bytes < 800 + CONFIG.segment_bytes
        self.log_start = new_start
        self.records = {o: kv for o, kv in self.records.items() if o >= new_start}

    @rule()
    def compact(self) -> None:
        self.log.update_high_watermark(self.end)
        self.clock.advance(1)
        clean_log(self.log)
        present = self._read(self.log_start)
        for offset, item in present.items():
            assert self.records[offset] == item
        for offset, (key, _value) in self.records.items():
            if offset not in present:  # removed: only if a later record has the key
                assert any(o > offset and k == key for o, (k, _v) in self.records.items())
        latest = {k: o for o, (k, _v) in sorted(self.records.items())}
        assert set(latest.values()) <= set(present)
        self.records = present

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        if self.end == self.log_start:
            return
        offset = data.draw(st.integers(max(self.log_start, self.flushed), self.end))
        new_end = self.log.truncate_to(offset)
        assert new_end <= offset
        if new_end < self.log_start or (new_end == offset and self.log.log_start_offset == offset):
            self.log_start = self.log.log_start_offset
            assert self.log_start == offset  # restarted empty at the target
            self.records = {}
        self._cut(new_end)

    @rule(tear=st.booleans(), seed=st.integers(0, 1000))
    def crash_and_recover(self, tear: bool, seed: int) -> None:
        self.memory.crash(tear=tear, rng=random.Random(seed))
        self.log = open_log(
            self.filesystem,
            self.clock,
            CONFIG,
            recovery_point=self.flushed,
            log_start_offset=self.log_start,
        )
        new_end = self.log.log_end_offset
        assert self.flushed <= new_end <= max(self.end, self.log_start)
        self._cut(new_end)

    def _cut(self, new_end: int) -> None:
        self.end = new_end
        self.flushed = min(self.flushed, new_end)
        self.records = {o: kv for o, kv in self.records.items() if o < new_end}
        self.batch_starts = [s for s in self.batch_starts if s < new_end]

    def _read(self, offset: int) -> dict[int, tuple[bytes, bytes]]:
        out: dict[int, tuple[bytes, bytes]] = {}
        position = offset
        while position < self.end:
            result = self.log.read(position, max_bytes=300, max_offset=self.end)
            data = result.read_bytes()
            if not data:
                break
            for found in iter_batches(data):
                assert found.is_valid()
                for record in decode_records(found.data):
                    if record.offset >= offset:
                        assert record.key is not None and record.value is not None
                        out[record.offset] = (record.key, record.value)
                position = found.header.next_offset
        return out

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.log_start
        if self.log_start > 0:
            with pytest.raises(KafkaError) as caught:
                self.log.read(self.log_start - 1, max_bytes=100, max_offset=self.end)
            assert caught.value.code is ErrorCode.offset_out_of_range


LogModel.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_log_agrees_with_model = LogModel.TestCase


class LogModelWithFewOpenFiles(LogModel):
    """The same log with at most 3 files open: every segment file is closed and reopened by
    path again and again, across rolls, renames to `.deleted`, compaction swaps and crashes."""

    def wrap(self, memory: MemoryFileSystem) -> FileSystem:
        return CachingFileSystem(memory, max_open_files=3)


LogModelWithFewOpenFiles.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None
)
test_log_with_few_open_files_agrees_with_model = LogModelWithFewOpenFiles.TestCase
