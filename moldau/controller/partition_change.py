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

A reassignment (KIP-455) gives target `replicas` with `adding`/`removing` replicas; every change
of a partition under reassignment also tries to complete it, as Kafka's tryCompleteReassignment:
once every target replica (the replicas less the removing ones) is in the (target) ISR, the
replicas become the target and the removing ones drop out of the ISR; the leader is then
elected over the new replicas (a leader that left gives way to the first target replica in the
ISR). A target replica out of the ISR (fenced, lagging) holds the reassignment until it is back,
or the reassignment is cancelled.

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
    target_replicas: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
) -> PartitionChangeRecord | None:
    """The record taking `partition` to its target ISR (and replicas) with the leader
    `election` picks among replicas that `may_lead`; None when nothing would change."""
    isr = tuple(partition.isr if target_isr is None else target_isr)
    replicas = tuple(partition.replicas if target_replicas is None else target_replicas)
    adding = tuple(partition.adding_replicas if target_adding is None else target_adding)
    removing = tuple(partition.removing_replicas if target_removing is None else target_removing)
    if adding or removing:
        completed = _complete_reassignment(replicas, isr, removing)
        if completed is not None:
            replicas, isr = completed
            adding = removing = ()
    leader, unclean = _elect(partition, replicas, isr, may_lead, election)
    new_leader: int | None = None
    new_isr: tuple[int, ...] | None = None
    recovery_state: int | None = None
    if leader != partition.leader:
        new_leader = leader
        if unclean:
            new_isr = (leader,)
            if partition.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                recovery_state = LeaderRecoveryState.RECOVERING
            if adding or removing:  # (the leader alone in the ISR may complete it now)
                completed = _complete_reassignment(replicas, new_isr, removing)
                if completed is not None:
                    replicas = completed[0]
                    adding = removing = ()
    if new_isr is None and isr and isr != partition.isr:
        new_isr = isr
    if (
        recovery_state is None
        and target_recovery_state is not None
        and target_recovery_state != partition.leader_recovery_state
    ):
        recovery_state = target_recovery_state
    record = PartitionChangeRecord(
        topic_id=topic_id,
        partition=partition.partition,
        leader=new_leader,
        isr=new_isr,
        leader_recovery_state=recovery_state,
        replicas=replicas if replicas != partition.replicas else None,
        adding_replicas=adding if adding != partition.adding_replicas else None,
        removing_replicas=removing if removing != partition.removing_replicas else None,
    )
    if record == PartitionChangeRecord(topic_id=topic_id, partition=partition.partition):
        return None
    return record


def _complete_reassignment(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    removing: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) once the reassignment is complete: every target replica (the adding
    ones among them) in the ISR; None while it is not."""
    new_replicas = tuple(replica for replica in replicas if replica not in removing)
    new_isr = tuple(replica for replica in isr if replica not in removing)
    if not new_replicas or not new_isr or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def _elect(
    partition: PartitionImage,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    may_lead: Callable[[int], bool],
    election: Election,
) -> tuple[int, bool]:
    """(leader, whether the election was unclean) among `replicas`, the partition's next."""

    def valid(replica: int) -> bool:
        return replica in isr and replica in replicas and may_lead(replica)

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
