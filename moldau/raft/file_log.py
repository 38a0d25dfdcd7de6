"""The metadata log on disk: one append-only file of CRC-framed entries (Kafka's KafkaMetadataLog).

Directory `<metadata.log.dir>/__cluster_metadata-0/`, file `metadata.log`. Each entry:

    length       uint32   bytes after this field
    crc          uint32   CRC32C of everything after this field
    base_offset  int64
    epoch        int32
    attributes   int16    bit 0: control entry (Raft's own, e.g. a leader change)
    count        int32    number of records
    records      count x (size uint32, bytes)

Recovery reads entries from the start and truncates the file at the first one that is short,
fails its CRC or does not continue the offsets and epochs: a torn tail from a crash mid-append.
Everything before it was written whole; whether it was committed is Raft's business (a single voter's
whole surviving log commits once it appends in its new epoch).

A log that starts after a snapshot records where in `log-start` (`{"offset": n, "epoch": e}`),
written atomically before the entries below it leave the file; recovery drops entries the
file still holds below it, and any that do not continue it.
"""

from __future__ import annotations

import json
import os
import struct
import threading

import crc32c

from moldau.raft._files import fsync_directory, write_file_atomically
from moldau.raft.log import CachedEntries, LogEntry, OffsetAndEpoch

LOG_FILE_NAME = "metadata.log"
LOG_START_FILE_NAME = "log-start"
_LENGTH = struct.Struct(">I")
_HEADER = struct.Struct(">IqihI")  # crc, base_offset, epoch, attributes, count
_RECORD_SIZE = struct.Struct(">I")
_CONTROL = 0x1


def encode_entry(entry: LogEntry) -> bytes:
    body = bytearray(_HEADER.size)
    for record in entry.records:
        body += _RECORD_SIZE.pack(len(record))
        body += record
    attributes = _CONTROL if entry.is_control else 0
    struct.pack_into(
        ">qihI", body, 4, entry.base_offset, entry.epoch, attributes, len(entry.records)
    )
    struct.pack_into(">I", body, 0, crc32c.crc32c(memoryview(body)[4:]))
    return _LENGTH.pack(len(body)) + bytes(body)


def decode_entries(data: bytes) -> tuple[list[LogEntry], int]:
    """Whole, valid entries from the start of `data`, and the byte length they span."""
    entries: list[LogEntry] = []
    position = 0
    expected_offset: int | None = None
    while position + _LENGTH.size + _HEADER.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, position)
        end = position + _LENGTH.size + length
        if length < _HEADER.size or end > len(data):
            break
        body = memoryview(data)[position + _LENGTH.size : end]
        crc, base_offset, epoch, attributes, count = _HEADER.unpack_from(body)
        if crc32c.crc32c(body[4:]) != crc:
            break
        if expected_offset is not None and base_offset != expected_offset:
            break
        if entries and epoch < entries[-1].epoch:
            break
        records = _decode_records(body, count)
        if records is None:
            break
        entries.append(
            LogEntry(
                base_offset=base_offset,
                epoch=epoch,
                records=records,
                is_control=bool(attributes & _CONTROL),
            )
        )
        expected_offset = base_offset + count
        position = end
    return entries, position


def _decode_records(body: memoryview, count: int) -> tuple[bytes, ...] | None:
    records: list[bytes] = []
    position = _HEADER.size
    for _ in range(count):
        if position + _RECORD_SIZE.size > len(body):
            return None
        (size,) = _RECORD_SIZE.unpack_from(body, position)
        position += _RECORD_SIZE.size
        if position + size > len(body):
            return None
        records.append(bytes(body[position : position + size]))
        position += size
    if position != len(body) or not records:
        return None
    return tuple(records)


class FileReplicatedLog(CachedEntries):
    """A `ReplicatedLog` in one file. Entries are also kept in memory (metadata is small)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.path = os.path.join(directory, LOG_FILE_NAME)
        self.start_path = os.path.join(directory, LOG_START_FILE_NAME)
        self._flush_lock = threading.Lock()
        self.truncated_bytes = 0
        self._recover()
        created = not os.path.exists(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            fsync_directory(directory)
        self._size = os.fstat(self._fd).st_size
        self._flushed_offset = self.end_offset

    def _recover(self) -> None:
        if os.path.exists(self.start_path):
            with open(self.start_path, encoding="utf-8") as handle:
                start = json.load(handle)
            self._start = OffsetAndEpoch(epoch=int(start["epoch"]), offset=int(start["offset"]))
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as handle:
            data = handle.read()
        entries, valid_length = decode_entries(data)
        kept = self._continuing_the_start(entries)
        if len(kept) < len(entries):
            # A crash between writing log-start and rewriting the file: finish the rewrite.
            self._set_entries(kept)
            self._rewrite(kept)
            return
        self._set_entries(entries)
        if valid_length < len(data):
            self.truncated_bytes = len(data) - valid_length
            with open(self.path, "r+b") as handle:
                handle.truncate(valid_length)
                handle.flush()
                os.fsync(handle.fileno())

    def _continuing_the_start(self, entries: list[LogEntry]) -> list[LogEntry]:
        kept = [e for e in entries if e.base_offset >= self._start.offset]
        if kept and (
            kept[0].base_offset != self._start.offset or kept[0].epoch < self._start.epoch
        ):
            return []
        return kept

    def _rewrite(self, entries: list[LogEntry]) -> None:
        """Replace the file with `entries`, durably (a temporary file renamed over it)."""
        temporary = self.path + ".tmp"
        with open(temporary, "wb") as handle:
            for entry in entries:
                handle.write(encode_entry(entry))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        fsync_directory(self.directory)

    def _write_start(self, snapshot_id: OffsetAndEpoch) -> None:
        text = json.dumps({"offset": snapshot_id.offset, "epoch": snapshot_id.epoch})
        write_file_atomically(self.start_path, text)

    def append(self, entry: LogEntry) -> None:
        self._check_appendable(entry)
        data = encode_entry(entry)
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        self._size += written
        self._add_entry(entry)

    def flush(self) -> int:
        # Read the end offset before fsync: every entry below it has been written already.
        with self._flush_lock:
            end_offset = self.end_offset
            os.fsync(self._fd)
            self._flushed_offset = max(self._flushed_offset, end_offset)
            return self._flushed_offset

    def truncate_to(self, offset: int) -> None:
        kept = self._entries_below(offset)
        size = sum(e.size_in_bytes for e in kept)  # the encoded length of each entry
        with self._flush_lock:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
            self._set_entries(kept)
            self._size = size
            self._flushed_offset = min(self._flushed_offset, self.end_offset)

    def truncate_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        with self._flush_lock:
            self._write_start(snapshot_id)
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)
            self._start = snapshot_id
            self._set_entries([])
            self._size = 0
            self._flushed_offset = snapshot_id.offset

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self._check_snapshot_boundary(snapshot_id)
        kept = self._entries_from(snapshot_id.offset)
        with self._flush_lock:
            self._write_start(snapshot_id)
            self._rewrite(kept)
            os.close(self._fd)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            self._start = snapshot_id
            self._set_entries(kept)
            self._size = sum(e.size_in_bytes for e in kept)
            self._flushed_offset = self.end_offset  # the rewrite fsynced every kept entry

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
