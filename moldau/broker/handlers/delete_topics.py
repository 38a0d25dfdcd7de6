"""DeleteTopics (key 20), v1-6: delete topics through the controller (a record in the metadata log).

v1-3 are v0 (throttling behaviour changes); v4 is flexible; v5 adds error messages (and
THROTTLING_QUOTA_EXCEEDED, never sent here); v6 names each topic by name or by topic id
(KIP-516). Unknown names answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID;
`delete.topic.enable=false` answers TOPIC_DELETION_DISABLED.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.handlers._authorized import denial_message, for_authorized
from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import DeleteTopicResult
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

_ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.DELETE_TOPICS, 1, 6, forward=True)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    references: list[str | uuid.UUID]
    if ctx.api_version >= 6:
        references = [_reference(topic.name, topic.topic_id) for topic in request.topics]
    else:
        references = list(request.topic_names)
    image = ctx.node.metadata_image

    def name_of(reference: str | uuid.UUID) -> str | None:
        if isinstance(reference, str):
            return reference
        topic = image.topics_by_id.get(reference)
        return topic.name if topic is not None else None

    def allowed(reference: str | uuid.UUID) -> bool:
        name = name_of(reference)
        return name is None or ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, name)

    def refused(reference: str | uuid.UUID) -> DeleteTopicResult:
        name = name_of(reference)
        assert name is not None  # (an unknown id is not refused: the controller answers it)
        if isinstance(reference, uuid.UUID) and not ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.TOPIC, name
        ):  # a topic named by id that the principal may not see: as if it did not exist
            return DeleteTopicResult(
                name=None, topic_id=reference, error_code=ErrorCode.unknown_topic_id
            )
        return DeleteTopicResult(
            name=name,
            topic_id=reference if isinstance(reference, uuid.UUID) else _ZERO_UUID,
            error_code=ErrorCode.topic_authorization_failed,
            error_message=denial_message(ErrorCode.topic_authorization_failed),
        )

    async def delete(permitted: list[str | uuid.UUID]) -> list[DeleteTopicResult]:
        return list(await ctx.controller.delete_topics(permitted))

    results = await for_authorized(references, allowed, delete, refused)
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
