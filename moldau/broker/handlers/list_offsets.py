"""ListOffsets (key 2), v1-11: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

v2 adds isolation_level (latest is the last stable offset under read_committed); v4 leader
epochs; v6 flexible; v7 max timestamp (KIP-734); v8 earliest local (-4, KIP-405); v9 earliest
pending upload (-5); v10 a timeout; v11 latest tiered (-6). Without tiered storage, local and
pending-upload lookups are the log start offset.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
LATEST_TIERED = -6


@handler(ApiKey.LIST_OFFSETS, 1, 11)
def handle_list_offsets(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    isolation_level = getattr(request, "isolation_level", 0)
    topics = []
    for topic in request.topics:
        partitions = []
        for requested in topic.partitions:
            response: dict[str, Any] = {
                "partition_index": requested.partition_index,
                "error_code": ErrorCode.none,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            try:
                partition = replica_manager.leader_partition(
                    TopicPartition(topic.name, requested.partition_index),
                    getattr(requested, "current_leader_epoch", -1),
                )
                response.update(_lookup(partition, requested.timestamp, isolation_level))
            except KafkaError as exc:
                response["error_code"] = exc.code
            partitions.append(response)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _lookup(partition: Any, timestamp: int, isolation_level: int) -> dict[str, Any]:
    log = partition.log
    if timestamp == LATEST:
        offset = log.last_stable_offset if isolation_level == 1 else log.high_watermark
        return {"offset": offset, "leader_epoch": partition.leader_epoch}
    if timestamp in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
        return {
            "offset": log.log_start_offset,
            "leader_epoch": _epoch_for_offset(log, log.log_start_offset, partition.leader_epoch),
        }
    if timestamp == LATEST_TIERED:
        return {"offset": -1}
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return {"offset": -1, "timestamp": -1}
    upper = log.last_stable_offset if isolation_level == 1 else log.high_watermark
    if found.offset >= upper:
        return {"offset": -1, "timestamp": -1}
    return {
        "offset": found.offset,
        "timestamp": found.timestamp,
        "leader_epoch": found.leader_epoch if found.leader_epoch is not None else -1,
    }


def _epoch_for_offset(log: Any, offset: int, default: int) -> int:
    epoch_for = getattr(log, "leader_epoch_for_offset", None)
    if epoch_for is None:
        return default
    epoch = epoch_for(offset)
    return default if epoch is None else epoch
