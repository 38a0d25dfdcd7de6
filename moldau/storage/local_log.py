"""The segments of one partition in its directory, Kafka's `LocalLog`: the segment list, the log
end offset and the recovery point, rolling, writing at the log end, removing segments (retention,
truncation, a compaction swap), deleting their files after `file.delete.delay.ms`, the fsyncs of
a flush, and moving the files to another directory.

Not thread-safe: a `PartitionLog` (Kafka's `UnifiedLog`) owns one and calls it under its lock,
except for `fsync_segments`, which works on a list taken under it. Removed segments leave the
list at once; their files are renamed `*.deleted` and closed and removed only after the delay
(`take_expired_deletes`), so a fetch still sending a region of such a segment completes (as
Kafka's async delete).

The produce fast path and the read of `PartitionLog` use `segments`, `base_offsets` and the
offsets here directly rather than through a method: no call is added per batch.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from moldau.clock import Clock
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import Buffer, FileHandle, FileSystem
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
)
from moldau.storage.transaction_index import AbortedTransaction
from moldau.types import TopicPartition

__all__ = ["LocalLog"]


class LocalLog:
    """`segments` are sorted by base offset and only the last (the active segment) is appended
    to; `recovery_point` is an offset below which every byte is fsynced."""

    def __init__(
        self,
        *,
        filesystem: FileSystem,
        directory: str,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        recovery_point: int,
    ) -> None:
        self.filesystem = filesystem
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.segments = segments
        self.base_offsets = [s.base_offset for s in segments]
        self.log_end_offset = segments[-1].next_offset
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.unflushed_messages = 0
        self.unflushed_bytes = 0  # appended since the last flush began
        self.last_append_position = 0  # where the last `append` wrote in the active segment
        self.truncations = 0  # how many times the log end moved back (replication)
        self.last_flush_ms = clock.now_ms()
        self.pending_deletes: list[tuple[int, LogSegment]] = []  # (due, removed segment)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def index_of_segment(self, offset: int) -> int:
        """The index in `segments` of the one that holds `offset` (the first for one below)."""
        return max(0, bisect_right(self.base_offsets, offset) - 1)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.config = config

    # -- appending --

    def append(
        self,
        buffers: list[Buffer],
        placements: list[tuple[int, int, int, int]],
        *,
        size: int,
        now: int,
        record_count: int,
    ) -> None:
        """Write batches to the active segment and move the log end past the last."""
        self.last_append_position = self.segments[-1].append(
            buffers, placements, size=size, now_ms=now
        )
        self.log_end_offset = placements[-1][1] + 1
        self.unflushed_messages += record_count
        self.unflushed_bytes += size

    def roll(self, base_offset: int, now: int) -> LogSegment:
        """Close the active segment to appends and start one at `base_offset` (in place of the
        active one if that is empty)."""
        old = self.segments[-1]
        old.on_become_inactive()
        if old.size == 0:
            self.segments.pop()
            self.base_offsets.pop()
            old.delete_files()
        return self._add_segment(base_offset, now)

    def _add_segment(self, base_offset: int, now: int) -> LogSegment:
        segment = LogSegment(self.filesystem, self.directory, base_offset, self.config, now_ms=now)
        segment.preallocate_indexes()
        self.segments.append(segment)
        self.base_offsets.append(base_offset)
        return segment

    # -- reading --

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTransaction]:
        found: list[AbortedTransaction] = []
        for segment in self.segments[self.index_of_segment(start) :]:
            found.extend(segment.transaction_index.overlapping(start, end))
        return found

    # -- flushing --

    def unflushed_segments(self) -> tuple[list[LogSegment], list[LogSegment]]:
        """What a flush fsyncs: the `.log` files past the recovery point, and the indexes of
        inactive segments not synced yet (final since their roll, they are synced once; the
        active segment's are rebuilt by recovery after a crash)."""
        logs = [s for s in self.segments if s.next_offset > self.recovery_point]
        indexes = [s for s in self.segments[:-1] if not s.indexes_synced]
        for segment in indexes:
            segment.prepare_flush()
        return logs, indexes

    @staticmethod
    def fsync_segments(logs: list[LogSegment], indexes: list[LogSegment]) -> None:
        """fsync what `unflushed_segments` named (no lock needed; a segment closed meanwhile,
        deleted or moved, is skipped)."""
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

    def mark_flushed(
        self, end: int, *, truncations: int, flushed_messages: int, flushed_bytes: int
    ) -> None:
        """A flush that began at log end `end` is done; `truncations` as it began."""
        if truncations == self.truncations:
            self.recovery_point = max(self.recovery_point, end)
        # else: a truncation cut below `end` meanwhile, and what was appended after it is not
        # covered by this fsync; the next flush will be
        self.unflushed_messages -= flushed_messages
        self.unflushed_bytes -= flushed_bytes
        self.last_flush_ms = self.clock.now_ms()

    # -- removing segments --

    def deletable_segments(
        self, high_watermark: int, predicate: Callable[[LogSegment, int], bool]
    ) -> list[LogSegment]:
        """The oldest segments for as long as `predicate(segment, its end offset)` holds, only
        those wholly below `high_watermark` and never an empty active segment (Kafka's
        `deletableSegments`)."""
        deletable: list[LogSegment] = []
        last = len(self.segments) - 1
        for index, segment in enumerate(self.segments):
            is_active = index == last
            end = self.log_end_offset if is_active else self.segments[index + 1].base_offset
            if end > high_watermark or (is_active and segment.size == 0):
                break
            if not predicate(segment, end):
                break
            deletable.append(segment)
        return deletable

    def remove_segments(self, doomed: list[LogSegment], now: int) -> None:
        """Take `doomed` out of the list; their files go after the delete delay."""
        for segment in doomed:
            index = self.segments.index(segment)
            del self.segments[index]
            del self.base_offsets[index]
            self.pending_deletes.append((now + self.config.file_delete_delay_ms, segment))

    @staticmethod
    def rename_deleted(doomed: list[LogSegment]) -> None:
        for segment in doomed:
            try:
                segment.rename_suffix(DELETED_SUFFIX)
            except OSError:
                pass  # the partition directory may be gone already

    def take_expired_deletes(self, now: int, *, force: bool = False) -> list[LogSegment]:
        """The removed segments whose delay has passed (all with `force`), for their files to
        be closed and removed."""
        due = [s for when, s in self.pending_deletes if force or when <= now]
        self.pending_deletes = [
            (when, s) for when, s in self.pending_deletes if not (force or when <= now)
        ]
        return due

    def truncate_to(self, offset: int) -> list[LogSegment]:
        """Remove everything from the batch holding `offset` on, which lies past the first
        segment; returns the segments removed whole (for `rename_deleted`). Made durable at
        once, so a crash cannot bring back what replication cut away."""
        doomed = [s for s in self.segments[1:] if s.base_offset >= offset]
        self.remove_segments(doomed, self.clock.now_ms())
        active = self.segments[-1]
        active.truncate_to(offset)
        active.log.fsync()
        self._truncated(active.next_offset)
        return doomed

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Remove every segment and start empty at `offset`."""
        now = self.clock.now_ms()
        doomed = list(self.segments)
        self.remove_segments(doomed, now)
        for segment in doomed:  # closed after the delete delay, as in retention
            segment.rename_suffix(DELETED_SUFFIX)
        self._add_segment(offset, now)
        self._truncated(offset)
        self.recovery_point = offset

    def _truncated(self, end: int) -> None:
        self.log_end_offset = end
        self.truncations += 1
        self.recovery_point = min(self.recovery_point, end)

    def replace_segment(self, old: LogSegment, cleaned: LogSegment) -> bool:
        """Swap the compacted copy `cleaned` (files `*.cleaned`) in for `old`, in the directory
        and in the list; False, dropping `cleaned`, when `old` was removed meanwhile."""
        if old not in self.segments:  # deleted or truncated meanwhile: drop the work
            cleaned.delete_files()
            return False
        filesystem = self.filesystem
        log_path = cleaned.path(LOG_SUFFIX)
        swap_path = log_path[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX
        filesystem.rename(log_path, swap_path)  # commit point
        for suffix in SEGMENT_SUFFIXES[1:]:
            source = cleaned.path(suffix)
            filesystem.rename(source, source[: -len(CLEANED_SUFFIX)])
        filesystem.rename(swap_path, old.path(LOG_SUFFIX))
        cleaned.suffix = ""
        self.segments[self.segments.index(old)] = cleaned
        old.replaced = True
        self.pending_deletes.append((self.clock.now_ms() + self.config.file_delete_delay_ms, old))
        return True

    # -- moving and closing --

    def relocate(self, directory: str) -> list[FileHandle]:
        """Point every segment at its files under `directory` (renamed there already); returns
        the old handles, for the caller to close once reads in flight are done."""
        old: list[FileHandle] = []
        for segment in self.segments:
            old.extend(segment.relocate(directory))
        self.active_segment.preallocate_indexes()
        self.directory = directory
        return old

    def close(self) -> None:
        """Close every file; the files of removed segments go now."""
        for segment in self.segments:
            segment.close()
        for _due, segment in self.pending_deletes:
            try:
                segment.delete_files()
            except OSError:
                pass  # recovery removes `.deleted` files
        self.pending_deletes.clear()
