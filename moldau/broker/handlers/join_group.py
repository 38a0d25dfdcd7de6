"""JoinGroup (key 11), v0-9: join a classic group; parked until the rebalance completes.

v1 adds rebalance_timeout (v0 uses the session timeout); v2 throttle time; v4 answers a first
join without member id with MEMBER_ID_REQUIRED and a generated id (KIP-394); v5 adds
group_instance_id (static membership, KIP-345); v6 flexible; v7 protocol_type in the response;
v8 a reason; v9 skip_assignment for a static leader that rejoined without a rebalance.

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.classic import JoinGroupRequest
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.JOIN_GROUP, 0, 9)
async def handle_join_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require(
        AclOperation.READ,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )
    runtime = ctx.node.group_coordinator
    if runtime is None:
        raise KafkaError(ErrorCode.coordinator_not_available)
    session_timeout = millis(request.session_timeout)
    rebalance_timeout = millis(getattr(request, "rebalance_timeout", request.session_timeout))
    if ctx.api_version == 0 or rebalance_timeout < 0:
        rebalance_timeout = session_timeout
    response = await runtime.join_group(
        JoinGroupRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=request.protocol_type,
            protocols=[(protocol.name, protocol.metadata) for protocol in request.protocols],
            session_timeout_ms=session_timeout,
            rebalance_timeout_ms=rebalance_timeout,
            client_id=ctx.client_id,
            client_host="/" + ctx.client_host,
            require_known_member_id=ctx.api_version >= 4,
        )
    )
    if ctx.api_version < 9 and response.get("skip_assignment"):
        response["skip_assignment"] = False  # older leaders re-run an assignment that is ignored
    if ctx.api_version < 7 and response["protocol_name"] is None:
        response["protocol_name"] = ""  # nullable only since v7
    return {"throttle_time": 0, **response}
