"""OffsetDelete (key 47), v0: delete a group's committed offsets for some partitions (KIP-496).

Refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes the topic;
GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for an active non-consumer group.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    topics = [
        (topic.name, [partition.partition_index for partition in topic.partitions])
        for topic in request.topics
    ]
    response = await runtime.delete_offsets(group_id=request.group_id, topics=topics)
    return {"throttle_time": 0, **response}
