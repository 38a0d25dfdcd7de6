"""Server-side partition assignors of KIP-848 consumer groups: `uniform` and `range`.

`uniform` keeps each member's previous target where it can (sticky) and balances the rest, so
every member ends within one partition of every other member that could take the same partitions.
`range` gives each subscribed member a contiguous run of every topic's partitions, co-partitioned
across topics. Both are deterministic: members are visited in member-id order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.coordinator.consumer_group import Assignment

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    topic_ids: frozenset[uuid.UUID]
    previous: Assignment


Assignor = Callable[
    [list[MemberSubscription], Mapping[uuid.UUID, TopicMetadata]], dict[str, Assignment]
]


def _to_assignment(partitions: set[TopicPartition]) -> Assignment:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        result.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(values) for topic_id, values in result.items()}


def assign_uniform(
    members: list[MemberSubscription], topics: Mapping[uuid.UUID, TopicMetadata]
) -> dict[str, Assignment]:
    ordered = sorted(members, key=lambda m: m.member_id)
    owned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in ordered}
    subscribed = {m.member_id: m.topic_ids for m in ordered}
    taken: set[TopicPartition] = set()
    all_partitions = sorted(
        (topic_id, partition)
        for topic_id in {t for m in ordered for t in m.topic_ids if t in topics}
        for partition in range(topics[topic_id].num_partitions)
    )
    fair_share = -(-len(all_partitions) // max(len(ordered), 1))
    for member in ordered:  # sticky: keep the previous target, up to a fair share
        for topic_id, partitions in sorted(member.previous.items(), key=lambda i: i[0].bytes):
            if topic_id not in member.topic_ids or topic_id not in topics:
                continue
            for partition in sorted(partitions):
                where = (topic_id, partition)
                if (
                    partition < topics[topic_id].num_partitions
                    and where not in taken
                    and len(owned[member.member_id]) < fair_share
                ):
                    owned[member.member_id].add(where)
                    taken.add(where)
    for where in all_partitions:
        if where in taken:
            continue
        eligible = [m.member_id for m in ordered if where[0] in subscribed[m.member_id]]
        if eligible:
            chosen = min(eligible, key=lambda member_id: (len(owned[member_id]), member_id))
            owned[chosen].add(where)
            taken.add(where)
    _balance(owned, subscribed)
    return {member_id: _to_assignment(partitions) for member_id, partitions in owned.items()}


def _balance(
    owned: dict[str, set[TopicPartition]], subscribed: dict[str, frozenset[uuid.UUID]]
) -> None:
    """Move partitions from the most to the least loaded member that can take them."""
    while True:
        by_load = sorted(owned, key=lambda member_id: (len(owned[member_id]), member_id))
        moved = False
        for giver in reversed(by_load):
            for taker in by_load:
                if len(owned[giver]) <= len(owned[taker]) + 1:
                    break
                movable = sorted(p for p in owned[giver] if p[0] in subscribed[taker])
                if movable:
                    where = movable[-1]
                    owned[giver].remove(where)
                    owned[taker].add(where)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def assign_range(
    members: list[MemberSubscription], topics: Mapping[uuid.UUID, TopicMetadata]
) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in members}
    for topic_id in sorted(
        {t for m in members for t in m.topic_ids if t in topics}, key=lambda t: t.bytes
    ):
        subscribers = sorted(m.member_id for m in members if topic_id in m.topic_ids)
        count = topics[topic_id].num_partitions
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            size = quota + (1 if index < extra else 0)
            owned[member_id].update((topic_id, p) for p in range(start, start + size))
            start += size
    return {member_id: _to_assignment(partitions) for member_id, partitions in owned.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": assign_uniform, "range": assign_range}
DEFAULT_ASSIGNOR = "uniform"
