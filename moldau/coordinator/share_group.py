"""A share group (KIP-932): members, the group epoch and each member's assignment.

Share groups have no exclusive ownership: any number of members may read a partition, the
records themselves being handed out by the partition leaders (`moldau.share`). So there is
nothing to revoke, and a member takes its target assignment on its next heartbeat. The group
epoch grows when membership, subscriptions or the subscribed topics' partitions change; the
target assignment is recomputed when it lags the group epoch. States, as Kafka names them for
share groups: Empty (no members), Stable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from moldau.coordinator.consumer_group import Assignment

SHARE_PROTOCOL_TYPE = "share"
SIMPLE_ASSIGNOR = "simple"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (name, id, partitions) of the subscribed topics last seen; None after loading (not stored)
    subscription_metadata: tuple[tuple[str, str, int], ...] | None = None
    state_timestamp_ms: int = -1

    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topic_names(self, known: Iterable[str] | None = None) -> set[str]:
        """Every member's subscribed topics (among `known`, when given)."""
        names = {name for member in self.members.values() for name in member.subscribed_topic_names}
        return names if known is None else names & set(known)
