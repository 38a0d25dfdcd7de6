"""A KIP-848 consumer group: group epoch, target assignment and each member's current assignment.

The group epoch grows when membership or subscriptions change; the target assignment is
recomputed (by a server-side assignor) when it lags the group epoch; each member then converges
on its target through its heartbeats, one step at a time (see `reconcile.py`). State for
DescribeGroups/ListGroups: Empty (no members), Assigning (target epoch < group epoch),
Reconciling (some member has not reached the target epoch), Stable.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

Assignment = dict[uuid.UUID, frozenset[int]]


def wire_assignment(assignment: Assignment) -> dict[str, Any]:
    """An assignment as a heartbeat answer carries it (KIP-848 and KIP-932 alike)."""
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "partitions": sorted(partitions)}
            for topic_id, partitions in sorted(assignment.items(), key=lambda i: i[0].bytes)
            if partitions
        ]
    }


def described_assignment(
    assignment: Assignment, topic_names: Mapping[uuid.UUID, str]
) -> dict[str, Any]:
    """An assignment as a describe answer carries it: with the topics' names."""
    return {
        "topic_partitions": [
            {
                "topic_id": topic_id,
                "topic_name": topic_names.get(topic_id, ""),
                "partitions": sorted(partitions),
            }
            for topic_id, partitions in sorted(assignment.items(), key=lambda i: i[0].bytes)
        ]
    }


class MemberState(enum.IntEnum):
    """Values as stored in ConsumerGroupCurrentMemberAssignmentValue.State."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3
    UNKNOWN = 127


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def topics_in(self, known: Iterable[str]) -> set[str]:
        """The subscribed topics among `known`: named ones, and those the regex matches."""
        names = set(self.subscribed_topic_names)
        pattern = compiled_regex(self.subscribed_topic_regex)
        if pattern is not None:
            names.update(name for name in known if pattern.fullmatch(name))
        return names


@cache
def compiled_regex(regex: str | None) -> re.Pattern[str] | None:
    """A subscription regex (Kafka uses RE2/J; Python's syntax covers the common cases)."""
    if not regex:
        return None
    try:
        return re.compile(regex)
    except re.error:
        return None


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (name, id, partitions) of the subscribed topics last seen; None after loading (not stored)
    subscription_metadata: tuple[tuple[str, str, int], ...] | None = None
    state_timestamp_ms: int = -1
    assignor_name: str = "uniform"

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def member_by_instance(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Who holds each partition now: assigned, or still to be revoked."""
        owned: dict[tuple[uuid.UUID, int], str] = {}
        for member in self.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for partition in partitions:
                        owned[(topic_id, partition)] = member.member_id
        return owned

    def subscribed_topic_names(self, known: Iterable[str] = ()) -> set[str]:
        """Every member's subscribed topics; regexes are matched against `known` names."""
        candidates = list(known)
        names: set[str] = set()
        for member in self.members.values():
            names |= member.topics_in(candidates)
        return names
