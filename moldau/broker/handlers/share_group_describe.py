"""ShareGroupDescribe (key 77), v1: share groups with their epochs, members and assignments
(KIP-932; `kafka-share-groups --describe --members`).

A group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED, one whose members'
assignments name a topic it may not DESCRIBE TOPIC_AUTHORIZATION_FAILED, as in Kafka; a group
that is not a share group GROUP_ID_NOT_FOUND; every group UNSUPPORTED_VERSION while
share.version is not finalized at 1 or more.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._share import DISABLED, share_groups_enabled
from moldau.broker.handlers.consumer_group_describe import AUTHORIZED_OPERATIONS_OMITTED
from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
def handle_share_group_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    names = {topic.topic_id: name for name, topic in ctx.node.metadata_image.topics.items()}
    groups = []
    for group_id in request.group_ids:
        try:
            if not share_groups_enabled(ctx):
                raise KafkaError(ErrorCode.unsupported_version, DISABLED)
            ctx.require(
                AclOperation.DESCRIBE,
                ResourceType.GROUP,
                group_id,
                ErrorCode.group_authorization_failed,
            )
            if runtime is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            answer: dict[str, Any] = runtime.share_group_describe(group_id, names)
            topics = {
                entry["topic_name"]
                for member in answer.get("members", ())
                for entry in member["assignment"]["topic_partitions"]
                if entry["topic_name"]
            }
            if not all(
                ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics
            ):
                raise KafkaError(
                    ErrorCode.topic_authorization_failed,
                    "The group has described topic(s) that the client is not authorized to "
                    "describe.",
                )
        except KafkaError as error:
            answer = {
                "error_code": error.code,
                "error_message": error.message,
                "group_id": group_id,
                "group_state": "",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
            }
        described = request.include_authorized_operations and answer["error_code"] == ErrorCode.none
        answer["authorized_operations"] = (
            ctx.authorized_operations(ResourceType.GROUP, group_id)
            if described
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        groups.append(answer)
    return {"throttle_time": 0, "groups": groups}
