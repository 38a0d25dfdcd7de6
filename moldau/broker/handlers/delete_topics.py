"""DeleteTopics (key 20), v1-6: delete topics through the controller (a record in the metadata log).

v1-3 are v0 (throttling behaviour changes); v4 is flexible; v5 adds error messages (and
THROTTLING_QUOTA_EXCEEDED, never sent here); v6 names each topic by name or by topic id
(KIP-516). Unknown names answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID;
`delete.topic.enable=false` answers TOPIC_DELETION_DISABLED.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey

_ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.DELETE_TOPICS, 1, 6, forward=True)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    references: list[str | uuid.UUID]
    if ctx.api_version >= 6:
        references = [_reference(topic.name, topic.topic_id) for topic in request.topics]
    else:
        references = list(request.topic_names)
    results = await ctx.controller.delete_topics(references)
    return {
        "throttle_time": 0,
        "responses": [
            {
                "name": result.name,
                "topic_id": result.topic_id,
                "error_code": result.error_code,
                "error_message": result.error_message,
            }
            for result in results
        ],
    }


def _reference(name: str | None, topic_id: uuid.UUID | None) -> str | uuid.UUID:
    """v6 names a topic by name, or by id when the name is null."""
    if name is not None or topic_id is None or topic_id == _ZERO_UUID:
        return name or ""
    return topic_id
