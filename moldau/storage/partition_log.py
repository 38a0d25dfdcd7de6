"""The log of one partition, Kafka's `UnifiedLog`: append (validation, offsets, producer state,
leader epochs), read, flush, timestamps, retention, DeleteRecords and truncation, over the
segments of a `LocalLog` (`local_log.py`), which it owns. `log_loader.py` opens one from disk.

Invariants: log_start_offset <= high_watermark <= log_end_offset; `recovery_point`
(= `flushed_offset`) is an offset below which every byte is fsynced.

Threads: append/read run on the event-loop thread, `flush()` in a worker, retention and the cleaner
in background threads. `lock` guards the in-memory state (this object's and its `LocalLog`'s) and
is never held across an fsync; `flush_lock` serializes fsyncs, so callers that queue behind one
flush find their data covered (group commit).
"""

from __future__ import annotations

import struct
import threading
from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING

import crc32c

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
from moldau.storage.filesystem import Buffer
from moldau.storage.leader_epoch import LeaderEpochCache
from moldau.storage.local_log import LocalLog
from moldau.storage.log_dir_failures import LogDirState
from moldau.storage.log_validator import (
    DecodeBudget,
    batch_limits,
    fast_path_limits,
    storage_error,
    validate_for_leader,
)
from moldau.storage.producer_appends import ProducerAppends
from moldau.storage.producer_snapshots import (
    delete_snapshots,
    rebuild_producer_state,
    snapshot_path,
)
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.results import AppendOrigin, AppendResult, ReadResult, TimestampOffset
from moldau.storage.segment import FileRegion, LogSegment

if TYPE_CHECKING:
    from moldau.storage.transaction_index import AbortedTransaction

__all__ = ["PartitionLog"]

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_PREFIX_SIZE = _PREFIX.size
_HEADER_UNPACK = HEADER.unpack_from
_SLOW_ATTRIBUTES = CONTROL_BIT | TIMESTAMP_TYPE_BIT | 0x04  # control, LogAppendTime, codec > 3
_crc32c = crc32c.crc32c
_new_tuple = tuple.__new__


