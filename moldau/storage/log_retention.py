"""Shrinking a partition log from its start: retention (`retention.ms`, `retention.bytes`, the
log start offset), DeleteRecords, and the removal of deleted segments' files after
`file.delete.delay.ms` (Kafka's `UnifiedLog.deleteOldSegments` and `deleteRecordsOnLeader`,
and `LocalLog`'s asynchronous delete). `LogManager` runs retention over its logs; replication
asks for DeleteRecords.

Deleted segments leave the segment list under the log's lock at once, then their files are
renamed `*.deleted` and closed and removed only after the delay (`delete_expired_segments`),
so a fetch still sending a region of such a segment completes.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.partition_log import PartitionLog
from moldau.storage.producer_snapshots import delete_snapshots
from moldau.storage.segment import LogSegment

__all__ = ["delete_expired_segments", "delete_old_segments", "delete_records"]


def delete_old_segments(log: PartitionLog, now_ms: int | None = None) -> int:
    """Apply retention.ms, retention.bytes and the log start offset; returns segments deleted.

    Only segments wholly below the high watermark are deleted, oldest first. When the active
    segment is due as well it is rolled first (as Kafka does), so the log keeps an active
    segment starting at the log end offset.
    """
    now = log.clock.now_ms() if now_ms is None else now_ms
    local = log.local
    with log.lock:
        config = log.config
        total = local.size_bytes

        def breached(segment: LogSegment, end: int) -> bool:
            nonlocal total
            below_start = end <= log.log_start_offset
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
                return False
            total -= segment.size
            return True

        doomed = local.deletable_segments(log.high_watermark, breached)
        if not doomed:
            return 0
        if doomed[-1] is local.active_segment:
            log.roll(now)
        local.remove_segments(doomed, now)
        new_start = local.segments[0].base_offset
        log.increment_log_start_offset(new_start)
    local.rename_deleted(doomed)
    # Producer snapshots of deleted segments are useless: recovery never goes below.
    delete_snapshots(local.filesystem, local.directory, below=new_start)
    return len(doomed)


def delete_records(log: PartitionLog, offset: int) -> int:
    """Advance the log start offset to `offset` (-1: the high watermark) and delete the segments
    wholly below it; returns the log start offset.

    OFFSET_OUT_OF_RANGE if `offset` is above the high watermark.
    """
    with log.lock:
        if offset == -1:
            offset = log.high_watermark
        if offset < 0 or offset > log.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} is above the high watermark {log.high_watermark}",
            )
        if offset > log.log_start_offset:
            log.increment_log_start_offset(offset)
            local = log.local
            if local.recovery_point < offset:
                local.recovery_point = min(offset, local.log_end_offset)
        start = log.log_start_offset
    delete_old_segments(log)
    return start


def delete_expired_segments(
    log: PartitionLog, now_ms: int | None = None, *, force: bool = False
) -> int:
    """Close and remove deleted segments whose delay has passed (all with `force`)."""
    now = log.clock.now_ms() if now_ms is None else now_ms
    with log.lock:
        due = log.local.take_expired_deletes(now, force=force)
    for segment in due:
        segment.delete_files()
    return len(due)
