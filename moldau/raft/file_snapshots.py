"""Snapshots on disk beside the metadata log, in Kafka's layout (KafkaMetadataLog, Snapshots).

In `<metadata log dir>/__cluster_metadata-0/`:

    <20-digit end offset>-<10-digit epoch>.checkpoint                  a complete snapshot
    <20-digit end offset>-<10-digit epoch>-<random>.checkpoint.part    being written or received
    <20-digit end offset>-<10-digit epoch>.checkpoint.deleted          superseded, being removed

A file holds the snapshot's bytes as the state machine gave them (what FetchSnapshot serves),
then a 16-byte trailer:

    length  uint64   bytes before the trailer
    crc     uint32   CRC32C of those bytes
    magic   4 bytes  b"MSN1"

A snapshot becomes complete only by renaming its `.part` file, after the trailer is written and
fsynced; the directory is fsynced after the rename. Opening the store deletes `.part` and
`.deleted` files (a crash mid-write or mid-removal) and checks the trailer of the newest complete
snapshot: a damaged one (a short file, a wrong length, CRC or magic) is renamed `*.damaged` and
the next newest is checked, so the state machine never loads damaged bytes.

Older snapshots go once the log starts at a newer one (`delete_before`), as the log start moving
past them makes Kafka delete them; one read in the last `reader_grace_s` (a follower fetching
it in chunks) is kept until a later call, as Kafka delays deletions by `file.delete.delay.ms`.

Threading: the controller writes snapshots with `create` in a worker thread while the loop serves
FetchSnapshot from the store and receives the leader's chunks: the set of complete snapshots is
guarded by a lock; each file is written by one caller.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable

import crc32c

from moldau.raft._files import fsync_directory
from moldau.raft.log import OffsetAndEpoch

logger = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
DAMAGED_SUFFIX = ".checkpoint.damaged"
_TRAILER = struct.Struct(">QI4s")
_MAGIC = b"MSN1"
_NAME = re.compile(r"^(\d{20})-(\d{10})(?:-[0-9a-f]+)?(\.checkpoint(?:\.part|\.deleted)?)$")
# Kafka's file.delete.delay.ms: how long a snapshot someone is reading outlives its successor.
DEFAULT_READER_GRACE_S = 60.0


class SnapshotCorruptError(Exception):
    """A complete snapshot file whose trailer does not match its bytes."""


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> tuple[OffsetAndEpoch, str] | None:
    """The snapshot id a file name stands for and its suffix (`.checkpoint`, `.part`, ...)."""
    match = _NAME.match(name)
    if match is None:
        return None
    snapshot_id = OffsetAndEpoch(epoch=int(match.group(2)), offset=int(match.group(1)))
    return snapshot_id, match.group(3)


def _trailer(length: int, crc: int) -> bytes:
    return _TRAILER.pack(length, crc, _MAGIC)


class _Partial:
    """A snapshot being received: its file, how much it holds and the CRC so far."""

    __slots__ = ("crc", "fd", "path", "size", "snapshot_id")

    def __init__(self, snapshot_id: OffsetAndEpoch, path: str, fd: int) -> None:
        self.snapshot_id = snapshot_id
        self.path = path
        self.fd = fd
        self.size = 0
        self.crc = 0


class FileSnapshotStore:
    """A `SnapshotStore` of `.checkpoint` files in one directory (the metadata log's)."""

    def __init__(
        self,
        directory: str,
        *,
        reader_grace_s: float = DEFAULT_READER_GRACE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.reader_grace_s = reader_grace_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._sizes: dict[OffsetAndEpoch, int] = {}  # complete snapshots: size of their bytes
        self._last_read: dict[OffsetAndEpoch, float] = {}
        self._partial: _Partial | None = None
        self.damaged: list[str] = []  # files found damaged at open (renamed *.damaged)
        self._recover()

    # Opening.

    def _recover(self) -> None:
        for name in sorted(os.listdir(self.directory)):
            parsed = parse_snapshot_file_name(name)
            if parsed is None:
                continue
            snapshot_id, suffix = parsed
            path = os.path.join(self.directory, name)
            if suffix == SUFFIX:
                self._sizes[snapshot_id] = os.path.getsize(path) - _TRAILER.size
            else:
                os.remove(path)  # a crash while writing, receiving or deleting it
        while self._sizes:
            latest = self._latest()
            try:
                self._check(latest)
                return
            except SnapshotCorruptError as exc:
                path = self._path(latest)
                os.replace(path, path[: -len(SUFFIX)] + DAMAGED_SUFFIX)
                fsync_directory(self.directory)
                del self._sizes[latest]
                self.damaged.append(path)
                logger.error("metadata snapshot %s is damaged and set aside: %s", path, exc)

    def _check(self, snapshot_id: OffsetAndEpoch) -> bytes:
        """The bytes of a complete snapshot, checked against its trailer."""
        path = self._path(snapshot_id)
        with open(path, "rb") as handle:
            data = handle.read()
        if len(data) < _TRAILER.size:
            raise SnapshotCorruptError(f"{path} is {len(data)} bytes, shorter than its trailer")
        length, crc, magic = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
        contents = memoryview(data)[: len(data) - _TRAILER.size]
        if magic != _MAGIC or length != len(contents):
            raise SnapshotCorruptError(f"{path} has no valid trailer")
        if crc32c.crc32c(contents) != crc:
            raise SnapshotCorruptError(f"{path} fails its CRC check")
        return bytes(contents)

    # Reading (the Raft node, the state machine).

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        """Every complete snapshot, oldest first."""
        with self._lock:
            return sorted(self._sizes, key=_order)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        with self._lock:
            return self._latest() if self._sizes else None

    def _latest(self) -> OffsetAndEpoch:
        return max(self._sizes, key=_order)

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        with self._lock:
            return self._sizes.get(snapshot_id)

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        with self._lock:
            size = self._sizes.get(snapshot_id)
            if size is None:
                raise KeyError(f"no snapshot {snapshot_id}")
            self._last_read[snapshot_id] = self._monotonic()
        length = max(0, min(max_bytes, size - position))
        with open(self._path(snapshot_id), "rb") as handle:
            return os.pread(handle.fileno(), length, position)

    def load(self, snapshot_id: OffsetAndEpoch) -> bytes:
        """The whole snapshot, checked against its trailer (raises `SnapshotCorruptError`)."""
        return self._check(snapshot_id)

    # Writing.

    def create(self, snapshot_id: OffsetAndEpoch, contents: bytes) -> None:
        path = self._partial_path(snapshot_id)
        with open(path, "wb") as handle:
            handle.write(contents)
            handle.write(_trailer(len(contents), crc32c.crc32c(contents)))
            handle.flush()
            os.fsync(handle.fileno())
        self._freeze(snapshot_id, path, len(contents))

    def write_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        if position == 0:
            self._discard_partial()
            path = self._partial_path(snapshot_id)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self._partial = _Partial(snapshot_id, path, fd)
        partial = self._partial
        if partial is None or partial.snapshot_id != snapshot_id or partial.size != position:
            raise ValueError(f"chunk at {position} does not continue snapshot {snapshot_id}")
        view = memoryview(data)
        while view:
            written = os.write(partial.fd, view)
            view = view[written:]
        partial.size += len(data)
        partial.crc = crc32c.crc32c(data, value=partial.crc)

    def complete(self, snapshot_id: OffsetAndEpoch) -> None:
        partial = self._partial
        if partial is None or partial.snapshot_id != snapshot_id:
            raise ValueError(f"no partial snapshot {snapshot_id} to complete")
        self._partial = None
        try:
            os.write(partial.fd, _trailer(partial.size, partial.crc))
            os.fsync(partial.fd)
        finally:
            os.close(partial.fd)
        self._freeze(snapshot_id, partial.path, partial.size)

    def _freeze(self, snapshot_id: OffsetAndEpoch, partial_path: str, size: int) -> None:
        """A whole, durable `.part` file becomes the complete snapshot."""
        os.replace(partial_path, self._path(snapshot_id))
        fsync_directory(self.directory)
        with self._lock:
            self._sizes[snapshot_id] = size

    def _discard_partial(self) -> None:
        partial, self._partial = self._partial, None
        if partial is not None:
            os.close(partial.fd)
            os.remove(partial.path)

    # Removing.

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> list[OffsetAndEpoch]:
        """Delete the complete snapshots that end before `snapshot_id` (the log starts there
        now), except one read within `reader_grace_s`; returns the ids deleted."""
        now = self._monotonic()
        with self._lock:
            doomed = [
                s
                for s in self._sizes
                if _order(s) < _order(snapshot_id)
                and now - self._last_read.get(s, -self.reader_grace_s) >= self.reader_grace_s
            ]
            for old in doomed:
                del self._sizes[old]
                self._last_read.pop(old, None)
        for old in doomed:
            # Renamed first, so that a crash mid-removal leaves a file recovery deletes.
            path = self._path(old)
            deleted = path[: -len(SUFFIX)] + DELETED_SUFFIX
            os.replace(path, deleted)
            os.remove(deleted)
        if doomed:
            fsync_directory(self.directory)
        return doomed

    def close(self) -> None:
        """Drop a partial snapshot still being received (it would be deleted at open anyway)."""
        self._discard_partial()

    def _path(self, snapshot_id: OffsetAndEpoch) -> str:
        return os.path.join(self.directory, snapshot_file_name(snapshot_id))

    def _partial_path(self, snapshot_id: OffsetAndEpoch) -> str:
        stem = snapshot_file_name(snapshot_id)[: -len(SUFFIX)]
        return os.path.join(self.directory, f"{stem}-{uuid.uuid4().hex[:12]}{PARTIAL_SUFFIX}")


def _order(snapshot_id: OffsetAndEpoch) -> tuple[int, int]:
    return snapshot_id.offset, snapshot_id.epoch
