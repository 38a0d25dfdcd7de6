"""DescribeTopicPartitions (key 75), v0: topics with their partitions, paged (KIP-966).

Java AdminClient >= 3.7 describes topics with it. v0 is flexible. An empty topic list means
every topic. Topics are answered in name order from the cursor on, at most
`response_partition_limit` partitions in all (capped by `max.request.partition.size.limit`,
default 2000); when the limit cuts in, `next_cursor` names the first partition left out. A
cursor topic missing from a non-empty topic list, or a negative cursor partition, fails every
requested topic with INVALID_REQUEST. Unknown topics are UNKNOWN_TOPIC_OR_PARTITION (or
INVALID_TOPIC_EXCEPTION for an invalid name) and are left out when listing every topic. Moldau
has no eligible leader replicas (ELR) yet: those lists are empty.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.topic_names import validate_topic_name
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.metadata.image import TopicImage
from moldau.metadata.records import ZERO_UUID
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
DEFAULT_PARTITION_LIMIT = 2000


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
def handle_describe_topic_partitions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.node.metadata_image
    every_topic = len(request.topics) == 0
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if every_topic:  # every topic the principal may describe
        names = {
            name
            for name in image.topics
            if name >= cursor_topic
            and ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        }
    else:
        names = {topic.name for topic in request.topics if topic.name >= cursor_topic}
    if (cursor is not None and not every_topic and cursor.topic_name not in names) or (
        cursor is not None and cursor.partition_index < 0
    ):
        return {
            "throttle_time": 0,
            "topics": [
                {"error_code": ErrorCode.invalid_request, "name": t.name, "topic_id": ZERO_UUID}
                for t in request.topics
            ],
            "next_cursor": None,
        }
    limit_config = ctx.node.config.get("max.request.partition.size.limit")
    server_limit = int(limit_config) if limit_config is not None else DEFAULT_PARTITION_LIMIT
    remaining = max(min(server_limit, int(request.response_partition_limit)), 1)
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = image.topics.get(name)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append(
                {**_unknown_topic(name), "error_code": ErrorCode.topic_authorization_failed}
            )
            continue
        if topic is None:
            if not every_topic:
                topics.append(_unknown_topic(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        indexes = sorted(i for i in topic.partitions if i >= start)
        shown = indexes[:remaining]
        topics.append(_topic(ctx, topic, shown))
        if len(indexes) > len(shown):
            next_cursor = {"topic_name": name, "partition_index": indexes[len(shown)]}
            break
        remaining -= len(shown)
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


def _topic(ctx: RequestContext, topic: TopicImage, indexes: list[int]) -> dict[str, Any]:
    partitions = []
    for index in indexes:
        partition = topic.partitions[index]
        partitions.append(
            {
                "error_code": (
                    ErrorCode.none if partition.leader >= 0 else ErrorCode.leader_not_available
                ),
                "partition_index": index,
                "leader_id": partition.leader,
                "leader_epoch": partition.leader_epoch,
                "replica_nodes": list(partition.replicas),
                "isr_nodes": list(partition.isr),
                "eligible_leader_replicas": [],
                "last_known_elr": [],
                "offline_replicas": [
                    r for r in partition.replicas if not ctx.node.is_broker_alive(r)
                ],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": ctx.authorized_operations(ResourceType.TOPIC, topic.name),
    }


def _unknown_topic(name: str) -> dict[str, Any]:
    try:
        validate_topic_name(name)
        code = ErrorCode.unknown_topic_or_partition
    except KafkaError:
        code = ErrorCode.invalid_topic_exception
    return {
        "error_code": code,
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
    }
