"""Aborted transactions of a segment, Kafka's `TransactionIndex` (`.txnindex`).

    entry (34 bytes): version int16 (0), producerId int64, firstOffset int64,
                      lastOffset int64, lastStableOffset int64

An entry is written when an ABORT marker is appended: consumers in read_committed mode get the
aborted ranges overlapping their fetch (`aborted_transactions(start, end)`) and drop those records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from moldau.storage.filesystem import FileHandle

__all__ = ["AbortedTransaction", "TransactionIndex", "encode_entries"]

_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, file: FileHandle) -> None:
        self.file = file
        self.entries: list[AbortedTransaction] = []
        self._size = 0

    def load(self) -> None:
        data = self.file.pread(self.file.size(), 0)
        count = len(data) // _ENTRY.size
        self.entries = [
            AbortedTransaction(
                producer_id=producer_id,
                first_offset=first,
                last_offset=last,
                last_stable_offset=stable,
            )
            for _version, producer_id, first, last, stable in _ENTRY.iter_unpack(
                data[: count * _ENTRY.size]
            )
        ]
        self._size = count * _ENTRY.size

    def append(self, entry: AbortedTransaction) -> None:
        data = encode_entries([entry])
        self.file.pwritev([data], self._size)
        self._size += len(data)
        self.entries.append(entry)

    def overlapping(self, start: int, end: int) -> list[AbortedTransaction]:
        """Entries whose range meets [start, end)."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < end]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above `offset`."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._size = len(kept) * _ENTRY.size
            self.file.truncate(self._size)

    def reset(self) -> None:
        self.entries = []
        self._size = 0
        self.file.truncate(0)

    def reopen(self, file: FileHandle) -> None:
        """Use `file` from now on: a copy holding every entry (see `OffsetIndex.reopen`)."""
        self.file = file
        self._size = len(self.entries) * _ENTRY.size


def encode_entries(entries: list[AbortedTransaction]) -> bytes:
    """`.txnindex` bytes of these entries."""
    return b"".join(
        _ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        for e in entries
    )
