"""The log of one partition, Kafka's `UnifiedLog`: append, read, roll, flush, offsets and epochs.

Invariants: log_start_offset <= high_watermark <= log_end_offset; segments are sorted by base
offset and only the last (the active segment) is appended to; `recovery_point` (= `flushed_offset`)
is an offset below which every byte is fsynced. Loading and recovery are in `log_loader.py`;
retention, truncation and DeleteRecords in `log_maintenance.py`.

Threads: append/read run on the event-loop thread, `flush()` in a worker, retention and the cleaner
in background threads. `_lock` guards the in-memory state and is never held across an fsync;
`_flush_lock` serializes fsyncs, so callers that queue behind one flush find their data covered
(group commit).
"""

from __future__ import annotations

import posixpath
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING

import crc32c

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.protocol.batch_layout import (
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader, validate_batches
from moldau.storage import timestamp_lookup
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import Buffer, FileSystem
from moldau.storage.leader_epoch import LeaderEpochCache
from moldau.storage.log_dir_failures import LogDirState
from moldau.storage.log_maintenance import LogMaintenance
from moldau.storage.log_validator import (
    DecodeBudget,
    batch_limits,
    fast_path_limits,
    storage_error,
    validate_for_leader,
)
from moldau.storage.producer_state import (
    SNAPSHOT_SUFFIX,
    ProducerStateEntry,
    ProducerStateManager,
    control_type_of,
)
from moldau.storage.results import AppendOrigin, AppendResult, ReadResult, TimestampOffset
from moldau.storage.segment import FileRegion, LogSegment, segment_file_name
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.storage.transaction_index import AbortedTransaction

__all__ = ["PartitionLog"]

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_PREFIX_SIZE = _PREFIX.size
_HEADER_UNPACK = HEADER.unpack_from
_SLOW_ATTRIBUTES = CONTROL_BIT | TIMESTAMP_TYPE_BIT | 0x04  # control, LogAppendTime, codec > 3
_crc32c = crc32c.crc32c
_new_tuple = tuple.__new__


class PartitionLog(LogMaintenance):
    """Use `log_loader.load_partition_log` (or `LogManager`) to open one from disk."""

    def __init__(
        self,
        *,
        filesystem: FileSystem,
        directory: str,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock = SYSTEM_CLOCK,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochCache,
    ) -> None:
        self.filesystem = filesystem
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.segments = segments
        self._base_offsets = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self._log_end_offset = segments[-1].next_offset
        self.recovery_point = min(recovery_point, self._log_end_offset)
        self.high_watermark = min(max(high_watermark, log_start_offset), self._log_end_offset)
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._pending_snapshots: list[tuple[int, bytes]] = []
        self.truncations = 0  # how many times the log end moved back (replication)
        self._unflushed_messages = 0
        self._unflushed_bytes = 0
        self._last_append_position = 0
        self._latest_epoch = leader_epoch_cache.latest_epoch
        self._fast_limits = fast_path_limits(config)
        self.last_flush_ms = clock.now_ms()
        self.closed = False
        # producer id -> (epoch, base sequence) of its batch whose write failed (a full disk):
        # a batch pipelined behind it is answered KAFKA_STORAGE_ERROR, not OUT_OF_ORDER_SEQUENCE
        self._failed_sequences: dict[int, tuple[int, int]] = {}
        self.topic_id: str | None = None
        self.first_dirty_offset = log_start_offset  # compaction has cleaned everything below
        # Told of every I/O error (LogManager reports it for the log dir: Kafka's
        # LogDirFailureChannel); the error is raised as well.
        self.io_error_handler: Callable[[OSError], object] | None = None

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic_partition}, start={self.log_start_offset}, "
            f"end={self._log_end_offset}, segments={len(self.segments)})"
        )

    # -- offsets --

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def flushed_offset(self) -> int:
        return self.recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def last_stable_offset(self) -> int:
        unstable = self.producer_state.first_unstable_offset
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def unflushed_bytes(self) -> int:
        """Bytes appended since the last flush began (what the next fsync has to write)."""
        return self._unflushed_bytes

    def update_high_watermark(self, offset: int) -> int:
        with self._lock:
            self.high_watermark = min(max(offset, self.log_start_offset), self._log_end_offset)
            return self.high_watermark

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._fast_limits = fast_path_limits(config)
            for segment in self.segments:
                segment.config = config

    # -- append --

    def append_as_leader(
        self,
        records: Buffer,
        *,
        leader_epoch: int,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        decode_budget: DecodeBudget | None = None,
    ) -> AppendResult:
        """Validate, assign offsets and append the batches of a produce request.

        Raises KafkaError (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP,
        INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER) with the log untouched. This is the
        produce hot path: it works from the 61-byte headers only and never copies record data.
        A writable `records` (bytearray, writable memoryview) is handed over: base offset and
        epoch are rewritten in it and it is written as is; for read-only bytes the new first 16
        bytes go out as a separate buffer of a vectored write. `decode_budget` is shared by the
        partitions of one produce request (see `DecodeBudget`).
        """
        view = memoryview(records)
        now = self.clock.now_ms() if now_ms is None else now_ms
        if origin is not AppendOrigin.CLIENT or len(view) < HEADER_SIZE:
            return self._append_batches(view, leader_epoch, now, origin, decode_budget)
        # Fast path, the common produce: one valid batch, no producer id, CreateTime, no config
        # that needs the records decoded. Same checks and effects as `_append_batches`, in fewer
        # Python steps; anything else (including every invalid batch) goes there.
        values = _HEADER_UNPACK(view, 0)
        size = values[1] + LOG_OVERHEAD
        max_message_bytes, max_records, after_max_ms, before_max_ms, plain = self._fast_limits
        if (
            size != len(view)
            or values[3] != 2  # magic
            or values[9] >= 0  # producer id
            or values[5] & _SLOW_ATTRIBUTES
            or size > max_message_bytes
            or not 0 < values[12] <= max_records
            or values[6] != values[12] - 1
            or not plain
            or _crc32c(view[CRC_START:]) != values[4]
            or values[8] > now + after_max_ms
            or 0 <= values[7] < now - before_max_ms
        ):
            return self._append_batches(view, leader_epoch, now, origin, decode_budget)
        with self._lock:
            if self.closed:
                self._check_open()
            offset = self._log_end_offset
            last_offset = offset + values[6]
            segment = self.segments[-1]
            # The header as written: a consumer at the log end is answered without reading it.
            header = _new_tuple(BatchHeader, (offset, values[1], leader_epoch, *values[3:]))
            try:
                if segment.should_roll(size, last_offset, now):
                    segment = self._roll(offset, now)
                if view.readonly:
                    segment.append(
                        [_PREFIX.pack(offset, values[1], leader_epoch), view[_PREFIX_SIZE:]],
                        [(0, last_offset, values[8], size)],
                        size=size,
                        now_ms=now,
                        last_header=header,
                    )
                else:  # the caller handed us its buffer: rewrite in place, one contiguous write
                    _PREFIX.pack_into(view, 0, offset, values[1], leader_epoch)
                    segment.append_batch(view, size, last_offset, values[8], now, header)
            except OSError as error:
                raise self._storage_error(error) from error
            self._log_end_offset = last_offset + 1
            self._unflushed_messages += values[12]
            self._unflushed_bytes += size
            if leader_epoch > self._latest_epoch:
                self.assign_leader_epoch(leader_epoch, offset)
            # tuple.__new__ skips the generated __new__ (a measurable share of this path)
            return _new_tuple(
                AppendResult, (offset, last_offset, -1, self.log_start_offset, values[12], False)
            )

    def _append_batches(
        self,
        view: memoryview,
        leader_epoch: int,
        now: int,
        origin: AppendOrigin,
        decode_budget: DecodeBudget | None = None,
    ) -> AppendResult:
        """The general append: any number of batches, any config, producer state."""
        config = self.config
        view, batches = validate_for_leader(
            view,
            config,
            now=now,
            from_client=origin is AppendOrigin.CLIENT,
            budget=decode_budget,
        )
        append_time = now if config.log_append_time else -1
        has_producers = any(header[9] >= 0 for _position, header in batches)
        with self._lock:
            if self.closed:
                self._check_open()
            if has_producers and origin is AppendOrigin.CLIENT:
                duplicate = self._check_producers(batches)
                if duplicate is not None:
                    return duplicate
            if origin is AppendOrigin.COORDINATOR:
                self.producer_state.check_markers(view, batches)
            first_offset = offset = self._log_end_offset
            buffers: list[Buffer] = []
            placements: list[tuple[int, int, int, int]] = []
            stateful: list[tuple[int, BatchHeader]] = []
            relative = 0
            record_count = 0
            for position, header in batches:
                size = header.batch_length + LOG_OVERHEAD
                last_offset = offset + header.last_offset_delta
                if append_time >= 0:
                    header = header._replace(
                        base_offset=offset,
                        partition_leader_epoch=leader_epoch,
                        attributes=header.attributes | TIMESTAMP_TYPE_BIT,
                        max_timestamp=append_time,
                    )
                    packed = bytearray(HEADER.pack(*header))
                    records_view = view[position + HEADER_SIZE : position + size]
                    crc = crc32c.crc32c(records_view, crc32c.crc32c(packed[CRC_START:]))
                    struct.pack_into(">I", packed, 17, crc)
                    buffers.append(packed)
                    buffers.append(records_view)
                else:
                    buffers.append(_PREFIX.pack(offset, header.batch_length, leader_epoch))
                    buffers.append(view[position + _PREFIX_SIZE : position + size])
                placements.append((relative, last_offset, header.max_timestamp, size))
                if has_producers and header.producer_id >= 0:
                    stateful.append(
                        (
                            relative,
                            header._replace(
                                base_offset=offset, partition_leader_epoch=leader_epoch
                            ),
                        )
                    )
                relative += size
                record_count += header.records_count
                offset = last_offset + 1
            try:
                self._write(buffers, placements, relative, now, record_count, first_offset)
            except KafkaError:
                for _relative, header in stateful:
                    self._failed_sequences.setdefault(
                        header.producer_id, (header.producer_epoch, header.base_sequence)
                    )
                raise
            if leader_epoch > self._latest_epoch:
                self.assign_leader_epoch(leader_epoch, first_offset)
            if stateful:
                if self._failed_sequences:  # (empty but after a failed write)
                    for _relative, header in stateful:
                        self._failed_sequences.pop(header.producer_id, None)
                try:
                    self._apply_producer_state(stateful)
                except OSError as error:
                    raise self._storage_error(error) from error
            return AppendResult(
                first_offset, offset - 1, append_time, self.log_start_offset, record_count
            )

    def append_as_follower(self, records: Buffer) -> AppendResult:
        """Append batches copied from the leader, offsets and epochs as they are."""
        view = memoryview(records)
        batches = validate_batches(view, check_counts=False)
        with self._lock:
            self._check_open()
            first = batches[0][1].base_offset
            if first < self._log_end_offset:
                raise KafkaError(
                    ErrorCode.unknown_server_error,
                    f"follower append at {first} below log end offset {self._log_end_offset}",
                )
            previous = first - 1
            placements: list[tuple[int, int, int, int]] = []
            record_count = 0
            for position, header in batches:
                if header.base_offset <= previous:
                    raise KafkaError(ErrorCode.invalid_record, "offsets must increase")
                previous = header.last_offset
                placements.append((position, previous, header.max_timestamp, header.size))
                record_count += header.records_count
            self._write([view], placements, len(view), self.clock.now_ms(), record_count, first)
            for _position, header in batches:
                if header.partition_leader_epoch > self._latest_epoch:
                    self.assign_leader_epoch(header.partition_leader_epoch, header.base_offset)
            try:
                self._apply_producer_state([b for b in batches if b[1].producer_id >= 0])
            except OSError as error:
                raise self._storage_error(error) from error
            return AppendResult(first, previous, -1, self.log_start_offset, record_count)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.topic_partition} is closed")

    def _report_io_error(self, error: OSError) -> None:
        handler = self.io_error_handler
        if handler is not None and handler(error) is LogDirState.FAILED:
            # Closed to appends at once: the broker takes the partition offline later, on its
            # loop, and a produce pipelined behind the failed one must not be checked against a
            # producer state without the failed batch (OUT_OF_ORDER_SEQUENCE_NUMBER, on which
            # librdkafka bumps its epoch and resends what an unanswered request put in the log).
            with self._lock:
                self.closed = True

    def _storage_error(self, error: OSError) -> KafkaError:
        """Report `error`; the KAFKA_STORAGE_ERROR to raise for it."""
        self._report_io_error(error)
        return storage_error(self.topic_partition, error)

    def _check_producers(self, batches: list[tuple[int, BatchHeader]]) -> AppendResult | None:
        """Check idempotent batches against (copies of) the producer state; a retried batch
        returns its original result."""
        entries: dict[int, ProducerStateEntry] = {}
        for _position, header in batches:
            if header.producer_id < 0 or header.is_control:
                continue
            entry = entries.get(header.producer_id)
            if entry is None:
                entry = entries[header.producer_id] = self.producer_state.copy_entry(
                    header.producer_id
                )
            try:
                duplicate = ProducerStateManager.check(entry, header)
            except KafkaError as error:
                self._after_failed_write(error, entry, header)
                raise
            if duplicate is not None:
                if len(batches) != 1:
                    raise KafkaError(ErrorCode.duplicate_sequence_number)
                return AppendResult(
                    first_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    log_append_time=-1,
                    log_start_offset=self.log_start_offset,
                    record_count=header.records_count,
                    duplicate=True,
                )
            ProducerStateManager.update_entry(entry, header._replace(base_offset=0))
        return None

    def _after_failed_write(
        self, error: KafkaError, entry: ProducerStateEntry, header: BatchHeader
    ) -> None:
        """Raise KAFKA_STORAGE_ERROR for a batch out of sequence only because the batch before it
        failed to be written (pipelined behind it): that one is retried, and so must this be.
        OUT_OF_ORDER_SEQUENCE_NUMBER would make the producer bump its epoch and resend batches
        it cannot know the fate of (a duplicate: librdkafka does)."""
        failed = self._failed_sequences.get(header.producer_id)
        if (
            error.code == ErrorCode.out_of_order_sequence_number
            and failed is not None
            and failed == (header.producer_epoch, ProducerStateManager.next_sequence(entry))
        ):
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{self.topic_partition}: producer {header.producer_id} sequence "
                f"{header.base_sequence} follows sequence {failed[1]}, whose write failed",
            ) from None

    def _apply_producer_state(self, placed: list[tuple[int, BatchHeader]]) -> None:
        """Record appended batches (relative positions) in the producer state; markers also
        complete transactions and aborted ones go to the transaction index."""
        state = self.producer_state
        for relative, header in placed:
            if header.producer_id < 0:
                continue
            if header.is_control:
                segment = self.active_segment
                data = segment.log.pread(
                    header.batch_length + LOG_OVERHEAD, self._last_append_position + relative
                )
                control_type, coordinator_epoch = control_type_of(data)
                aborted = state.apply_batch(
                    header, control_type=control_type, coordinator_epoch=coordinator_epoch
                )
                if aborted is not None:
                    self._record_aborted(aborted)
                continue
            entry = state.copy_entry(header.producer_id)
            ProducerStateManager.update_entry(entry, header)
            state.commit_entry(entry)

    def _record_aborted(self, aborted: AbortedTransaction) -> None:
        self.active_segment.transaction_index.append(aborted)

    def _write(
        self,
        buffers: list[Buffer],
        placements: list[tuple[int, int, int, int]],
        size: int,
        now: int,
        record_count: int,
        first_offset: int,
    ) -> None:
        last_offset = placements[-1][1]
        segment = self.segments[-1]
        try:
            if segment.should_roll(size, last_offset, now):
                segment = self._roll(first_offset, now)
            self._last_append_position = segment.append(buffers, placements, size=size, now_ms=now)
        except OSError as error:
            raise self._storage_error(error) from error
        self._log_end_offset = last_offset + 1
        self._unflushed_messages += record_count
        self._unflushed_bytes += size

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        """Close the active segment to appends and start one at `base_offset`."""
        old = self.active_segment
        old.on_become_inactive()
        self._pending_snapshots.append((base_offset, self.producer_state.snapshot_bytes()))
        if old.size == 0:
            self.segments.pop()
            self._base_offsets.pop()
            old.delete_files()
        segment = LogSegment(self.filesystem, self.directory, base_offset, self.config, now_ms=now)
        segment.preallocate_indexes()
        self.segments.append(segment)
        self._base_offsets.append(base_offset)
        return segment

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new segment at the log end offset (if the active one has data)."""
        with self._lock:
            if self.active_segment.size:
                self._roll(self._log_end_offset, self.clock.now_ms() if now_ms is None else now_ms)

    # -- read --

    def read(
        self,
        fetch_offset: int,
        *,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> ReadResult:
        """Whole batches from `fetch_offset`, below `max_offset` (exclusive: the high watermark or
        last stable offset) and within `max_bytes` (at least one batch if `min_one_message`)."""
        with self._lock:
            end = self._log_end_offset
            if fetch_offset < self.log_start_offset or fetch_offset > end:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {fetch_offset} is outside [{self.log_start_offset}, {end}]",
                )
            upper = end if max_offset is None else min(max_offset, end)
            regions: list[FileRegion] = []
            remaining = max_bytes
            index = max(0, bisect_right(self._base_offsets, fetch_offset) - 1)
            offset = fetch_offset
            while index < len(self.segments) and offset < upper:
                try:
                    region, next_offset, go_on = self.segments[index].read(
                        offset,
                        max_offset=upper,
                        max_bytes=remaining,
                        min_one_message=min_one_message and not regions,
                    )
                except OSError as error:
                    raise self._storage_error(error) from error
                if region is not None:
                    regions.append(region)
                    remaining -= region.length
                    offset = next_offset
                elif go_on:
                    offset = max(offset, next_offset)
                if not go_on or remaining <= 0:
                    break
                index += 1
            return ReadResult(
                regions=tuple(regions),
                log_start_offset=self.log_start_offset,
                log_end_offset=end,
                high_watermark=self.high_watermark,
                last_stable_offset=self.last_stable_offset,
                next_offset=offset if regions else fetch_offset,
            )

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTransaction]:
        """Aborted transactions overlapping [start, end), for read_committed fetches."""
        with self._lock:
            index = max(0, bisect_right(self._base_offsets, start) - 1)
            found: list[AbortedTransaction] = []
            for segment in self.segments[index:]:
                found.extend(segment.transaction_index.overlapping(start, end))
            return found

    # -- timestamps and epochs --

    def offset_for_timestamp(
        self, timestamp: int, *, read_records: bool = True
    ) -> TimestampOffset | None:
        """The first record with a timestamp >= `timestamp` (ListOffsets), or None. Reading a
        batch is bounded by the topic's batch limits; with `read_records=False` nothing is read
        and an answer that needs it comes back with `exact=False` (see `timestamp_lookup`)."""
        with self._lock:
            segments = list(self.segments)
            limits = batch_limits(self.config)
        found = timestamp_lookup.offset_for_timestamp(
            segments,
            timestamp,
            log_start_offset=self.log_start_offset,
            limits=limits,
            read_records=read_records,
        )
        return None if found is None else self._timestamp_offset(found)

    def max_timestamp_offset(self, *, read_records: bool = True) -> TimestampOffset | None:
        """The first record with the largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734);
        `read_records` as for `offset_for_timestamp`."""
        with self._lock:
            best = max(self.segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            found = best.find_batch(best.offset_of_max_timestamp)
            limits = batch_limits(self.config)
        lookup = timestamp_lookup.max_timestamp_offset(
            best, found, limits=limits, read_records=read_records
        )
        return self._timestamp_offset(lookup)

    def _timestamp_offset(self, lookup: timestamp_lookup.Lookup) -> TimestampOffset:
        return TimestampOffset(
            timestamp=lookup.timestamp,
            offset=lookup.offset,
            leader_epoch=self.leader_epoch_cache.epoch_for_offset(lookup.offset),
            exact=lookup.exact,
        )

    def end_offset_for_leader_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        with self._lock:  # (a move to another log dir swaps the checkpoint file under it)
            self.leader_epoch_cache.assign(epoch, start_offset)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch

    # -- durability --

    def flush(self) -> int:
        """fsync what was appended so far; returns the offset below which all is durable.

        Thread-safe group commit: callers arriving during an fsync wait for it and return at once
        if it covered their appends. Appends are not blocked by the fsync.
        """
        with self._lock:
            target = self._log_end_offset
        with self._flush_lock:
            if self.recovery_point >= target and not self._pending_snapshots:
                return self.recovery_point
            with self._lock:
                end = self._log_end_offset
                # Only .log files need an fsync per flush: after a crash the active segment is
                # always recovered (indexes rebuilt). Inactive segments' indexes, final since
                # their roll, are synced once.
                logs = [s for s in self.segments if s.next_offset > self.recovery_point]
                indexes = [s for s in self.segments[:-1] if not s.indexes_synced]
                for segment in indexes:
                    segment.prepare_flush()
                snapshots, self._pending_snapshots = self._pending_snapshots, []
                flushed_messages = self._unflushed_messages
                flushed_bytes = self._unflushed_bytes
                truncations = self.truncations
            try:
                self._fsync(logs, indexes, snapshots)
            except OSError as error:
                self._report_io_error(error)
                raise
            with self._lock:
                if truncations == self.truncations:
                    self.recovery_point = max(self.recovery_point, end)
                # else: a truncation cut below `end` meanwhile, and what was appended after it
                # is not covered by this fsync; the next flush will be
                self._unflushed_messages -= flushed_messages
                self._unflushed_bytes -= flushed_bytes
                self.last_flush_ms = self.clock.now_ms()
                return self.recovery_point

    def _fsync(
        self,
        logs: list[LogSegment],
        indexes: list[LogSegment],
        snapshots: list[tuple[int, bytes]],
    ) -> None:
        for segment in logs:
            try:
                segment.log.fsync()
            except OSError:
                if not segment.closed:
                    raise
        for segment in indexes:
            try:
                segment.fsync()
                segment.indexes_synced = True
            except OSError:
                if not segment.closed:
                    raise
        for offset, data in snapshots:
            self.filesystem.write_file_atomic(self.snapshot_path(offset), data)

    def snapshot_path(self, offset: int) -> str:
        return posixpath.join(self.directory, segment_file_name(offset, SNAPSHOT_SUFFIX))

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, trim indexes, close files.

        An I/O error (reported, then raised) still closes every file: the next start recovers
        what this could not finish (a missing snapshot only means a longer replay)."""
        if self.closed:
            self.close_quietly()  # (closed to appends by a failed log dir: its files are open)
            return
        try:
            self.flush()
            with self._lock:
                snapshot = self.snapshot_path(self._log_end_offset)
                if not self.filesystem.exists(snapshot):  # else the same state: nothing moved
                    self.filesystem.write_file_atomic(
                        snapshot, self.producer_state.snapshot_bytes()
                    )
                self.active_segment.offset_index.trim()
                self.active_segment.time_index.trim()
                self.active_segment.fsync()
        except OSError as error:
            self._report_io_error(error)
            raise
        finally:
            self.close_quietly()

    def close_quietly(self) -> None:
        """Close every file without flushing (a failed log dir; or after `close()`)."""
        with self._lock:
            for segment in self.segments:
                segment.close()
            for _due, segment in self._pending_deletes:
                try:
                    segment.delete_files()
                except OSError:
                    pass  # recovery removes `.deleted` files
            self._pending_deletes.clear()
            self.closed = True
