"""ListOffsets (key 2), v1-11: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

v2 adds isolation_level (latest is the last stable offset under read_committed); v4 leader
epochs; v6 flexible; v7 max timestamp (KIP-734); v8 earliest local (-4, KIP-405); v9 latest
tiered (-5, KIP-1005); v10 a timeout; v11 earliest pending upload (-6, KIP-1023). Without tiered
storage, as in Kafka with remote storage off: the earliest local offset is the log start offset,
and the latest tiered and earliest pending upload offsets are -1 (leader epoch -1).

A timestamp lookup is answered on the event loop when indexes and batch headers answer it; one
that has to read a batch's records (see `storage.timestamp_lookup`) is read in a worker thread,
the request's such lookups one after another. A partition named twice in one request answers
INVALID_REQUEST, as Kafka's does (a request cannot repeat one expensive lookup).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


@handler(ApiKey.LIST_OFFSETS, 1, 11)
async def handle_list_offsets(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    isolation_level = getattr(request, "isolation_level", 0)
    named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    to_read: list[tuple[dict[str, Any], Any, int]] = []
    topics = []
    for topic in request.topics:
        partitions = []
        described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for requested in topic.partitions:
            response: dict[str, Any] = {
                "partition_index": requested.partition_index,
                "error_code": ErrorCode.none if described else ErrorCode.topic_authorization_failed,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            partitions.append(response)
            if not described:
                continue
            if named[topic.name, requested.partition_index] > 1:
                response["error_code"] = ErrorCode.invalid_request
                continue
            try:
                partition = replica_manager.leader_partition(
                    TopicPartition(topic.name, requested.partition_index),
                    getattr(requested, "current_leader_epoch", -1),
                )
                answer = _lookup(partition, requested.timestamp, isolation_level, read=False)
            except KafkaError as exc:
                response["error_code"] = exc.code
                continue
            if answer is None:
                to_read.append((response, partition, requested.timestamp))
            else:
                response.update(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    if to_read:
        await asyncio.get_running_loop().run_in_executor(
            None, _read_lookups, to_read, isolation_level
        )
    return {"throttle_time": 0, "topics": topics}


def _read_lookups(to_read: list[tuple[dict[str, Any], Any, int]], isolation_level: int) -> None:
    """The lookups that read a batch (in a worker thread)."""
    for response, partition, timestamp in to_read:
        try:
            response.update(_lookup(partition, timestamp, isolation_level, read=True) or {})
        except KafkaError as exc:
            response["error_code"] = exc.code
        except OSError:
            response["error_code"] = ErrorCode.kafka_storage_error


def _lookup(
    partition: Any, timestamp: int, isolation_level: int, *, read: bool
) -> dict[str, Any] | None:
    """The answer's fields; None if it needs a batch read and `read` is False."""
    log = partition.log
    if timestamp == LATEST:
        offset = log.last_stable_offset if isolation_level == 1 else log.high_watermark
        return {"offset": offset, "leader_epoch": partition.leader_epoch}
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {
            "offset": log.log_start_offset,
            "leader_epoch": _epoch_for_offset(log, log.log_start_offset, partition.leader_epoch),
        }
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # (nothing is tiered)
        return {"offset": -1, "leader_epoch": -1}
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset(read_records=read)
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp, read_records=read)
    if found is None:
        return {"offset": -1, "timestamp": -1}
    if not found.exact:
        return None
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
