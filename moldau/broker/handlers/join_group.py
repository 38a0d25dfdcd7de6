"""JoinGroup (key 11), v0-9: join a classic group; parked until the rebalance completes (the join
is applied first, and the answer is a `Deferred`: the connection serves its next requests while
the member waits).

v1 adds rebalance_timeout (v0 uses the session timeout); v2 throttle time; v4 answers a first
join without member id with MEMBER_ID_REQUIRED and a generated id (KIP-394); v5 adds
group_instance_id (static membership, KIP-345); v6 flexible; v7 protocol_type in the response;
v8 a reason; v9 skip_assignment for a static leader that rejoined without a rebalance.

The principal needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.classic import JoinGroupRequest
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.net.deferred import Deferred, settled_by
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.JOIN_GROUP, 0, 9)
async def handle_join_group(ctx: RequestContext, request: Any) -> dict[str, Any] | Deferred:
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
    outcome = await runtime.apply_join_group(
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
    version = ctx.api_version
    if isinstance(outcome, asyncio.Future):  # the member waits for the rebalance
        return settled_by(outcome, lambda response: _answer(version, response))
    return _answer(version, outcome)


def _answer(version: int, response: dict[str, Any]) -> dict[str, Any]:
    if version < 9 and response.get("skip_assignment"):
        response["skip_assignment"] = False  # older leaders re-run an assignment that is ignored
    if version < 7 and response["protocol_name"] is None:
        response["protocol_name"] = ""  # nullable only since v7
    return {"throttle_time": 0, **response}
