"""Log compaction, Kafka's `LogCleaner`: keep the latest record of each key.

One pass over a log with `cleanup.policy` containing `compact`:
  1. cleanable range: the inactive segments below the last stable offset (never an open
     transaction) whose newest record is older than `min.compaction.lag.ms`; cleaned only if the
     bytes after the first dirty offset are >= `min.cleanable.dirty.ratio` of the range, or a
     dirty segment is older than `max.compaction.lag.ms`;
  2. offset map: key → latest offset, over the dirty part;
  3. each segment is rewritten to `<base>.log.cleaned`: a record survives if no later record has
     its key; tombstones survive until `delete.retention.ms` after their segment's last write;
     batches of aborted transactions are dropped; control batches are kept; a batch whose records
     all survive is copied byte for byte, others are rebuilt with their original offsets;
  4. swap: fsync, rename `.log.cleaned` → `.log.swap` (the commit point), then over `.log`; the
     loader finishes a swap interrupted by a crash, so the log is valid at every moment.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.protocol.records import BatchHeader, RecordBatch, rebuild_batch
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
)
from moldau.storage.transaction_index import AbortedTransaction

if TYPE_CHECKING:
    from moldau.storage.log_manager import LogManager
    from moldau.storage.partition_log import PartitionLog

__all__ = ["LogCleaner", "clean_log"]


class LogCleaner:
    """A background thread that cleans every compacted log of a `LogManager`."""

    def __init__(
        self, manager: LogManager, *, clock: Clock = SYSTEM_CLOCK, backoff_seconds: float = 15.0
    ) -> None:
        self.manager = manager
        self.clock = clock
        self.backoff_seconds = backoff_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bytes_cleaned = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.clean_once()
            self._stop.wait(self.backoff_seconds)

    def clean_once(self, now_ms: int | None = None) -> int:
        """Clean every compacted log that is dirty enough; returns bytes read."""
        total = 0
        for log in self.manager.logs():
            if self._stop.is_set():
                break
            if log.config.compact and not log.closed:
                total += clean_log(log, now_ms=now_ms)
        self.bytes_cleaned += total
        if total:
            self.manager.checkpoint_cleaner_offsets()
        return total


def _cleanable_segments(log: PartitionLog, now: int) -> list[LogSegment]:
    config = log.config
    limit = min(log.last_stable_offset, log.active_segment.base_offset)
    chosen: list[LogSegment] = []
    for segment in log.segments[:-1]:
        if segment.next_offset > limit:
            break
        if now - segment.largest_timestamp < config.min_compaction_lag_ms:
            break
        chosen.append(segment)
    return chosen


def _in_aborted(batch: RecordBatch, aborted: list[AbortedTransaction]) -> bool:
    header = batch.header
    if not header.is_transactional or header.is_control:
        return False
    return any(
        a.producer_id == header.producer_id
        and a.first_offset <= header.base_offset <= a.last_offset
        for a in aborted
    )


def clean_log(log: PartitionLog, *, now_ms: int | None = None) -> int:
    """One cleaning pass over `log` (see the module docstring); returns bytes read."""
    now = log.clock.now_ms() if now_ms is None else now_ms
    with log._lock:
        segments = _cleanable_segments(log, now)
        if not segments:
            return 0
        end_offset = segments[-1].next_offset
        first_dirty = max(log.first_dirty_offset, segments[0].base_offset)
        total = sum(s.size for s in segments)
        dirty_segments = [s for s in segments if s.next_offset > first_dirty]
        dirty = sum(s.size for s in dirty_segments)
        if total == 0 or dirty == 0:
            return 0
        # max.compaction.lag.ms: a dirty segment this old is cleaned whatever the ratio
        overdue = now - dirty_segments[0].largest_timestamp > log.config.max_compaction_lag_ms
        if dirty / total < log.config.min_cleanable_dirty_ratio and not overdue:
            return 0
        aborted = log.aborted_transactions(segments[0].base_offset, end_offset)
        config = log.config
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty:
            continue
        for batch in segment.batches():
            if batch.header.is_control or _in_aborted(batch, aborted):
                continue
            for record in batch.records():
                if record.key is not None:
                    latest[record.key] = record.offset
    for segment in segments:
        cleaned = _rewrite_segment(log, segment, latest, aborted, now, config.delete_retention_ms)
        _swap(log, segment, cleaned)
    with log._lock:
        log.first_dirty_offset = max(log.first_dirty_offset, end_offset)
    return total


def _rewrite_segment(
    log: PartitionLog,
    segment: LogSegment,
    latest: dict[bytes, int],
    aborted: list[AbortedTransaction],
    now: int,
    delete_retention_ms: int,
) -> LogSegment:
    cleaned = LogSegment(
        log.filesystem,
        log.directory,
        segment.base_offset,
        log.config,
        now_ms=segment.created_ms,
        suffix=CLEANED_SUFFIX,
    )
    cleaned.log.truncate(0)
    cleaned.size = 0
    drop_tombstones = now - segment.largest_timestamp > delete_retention_ms
    for batch in segment.batches():
        header = batch.header
        if header.is_control:
            data: bytes | memoryview = batch.data
        elif _in_aborted(batch, aborted):
            continue
        else:
            records = batch.records()
            kept = [
                r
                for r in records
                if (r.key is None or latest.get(r.key, r.offset) <= r.offset)
                and not (r.value is None and drop_tombstones)
            ]
            is_last = batch.position + header.size == segment.size
            if not kept and not is_last:
                continue
            # the last batch stays (maybe empty) so the segment still ends where it did
            if len(kept) == len(records):
                data = batch.data
            else:
                data = rebuild_batch(header, kept)
        written = BatchHeader.parse(data)
        placement = (0, written.last_offset, written.max_timestamp, written.size)
        cleaned.append([data], [placement], size=len(data), now_ms=now)
    for entry in segment.transaction_index.entries:
        cleaned.transaction_index.append(entry)
    cleaned.next_offset = segment.next_offset
    cleaned.on_become_inactive()
    cleaned.fsync()
    return cleaned


def _swap(log: PartitionLog, old: LogSegment, cleaned: LogSegment) -> None:
    """Replace `old` by `cleaned` in the directory and in the segment list, atomically."""
    filesystem = log.filesystem
    with log._lock:
        if old not in log.segments:  # deleted or truncated meanwhile: drop the work
            cleaned.delete_files()
            return
        log_path = cleaned.path(LOG_SUFFIX)
        swap_path = log_path[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX
        filesystem.rename(log_path, swap_path)  # commit point
        for suffix in SEGMENT_SUFFIXES[1:]:
            source = cleaned.path(suffix)
            filesystem.rename(source, source[: -len(CLEANED_SUFFIX)])
        filesystem.rename(swap_path, old.path(LOG_SUFFIX))
        cleaned.suffix = ""
        index = log.segments.index(old)
        log.segments[index] = cleaned
        old.replaced = True
        log._pending_deletes.append((log.clock.now_ms() + log.config.file_delete_delay_ms, old))
