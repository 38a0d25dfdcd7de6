"""The next state of one partition, as Kafka's PartitionChangeBuilder (KIP-631, KIP-704).

Every change of a partition's leader or ISR goes through `partition_change`: a broker fenced or
shutting down, a broker unfenced, AlterPartition, ElectLeaders and the leader rebalance. It
elects a leader in one of Kafka's three ways:

    PREFERRED  the first replica, if it is in the ISR and may lead; else as ONLINE, except that
               the other replicas are tried only when the current leader may not stay
    ONLINE     the current leader if it is in the ISR and may lead; else the first replica, in
               replica order, that is in the ISR and may lead; else no leader (-1)
    UNCLEAN    as ONLINE; then the first replica that may lead, in the ISR or not: the ISR
               becomes that replica alone and the leader RECOVERING (KIP-704)

Invariants of the result: the ISR is never empty (a target ISR without anyone leaves the ISR as
it is, so its last member stays, as Kafka's controller does without KIP-966's eligible leader
replicas); a leader is always in the ISR; the record carries only what changes, and there is no
record when nothing does. Leader and partition epochs are bumped by replaying the record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from enum import Enum

from moldau.metadata.image import NO_LEADER, PartitionImage
from moldau.metadata.records import LeaderRecoveryState, PartitionChangeRecord


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def partition_change(
    topic_id: uuid.UUID,
    partition: PartitionImage,
    *,
    may_lead: Callable[[int], bool],
    target_isr: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
    target_recovery_state: int | None = None,
) -> PartitionChangeRecord | None:
    """The record taking `partition` to its target ISR with the leader `election` picks among
    replicas that `may_lead`; None when nothing would change."""
    isr = tuple(partition.isr if target_isr is None else target_isr)
    leader, unclean = _elect(partition, isr, may_lead, election)
    new_leader: int | None = None
    new_isr: tuple[int, ...] | None = None
    recovery_state: int | None = None
    if leader != partition.leader:
        new_leader = leader
        if unclean:
            new_isr = (leader,)
            if partition.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                recovery_state = LeaderRecoveryState.RECOVERING
    if new_isr is None and isr and isr != partition.isr:
        new_isr = isr
    if (
        recovery_state is None
        and target_recovery_state is not None
        and target_recovery_state != partition.leader_recovery_state
    ):
        recovery_state = target_recovery_state
    if new_leader is None and new_isr is None and recovery_state is None:
        return None
    return PartitionChangeRecord(
        topic_id=topic_id,
        partition=partition.partition,
        leader=new_leader,
        isr=new_isr,
        leader_recovery_state=recovery_state,
    )


def _elect(
    partition: PartitionImage,
    isr: tuple[int, ...],
    may_lead: Callable[[int], bool],
    election: Election,
) -> tuple[int, bool]:
    """(leader, whether the election was unclean)."""

    def valid(replica: int) -> bool:
        return replica in isr and may_lead(replica)

    replicas = partition.replicas
    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(partition.leader):
        return partition.leader, False
    for replica in replicas:
        if valid(replica):
            return replica, False
    if election is Election.UNCLEAN:
        for replica in replicas:
            if may_lead(replica):
                return replica, True
    return NO_LEADER, False
