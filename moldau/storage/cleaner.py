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

A batch the cleaner cannot read within the topic's `BatchLimits` (a decompression bomb stored
before a topic became compacted, a corrupt one) is copied as it is: its records join no key's
history and are never removed, which keeps every record a reader could see. The partition is
reported uncleanable with the reason (logged once) and the rest of it is cleaned. A partition
whose cleaning fails in any other way is reported the same and left alone until the broker
restarts, as Kafka's `LogCleanerManager` marks a partition uncleanable; the other partitions,
`__consumer_offsets` among them, are cleaned on, and the cleaner thread outlives any error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.protocol.errors import KafkaError
from moldau.protocol.records import BatchHeader, Record, RecordBatch, rebuild_batch
from moldau.storage.log_validator import batch_limits
from moldau.storage.segment import CLEANED_SUFFIX, LogSegment
from moldau.storage.transaction_index import AbortedTransaction

if TYPE_CHECKING:
    from moldau.storage.config import LogConfig
    from moldau.storage.partition_log import PartitionLog
    from moldau.types import TopicPartition

__all__ = ["LogCleaner", "clean_log"]

log = logging.getLogger(__name__)


class LogCleaner:
    """A background thread that cleans every compacted log among `logs()` (a `LogManager`'s),
    calling `checkpoint()` after a pass that cleaned something (the manager writes the
    cleaner-offset checkpoints)."""

    def __init__(
        self,
        logs: Callable[[], Iterable[PartitionLog]],
        *,
        checkpoint: Callable[[], None],
        clock: Clock = SYSTEM_CLOCK,
        backoff_seconds: float = 15.0,
    ) -> None:
        self._logs = logs
        self._checkpoint = checkpoint
        self.clock = clock
        self.backoff_seconds = backoff_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bytes_cleaned = 0
        # partition -> (its log, why, whether it is left alone); kept until the broker restarts
        self._uncleanable: dict[TopicPartition, tuple[PartitionLog, str, bool]] = {}
        # Kafka's abortAndPauseCleaning, without the abort: a paused partition is skipped, and
        # pausing waits for a pass over it to end (a replica moving to another log dir).
        self._pause_condition = threading.Condition()
        self._paused: set[TopicPartition] = set()
        self._cleaning: TopicPartition | None = None

    @property
    def uncleanable(self) -> dict[TopicPartition, str]:
        """Partitions the cleaner met something in, and what (Kafka's uncleanable partitions)."""
        return {tp: reason for tp, (_log, reason, _left) in self._uncleanable.items()}

    def pause(self, tp: TopicPartition) -> None:
        """Clean `tp` no more until `resume(tp)`; returns once no pass is cleaning it."""
        with self._pause_condition:
            self._paused.add(tp)
            while self._cleaning == tp:
                self._pause_condition.wait()

    def resume(self, tp: TopicPartition) -> None:
        with self._pause_condition:
            self._paused.discard(tp)

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
            try:
                self.clean_once()
            except Exception:  # the thread must outlive anything a pass meets
                log.exception(
                    "log cleaner pass failed; the next starts in %ss", self.backoff_seconds
                )
            self._stop.wait(self.backoff_seconds)

    def clean_once(self, now_ms: int | None = None) -> int:
        """Clean every compacted log that is dirty enough; returns bytes read."""
        total = 0
        for partition_log in self._logs():
            if self._stop.is_set():
                break
            if not partition_log.config.compact or partition_log.closed:
                continue
            tp = partition_log.topic_partition
            mark = self._uncleanable.get(tp)
            if mark is not None and mark[0] is partition_log and mark[2]:
                continue  # left alone since its cleaning failed
            with self._pause_condition:
                if tp in self._paused:
                    continue
                self._cleaning = tp
            try:
                total += clean_log(
                    partition_log, now_ms=now_ms, on_unreadable=self._unreadable_in(partition_log)
                )
            except Exception as error:
                self._mark(
                    partition_log,
                    f"cleaning failed ({error!r}); the partition is no longer cleaned until the "
                    "broker restarts",
                    leave_alone=True,
                    failure=error,
                )
            finally:
                with self._pause_condition:
                    self._cleaning = None
                    self._pause_condition.notify_all()
        self.bytes_cleaned += total
        if total:
            self._checkpoint()
        return total

    def _unreadable_in(self, partition_log: PartitionLog) -> Callable[[int, str], None]:
        def report(offset: int, reason: str) -> None:
            self._mark(
                partition_log,
                f"batch at offset {offset} cannot be read ({reason}); it is kept as it is and "
                "the rest of the partition is cleaned",
            )

        return report

    def _mark(
        self,
        partition_log: PartitionLog,
        reason: str,
        *,
        leave_alone: bool = False,
        failure: BaseException | None = None,
    ) -> None:
        """Report a partition uncleanable: logged the first time (and again if it is now left
        alone)."""
        tp = partition_log.topic_partition
        mark = self._uncleanable.get(tp)
        if mark is not None and mark[0] is partition_log and (mark[2] or not leave_alone):
            return
        self._uncleanable[tp] = (partition_log, reason, leave_alone)
        log.warning("uncleanable partition %s: %s", tp, reason, exc_info=failure)


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


def clean_log(
    log: PartitionLog,
    *,
    now_ms: int | None = None,
    on_unreadable: Callable[[int, str], None] | None = None,
) -> int:
    """One cleaning pass over `log` (see the module docstring); returns bytes read.
    `on_unreadable(base offset, reason)` hears of each batch kept as it is, once a pass."""
    now = log.clock.now_ms() if now_ms is None else now_ms
    with log.lock:
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
    read = _BatchReader(config, on_unreadable)
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty:
            continue
        for batch in segment.batches():
            if batch.header.is_control or _in_aborted(batch, aborted):
                continue
            for record in read(batch) or ():
                if record.key is not None:
                    latest[record.key] = record.offset
    for segment in segments:
        cleaned = _rewrite_segment(
            log, segment, latest, aborted, now, config.delete_retention_ms, read
        )
        _swap(log, segment, cleaned)
    with log.lock:
        log.first_dirty_offset = max(log.first_dirty_offset, end_offset)
    return total


class _BatchReader:
    """A batch's records within the topic's batch limits, or None for a batch that cannot be
    read (reported once)."""

    def __init__(self, config: LogConfig, on_unreadable: Callable[[int, str], None] | None) -> None:
        self.limits = batch_limits(config)
        self.on_unreadable = on_unreadable
        self.unreadable: set[int] = set()

    def __call__(self, batch: RecordBatch) -> list[Record] | None:
        try:
            return batch.records(
                max_size=self.limits.max_decoded_bytes, max_records=self.limits.max_records
            )
        except KafkaError as error:
            base_offset = batch.header.base_offset
            if base_offset not in self.unreadable:
                self.unreadable.add(base_offset)
                if self.on_unreadable is not None:
                    self.on_unreadable(base_offset, str(error))
            return None


def _rewrite_segment(
    log: PartitionLog,
    segment: LogSegment,
    latest: dict[bytes, int],
    aborted: list[AbortedTransaction],
    now: int,
    delete_retention_ms: int,
    read: _BatchReader,
) -> LogSegment:
    cleaned = LogSegment(
        log.local.filesystem,
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
        elif (records := read(batch)) is None:  # cannot be read: kept as it is
            data = batch.data
        else:
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
    with log.lock:
        log.local.replace_segment(old, cleaned)
