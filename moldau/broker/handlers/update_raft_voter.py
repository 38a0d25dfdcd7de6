"""UpdateRaftVoter (key 82), v0: a voter tells the quorum's leader its current endpoints
(KIP-853); the leader writes them into the voter set when they changed, and answers with
itself as the current leader. Served on controller listeners only (voters send it to the
leader). Errors as RemoveRaftVoter's.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_raft_voter import voter_of
from moldau.broker.handlers.remove_raft_voter import REMOVE_TIMEOUT_S, voter_change_answer
from moldau.broker.registry import CONTROLLER, RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey


@handler(ApiKey.UPDATE_RAFT_VOTER, 0, 0, scopes=(CONTROLLER,))
async def handle_update_raft_voter(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    voter = voter_of(request)
    return await voter_change_answer(
        ctx,
        request,
        lambda controller: controller.update_voter(voter, timeout_s=REMOVE_TIMEOUT_S),
    )
