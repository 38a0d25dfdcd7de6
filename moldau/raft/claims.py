"""What a message says of the quorum (its epoch, its leader, its cluster), checked before
anything changes and then believed or refused: Kafka's KafkaRaftClient `maybeTransition`,
`maybeHandleCommonResponse` and `hasValidClusterId`. Elections and fetching (`voting.py`,
`replication.py`) call these with the node's `QuorumState`.

A claim that cannot be true is answered INVALID_REQUEST (or INCONSISTENT_CLUSTER_ID) with a
`Refused` action naming the sender, never a failure of the node.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.raft.epoch_states import Role
from moldau.raft.events import RaftAction, Refused
from moldau.raft.quorum import LAST_EPOCH, QuorumState

__all__ = ["cluster_id_error", "learn", "learned_from_response", "refuse"]


def learn(
    quorum: QuorumState,
    leader_id: int | None,
    epoch: int,
    now: float,
    actions: list[RaftAction],
    *,
    source_id: int,
    from_leader: bool = False,
) -> ErrorCode | None:
    """Move to what a message says of the quorum, if it is news (Kafka's maybeTransition);
    `from_leader`: the leader itself said so, which outranks a leader this node has not
    heard from. A claim that contradicts what this node knows of its epoch (another
    leader of an epoch it leads, or of one whose leader it has heard from), or an epoch
    no election could follow, changes nothing: it is refused with INVALID_REQUEST (where
    Kafka's node fails on an IllegalStateException), and `source_id` is named in the
    `Refused` action."""
    if epoch >= LAST_EPOCH:
        return refuse(source_id, "epoch", f"epoch {epoch} leaves no room for an election", actions)
    if epoch < quorum.epoch or leader_id == quorum.node_id:
        return None
    if epoch > quorum.epoch:
        if leader_id is not None:
            quorum.become_follower(epoch, leader_id, now, actions)
        else:
            quorum.become_unattached(epoch, now, actions)
        return None
    known = quorum.leader_id
    if leader_id is None or leader_id == known:
        if quorum.role is not Role.FOLLOWER and leader_id is not None and from_leader:
            quorum.become_follower(epoch, leader_id, now, actions)
        return None
    if known is None:
        if quorum.role is not Role.FOLLOWER:
            quorum.become_follower(epoch, leader_id, now, actions)
        return None
    if known != quorum.node_id and from_leader and not quorum.leader_confirmed:
        # The leader this node named for the epoch never answered it as leader (a message
        # that named it may have lied); the one that says it leads is followed. Its
        # fetch answers confirm it, and from then on no other claim is believed.
        quorum.become_follower(epoch, leader_id, now, actions)
        return None
    holder = "this node" if known == quorum.node_id else f"node {known}"
    return refuse(
        source_id,
        "leader",
        f"node {leader_id} named as leader of epoch {epoch}, which {holder} leads",
        actions,
    )


def refuse(source_id: int, kind: str, reason: str, actions: list[RaftAction]) -> ErrorCode:
    """A message said what cannot be true: INVALID_REQUEST, and a `Refused` to log."""
    actions.append(Refused(source_id=source_id, kind=kind, reason=reason))
    return ErrorCode.invalid_request


def learned_from_response(
    quorum: QuorumState,
    source_id: int,
    leader_id: int | None,
    epoch: int,
    now: float,
    actions: list[RaftAction],
) -> bool:
    """True when the response is stale or taught us a new epoch or leader: it has nothing
    more to say (Kafka's maybeHandleCommonResponse). When this node names a leader of its
    epoch it has not heard from (the message that named it may have lied), a node it asked
    that answers as the epoch's leader itself is believed (what others say of the leader
    is not: they may have been lied to as well, and believing them can go round in a
    circle of followers that never stand)."""
    if epoch < quorum.epoch:
        return True
    corrected = (
        epoch == quorum.epoch
        and quorum.role in (Role.FOLLOWER, Role.PROSPECTIVE)
        and not quorum.leader_confirmed
        and quorum.leader_id not in (None, quorum.node_id)
        and leader_id not in (None, quorum.leader_id)
        and source_id == leader_id
    )
    if epoch > quorum.epoch or (leader_id is not None and quorum.leader_id is None) or corrected:
        learn(quorum, leader_id, epoch, now, actions, source_id=source_id, from_leader=corrected)
        return True
    return False


def cluster_id_error(
    quorum: QuorumState, source_id: int, cluster_id: str | None, actions: list[RaftAction]
) -> ErrorCode | None:
    """INCONSISTENT_CLUSTER_ID for a request of another cluster. A request without one
    (null: Fetch before v12 cannot carry it, the others may leave it out) is taken, as
    Kafka's hasValidClusterId takes it; an empty one is another cluster's."""
    if cluster_id is None or quorum.cluster_id is None or cluster_id == quorum.cluster_id:
        return None
    actions.append(
        Refused(
            source_id=source_id,
            kind="cluster-id",
            reason=f"node {source_id} is of cluster {cluster_id!r}, not {quorum.cluster_id!r}",
        )
    )
    return ErrorCode.inconsistent_cluster_id
