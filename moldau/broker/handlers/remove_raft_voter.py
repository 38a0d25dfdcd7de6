"""RemoveRaftVoter (key 81), v0: remove a voter from the metadata quorum (KIP-853;
`kafka-metadata-quorum remove-controller`).

Served on controller listeners and passed on by brokers. The quorum's leader appends the voter
set without it and answers once that is committed; a leader that removes itself leads until
then and resigns after. Errors: VOTER_NOT_FOUND (no such voter, or another directory id),
INVALID_REQUEST (the last voter), REQUEST_TIMED_OUT (another change is not committed yet, or
this one did not commit in time), UNSUPPORTED_VERSION (static voters), NOT_LEADER_OR_FOLLOWER,
INCONSISTENT_CLUSTER_ID.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.voter_set import directory_id_of

# How long a RemoveRaftVoter (which has no timeout field) waits for its change to commit.
REMOVE_TIMEOUT_S = 30.0


async def voter_change_answer(
    ctx: RequestContext, request: Any, change: Callable[[Any], Awaitable[None]]
) -> dict[str, Any]:
    """Run a voter change on this node's controller; the answer of Add/Remove/UpdateRaftVoter
    (Add and Remove carry an error message, UpdateRaftVoter the current leader instead)."""
    cluster_id = getattr(request, "cluster_id", None)
    code, message = ErrorCode.none, None
    controller = ctx.controller  # (NOT_CONTROLLER once it has stopped: the dispatcher answers)
    if cluster_id is not None and cluster_id != controller.cluster_id:
        code = ErrorCode.inconsistent_cluster_id
        message = f"this is cluster {controller.cluster_id}, not {cluster_id}"
    else:
        try:
            await change(controller)
        except KafkaError as error:
            code, message = error.code, error.message
    leader_id = controller.leader_id
    addresses, transport = ctx.node.quorum_addresses, ctx.node.quorum_transport
    endpoint = None
    if leader_id is not None and leader_id == ctx.node.node_id and transport is not None:
        endpoint = transport.local_endpoint
    elif leader_id is not None and addresses is not None:
        endpoint = addresses.get(leader_id)
    if ctx.header.api_key != ApiKey.UPDATE_RAFT_VOTER:
        return {"throttle_time": 0, "error_code": code, "error_message": message}
    return {
        "throttle_time": 0,
        "error_code": code,
        "current_leader": {
            "leader_id": leader_id if leader_id is not None else -1,
            "leader_epoch": controller.describe_quorum().epoch,
            "host": endpoint[0] if endpoint else "",
            "port": endpoint[1] if endpoint else -1,
        },
    }


@handler(ApiKey.REMOVE_RAFT_VOTER, 0, 0, forward=True)
async def handle_remove_raft_voter(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.ALTER)
    voter_id = int(request.voter_id)
    directory_id = directory_id_of(request.voter_directory_id)
    return await voter_change_answer(
        ctx,
        request,
        lambda controller: controller.remove_voter(
            voter_id, directory_id, timeout_s=REMOVE_TIMEOUT_S
        ),
    )
