"""Shrinking a partition log: retention, DeleteRecords and truncation (parts of Kafka's `UnifiedLog`).

Deleted segments leave the segment list under the lock at once, then their files are renamed to
`*.deleted` and closed and removed only after `file.delete.delay.ms` (`delete_expired_segments`),
so a fetch still sending a region of such a segment completes (as Kafka's async delete).
"""

from __future__ import annotations

import threading
from bisect import bisect_right

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem
from moldau.storage.leader_epoch import LeaderEpochCache
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.segment import DELETED_SUFFIX, LogSegment

__all__ = ["LogMaintenance"]


class LogMaintenance:
    """Mixed into `PartitionLog`; the attributes below are its state."""

    filesystem: FileSystem
    directory: str
    config: LogConfig
    clock: Clock
    segments: list[LogSegment]
    _base_offsets: list[int]
    log_start_offset: int
    _log_end_offset: int
    recovery_point: int
    high_watermark: int
    producer_state: ProducerStateManager
    leader_epoch_cache: LeaderEpochCache
    _lock: threading.RLock
    _latest_epoch: int
    _pending_deletes: list[tuple[int, LogSegment]]
    _pending_snapshots: list[tuple[int, bytes]]
    truncations: int

    def snapshot_path(self, offset: int) -> str:
        raise NotImplementedError

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        raise NotImplementedError

    # -- retention --

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns segments deleted.

        Only segments wholly below the high watermark are deleted, oldest first. When the active
        segment is due as well it is rolled first (as Kafka does), so the log keeps an active
        segment starting at the log end offset.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            config = self.config
            total = sum(s.size for s in self.segments)
            doomed: list[LogSegment] = []
            for index, segment in enumerate(self.segments):
                is_active = index == len(self.segments) - 1
                end = self._log_end_offset if is_active else self.segments[index + 1].base_offset
                if end > self.high_watermark or (is_active and segment.size == 0):
                    break
                below_start = end <= self.log_start_offset
                expired = (
                    config.delete
                    and config.retention_ms >= 0
                    and now - segment.largest_timestamp > config.retention_ms
                )
                oversized = (
                    config.delete
                    and config.retention_bytes >= 0
                    and total - segment.size >= config.retention_bytes
                )
                if not (below_start or expired or oversized):
                    break
                if is_active:
                    self._roll(self._log_end_offset, now)
                doomed.append(segment)
                total -= segment.size
            if not doomed:
                return 0
            self._remove_segments(doomed, now)
            new_start = self.segments[0].base_offset
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start
                self.leader_epoch_cache.truncate_from_start(new_start)
        self._rename_deleted(doomed)
        self._delete_snapshots_below(new_start)
        return len(doomed)

    def _delete_snapshots_below(self, offset: int) -> None:
        """Producer snapshots of deleted segments are useless: recovery never goes below."""
        from moldau.storage.log_loader import snapshot_offsets

        for snapshot in snapshot_offsets(self.filesystem, self.directory):
            if snapshot < offset:
                self.filesystem.remove(self.snapshot_path(snapshot))

    def _remove_segments(self, doomed: list[LogSegment], now: int) -> None:
        for segment in doomed:
            index = self.segments.index(segment)
            del self.segments[index]
            del self._base_offsets[index]
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, segment))

    def _rename_deleted(self, doomed: list[LogSegment]) -> None:
        for segment in doomed:
            try:
                segment.rename_suffix(DELETED_SUFFIX)
            except OSError:
                pass  # the partition directory may be gone already

    def delete_expired_segments(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Close and remove deleted segments whose delay has passed (all with `force`)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for when, s in self._pending_deletes if force or when <= now]
            self._pending_deletes = [
                (when, s) for when, s in self._pending_deletes if not (force or when <= now)
            ]
        for segment in due:
            segment.delete_files()
        return len(due)

    # -- DeleteRecords --

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset to `offset` (-1: the high watermark); returns it.

        OFFSET_OUT_OF_RANGE if `offset` is above the high watermark.
        """
        with self._lock:
            if offset == -1:
                offset = self.high_watermark
            if offset < 0 or offset > self.high_watermark:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} is above the high watermark {self.high_watermark}",
                )
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                if self.recovery_point < offset:
                    self.recovery_point = min(offset, self._log_end_offset)
            start = self.log_start_offset
        self.delete_old_segments()
        return start

    # -- truncation (replication) --

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above `offset` (a follower diverged); returns the new log end
        offset: the start of the batch holding `offset` if it falls inside one. A cut that would
        fall below the log start offset empties the log and restarts it at `offset`."""
        with self._lock:
            if offset >= self._log_end_offset:
                # Nothing to cut, but an epoch this replica began as leader without appending
                # anything (its start at the log end) is forgotten: kept, it would be the last
                # fetched epoch of every fetch, each answered with the same divergence.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                self._latest_epoch = self.leader_epoch_cache.latest_epoch
                return self._log_end_offset
            if offset <= self.segments[0].base_offset:
                return self._truncate_fully_locked(offset)
            index = bisect_right(self._base_offsets, offset) - 1
            found = self.segments[index].find_batch(offset)
            cut = offset if found is None else min(found[1].base_offset, offset)
            if cut < self.log_start_offset:
                return self._truncate_fully_locked(offset)
            doomed = [s for s in self.segments[1:] if s.base_offset >= offset]
            self._remove_segments(doomed, self.clock.now_ms())
            active = self.segments[-1]
            active.truncate_to(offset)
            # made durable at once, so a crash cannot bring back what replication cut away
            active.log.fsync()
            self._after_truncation(active.next_offset)
        self._rename_deleted(doomed)
        return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start empty at `offset` (a follower far behind the leader)."""
        with self._lock:
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> int:
        now = self.clock.now_ms()
        doomed = list(self.segments)
        self._remove_segments(doomed, now)
        for segment in doomed:  # closed after the delete delay, as in retention
            segment.rename_suffix(DELETED_SUFFIX)
        from moldau.storage.log_loader import snapshot_offsets

        for snapshot in snapshot_offsets(self.filesystem, self.directory):
            self.filesystem.remove(self.snapshot_path(snapshot))
        self._pending_snapshots = []
        segment = LogSegment(self.filesystem, self.directory, offset, self.config, now_ms=now)
        segment.preallocate_indexes()
        self.segments.append(segment)
        self._base_offsets.append(offset)
        self.log_start_offset = offset
        self.leader_epoch_cache.clear()
        self._after_truncation(offset)
        self.high_watermark = self.recovery_point = offset
        return offset

    # -- producer ids --

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idle producers (`producer.id.expiration.ms`, Kafka's
        `removeExpiredProducers`); the next producer snapshot no longer holds them."""
        with self._lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    def _after_truncation(self, end: int) -> None:
        from moldau.storage.log_loader import rebuild_producer_state

        self._log_end_offset = end
        self.truncations += 1
        self.recovery_point = min(self.recovery_point, end)
        self.high_watermark = min(self.high_watermark, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self._latest_epoch = self.leader_epoch_cache.latest_epoch
        self._pending_snapshots = [(o, d) for o, d in self._pending_snapshots if o <= end]
        rebuild_producer_state(
            self.filesystem, self.directory, self.segments, self.producer_state, upto=end
        )
