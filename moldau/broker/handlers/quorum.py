"""The metadata quorum's RPCs on the controller listener (KIP-595, KIP-630): Vote (52) v0-2,
BeginQuorumEpoch (53) v0-1, EndQuorumEpoch (54) v0-1, FetchSnapshot (59) v0-1, and Fetch (1)
of `__cluster_metadata-0` v4-17.

Each request is handed to this node's Raft driver (`QuorumTransport.handle`) and answered with
what the core sends back. Vote v1 and BeginQuorumEpoch/EndQuorumEpoch v1 add directory ids and
endpoints (KIP-853), which Moldau leaves empty (static voters); Vote v2 adds pre-vote (KIP-996);
Fetch v15 moves the replica id into ReplicaState; a Fetch before v12 carries no last fetched
epoch and is refused (INVALID_REQUEST), as Kafka's leader refuses it. What the core refuses and
why: `moldau/raft/README.md`, "Messages that lie".
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import CONTROLLER, RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


async def _answer(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    transport = ctx.node.quorum_transport
    if transport is None:
        raise KafkaError(ErrorCode.invalid_request, "this node takes no part in a quorum")
    answer: dict[str, Any] = await transport.handle(ctx.header.api_key, request)
    return answer


@handler(ApiKey.VOTE, 0, 2, scopes=(CONTROLLER,))
async def handle_vote(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _answer(ctx, request)


@handler(ApiKey.BEGIN_QUORUM_EPOCH, 0, 1, scopes=(CONTROLLER,))
async def handle_begin_quorum_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _answer(ctx, request)


@handler(ApiKey.END_QUORUM_EPOCH, 0, 1, scopes=(CONTROLLER,))
async def handle_end_quorum_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _answer(ctx, request)


@handler(ApiKey.FETCH_SNAPSHOT, 0, 1, scopes=(CONTROLLER,))
async def handle_fetch_snapshot(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _answer(ctx, request)


@handler(ApiKey.FETCH, 4, 18, scopes=(CONTROLLER,))
async def handle_metadata_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _answer(ctx, request)
