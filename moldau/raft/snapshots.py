"""Snapshots of the replicated state machine (KIP-630), kept by a `SnapshotStore`.

A snapshot is opaque bytes (the controller writes and loads them) named by its id: the offset
it ends at (every committed entry below it is in it) and the epoch of the last entry it holds.
A follower that falls behind the leader's log start receives the leader's newest snapshot in
chunks (FetchSnapshot): they accumulate as a partial snapshot, which becomes visible only once
complete. The Raft node reads the store (ids, sizes, chunks to answer FetchSnapshot); the
driver writes it as the node's actions say, and drops older snapshots once the log starts at a
newer one. `FileSnapshotStore` (`file_snapshots.py`) keeps them on disk.
"""

from __future__ import annotations

from typing import Protocol

from moldau.raft.log import OffsetAndEpoch


class SnapshotStore(Protocol):
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The complete snapshot with the largest end offset, if any."""
        ...

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """The byte size of a complete snapshot; None when there is no such snapshot."""
        ...

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of a complete snapshot from byte `position`."""
        ...

    def load(self, snapshot_id: OffsetAndEpoch) -> bytes:
        """The whole of a complete snapshot, for the state machine to load."""
        ...

    def create(self, snapshot_id: OffsetAndEpoch, contents: bytes) -> None:
        """Store a complete snapshot the state machine produced, durably."""
        ...

    def write_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Add to the partial snapshot being received; position 0 starts it afresh."""
        ...

    def complete(self, snapshot_id: OffsetAndEpoch) -> None:
        """The partial snapshot is whole: make it a complete one, durably."""
        ...

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> list[OffsetAndEpoch]:
        """The log starts at `snapshot_id` now: drop complete snapshots that end before it
        and nothing needs any more; returns the ids dropped."""
        ...

    def close(self) -> None:
        """Give up a partial snapshot still being received."""
        ...


class MemorySnapshotStore:
    """A `SnapshotStore` in memory, for tests and simulations; `crash()` loses partial ones."""

    def __init__(self) -> None:
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self._partial: dict[OffsetAndEpoch, bytearray] = {}

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        if not self.snapshots:
            return None
        return max(self.snapshots, key=lambda s: (s.offset, s.epoch))

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        contents = self.snapshots.get(snapshot_id)
        return len(contents) if contents is not None else None

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position : position + max_bytes]

    def load(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self.snapshots[snapshot_id]

    def create(self, snapshot_id: OffsetAndEpoch, contents: bytes) -> None:
        self.snapshots[snapshot_id] = bytes(contents)

    def write_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        if position == 0:
            self._partial = {snapshot_id: bytearray()}
        partial = self._partial.get(snapshot_id)
        if partial is None or len(partial) != position:
            raise ValueError(f"chunk at {position} does not continue snapshot {snapshot_id}")
        partial += data

    def complete(self, snapshot_id: OffsetAndEpoch) -> None:
        self.snapshots[snapshot_id] = bytes(self._partial.pop(snapshot_id))

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> list[OffsetAndEpoch]:
        older = [
            s
            for s in self.snapshots
            if (s.offset, s.epoch) < (snapshot_id.offset, snapshot_id.epoch)
        ]
        for old in older:
            del self.snapshots[old]
        return older

    def close(self) -> None:
        self._partial.clear()

    def crash(self) -> None:
        self._partial.clear()
