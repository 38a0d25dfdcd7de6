"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch (KIP-101, KIP-279).

Clients use it after a leader change to detect log truncation (KIP-320). v2 adds
current_leader_epoch; v3 replica_id; v4 flexible. The answer is the largest epoch <= the one
asked and the start offset of the next epoch (or the log end offset for the current epoch).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    # A follower (replica id >= 0) needs CLUSTER_ACTION, a client DESCRIBE on each topic.
    follower = getattr(request, "replica_id", -1) >= 0
    cluster_allowed = not follower or ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    topics = []
    for topic in request.topics:
        partitions = []
        allowed = cluster_allowed and (
            follower or ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        )
        for requested in topic.partitions:
            response: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "partition": requested.partition,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            try:
                if not allowed:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = replica_manager.leader_partition(
                    TopicPartition(topic.topic, requested.partition),
                    getattr(requested, "current_leader_epoch", -1),
                )
                epoch, end_offset = partition.log.end_offset_for_leader_epoch(
                    requested.leader_epoch
                )
                response["leader_epoch"] = epoch
                response["end_offset"] = end_offset
            except KafkaError as exc:
                response["error_code"] = exc.code
            partitions.append(response)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
