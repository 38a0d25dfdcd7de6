"""ListOffsets on a leader, Kafka's `Partition.fetchOffsetForTimestamp`: the offset of a
timestamp, or of a special position (latest, earliest, max timestamp), within what a consumer
of the isolation level may read.

Latest is the high watermark, or the last stable offset under read_committed; a timestamp found
at or past that bound is not there yet (-1). Without tiered storage, as in Kafka with remote
storage off, the earliest local offset is the log start offset, and the latest tiered and
earliest pending upload offsets are -1 (leader epoch -1). A lookup that must read a batch's
records (`storage.timestamp_lookup`) is refused without `read`, so the caller can run it off the
event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.consumer_fetch import upper_bound
from moldau.replication.partition import Partition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4  # KIP-405
LATEST_TIERED = -5  # KIP-1005
EARLIEST_PENDING_UPLOAD = -6  # KIP-1023


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


NOT_FOUND = ListedOffset()


def offset_for_timestamp(
    partition: Partition, timestamp: int, isolation_level: int, *, read: bool
) -> ListedOffset | None:
    """The answer for `timestamp` (or a special position); None when it needs a batch's records
    read and `read` is False. KafkaError for a special timestamp Kafka does not define."""
    log = partition.log
    if timestamp == LATEST:
        return ListedOffset(
            offset=upper_bound(log, isolation_level), leader_epoch=partition.leader_epoch
        )
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # (the epoch of that offset, as Kafka)
        return ListedOffset(
            offset=log.log_start_offset,
            leader_epoch=log.leader_epoch_cache.epoch_for_offset(log.log_start_offset),
        )
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # (nothing is tiered)
        return NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset(read_records=read)
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp, read_records=read)
    if found is None:
        return NOT_FOUND
    if not found.exact:
        return None
    if found.offset >= upper_bound(log, isolation_level):
        return NOT_FOUND
    return ListedOffset(
        offset=found.offset,
        timestamp=found.timestamp,
        leader_epoch=found.leader_epoch if found.leader_epoch is not None else -1,
    )
