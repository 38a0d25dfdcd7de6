"""A read-only view of the quorum for DescribeQuorum (KIP-595, KIP-836): leader, epoch, high
watermark, and each voter's and observer's progress as the leader knows it.

Times are the node's monotonic clock in seconds (the `now` of its steps); the handler turns
them into wall-clock milliseconds. -1 / None: unknown, as Kafka reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.epoch_states import Role
from moldau.raft.voter_set import VoterNode


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaState:
    """One replica's progress (DescribeQuorum's ReplicaState)."""

    replica_id: int
    log_end_offset: int
    last_fetch_time: float | None = None
    last_caught_up_time: float | None = None
    directory_id: str | None = None  # KIP-853; None with static voters

    @property
    def voter_id(self) -> int:
        """The name the DescribeQuorum handler reads for a voter."""
        return self.replica_id


VoterState = ReplicaState


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumDescription:
    node_id: int
    role: Role
    leader_id: int | None
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()
    voter_nodes: tuple[VoterNode, ...] = ()  # the voters with their endpoints
    kraft_version: int = 0
