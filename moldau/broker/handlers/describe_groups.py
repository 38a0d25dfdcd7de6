"""DescribeGroups (key 15), v0-6: state, protocol and members of classic groups.

v1 adds throttle time; v2 same; v3 authorized_operations; v4 group_instance_id of members; v5
flexible; v6 error_message, and an unknown group answers GROUP_ID_NOT_FOUND (older versions
answer no error and state Dead, KIP-1043). Member metadata and assignment are only shown while
the group is Stable, as Kafka does.

A group the principal may not DESCRIBE is answered GROUP_AUTHORIZATION_FAILED. The authorized
operations are the principal's on the group when asked for (v3+) and the group is described.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._group_describe import AUTHORIZED_OPERATIONS_OMITTED
from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> dict[str, Any]:
    runtime = ctx.node.group_coordinator
    try:
        ctx.require(
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            group_id,
            ErrorCode.group_authorization_failed,
        )
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        answer: dict[str, Any] = runtime.describe_group(group_id)
    except KafkaError as error:
        answer = {
            "error_code": error.code,
            "error_message": None,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }
    unknown = (
        answer["error_code"] == ErrorCode.group_id_not_found and answer["group_state"] == "Dead"
    )
    if unknown and ctx.api_version < 6:
        answer["error_code"] = ErrorCode.none
        answer["error_message"] = None
    described = with_operations and answer["error_code"] == ErrorCode.none
    answer["authorized_operations"] = (
        ctx.authorized_operations(ResourceType.GROUP, group_id)
        if described
        else AUTHORIZED_OPERATIONS_OMITTED
    )
    return answer


@handler(ApiKey.DESCRIBE_GROUPS, 0, 6)
def handle_describe_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    with_operations = bool(getattr(request, "include_authorized_operations", False))
    return {
        "throttle_time": 0,
        "groups": [_describe(ctx, group_id, with_operations) for group_id in request.groups],
    }
