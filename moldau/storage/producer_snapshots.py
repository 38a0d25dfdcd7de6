"""The producer-state snapshots of a partition directory (`<20-digit offset>.snapshot`) and the
rebuild of the state from the newest usable one and the log after it: Kafka's
`ProducerStateManager` snapshot files and `UnifiedLog.rebuildProducerState`. Used by the loader
at start-up and by `PartitionLog` after a truncation.
"""

from __future__ import annotations

import posixpath

from moldau.storage.filesystem import FileSystem
from moldau.storage.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager, control_type_of
from moldau.storage.segment import LogSegment, segment_file_name

__all__ = ["delete_snapshots", "rebuild_producer_state", "snapshot_offsets", "snapshot_path"]


def snapshot_path(directory: str, offset: int) -> str:
    return posixpath.join(directory, segment_file_name(offset, SNAPSHOT_SUFFIX))


def snapshot_offsets(filesystem: FileSystem, directory: str) -> list[int]:
    return sorted(
        int(name[: -len(SNAPSHOT_SUFFIX)])
        for name in filesystem.listdir(directory)
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit()
    )


def delete_snapshots(filesystem: FileSystem, directory: str, *, below: int | None = None) -> None:
    """Remove the snapshots at offsets below `below` (all of them without it)."""
    for offset in snapshot_offsets(filesystem, directory):
        if below is None or offset < below:
            filesystem.remove(snapshot_path(directory, offset))


def rebuild_producer_state(
    filesystem: FileSystem,
    directory: str,
    segments: list[LogSegment],
    state: ProducerStateManager,
    *,
    upto: int,
    replay_limit: int | None = None,
) -> None:
    """Load the newest usable snapshot at or below min(`upto`, `replay_limit`) and replay the log
    from there to `upto`. Aborted transactions found in segments at or after `replay_limit`
    (freshly recovered, their transaction index emptied) are written back to their index.
    Snapshots above `upto` are deleted."""
    limit = upto if replay_limit is None else min(upto, replay_limit)
    start = 0
    state.reset()
    for offset in reversed(snapshot_offsets(filesystem, directory)):
        path = snapshot_path(directory, offset)
        if offset > upto:
            filesystem.remove(path)
            continue
        if offset > limit:
            continue
        try:
            state.load_snapshot(filesystem.read_file(path))
        except ValueError:
            filesystem.remove(path)
            continue
        start = offset
        break
    for segment in segments:
        if segment.next_offset <= start:
            continue
        rebuild_index = replay_limit is not None and segment.base_offset >= replay_limit
        position = segment.position_of(start) if segment.base_offset < start else 0
        while True:
            header = segment.header_at(position)
            if header is None or header.base_offset >= upto:
                break
            if header.producer_id >= 0 and header.last_offset >= start:
                if header.is_control:
                    data = segment.log.pread(header.size, position)
                    control_type, coordinator_epoch = control_type_of(data)
                    aborted = state.apply_batch(
                        header, control_type=control_type, coordinator_epoch=coordinator_epoch
                    )
                    if aborted is not None and rebuild_index:
                        segment.transaction_index.append(aborted)
                else:
                    state.apply_batch(header)
            position += header.size
