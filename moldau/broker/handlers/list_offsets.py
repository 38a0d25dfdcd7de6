"""ListOffsets (key 2), v1-11: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

v2 adds isolation_level (latest is the last stable offset under read_committed); v4 leader
epochs; v6 flexible; v7 max timestamp (KIP-734); v8 earliest local (-4, KIP-405); v9 latest
tiered (-5, KIP-1005); v10 a timeout; v11 earliest pending upload (-6, KIP-1023). The lookup
itself is the leader's (`replication.offset_lookup`).

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
from moldau.replication.offset_lookup import NOT_FOUND, ListedOffset, offset_for_timestamp
from moldau.types import TopicPartition


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
                found = offset_for_timestamp(
                    partition, requested.timestamp, isolation_level, read=False
                )
            except KafkaError as exc:
                response["error_code"] = exc.code
                continue
            if found is None:
                to_read.append((response, partition, requested.timestamp))
            else:
                _answer(response, found)
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
            found = offset_for_timestamp(partition, timestamp, isolation_level, read=True)
        except KafkaError as exc:
            response["error_code"] = exc.code
        except OSError:
            response["error_code"] = ErrorCode.kafka_storage_error
        else:
            _answer(response, found or NOT_FOUND)


def _answer(response: dict[str, Any], found: ListedOffset) -> None:
    response["offset"] = found.offset
    response["timestamp"] = found.timestamp
    response["leader_epoch"] = found.leader_epoch
