"""Sparse segment indexes, Kafka's `OffsetIndex` (`.index`) and `TimeIndex` (`.timeindex`).

    .index      entries of 8 bytes:  relativeOffset int32, position int32
    .timeindex  entries of 12 bytes: timestamp int64, relativeOffset int32

Offsets are relative to the segment's base offset. Entries are strictly increasing. The file of
the active segment is preallocated to `segment.index.bytes` (rounded down to whole entries) and
trimmed to its entries when the segment rolls or closes, as Kafka does; a preallocated file found
after a crash ends in zero entries, which loading drops. Entries are kept in arrays in memory
(lookups are a bisect, O(log n)); new entries reach the file on `flush()` or `trim()`.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right

from moldau.storage.filesystem import FileHandle

__all__ = ["OffsetIndex", "TimeIndex", "encode_offset_entries", "encode_time_entries"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _Index:
    entry_size = 8

    def __init__(self, file: FileHandle, base_offset: int, max_bytes: int) -> None:
        self.file = file
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry_size)
        self.relative_offsets = array("i")
        self._written = 0  # entries already in the file
        self._file_size = file.size()

    def __len__(self) -> int:
        return len(self.relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.relative_offsets) >= self.max_entries

    def preallocate(self) -> None:
        size = self.max_entries * self.entry_size
        if self._file_size < size:
            self.file.truncate(size)
            self._file_size = size

    def _encode(self, index: int) -> bytes:
        raise NotImplementedError

    def flush(self) -> None:
        """Write entries not yet in the file (no fsync)."""
        count = len(self.relative_offsets)
        if self._written >= count:
            return
        data = b"".join(self._encode(i) for i in range(self._written, count))
        self.file.pwritev([data], self._written * self.entry_size)
        self._written = count
        self._file_size = max(self._file_size, count * self.entry_size)

    def trim(self) -> None:
        """Write pending entries and cut the preallocated tail."""
        self.flush()
        size = len(self.relative_offsets) * self.entry_size
        if self._file_size != size:
            self.file.truncate(size)
            self._file_size = size

    def fsync(self) -> None:
        self.file.fsync()

    def _drop_from(self, index: int) -> None:
        del self.relative_offsets[index:]
        self._written = min(self._written, index)

    def reset(self) -> None:
        self._drop_from(0)
        self.file.truncate(0)
        self._file_size = 0

    def reopen(self, file: FileHandle) -> None:
        """Use `file` from now on: a copy holding every entry (a replica moved to another log
        dir, `log_mover.py`). The old handle is the caller's to close."""
        self.file = file
        self._file_size = file.size()
        self._written = min(len(self.relative_offsets), self._file_size // self.entry_size)


def encode_offset_entries(relative_offsets: array[int], positions: array[int]) -> bytes:
    """`.index` bytes of these entries (what `flush()` writes), for a copy of the file."""
    return b"".join(map(_OFFSET_ENTRY.pack, relative_offsets, positions))


def encode_time_entries(timestamps: array[int], relative_offsets: array[int]) -> bytes:
    """`.timeindex` bytes of these entries."""
    return b"".join(map(_TIME_ENTRY.pack, timestamps, relative_offsets))


class OffsetIndex(_Index):
    """Offset → file position, one entry per `index.interval.bytes` of log."""

    entry_size = 8

    def __init__(self, file: FileHandle, base_offset: int, max_bytes: int) -> None:
        super().__init__(file, base_offset, max_bytes)
        self.positions = array("i")

    def load(self, log_size: int) -> bool:
        """Read the file's entries; False if they are inconsistent (the caller rebuilds)."""
        data = self.file.pread(self._file_size, 0)
        count = len(data) // self.entry_size
        for relative_offset, position in _OFFSET_ENTRY.iter_unpack(data[: count * 8]):
            if self.relative_offsets and (
                relative_offset <= self.relative_offsets[-1] or position <= self.positions[-1]
            ):
                break  # preallocated zero tail or garbage
            if relative_offset < 0 or position < 0 or position >= max(log_size, 1):
                return False
            self.relative_offsets.append(relative_offset)
            self.positions.append(position)
        self._written = len(self.relative_offsets)
        return True

    def _encode(self, index: int) -> bytes:
        return _OFFSET_ENTRY.pack(self.relative_offsets[index], self.positions[index])

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self.relative_offsets and relative <= self.relative_offsets[-1]:
            return
        self.relative_offsets.append(relative)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The largest indexed (offset, position) with offset <= `offset`, else (base, 0)."""
        index = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if index < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[index], self.positions[index]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The largest indexed (offset, position) with position <= `position`, else (base, 0)."""
        index = bisect_right(self.positions, position) - 1
        if index < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[index], self.positions[index]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        index = bisect_left(self.relative_offsets, offset - self.base_offset)
        self._drop_from(index)
        del self.positions[index:]

    def reset(self) -> None:
        del self.positions[:]
        super().reset()


class TimeIndex(_Index):
    """Max timestamp so far → offset, appended when the segment's max timestamp grows."""

    entry_size = 12

    def __init__(self, file: FileHandle, base_offset: int, max_bytes: int) -> None:
        super().__init__(file, base_offset, max_bytes)
        self.timestamps = array("q")

    def load(self) -> bool:
        data = self.file.pread(self._file_size, 0)
        count = len(data) // self.entry_size
        for timestamp, relative_offset in _TIME_ENTRY.iter_unpack(data[: count * 12]):
            if self.timestamps and (
                timestamp <= self.timestamps[-1] or relative_offset < self.relative_offsets[-1]
            ):
                break
            if relative_offset < 0:
                return False
            self.timestamps.append(timestamp)
            self.relative_offsets.append(relative_offset)
        self._written = len(self.timestamps)
        return True

    def _encode(self, index: int) -> bytes:
        return _TIME_ENTRY.pack(self.timestamps[index], self.relative_offsets[index])

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def append(self, timestamp: int, offset: int) -> None:
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        self.timestamps.append(timestamp)
        self.relative_offsets.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """An offset from which to scan for the first record with timestamp >= `timestamp`:
        the offset of the last entry below `timestamp`, else the base offset."""
        index = bisect_left(self.timestamps, timestamp) - 1
        if index < 0:
            return self.base_offset
        return self.base_offset + self.relative_offsets[index]

    def truncate_to(self, offset: int) -> None:
        relative = offset - self.base_offset
        index = len(self.relative_offsets)
        while index > 0 and self.relative_offsets[index - 1] >= relative:
            index -= 1
        self._drop_from(index)
        del self.timestamps[index:]

    def reset(self) -> None:
        del self.timestamps[:]
        super().reset()
