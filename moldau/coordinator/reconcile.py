"""One step of a KIP-848 member towards its target assignment (Kafka's CurrentAssignmentBuilder).

A member that holds partitions its target gives away must first revoke them: it keeps its epoch
and goes to UNREVOKED_PARTITIONS until a heartbeat shows it no longer owns them. Then it takes
the target epoch and every target partition no other member still holds; partitions still held
elsewhere leave it in UNRELEASED_PARTITIONS until they are freed, after which it is STABLE.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.coordinator.consumer_group import Assignment, ConsumerMember, MemberState


def without(assignment: Assignment, removed: Assignment) -> Assignment:
    result = {}
    for topic_id, partitions in assignment.items():
        left = partitions - removed.get(topic_id, frozenset())
        if left:
            result[topic_id] = left
    return result


def intersect(first: Assignment, second: Assignment) -> Assignment:
    result = {}
    for topic_id, partitions in first.items():
        both = partitions & second.get(topic_id, frozenset())
        if both:
            result[topic_id] = both
    return result


def normalized(assignment: Assignment) -> Assignment:
    return {topic_id: partitions for topic_id, partitions in assignment.items() if partitions}


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """The member's next current assignment, as stored in its CurrentMemberAssignment record."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def next_assignment(
    member: ConsumerMember,
    *,
    target: Assignment,
    target_epoch: int,
    owned: Assignment | None,
    owners: Mapping[tuple[uuid.UUID, int], str],
) -> MemberAssignment | None:
    """The member's next step, or None if it stays as it is.

    `owned` is what the member reported holding (None if it did not say); `owners` maps every
    partition held in the group (assigned or pending revocation) to its member.
    """
    target = normalized(target)
    assigned = normalized(member.assigned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or intersect(owned, member.pending_revocation):
            return None  # still revoking
    elif member.member_epoch == target_epoch and member.state == MemberState.STABLE:
        return None
    revoke = without(assigned, target)
    if revoke:
        return MemberAssignment(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=intersect(assigned, target),
            pending_revocation=revoke,
        )
    free: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id, partitions in target.items():
        for partition in partitions:
            owner = owners.get((topic_id, partition))
            if owner is None or owner == member.member_id:
                free.setdefault(topic_id, set()).add(partition)
            else:
                unreleased = True
    new_assigned = {topic_id: frozenset(parts) for topic_id, parts in free.items()}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    if (
        new_assigned == assigned
        and member.member_epoch == target_epoch
        and member.state == state
        and not member.pending_revocation
    ):
        return None
    return MemberAssignment(
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        state=state,
        assigned=new_assigned,
        pending_revocation={},
    )
