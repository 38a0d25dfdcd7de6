"""AddRaftVoter (key 80), v0-1: make a controller that follows the metadata log a voter
(KIP-853; `kafka-metadata-quorum add-controller`).

Served on controller listeners (`--bootstrap-controller`) and on broker listeners, which pass it
on to the active controller. The quorum's leader appends the new voter set and answers once it
is committed (v1's `ack_when_committed` false answers once it is appended). It refuses with
DUPLICATE_VOTER, INVALID_REQUEST (no directory id, or not the one the observer fetches with),
REQUEST_TIMED_OUT (the controller has not caught up with the log, or another voter change is
not committed yet), UNSUPPORTED_VERSION (static voters) and NOT_LEADER_OR_FOLLOWER elsewhere.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.remove_raft_voter import voter_change_answer
from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.raft.voter_set import Endpoint, VoterNode, directory_id_of


def voter_of(request: Any) -> VoterNode:
    """The voter a request names, with the listeners it gives."""
    return VoterNode(
        node_id=int(request.voter_id),
        directory_id=directory_id_of(request.voter_directory_id),
        endpoints=tuple(
            Endpoint(name=str(listener.name), host=str(listener.host), port=int(listener.port))
            for listener in request.listeners
        ),
    )


@handler(ApiKey.ADD_RAFT_VOTER, 0, 1, forward=True)
async def handle_add_raft_voter(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.ALTER)
    timeout_s: float | None = max(millis(request.timeout), 1) / 1000
    if not getattr(request, "ack_when_committed", True):
        timeout_s = None  # answer once the leader has appended the change
    return await voter_change_answer(
        ctx,
        request,
        lambda controller: controller.add_voter(voter_of(request), timeout_s=timeout_s),
    )
