"""ShareAcknowledge (key 79), v1: a share group member acknowledges records it acquired,
without fetching (KIP-932; the share consumer's commitSync/commitAsync and its close).

The request carries the member's share session epoch: a positive one must be the session's and
moves it on, 0 is INVALID_SHARE_SESSION_EPOCH (ShareAcknowledge opens no session), -1 closes the
session once the acknowledgements are applied, releasing what the member still holds. Each
partition's acknowledgements apply all or none: INVALID_RECORD_STATE for records the member does
not hold (its lock ran out, or this broker has no state for them), INVALID_REQUEST for malformed
batches, NOT_LEADER_OR_FOLLOWER with the current leader. Authorization and share.version as
ShareFetch's.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.handlers._share import (
    endpoints_of,
    refusal,
    share_partition,
    wire_leader,
)
from moldau.broker.handlers.share_fetch import acknowledgement_batches
from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.sessions import FINAL_EPOCH


def _refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "responses": [],
        "node_endpoints": [],
    }


@handler(ApiKey.SHARE_ACKNOWLEDGE, 1, 1)
def handle_share_acknowledge(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refused = refusal(ctx, request)
    if refused is not None:
        return _refused(*refused)
    manager = ctx.node.share_partitions
    assert manager is not None
    group_id, member_id = request.group_id, request.member_id
    epoch = request.share_session_epoch
    try:
        manager.sessions.acknowledged(group_id, member_id, epoch)
    except KafkaError as error:
        return _refused(error.code, error.message)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    leaders: set[int] = set()
    for topic in request.topics:
        for partition in topic.partitions:
            code, message, leader = manager.acknowledge(
                group_id,
                member_id,
                share_partition(ctx, topic.topic_id, partition.partition_index),
                acknowledgement_batches(partition),
            )
            if leader is not None:
                leaders.add(leader[0])
            by_topic.setdefault(topic.topic_id, []).append(
                {
                    "partition_index": partition.partition_index,
                    "error_code": code,
                    "error_message": message,
                    "current_leader": wire_leader(leader),
                }
            )
    if epoch == FINAL_EPOCH:
        manager.sessions.close(group_id, member_id)
        manager.release_member(group_id, member_id)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [
            {"topic_id": topic_id, "partitions": partitions}
            for topic_id, partitions in by_topic.items()
        ],
        "node_endpoints": endpoints_of(ctx, leaders),
    }
