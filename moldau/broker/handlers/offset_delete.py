"""OffsetDelete (key 47), v0: delete a group's committed offsets for some partitions (KIP-496).

Refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes the topic;
GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for an active non-consumer group.
The principal needs DELETE on the group (GROUP_AUTHORIZATION_FAILED, top level) and READ on
each topic (TOPIC_AUTHORIZATION_FAILED for its partitions), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require(
        AclOperation.DELETE,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    topics, denied = [], []
    for topic in request.topics:
        partitions = [partition.partition_index for partition in topic.partitions]
        if ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name):
            topics.append((topic.name, partitions))
        else:
            denied.append(
                {
                    "name": topic.name,
                    "partitions": [
                        {
                            "partition_index": index,
                            "error_code": ErrorCode.topic_authorization_failed,
                        }
                        for index in partitions
                    ],
                }
            )
    response = await runtime.delete_offsets(group_id=request.group_id, topics=topics)
    return {"throttle_time": 0, **response, "topics": [*denied, *response["topics"]]}
