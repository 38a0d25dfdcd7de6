"""A classic (JoinGroup/SyncGroup) group and its members, as Kafka's ClassicGroup keeps them.

States and the transitions the coordinator makes between them:

    Empty               -> PreparingRebalance (a member joins), Dead (deleted, offsets expired)
    PreparingRebalance  -> CompletingRebalance (every member rejoined, or the rebalance timed out
                           with some members left), Empty (no member left), Dead
    CompletingRebalance -> Stable (the leader's SyncGroup), PreparingRebalance (a member joined,
                           left or timed out, or the leader did not sync in time), Dead
    Stable              -> PreparingRebalance (membership or subscription changed), Dead
    Dead                -> nothing (the group object is dropped)

Invariants: `generation` only grows; every member of a CompletingRebalance or Stable group took
part in that generation's JoinGroup; `leader_id` is a member whenever members exist; a static
member's instance id maps to exactly one member id (`static_members`).
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field

from moldau.coordinator.result import Responder


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset(
        {ClassicGroupState.PREPARING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {
            ClassicGroupState.EMPTY,
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.PREPARING_REBALANCE,
        }
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    awaiting_join: Responder | None = None
    awaiting_sync: Responder | None = None
    is_new: bool = False  # joined during the current rebalance; removed early if it vanishes

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    state_timestamp_ms: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # answered MEMBER_ID_REQUIRED
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # While a new group waits for more members (group.initial.rebalance.delay.ms).
    in_initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def add_member(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_member_id: str, new_id: str) -> None:
        member = self.members.pop(old_member_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_member_id:
            self.leader_id = new_id

    def all_members_joined(self) -> bool:
        waiting = sum(1 for member in self.members.values() if member.awaiting_join is not None)
        return waiting == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocol_names())
        for member in members[1:]:
            candidates &= set(member.protocol_names())
        return candidates

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if not protocol_type or not protocol_names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(protocol_names)
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        order: list[str] = []
        for member in self.members.values():
            for name in member.protocol_names():
                if name in candidates:
                    votes[name] += 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics of the members' consumer subscriptions; None if not a consumer group."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            topics |= parse_subscription_topics(member.metadata_for(self.protocol_name))
        return topics


def parse_subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (int16 version, [int16-length string])."""
    try:
        count = struct.unpack_from(">i", metadata, 2)[0]
        position = 6
        topics = set()
        for _ in range(count):
            length = struct.unpack_from(">h", metadata, position)[0]
            position += 2
            topics.add(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
