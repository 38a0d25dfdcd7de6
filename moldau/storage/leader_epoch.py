"""Leader epoch → start offset, Kafka's `LeaderEpochFileCache` (KIP-101/279).

Invariants: epochs and start offsets both strictly increase. `end_offset_for(epoch)` answers
OffsetForLeaderEpoch: the start offset of the first epoch above the requested one (or the log end
offset for the latest epoch), so a follower can truncate a divergent tail.

The checkpoint file is rewritten (fsynced) only when the entries differ from what it holds.
Opening a log truncates in memory only (`write=False`): the file may keep entries at or past the
log end, which every load drops again and the next change overwrites; a restarted partition that
is assigned the epoch it had then writes nothing.
"""

from __future__ import annotations

import posixpath
import threading

from moldau.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from moldau.storage.filesystem import FileSystem

__all__ = ["LeaderEpochCache"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, filesystem: FileSystem, directory: str) -> None:
        self._filesystem = filesystem
        self._path = posixpath.join(directory, LEADER_EPOCH_CHECKPOINT)
        self._lock = threading.Lock()
        self.entries: list[tuple[int, int]] = read_epoch_checkpoint(filesystem, self._path)
        self._written = list(self.entries)  # what the file holds

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        epoch = UNDEFINED_EPOCH
        for entry_epoch, start in self.entries:
            if start > offset:
                break
            epoch = entry_epoch
        return epoch

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; drop entries it contradicts."""
        if epoch < 0:
            return
        with self._lock:
            if (
                self.entries
                and self.entries[-1][0] == epoch
                and self.entries[-1][1] <= start_offset
            ):
                return
            if self.entries and self.entries[-1][0] > epoch and self.entries[-1][1] <= start_offset:
                return  # an older epoch does not take over a newer one's range
            kept = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
            kept.append((epoch, start_offset))
            self.entries = kept
            self._write()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, end offset of that epoch); for an epoch older than any
        known here, (that epoch, the start of the first known one), as Kafka answers: what a
        follower holds from it at or past that start is not this log's history (and what lies
        before was trimmed away); (-1, -1) when no epoch is known."""
        with self._lock:
            if not self.entries or requested_epoch < 0:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch < self.entries[0][0]:
                return requested_epoch, self.entries[0][1]
            if requested_epoch >= self.entries[-1][0]:
                return self.entries[-1][0], log_end_offset
            found = UNDEFINED_EPOCH
            for epoch, start in self.entries:
                if epoch > requested_epoch:
                    return found, start
                found = epoch
            return found, log_end_offset

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there);
        `write=False` leaves the file as it is (see the module docstring)."""
        with self._lock:
            kept = [(e, o) for e, o in self.entries if o < end_offset]
            if kept != self.entries:
                self.entries = kept
                if write:
                    self._write()

    def truncate_from_start(self, start_offset: int, *, write: bool = True) -> None:
        """The log start moved to `start_offset`: the epoch covering it now starts there."""
        with self._lock:
            covering = [(e, o) for e, o in self.entries if o <= start_offset]
            later = [(e, o) for e, o in self.entries if o > start_offset]
            kept = ([(covering[-1][0], start_offset)] if covering else []) + later
            if kept != self.entries:
                self.entries = kept
                if write:
                    self._write()

    def clear(self) -> None:
        with self._lock:
            self.entries = []
            self._write()

    def _write(self) -> None:
        if self.entries == self._written:
            return
        write_epoch_checkpoint(self._filesystem, self._path, self.entries)
        self._written = list(self.entries)

    def write_copy(self, directory: str) -> None:
        """Write the entries as they are now to the checkpoint file in `directory` (a replica
        being moved to another log dir); `relocate` then makes that file this cache's."""
        with self._lock:
            write_epoch_checkpoint(
                self._filesystem, posixpath.join(directory, LEADER_EPOCH_CHECKPOINT), self.entries
            )

    def relocate(self, directory: str) -> None:
        """Use the checkpoint file in `directory` from now on (`write_copy` wrote it)."""
        with self._lock:
            self._path = posixpath.join(directory, LEADER_EPOCH_CHECKPOINT)
            self._written = list(self.entries)
