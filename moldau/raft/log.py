"""The replicated log a Raft node appends to, as Kafka's `ReplicatedLog` interface (KIP-595).

The log is a sequence of entries (batches). An entry holds one or more records that commit
together, each record with its own offset: an entry at `base_offset` with n records covers
offsets base_offset .. base_offset + n - 1. Entries carry the leader epoch that wrote them;
control entries (a leader change) belong to Raft itself and are not handed to the state machine.

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


class ReplicatedLog(Protocol):
    @property
    def end_offset(self) -> int:
        """The offset the next appended record will get."""
        ...

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry, or 0 when the log is empty."""
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

    def read(self, start_offset: int = 0) -> Iterator[LogEntry]:
        """Entries holding offsets at or after `start_offset`, in order."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or after `offset` (a follower's divergent tail)."""
        ...

    def close(self) -> None: ...


def check_appendable(log_end_offset: int, entry: LogEntry) -> None:
    if entry.base_offset != log_end_offset:
        raise ValueError(
            f"entry at offset {entry.base_offset} does not follow the log end {log_end_offset}"
        )
    if not entry.records:
        raise ValueError("a log entry needs at least one record")


class CachedEntries:
    """The entries of a log held in memory in offset order (metadata logs are small): the read
    side shared by the implementations."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._flushed_offset = 0

    @property
    def end_offset(self) -> int:
        return self._entries[-1].next_offset if self._entries else 0

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def read(self, start_offset: int = 0) -> Iterator[LogEntry]:
        entries = self._entries
        index = max(0, bisect.bisect_right(entries, start_offset, key=_base_offset) - 1)
        for entry in entries[index:]:
            if entry.last_offset >= start_offset:
                yield entry

    def _entries_below(self, offset: int) -> list[LogEntry]:
        return [e for e in self._entries if e.last_offset < offset]


def _base_offset(entry: LogEntry) -> int:
    return entry.base_offset


class MemoryReplicatedLog(CachedEntries):
    """A `ReplicatedLog` in memory, for tests and simulations. `flush` is instant."""

    def __init__(self, entries: Sequence[LogEntry] = ()) -> None:
        super().__init__()
        self._lock = threading.Lock()
        for entry in entries:
            self.append(entry)
        self.flush()

    def append(self, entry: LogEntry) -> None:
        check_appendable(self.end_offset, entry)
        with self._lock:
            self._entries.append(entry)

    def flush(self) -> int:
        with self._lock:
            self._flushed_offset = self.end_offset
        return self._flushed_offset

    def truncate_to(self, offset: int) -> None:
        with self._lock:
            self._entries = self._entries_below(offset)
            self._flushed_offset = min(self._flushed_offset, self.end_offset)

    def close(self) -> None:
        pass
