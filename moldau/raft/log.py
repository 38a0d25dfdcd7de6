"""The replicated log a Raft node appends to, as Kafka's `ReplicatedLog` interface (KIP-595).

The log is a sequence of entries (batches). An entry holds one or more records that commit
together, each record with its own offset: an entry at `base_offset` with n records covers
offsets base_offset .. base_offset + n - 1. Entries carry the leader epoch that wrote them;
control entries (a leader change) belong to Raft itself and are not handed to the state machine.
Epochs never decrease along the log; `end_offset_for_epoch` answers from an index of the offset
where each epoch starts (Kafka's leader-epoch cache). A log may start after offset 0: the
entries before `log_start` are in a snapshot (KIP-630), whose id is that offset and the epoch of
the last entry it holds.

Threading: `append`, `read` and `truncate_to` run on the owner's thread; `flush` may run in a
worker thread at the same time as appends, and makes durable at least everything appended
before it was called.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

# Per entry: length, crc, base offset, epoch, attributes, count; per record: its size. Kafka's
# fetch limits count bytes, so the log measures entries as the file log stores them.
ENTRY_OVERHEAD_BYTES = 26
RECORD_OVERHEAD_BYTES = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEntry:
    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    is_control: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def size_in_bytes(self) -> int:
        return ENTRY_OVERHEAD_BYTES + sum(RECORD_OVERHEAD_BYTES + len(r) for r in self.records)


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class OffsetAndEpoch:
    """An offset and the epoch of the entry before it (Kafka's OffsetAndEpoch); ordered by
    epoch first, which is how Raft compares how up to date two logs are."""

    epoch: int
    offset: int


class ReplicatedLog(Protocol):
    @property
    def log_start(self) -> OffsetAndEpoch:
        """Where the log starts, and the epoch of the entry before it (in the snapshot it
        starts from); (0, 0) without a snapshot."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next appended record will get."""
        ...

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry, or the log start's when the log is empty."""
        ...

    @property
    def flushed_offset(self) -> int:
        """Every record below this offset is durable."""
        ...

    def append(self, entry: LogEntry) -> None:
        """Append an entry whose base_offset is `end_offset` (page cache only, not durable)."""
        ...

    def flush(self) -> int:
        """Make every appended record durable; return the new `flushed_offset`."""
        ...

    def read(self, start_offset: int = 0, *, max_bytes: int | None = None) -> Iterator[LogEntry]:
        """Entries holding offsets at or after `start_offset`, in order; with `max_bytes`, stop
        before the entry that would exceed it, but always give the first one (as Kafka does,
        KIP-74, so an entry larger than the limit still makes progress)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch at or below `epoch` in the log and the offset where it ends (where
        a larger epoch starts, or the log end): Kafka's `endOffsetForEpoch`. When every entry
        is of a larger epoch, the log start (as Kafka answers with its oldest snapshot)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry holding an offset at or after `offset` (a follower's divergent
        tail), durably: a crash afterwards does not bring them back."""
        ...

    def truncate_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop every entry; the log now starts at the snapshot (a follower installed the
        leader's). Durable."""
        ...

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop the entries below the snapshot's end offset (an entry boundary at or below the
        log end, whose previous entry has the snapshot's epoch); the log now starts there."""
        ...

    def close(self) -> None: ...


def check_appendable(log_end_offset: int, log_last_epoch: int, entry: LogEntry) -> None:
    if entry.base_offset != log_end_offset:
        raise ValueError(
            f"entry at offset {entry.base_offset} does not follow the log end {log_end_offset}"
        )
    if not entry.records:
        raise ValueError("a log entry needs at least one record")
    if entry.epoch < log_last_epoch:
        raise ValueError(f"entry of epoch {entry.epoch} after one of epoch {log_last_epoch}")


def end_after_truncation(log: ReplicatedLog, offset: int) -> OffsetAndEpoch:
    """Where `log.truncate_to(offset)` would leave the log: its end and last epoch. An entry
    that holds both `offset - 1` and `offset` goes whole, so the end may fall below `offset`."""
    start = log.log_start
    if offset <= start.offset:
        return start
    for entry in log.read(offset - 1):
        if entry.last_offset < offset:
            return OffsetAndEpoch(epoch=entry.epoch, offset=entry.next_offset)
        return end_after_truncation(log, entry.base_offset)
    return OffsetAndEpoch(epoch=log.last_epoch, offset=log.end_offset)


class CachedEntries:
    """The entries of a log held in memory in offset order (metadata logs are small), with the
    offset where each epoch starts: the read side shared by the implementations."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._start = OffsetAndEpoch(epoch=0, offset=0)
        self._flushed_offset = 0
        # Parallel lists: epoch k starts at offset _epoch_starts[k]; epochs strictly increase.
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []

    @property
    def log_start(self) -> OffsetAndEpoch:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._entries[-1].next_offset if self._entries else self._start.offset

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self._start.epoch

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def read(self, start_offset: int = 0, *, max_bytes: int | None = None) -> Iterator[LogEntry]:
        entries = self._entries
        index = max(0, bisect.bisect_right(entries, start_offset, key=_base_offset) - 1)
        budget = max_bytes
        first = True
        for entry in entries[index:]:
            if entry.last_offset < start_offset:
                continue
            if budget is not None:
                size = entry.size_in_bytes
                if size > budget and not first:
                    return
                budget -= size
            first = False
            yield entry

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        index = bisect.bisect_right(self._epochs, epoch) - 1
        if index < 0:
            return self._start
        if index + 1 < len(self._epochs):
            return OffsetAndEpoch(epoch=self._epochs[index], offset=self._epoch_starts[index + 1])
        return OffsetAndEpoch(epoch=self._epochs[index], offset=self.end_offset)

    def _check_appendable(self, entry: LogEntry) -> None:
        check_appendable(self.end_offset, self.last_epoch, entry)

    def _add_entry(self, entry: LogEntry) -> None:
        if not self._epochs or self._epochs[-1] != entry.epoch:
            self._epochs.append(entry.epoch)
            self._epoch_starts.append(entry.base_offset)
        self._entries.append(entry)

    def _set_entries(self, entries: list[LogEntry]) -> None:
        self._entries = []
        self._epochs = []
        self._epoch_starts = []
        for entry in entries:
            self._add_entry(entry)

    def _check_snapshot_boundary(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id.offset < self._start.offset or snapshot_id.offset > self.end_offset:
            raise ValueError(
                f"snapshot {snapshot_id} is outside the log {self._start.offset}..{self.end_offset}"
            )
        ends = [
            self._start,
            *(OffsetAndEpoch(epoch=e.epoch, offset=e.next_offset) for e in self._entries),
        ]
        if snapshot_id not in ends:
            raise ValueError(
                f"snapshot {snapshot_id} does not end where an entry of its epoch ends"
            )

    def _entries_from(self, offset: int) -> list[LogEntry]:
        return [e for e in self._entries if e.base_offset >= offset]

    def _entries_below(self, offset: int) -> list[LogEntry]:
        index = bisect.bisect_right(self._entries, offset, key=_base_offset)
        kept = self._entries[:index]
        while kept and kept[-1].last_offset >= offset:
            kept.pop()
        return kept


def _base_offset(entry: LogEntry) -> int:
    return entry.base_offset


class MemoryReplicatedLog(CachedEntries):
    """A `ReplicatedLog` in memory, for tests and simulations. `flush` is instant; `crash()`
    forgets what was never flushed, as a power cut would."""

    def __init__(self, entries: Sequence[LogEntry] = ()) -> None:
        super().__init__()
        self._lock = threading.Lock()
        for entry in entries:
            self.append(entry)
        self.flush()

    def append(self, entry: LogEntry) -> None:
        self._check_appendable(entry)
        with self._lock:
            self._add_entry(entry)

    def flush(self) -> int:
        with self._lock:
            self._flushed_offset = self.end_offset
        return self._flushed_offset

    def flush_up_to(self, offset: int) -> int:
        """Make the entries wholly below `offset` durable (a flush that began before later
        appends); return the new `flushed_offset`."""
        with self._lock:
            durable = self._entries_below(offset)
            end = durable[-1].next_offset if durable else 0
            self._flushed_offset = max(self._flushed_offset, end)
        return self._flushed_offset

    def truncate_to(self, offset: int) -> None:
        with self._lock:
            self._set_entries(self._entries_below(offset))
            self._flushed_offset = min(self._flushed_offset, self.end_offset)

    def truncate_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        with self._lock:
            self._start = snapshot_id
            self._set_entries([])
            self._flushed_offset = snapshot_id.offset

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self._check_snapshot_boundary(snapshot_id)
        with self._lock:
            kept = self._entries_from(snapshot_id.offset)
            self._start = snapshot_id
            self._set_entries(kept)
            self._flushed_offset = max(self._flushed_offset, snapshot_id.offset)

    def crash(self) -> None:
        """Lose every entry that was not flushed."""
        with self._lock:
            self._set_entries(self._entries_below(self._flushed_offset))

    def close(self) -> None:
        pass
