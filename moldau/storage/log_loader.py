"""Opening a partition directory, Kafka's `LogLoader`: finish interrupted swaps, load segments,
recover the unflushed tail after an unclean shutdown, rebuild producer state; then the
`PartitionLog` over a `LocalLog` of those segments.

Recovery rule: after a clean shutdown every segment is loaded as is (indexes sanity-checked).
Otherwise every segment from the one holding the recovery point onwards is scanned: each batch's
magic, length and CRC32C are checked, the log is truncated at the first invalid byte (later
segments are deleted) and the indexes are rebuilt.
"""

from __future__ import annotations

import logging
import posixpath

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.storage.checkpoints import read_partition_metadata
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem
from moldau.storage.leader_epoch import LeaderEpochCache
from moldau.storage.local_log import LocalLog
from moldau.storage.partition_log import PartitionLog
from moldau.storage.producer_snapshots import rebuild_producer_state
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
)
from moldau.types import TopicPartition

logger = logging.getLogger(__name__)

__all__ = ["load_partition_log", "parse_partition_directory"]

PARTITION_METADATA = "partition.metadata"


def parse_partition_directory(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` → TopicPartition; None for other names (and deleted partitions)."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def _clean_directory(filesystem: FileSystem, directory: str) -> set[int]:
    """Remove leftovers of deletions and interrupted cleanings; complete finished swaps.

    Returns the base offsets of segments whose log came from a swap (their indexes are rebuilt).
    """
    swapped: set[int] = set()
    for name in filesystem.listdir(directory):
        path = posixpath.join(directory, name)
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
            filesystem.remove(path)
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base_offset = int(name.split(".")[0])
            filesystem.rename(path, path[: -len(SWAP_SUFFIX)])
            swapped.add(base_offset)
        elif name.endswith(SWAP_SUFFIX):
            filesystem.remove(path)
    for base_offset in swapped:
        stem = posixpath.join(directory, f"{base_offset:020d}")
        for suffix in SEGMENT_SUFFIXES[1:3]:
            filesystem.remove(stem + suffix)
    return swapped


def load_partition_log(
    filesystem: FileSystem,
    directory: str,
    topic_partition: TopicPartition,
    config: LogConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    high_watermark: int = 0,
    clean_shutdown: bool = False,
) -> PartitionLog:
    filesystem.makedirs(directory)
    swapped = _clean_directory(filesystem, directory)
    now = clock.now_ms()
    base_offsets = sorted(
        int(name[: -len(LOG_SUFFIX)])
        for name in filesystem.listdir(directory)
        if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit()
    )
    segments: list[LogSegment] = []
    first_recovered: int | None = None
    for index, base_offset in enumerate(base_offsets):
        segment = LogSegment(filesystem, directory, base_offset, config, now_ms=now)
        next_base = base_offsets[index + 1] if index + 1 < len(base_offsets) else None
        trusted = clean_shutdown or (next_base is not None and next_base <= recovery_point)
        if base_offset in swapped or not trusted or not segment.load():
            truncated = segment.recover()
            if truncated:
                logger.warning(
                    "%s: invalid bytes at the end of segment %d (an unclean shutdown): "
                    "truncated %d bytes, the log ends at offset %d",
                    directory, base_offset, truncated, segment.next_offset,
                )  # fmt: skip
            if first_recovered is None:
                first_recovered = base_offset
            if segments and segment.size == 0 and segments[-1].next_offset > base_offset:
                segment.delete_files()
                continue
            segments.append(segment)
            gap = next_base is not None and segment.next_offset < next_base
            if truncated or gap:  # lost or corrupt data: nothing after it can be trusted
                for later in base_offsets[index + 1 :]:
                    LogSegment(filesystem, directory, later, config, now_ms=now).delete_files()
                break
        else:
            segments.append(segment)
    if not segments:
        segment = LogSegment(filesystem, directory, log_start_offset, config, now_ms=now)
        segments.append(segment)
        recovery_point = max(recovery_point, log_start_offset)
    segments[-1].preallocate_indexes()
    log_end_offset = segments[-1].next_offset
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if log_start_offset > log_end_offset:
        # DeleteRecords moved the start past data a crash then lost: offsets are never reused,
        # so the log restarts empty at its start offset (Kafka does the same)
        for segment in segments:
            segment.delete_files()
        segments = [LogSegment(filesystem, directory, log_start_offset, config, now_ms=now)]
        segments[0].preallocate_indexes()
        log_end_offset = log_start_offset

    epochs = LeaderEpochCache(filesystem, directory)
    # in memory only: opening a log writes no checkpoint (and so works on a full disk)
    epochs.truncate_from_end(log_end_offset, write=False)
    epochs.truncate_from_start(log_start_offset, write=False)

    producer_state = ProducerStateManager()
    replay_from = log_end_offset if first_recovered is None else first_recovered
    rebuild_producer_state(
        filesystem,
        directory,
        segments,
        producer_state,
        upto=log_end_offset,
        replay_limit=replay_from,
    )
    local = LocalLog(
        filesystem=filesystem,
        directory=directory,
        topic_partition=topic_partition,
        config=config,
        clock=clock,
        segments=segments,
        recovery_point=recovery_point if clean_shutdown else min(recovery_point, log_end_offset),
    )
    log = PartitionLog(
        local,
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        producer_state=producer_state,
        leader_epoch_cache=epochs,
    )
    log.topic_id = read_partition_metadata(
        filesystem, posixpath.join(directory, PARTITION_METADATA)
    )
    return log
