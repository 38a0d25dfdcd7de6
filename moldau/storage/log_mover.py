"""Moving a partition's replica to another log dir of this broker while it keeps serving: Kafka's
future log and `ReplicaAlterLogDirsThread` (KIP-113), done as a copy of the partition's files.

    <target dir>/<topic>-<partition>.<move id>-future   the copy, while it is being made
    <source dir>/<topic>-<partition>.<move id>-delete   the old replica after the swap

1. Copy (a worker thread; the log's lock is held only to note what there is to copy): each
   segment's `.log` bytes in chunks of COPY_CHUNK_BYTES, read through the segment's own handle;
   its index and transaction-index entries from memory (the arrays are the truth: the active
   segment's index file is preallocated and behind them); the producer snapshots and
   `partition.metadata`. Every round fsyncs what it wrote. Rounds repeat for what was appended
   meanwhile until less than SWAP_TAIL_MAX_BYTES are left.
2. Swap (the log's flush lock and lock held: no append, read or fsync of this log meanwhile):
   copy and fsync the rest, write the leader-epoch checkpoint (its atomic write fsyncs the future
   directory, so every file in it is durably named), then `commit()`: the old directory is
   renamed `-delete` (the commit point) and the future one `<topic>-<partition>`; every segment
   then points at the new files. Producer state, epochs, offsets and the recent-batch cache are
   the log's memory and do not move, so no append is lost or written twice. The lock is held for
   one small fsync (at most SWAP_TAIL_MAX_BYTES, the size of an inline group commit) plus two
   renames.

With a quota (`replica.alter.log.dirs.io.max.bytes.per.second`, Kafka's alter-log-dirs throttle)
the copy's rounds wait in their worker thread, holding no lock, after each chunk that takes the
node's moves over the rate; the swap's tail is never held back (the log's lock is held then).

A truncation by replication during the copy starts it over (`MoveRestart`); retention may delete
segments meanwhile (their copies are dropped at the next round); the caller pauses compaction.
The recovery rule after a crash is `LogManager.startup`'s: a `-future` directory whose partition
is live in some log dir is removed (the move had not committed), one whose partition is not is
renamed into place (the old directory had been renamed away: the move had committed).
"""

from __future__ import annotations

import posixpath
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.rate import RateQuota
from moldau.storage.checkpoints import PARTITION_METADATA
from moldau.storage.filesystem import FileHandle
from moldau.storage.index import encode_offset_entries, encode_time_entries
from moldau.storage.partition_log import PartitionLog
from moldau.storage.producer_state import SNAPSHOT_SUFFIX
from moldau.storage.segment import SEGMENT_SUFFIXES, LogSegment, segment_file_name
from moldau.storage.transaction_index import AbortedTransaction, encode_entries

__all__ = [
    "COPY_CHUNK_BYTES",
    "FUTURE_DIRECTORY_SUFFIX",
    "SWAP_TAIL_MAX_BYTES",
    "LogMove",
    "MoveCancelled",
    "MoveRestart",
]

FUTURE_DIRECTORY_SUFFIX = "-future"
COPY_CHUNK_BYTES = 1 << 20
SWAP_TAIL_MAX_BYTES = 256 * 1024
# Rounds before the swap takes whatever is left: a log appended to faster than it is copied
# still moves, holding its lock a little longer once.
MAX_COPY_ROUNDS = 20
# The longest single wait for the quota: a cancelled move or a closed log is noticed this soon.
QUOTA_WAIT_MAX_S = 0.5


class MoveRestart(Exception):
    """The log was truncated (replication) under the copy: the copy starts over."""


class MoveCancelled(Exception):
    """The move was cancelled, or the log closed (deleted, its log dir failed)."""


@dataclass(slots=True)
class _SegmentCopy:
    """How much of one segment is in the future directory."""

    segment: LogSegment
    log_bytes: int = 0
    offset_entries: int = 0
    time_entries: int = 0
    aborted_entries: int = 0


@dataclass(slots=True)
class _Work:
    """What one round copies of one segment: noted under the log's lock, copied without it."""

    copy: _SegmentCopy
    log_end: int
    next_offset: int
    offsets: array[int] = field(default_factory=lambda: array("i"))
    positions: array[int] = field(default_factory=lambda: array("i"))
    timestamps: array[int] = field(default_factory=lambda: array("q"))
    time_offsets: array[int] = field(default_factory=lambda: array("i"))
    aborted: list[AbortedTransaction] = field(default_factory=list)


