"""One segment of a partition log, Kafka's `LogSegment`: a `.log` file and its three indexes.

    <dir>/<20-digit base offset>.log        RecordBatch v2 bytes, exactly as on the wire
    <dir>/<20-digit base offset>.index      OffsetIndex: (lastOffset of a batch - base, position)
    <dir>/<20-digit base offset>.timeindex  TimeIndex: (max timestamp so far, its offset - base)
    <dir>/<20-digit base offset>.txnindex   TransactionIndex: aborted transactions

An index entry is added for a batch when more than `index.interval.bytes` were appended since the
last entry (as Kafka). Suffixes `.deleted` (waiting for `file.delete.delay.ms`), `.cleaned`
(compaction output being written) and `.swap` (compaction output complete) mark files in flight.
"""

from __future__ import annotations

import posixpath
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

from moldau.protocol.batch_layout import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC
from moldau.protocol.records import BatchHeader, RecordBatch
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import Buffer, FileHandle, FileSystem
from moldau.storage.index import OffsetIndex, TimeIndex
from moldau.storage.transaction_index import TransactionIndex

__all__ = ["FileRegion", "LogSegment", "segment_file_name"]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TRANSACTION_INDEX_SUFFIX = ".txnindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TRANSACTION_INDEX_SUFFIX)
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_RECOVERY_CHUNK = 1 << 20
_INT32_MAX = 2**31 - 1
# find_batch scans from an index entry to the batch it wants: at most about index.interval.bytes
# of batches, read with one pread of this size (bounded for large configured intervals).
_SCAN_CHUNK_MAX = 1 << 20
_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
# The active segment keeps the batches appended last, up to this many bytes, in memory as well:
# consumers at or near the end of the log are answered from them without a read.
RECENT_BYTES_MAX = 8192


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes [position, position + length) of a segment file: whole batches, sent from the file
    (`sendfile`) unless the segment still had them in memory. `file` is the pinned handle
    (`FileHandle.pinned()`): its descriptor stays open while the region exists."""

    file: FileHandle
    position: int
    length: int
    data: bytes | None = None  # the same bytes, when the segment had them in memory

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        data = self.data
        return self.file.pread(self.length, self.position) if data is None else data


class LogSegment:
    """Appends whole batches and finds them again by offset, position or timestamp."""

    def __init__(
        self,
        filesystem: FileSystem,
        directory: str,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        suffix: str = "",
    ) -> None:
        self.filesystem = filesystem
        self.directory = directory
        self.base_offset = base_offset
        self.created_ms = now_ms
        self.config = config
        self.suffix = suffix
        self.log = filesystem.open(self.path(LOG_SUFFIX))
        self.offset_index = OffsetIndex(
            filesystem.open(self.path(INDEX_SUFFIX)), base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            filesystem.open(self.path(TIME_INDEX_SUFFIX)), base_offset, config.segment_index_bytes
        )
        self.transaction_index = TransactionIndex(
            filesystem.open(self.path(TRANSACTION_INDEX_SUFFIX))
        )
        self.size = self.log.size()
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.last_modified_ms = now_ms
        self.bytes_since_last_index = 0
        # (position, first offset it can hold, header if known) of the last batch appended to the
        # active segment: a consumer at the end of the log fetches exactly there, found without
        # a scan (and, after a one-batch append, without parsing).
        self._tail: tuple[int, int, BatchHeader | None] | None = None
        self._recent: _RecentBatches | None = None  # only while active, from the first append
        self.closed = False
        self.indexes_synced = True  # False from a roll until the final indexes are fsynced
        self.replaced = False  # compaction swapped new files in under our names

    def path(self, suffix: str) -> str:
        return posixpath.join(
            self.directory, segment_file_name(self.base_offset, suffix) + self.suffix
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"

    # -- loading --

    def load(self) -> bool:
        """Open an existing segment trusting its indexes; False if they need a rebuild."""
        self.transaction_index.load()
        if not (self.offset_index.load(self.size) and self.time_index.load()):
            return False
        indexed_offset, position = self.offset_index.lookup_position(self.size)
        first: RecordBatch | None = None
        batch: RecordBatch | None = None
        for scanned in self.batches(position, validate=False):
            first = first or scanned
            batch = scanned
        if batch is None or first is None:
            if self.size:
                return False  # the last index entry does not point at a batch
            self.next_offset = self.base_offset
        else:
            if len(self.offset_index) and first.header.last_offset != indexed_offset:
                return False  # a torn or stale entry
            if batch.position + batch.header.size != self.size:
                return False
            self.next_offset = batch.header.last_offset + 1
        last_time = self.time_index.last_entry
        if last_time is not None:
            if not self.base_offset <= last_time[1] < max(self.next_offset, self.base_offset + 1):
                return False
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        self.bytes_since_last_index = self.size - position
        return True

    def recover(self) -> int:
        """Rebuild the indexes from the log, validating every batch (magic, length, CRC32C);
        truncate at the first invalid byte. Returns the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self.transaction_index.reset()
        self._tail = None
        self._recent = None
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index = 0
        valid_size = 0
        for batch in self.batches(0, validate=True):
            header = batch.header
            if header.base_offset < self.next_offset and valid_size:
                break  # offsets must increase
            self._index_batch(batch.position, header.last_offset, header.max_timestamp, header.size)
            self.next_offset = header.last_offset + 1
            valid_size = batch.position + header.size
        truncated = self.size - valid_size
        if truncated:
            self.log.truncate(valid_size)
            self.size = valid_size
        return truncated

    def batches(
        self, position: int = 0, *, validate: bool = False, end: int | None = None
    ) -> Iterator[RecordBatch]:
        """Batches from `position` to the end (or `end`); stops at a truncated or invalid batch."""
        limit = self.size if end is None else min(end, self.size)
        while position + HEADER_SIZE <= limit:
            chunk = self.log.pread(min(_RECOVERY_CHUNK, limit - position), position)
            view = memoryview(chunk)
            offset = 0
            while offset + HEADER_SIZE <= len(view):
                header = BatchHeader._make(HEADER.unpack_from(view, offset))
                size = header.batch_length + LOG_OVERHEAD
                if size < HEADER_SIZE or header.magic != MAGIC:
                    return
                if offset + size > len(view):
                    if offset == 0:  # one batch larger than a chunk
                        if position + size > limit:
                            return
                        view = memoryview(self.log.pread(size, position))
                        if len(view) < size:
                            return
                    else:
                        break
                data = view[offset : offset + size]
                if validate and crc32c.crc32c(data[CRC_START:]) != header.crc:
                    return
                yield RecordBatch(position + offset, header, data)
                offset += size
            if offset == 0:
                return
            position += offset

    # -- appending --

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        # precomputed for should_roll, which runs on every append
        self.roll_at_size = config.segment_bytes
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_after_ms = self.created_ms + config.segment_ms - config.segment_jitter_ms

    def should_roll(self, append_size: int, last_offset: int, now_ms: int) -> bool:
        if last_offset - self.base_offset > _INT32_MAX:
            return True
        return bool(self.size) and (
            self.size + append_size > self.roll_at_size
            or now_ms > self.roll_after_ms
            or len(self.offset_index.relative_offsets) >= self.offset_index.max_entries
            or len(self.time_index.relative_offsets) >= self.time_index.max_entries
        )

    def append(
        self,
        buffers: Sequence[Buffer],
        placements: Sequence[tuple[int, int, int, int]],
        *,
        size: int,
        now_ms: int,
        last_header: BatchHeader | None = None,
    ) -> int:
        """Write `buffers` (whole batches, `size` bytes) at the end. `placements` are per batch
        (position relative to the write, last offset, max timestamp, size); `last_header`, if
        given, is the last batch's header as written. Returns the position the data starts at."""
        position = self.size
        self.log.pwritev(buffers, position, size)
        self.size = position + size
        interval = self.index_interval_bytes
        first_offset = self.next_offset
        recent = self._remember(position, size)
        if recent is not None:
            for buffer in buffers:
                recent.data += buffer
        for relative_position, last_offset, max_timestamp, batch_size in placements:
            self._tail = (position + relative_position, first_offset, last_header)
            if recent is not None:
                recent.add(position + relative_position, first_offset)
            first_offset = last_offset + 1
            if max_timestamp > self.max_timestamp:
                self.max_timestamp = max_timestamp
                self.offset_of_max_timestamp = last_offset
            if self.bytes_since_last_index > interval:
                self.offset_index.append(last_offset, position + relative_position)
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index = batch_size
            else:
                self.bytes_since_last_index += batch_size
        self.next_offset = last_offset + 1
        self.last_modified_ms = now_ms
        return position

    def append_batch(
        self,
        data: Buffer,
        size: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
        header: BatchHeader | None = None,
    ) -> int:
        """`append` for one contiguous batch (the produce fast path, hence the inlined index
        updates: they are `OffsetIndex.append` and `TimeIndex.append`)."""
        position = self.size
        self.log.pwrite(data, position)
        self.size = position + size
        self._tail = (
            position,
            self.next_offset,
            header or BatchHeader._make(HEADER.unpack_from(data)),
        )
        recent = self._remember(position, size)
        if recent is not None:
            recent.data += data
            recent.add(position, self.next_offset)
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            relative_offsets = self.offset_index.relative_offsets
            relative = last_offset - self.base_offset
            if not relative_offsets or relative > relative_offsets[-1]:
                relative_offsets.append(relative)
                self.offset_index.positions.append(position)
            timestamps = self.time_index.timestamps
            if not timestamps or self.max_timestamp > timestamps[-1]:
                timestamps.append(self.max_timestamp)
                self.time_index.relative_offsets.append(
                    self.offset_of_max_timestamp - self.base_offset
                )
            self.bytes_since_last_index = size
        else:
            self.bytes_since_last_index += size
        self.next_offset = last_offset + 1
        self.last_modified_ms = now_ms
        return position

    def _remember(self, position: int, size: int) -> _RecentBatches | None:
        """The recent batches, with room made for `size` bytes appended at `position`; None if
        they are too many to keep (the window starts again after them)."""
        if size > RECENT_BYTES_MAX:
            self._recent = _RecentBatches(position + size)
            return None
        recent = self._recent
        if recent is None or recent.end != position:
            recent = self._recent = _RecentBatches(position)
        recent.make_room(size)
        return recent

    def _index_batch(self, position: int, last_offset: int, max_timestamp: int, size: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += size

    # -- reading --

    def header_at(self, position: int) -> BatchHeader | None:
        if position + HEADER_SIZE > self.size:
            return None
        recent = self._recent
        if recent is not None and position >= recent.start:
            return BatchHeader._make(HEADER.unpack_from(recent.data, position - recent.start))
        return BatchHeader._make(HEADER.unpack_from(self.log.pread(HEADER_SIZE, position)))

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset`: (position, header)."""
        tail = self._tail
        if tail is not None and offset >= tail[1]:  # every earlier batch ends below `offset`
            header = tail[2] or self.header_at(tail[0])
            if header is None or header.base_offset + header.last_offset_delta < offset:
                return None
            return tail[0], header
        recent = self._recent
        if recent is not None and recent.first_offsets and offset >= recent.first_offsets[0]:
            # the batch before the next one that could hold `offset` ends at or after it
            position = recent.positions[bisect_right(recent.first_offsets, offset) - 1]
            header = BatchHeader._make(HEADER.unpack_from(recent.data, position - recent.start))
            if header.base_offset + header.last_offset_delta < offset:
                return None
            return position, header
        _indexed, position = self.offset_index.lookup(offset)
        size = self.size
        chunk_size = min(self.index_interval_bytes + HEADER_SIZE, _SCAN_CHUNK_MAX)
        while position + HEADER_SIZE <= size:
            chunk = self.log.pread(min(chunk_size, size - position), position)
            scanned = 0
            while scanned + HEADER_SIZE <= len(chunk):
                base_offset, length = _BASE_OFFSET_AND_LENGTH.unpack_from(chunk, scanned)
                (delta,) = _LAST_OFFSET_DELTA.unpack_from(chunk, scanned + _LAST_OFFSET_DELTA_AT)
                if base_offset + delta >= offset:
                    return position + scanned, BatchHeader._make(HEADER.unpack_from(chunk, scanned))
                if length + LOG_OVERHEAD < HEADER_SIZE:
                    return None  # not a batch: the log is corrupt from here
                scanned += length + LOG_OVERHEAD
            if scanned == 0:
                return None  # a short read: the file is shorter than `size`
            position += scanned
        return None

    def position_of(self, offset: int) -> int:
        """Start of the first batch holding an offset >= `offset`, or the segment size."""
        found = self.find_batch(offset)
        return self.size if found is None else found[0]

    def boundary_at_or_below(self, position: int, start: int) -> int:
        """The last batch boundary <= `position`, scanning forward from `start` (a boundary)."""
        _offset, indexed = self.offset_index.lookup_position(position)
        current = max(indexed, start)
        while current < position:
            header = self.header_at(current)
            if header is None:
                break
            end = current + header.batch_length + LOG_OVERHEAD
            if end > position:
                break
            current = end
        return current

    def read(
        self, fetch_offset: int, *, max_offset: int, max_bytes: int, min_one_message: bool
    ) -> tuple[FileRegion | None, int, bool]:
        """Whole batches from the one holding `fetch_offset`, ending before `max_offset` and within
        `max_bytes` (but at least one batch if `min_one_message`).

        Returns (region, next offset, go on): the offset after the region's last batch, and
        whether a read may continue in the next segment (this one was read to its end or holds
        nothing at `fetch_offset`).
        """
        found = self.find_batch(fetch_offset)
        if found is None:
            return None, max(fetch_offset, self.next_offset), True
        start, first = found
        if first.base_offset + first.last_offset_delta >= max_offset:
            return None, fetch_offset, False
        end = self.size if max_offset >= self.next_offset else self.position_of(max_offset)
        first_size = first.batch_length + LOG_OVERHEAD
        if end - start > max_bytes:
            if first_size > max_bytes:
                end = start + first_size if min_one_message else start
            else:
                end = self.boundary_at_or_below(start + max_bytes, start)
        if end <= start:
            return None, fetch_offset, False
        recent = self._recent
        data = None
        if recent is not None and start >= recent.start:
            data = bytes(recent.data[start - recent.start : end - recent.start])
        if end == self.size:
            return FileRegion(self.log.pinned(), start, end - start, data), self.next_offset, True
        following = self.header_at(end)
        next_offset = self.next_offset if following is None else following.base_offset
        return FileRegion(self.log.pinned(), start, end - start, data), next_offset, False

    # -- truncation, flushing, closing --

    def truncate_to(self, offset: int) -> int:
        """Drop batches at and after the one holding `offset`; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:  # nothing stored at or above `offset` (compaction may leave gaps)
            self.next_offset = max(self.base_offset, min(self.next_offset, offset))
            return 0
        position = found[0]
        removed = self.size - position
        self._tail = None
        self._recent = None
        self.offset_index.truncate_to(offset)  # entries name a batch's last offset
        self.time_index.truncate_to(found[1].base_offset)
        self.transaction_index.truncate_to(found[1].base_offset)
        self.log.truncate(position)
        self.size = position
        self.next_offset = max(self.base_offset, min(found[1].base_offset, offset))
        last_time = self.time_index.last_entry
        if last_time is None:
            self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        else:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        self.bytes_since_last_index = 0
        return removed

    def prepare_flush(self) -> None:
        """Write pending index entries (cheap; done under the log's lock before an fsync)."""
        self.offset_index.flush()
        self.time_index.flush()

    def fsync(self) -> None:
        self.log.fsync()
        self.offset_index.fsync()
        self.time_index.fsync()
        self.transaction_index.file.fsync()

    def on_become_inactive(self) -> None:
        """Called when the segment rolls: final time-index entry, trimmed index files."""
        self.indexes_synced = False
        self._tail = None  # compaction may rewrite an inactive segment's files
        self._recent = None
        if self.max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim()
        self.time_index.trim()

    def preallocate_indexes(self) -> None:
        self.offset_index.preallocate()
        self.time_index.preallocate()

    @property
    def largest_timestamp(self) -> int:
        """For time retention: the max record timestamp, else the last modification time."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for file in (
            self.log,
            self.offset_index.file,
            self.time_index.file,
            self.transaction_index.file,
        ):
            file.close()

    def relocate(self, directory: str) -> list[FileHandle]:
        """Switch to the copies of this segment's files in `directory` (a replica moved to
        another log dir, `log_mover.py`: `.log` byte for byte, every index entry). Returns the
        old handles: the caller closes them once reads in flight are done."""
        old = [self.log, self.offset_index.file, self.time_index.file, self.transaction_index.file]
        self.directory = directory
        filesystem = self.filesystem
        self.log = filesystem.open(self.path(LOG_SUFFIX), create=False)
        self.offset_index.reopen(filesystem.open(self.path(INDEX_SUFFIX), create=False))
        self.time_index.reopen(filesystem.open(self.path(TIME_INDEX_SUFFIX), create=False))
        self.transaction_index.reopen(
            filesystem.open(self.path(TRANSACTION_INDEX_SUFFIX), create=False)
        )
        return old

    def rename_suffix(self, suffix: str) -> None:
        """Rename every file of the segment to carry `suffix` (open handles stay valid)."""
        for file_suffix in SEGMENT_SUFFIXES:
            source = self.path(file_suffix)
            if self.filesystem.exists(source):
                target = posixpath.join(
                    self.directory, segment_file_name(self.base_offset, file_suffix) + suffix
                )
                self.filesystem.rename(source, target)
        self.suffix = suffix

    def delete_files(self) -> None:
        self.close()
        if self.replaced:
            return
        for file_suffix in SEGMENT_SUFFIXES:
            self.filesystem.remove(self.path(file_suffix))


class _RecentBatches:
    """The batches appended last to an active segment, as in the file: the bytes from `start` to
    the segment's end, each batch's position and the first offset it can hold (one more than the
    last offset of the batch before it)."""

    __slots__ = ("data", "first_offsets", "positions", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.data = bytearray()
        self.positions: list[int] = []
        self.first_offsets: list[int] = []

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def add(self, position: int, first_offset: int) -> None:
        self.positions.append(position)
        self.first_offsets.append(first_offset)

    def make_room(self, size: int) -> None:
        """Forget the oldest batches until `size` more bytes fit in RECENT_BYTES_MAX."""
        limit = self.end + size - RECENT_BYTES_MAX
        if self.start >= limit:
            return
        positions = self.positions
        keep = bisect_left(positions, limit)  # the first batch starting at or after the limit
        if keep < len(positions):
            new_start = positions[keep]
        else:
            new_start = self.end
        del self.data[: new_start - self.start]
        del positions[:keep]
        del self.first_offsets[:keep]
        self.start = new_start