class PartitionLog:
    """Use `log_loader.load_partition_log` (or `LogManager`) to open one from disk."""

    def __init__(
        self,
        local: LocalLog,
        *,
        log_start_offset: int,
        high_watermark: int,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochCache,
    ) -> None:
        self.local = local
        self.topic_partition = local.topic_partition
        # Kept here as well as in `local` (as Kafka's UnifiedLog does): read on every append.
        self.config = local.config
        self.clock = local.clock
        self.log_start_offset = log_start_offset
        self.high_watermark = min(max(high_watermark, log_start_offset), local.log_end_offset)
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.lock = threading.RLock()
        self.flush_lock = threading.Lock()
        self._pending_snapshots: list[tuple[int, bytes]] = []  # (offset, producer state)
        self._latest_epoch = leader_epoch_cache.latest_epoch
        self._fast_limits = fast_path_limits(local.config)
        self.closed = False
        self._producers = ProducerAppends(producer_state, local.topic_partition)
        self.topic_id: str | None = None
        self.first_dirty_offset = log_start_offset  # compaction has cleaned everything below
        # Told of every I/O error (LogManager reports it for the log dir: Kafka's
        # LogDirFailureChannel); the error is raised as well.
        self.io_error_handler: Callable[[OSError], object] | None = None

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic_partition}, start={self.log_start_offset}, "
            f"end={self.local.log_end_offset}, segments={len(self.local.segments)})"
        )

    # -- offsets, and the local log's state --

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self.local.recovery_point

    @property
    def flushed_offset(self) -> int:
        return self.local.recovery_point

    @property
    def last_stable_offset(self) -> int:
        unstable = self.producer_state.first_unstable_offset
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    @property
    def directory(self) -> str:
        return self.local.directory

    @property
    def segments(self) -> list[LogSegment]:
        return self.local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local.segments[-1]

    @property
    def size_bytes(self) -> int:
        return self.local.size_bytes

    @property
    def unflushed_bytes(self) -> int:
        """Bytes appended since the last flush began (what the next fsync has to write)."""
        return self.local.unflushed_bytes

    def update_high_watermark(self, offset: int) -> int:
        with self.lock:
            self.high_watermark = min(max(offset, self.log_start_offset), self.local.log_end_offset)
            return self.high_watermark

    def update_config(self, config: LogConfig) -> None:
        with self.lock:
            self.config = config
            self._fast_limits = fast_path_limits(config)
            self.local.update_config(config)

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
        local = self.local
        with self.lock:
            if self.closed:
                self._check_open()
            offset = local.log_end_offset
            last_offset = offset + values[6]
            segment = local.segments[-1]
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
            # (LocalLog.append's bookkeeping, inlined: no call per batch on this path)
            local.log_end_offset = last_offset + 1
            local.unflushed_messages += values[12]
            local.unflushed_bytes += size
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
        with self.lock:
            if self.closed:
                self._check_open()
            if has_producers and origin is AppendOrigin.CLIENT:
                duplicate = self._producers.check(batches, log_start_offset=self.log_start_offset)
                if duplicate is not None:
                    return duplicate
            if origin is AppendOrigin.COORDINATOR:
                self.producer_state.check_markers(view, batches)
            first_offset = offset = self.local.log_end_offset
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
            local = self.local
            try:
                if local.segments[-1].should_roll(relative, offset - 1, now):
                    self._roll(first_offset, now)
                local.append(buffers, placements, size=relative, now=now, record_count=record_count)
            except OSError as error:
                failure = self._storage_error(error)
                self._producers.write_failed(stateful)
                raise failure from error
            if leader_epoch > self._latest_epoch:
                self.assign_leader_epoch(leader_epoch, first_offset)
            if stateful:
                try:
                    self._producers.record(
                        local.segments[-1], local.last_append_position, stateful, written=True
                    )
                except OSError as error:
                    raise self._storage_error(error) from error
            return AppendResult(
                first_offset, offset - 1, append_time, self.log_start_offset, record_count
            )

    def append_as_follower(self, records: Buffer) -> AppendResult:
        """Append batches copied from the leader, offsets and epochs as they are."""
        view = memoryview(records)
        batches = validate_batches(view, check_counts=False)
        with self.lock:
            self._check_open()
            first = batches[0][1].base_offset
            if first < self.local.log_end_offset:
                raise KafkaError(
                    ErrorCode.unknown_server_error,
                    f"follower append at {first} below log end offset {self.local.log_end_offset}",
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
            local, now = self.local, self.clock.now_ms()
            try:
                if local.segments[-1].should_roll(len(view), previous, now):
                    self._roll(first, now)
                local.append([view], placements, size=len(view), now=now, record_count=record_count)
            except OSError as error:
                raise self._storage_error(error) from error
            for _position, header in batches:
                if header.partition_leader_epoch > self._latest_epoch:
                    self.assign_leader_epoch(header.partition_leader_epoch, header.base_offset)
            try:
                self._producers.record(
                    local.segments[-1],
                    local.last_append_position,
                    [b for b in batches if b[1].producer_id >= 0],
                )
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
            with self.lock:
                self.closed = True

    def _storage_error(self, error: OSError) -> KafkaError:
        """Report `error`; the KAFKA_STORAGE_ERROR to raise for it."""
        self._report_io_error(error)
        return storage_error(self.topic_partition, error)

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        """Start a segment at `base_offset`; the producer state there is snapshotted at the next
        flush."""
        self._pending_snapshots.append((base_offset, self.producer_state.snapshot_bytes()))
        return self.local.roll(base_offset, now)

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new segment at the log end offset (if the active one has data)."""
        with self.lock:
            local = self.local
            if local.segments[-1].size:
                self._roll(local.log_end_offset, self.clock.now_ms() if now_ms is None else now_ms)

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
        local = self.local
        with self.lock:
            end = local.log_end_offset
            if fetch_offset < self.log_start_offset or fetch_offset > end:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {fetch_offset} is outside [{self.log_start_offset}, {end}]",
                )
            upper = end if max_offset is None else min(max_offset, end)
            regions: list[FileRegion] = []
            remaining = max_bytes
            segments = local.segments
            index = max(0, bisect_right(local.base_offsets, fetch_offset) - 1)
            offset = fetch_offset
            while index < len(segments) and offset < upper:
                try:
                    region, next_offset, go_on = segments[index].read(
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
        with self.lock:
            return self.local.aborted_transactions(start, end)

    # -- timestamps and epochs --

    def offset_for_timestamp(
        self, timestamp: int, *, read_records: bool = True
    ) -> TimestampOffset | None:
        """The first record with a timestamp >= `timestamp` (ListOffsets), or None. Reading a
        batch is bounded by the topic's batch limits; with `read_records=False` nothing is read
        and an answer that needs it comes back with `exact=False` (see `timestamp_lookup`)."""
        with self.lock:
            segments = list(self.local.segments)
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
        with self.lock:
            best = max(self.local.segments, key=lambda s: s.max_timestamp)
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
        return self.leader_epoch_cache.end_offset_for(epoch, self.local.log_end_offset)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        with self.lock:  # (a move to another log dir swaps the checkpoint file under it)
            self.leader_epoch_cache.assign(epoch, start_offset)
            self._latest_epoch = self.leader_epoch_cache.latest_epoch

    # -- durability --

    def flush(self) -> int:
        """fsync what was appended so far; returns the offset below which all is durable.

        Thread-safe group commit: callers arriving during an fsync wait for it and return at once
        if it covered their appends. Appends are not blocked by the fsync.
        """
        local = self.local
        with self.lock:
            target = local.log_end_offset
        with self.flush_lock:
            if local.recovery_point >= target and not self._pending_snapshots:
                return local.recovery_point
            with self.lock:
                end = local.log_end_offset
                logs, indexes = local.unflushed_segments()
                snapshots, self._pending_snapshots = self._pending_snapshots, []
                flushed_messages = local.unflushed_messages
                flushed_bytes = local.unflushed_bytes
                truncations = local.truncations
            try:
                local.fsync_segments(logs, indexes)
                for offset, data in snapshots:
                    local.filesystem.write_file_atomic(self.snapshot_path(offset), data)
            except OSError as error:
                self._report_io_error(error)
                raise
            with self.lock:
                local.mark_flushed(
                    end,
                    truncations=truncations,
                    flushed_messages=flushed_messages,
                    flushed_bytes=flushed_bytes,
                )
                return local.recovery_point

    def snapshot_path(self, offset: int) -> str:
        return snapshot_path(self.local.directory, offset)

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, trim indexes, close files.

        An I/O error (reported, then raised) still closes every file: the next start recovers
        what this could not finish (a missing snapshot only means a longer replay)."""
        if self.closed:
            self.close_quietly()  # (closed to appends by a failed log dir: its files are open)
            return
        local = self.local
        try:
            self.flush()
            with self.lock:
                snapshot = self.snapshot_path(local.log_end_offset)
                if not local.filesystem.exists(snapshot):  # else the same state: nothing moved
                    local.filesystem.write_file_atomic(
                        snapshot, self.producer_state.snapshot_bytes()
                    )
                active = local.segments[-1]
                active.offset_index.trim()
                active.time_index.trim()
                active.fsync()
        except OSError as error:
            self._report_io_error(error)
            raise
        finally:
            self.close_quietly()

    def close_quietly(self) -> None:
        """Close every file without flushing (a failed log dir; or after `close()`)."""
        with self.lock:
            self.local.close()
            self.closed = True

    def increment_log_start_offset(self, offset: int) -> None:
        """Under `lock`: the log starts at `offset` from now on, if that is later (Kafka's
        `maybeIncrementLogStartOffset`); retention and DeleteRecords move it."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)

    # -- truncation (replication) --

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above `offset` (a follower diverged); returns the new log end
        offset: the start of the batch holding `offset` if it falls inside one. A cut that would
        fall below the log start offset empties the log and restarts it at `offset`."""
        local = self.local
        with self.lock:
            if offset >= local.log_end_offset:
                # Nothing to cut, but an epoch this replica began as leader without appending
                # anything (its start at the log end) is forgotten: kept, it would be the last
                # fetched epoch of every fetch, each answered with the same divergence.
                self.leader_epoch_cache.truncate_from_end(local.log_end_offset)
                self._latest_epoch = self.leader_epoch_cache.latest_epoch
                return local.log_end_offset
            if offset <= local.segments[0].base_offset:
                return self._truncate_fully_locked(offset)
            found = local.segments[local.index_of_segment(offset)].find_batch(offset)
            cut = offset if found is None else min(found[1].base_offset, offset)
            if cut < self.log_start_offset:
                return self._truncate_fully_locked(offset)
            doomed = local.truncate_to(offset)
            self._after_truncation(local.log_end_offset)
        local.rename_deleted(doomed)
        return local.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start empty at `offset` (a follower far behind the leader)."""
        with self.lock:
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> int:
        local = self.local
        local.truncate_fully_and_start_at(offset)
        delete_snapshots(local.filesystem, local.directory)
        self._pending_snapshots = []
        self.log_start_offset = offset
        self.leader_epoch_cache.clear()
        self._after_truncation(offset)
        self.high_watermark = offset
        return offset

    def _after_truncation(self, end: int) -> None:
        """The local log now ends at `end`: what this log keeps of the tail follows it."""
        self.high_watermark = min(self.high_watermark, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch
        self._pending_snapshots = [(o, d) for o, d in self._pending_snapshots if o <= end]
        local = self.local
        rebuild_producer_state(
            local.filesystem, local.directory, local.segments, self.producer_state, upto=end
        )

    # -- producer ids --

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idle producers (`producer.id.expiration.ms`, Kafka's
        `removeExpiredProducers`); the next producer snapshot no longer holds them."""
        with self.lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)