class LogMove:
    """One move of `log`'s files into `future_directory` (see the module docstring)."""

    def __init__(
        self,
        log: PartitionLog,
        future_directory: str,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        quota: RateQuota | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`quota`: the node's log-dir move throttle, shared by its moves; `sleep` waits for it
        (in the worker thread)."""
        self.log = log
        self.future_directory = future_directory
        self.filesystem = log.local.filesystem
        self._cancelled = cancelled
        self._quota = quota
        self._sleep = sleep
        self._copies: dict[int, _SegmentCopy] = {}
        self._truncations = log.local.truncations
        self.copied_bytes = 0  # .log bytes in the future directory
        self.copied_offset = log.log_start_offset  # every batch below it is there

    # -- step 1 --

    def copy(self) -> None:
        """Copy in rounds until less than SWAP_TAIL_MAX_BYTES are left (or MAX_COPY_ROUNDS)."""
        self.filesystem.makedirs(self.future_directory)
        self._copy_small_files()
        for _round in range(MAX_COPY_ROUNDS):
            with self.log.lock:
                work = self._plan()
            if sum(item.log_end - item.copy.log_bytes for item in work) < SWAP_TAIL_MAX_BYTES:
                return
            self._copy(work, throttled=True)
            self._copy_small_files()

    # -- step 2 --

    def swap(self, commit: Callable[[], str]) -> list[FileHandle]:
        """Copy the rest and switch the log to the copy. `commit()` renames the directories (the
        old one away first: the commit point) and returns the log's new directory. Returns the
        old files' handles: the caller closes them once reads in flight are done."""
        log = self.log
        with log.flush_lock, log.lock:
            work = self._plan()
            self._copy(work)
            self._copy_small_files()
            # Written last: its atomic write fsyncs the future directory itself.
            log.leader_epoch_cache.write_copy(self.future_directory)
            directory = commit()
            old = log.local.relocate(directory)
            log.leader_epoch_cache.relocate(directory)
            return old

    # -- rounds --

    def _plan(self) -> list[_Work]:
        """Under the log's lock: what is new in each segment since the last round."""
        log = self.log
        if log.closed or self._cancelled():
            raise MoveCancelled(str(log.topic_partition))
        if log.local.truncations != self._truncations:
            raise MoveRestart(str(log.topic_partition))
        live: dict[int, _SegmentCopy] = {}
        work: list[_Work] = []
        for segment in log.segments:
            copy = self._copies.get(segment.base_offset)
            if copy is None or copy.segment is not segment:
                if copy is not None:  # compaction swapped new files in: copy them afresh
                    self._remove_copy(segment.base_offset)
                copy = _SegmentCopy(segment)
                work.append(_Work(copy, segment.size, segment.next_offset))  # files exist
            live[segment.base_offset] = copy
            offset_index, time_index = segment.offset_index, segment.time_index
            aborted = segment.transaction_index.entries
            if (
                segment.size > copy.log_bytes
                or len(offset_index) > copy.offset_entries
                or len(time_index) > copy.time_entries
                or len(aborted) > copy.aborted_entries
            ):
                if not work or work[-1].copy is not copy:
                    work.append(_Work(copy, segment.size, segment.next_offset))
                item = work[-1]
                item.offsets = offset_index.relative_offsets[copy.offset_entries :]
                item.positions = offset_index.positions[copy.offset_entries :]
                item.timestamps = time_index.timestamps[copy.time_entries :]
                item.time_offsets = time_index.relative_offsets[copy.time_entries :]
                item.aborted = aborted[copy.aborted_entries :]
        for base_offset in self._copies.keys() - live.keys():  # deleted by retention
            self._remove_copy(base_offset)
        self._copies = live
        return work

    def _copy(self, work: list[_Work], *, throttled: bool = False) -> None:
        for item in work:
            self._copy_segment(item, throttled=throttled)
            self.copied_offset = max(self.copied_offset, item.next_offset)

    def _hold_back(self, size: int) -> None:
        """Count `size` copied bytes against the quota and wait while the moves are over it."""
        quota = self._quota
        if quota is None:
            return
        quota.record(size)
        while (delay := quota.delay_s()) > 0:
            if self.log.closed or self._cancelled():
                raise MoveCancelled(str(self.log.topic_partition))
            self._sleep(min(delay, QUOTA_WAIT_MAX_S))

    def _copy_segment(self, item: _Work, *, throttled: bool) -> None:
        copy, segment, filesystem = item.copy, item.copy.segment, self.filesystem
        files = [
            filesystem.open(self._future_path(segment.base_offset, suffix))
            for suffix in SEGMENT_SUFFIXES
        ]
        try:
            log_file, index_file, time_file, aborted_file = files
            position = copy.log_bytes
            while position < item.log_end:
                if self._cancelled():
                    raise MoveCancelled(str(self.log.topic_partition))
                size = min(COPY_CHUNK_BYTES, item.log_end - position)
                data = segment.log.pread(size, position)
                if len(data) != size:
                    raise MoveRestart(f"{segment!r} is shorter than {item.log_end} bytes")
                log_file.pwrite(data, position)
                position += size
                copy.log_bytes = position
                self.copied_bytes += size
                if throttled:
                    self._hold_back(size)
            if item.offsets:
                index_file.pwrite(
                    encode_offset_entries(item.offsets, item.positions), copy.offset_entries * 8
                )
                copy.offset_entries += len(item.offsets)
            if item.timestamps:
                time_file.pwrite(
                    encode_time_entries(item.timestamps, item.time_offsets), copy.time_entries * 12
                )
                copy.time_entries += len(item.timestamps)
            if item.aborted:
                aborted_file.pwrite(encode_entries(item.aborted), copy.aborted_entries * 34)
                copy.aborted_entries += len(item.aborted)
            for file in files:
                file.fsync()
        finally:
            for file in files:
                file.close()

    def _copy_small_files(self) -> None:
        """Producer snapshots (each written once, atomically) and `partition.metadata`."""
        filesystem, source = self.filesystem, self.log.directory
        names = set(filesystem.listdir(source))
        present = set(filesystem.listdir(self.future_directory))
        for name in names:
            wanted = name.endswith(SNAPSHOT_SUFFIX) and name not in present
            if wanted or name == PARTITION_METADATA:
                try:
                    data = filesystem.read_file(posixpath.join(source, name))
                except FileNotFoundError:
                    continue  # deleted meanwhile (retention)
                filesystem.write_file_atomic(posixpath.join(self.future_directory, name), data)
        for name in present - names:
            if name.endswith(SNAPSHOT_SUFFIX):
                filesystem.remove(posixpath.join(self.future_directory, name))

    def _remove_copy(self, base_offset: int) -> None:
        for suffix in SEGMENT_SUFFIXES:
            self.filesystem.remove(self._future_path(base_offset, suffix))

    def _future_path(self, base_offset: int, suffix: str) -> str:
        return posixpath.join(self.future_directory, segment_file_name(base_offset, suffix))
