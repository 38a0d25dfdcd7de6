"""Server-side assignors: balance, stickiness, heterogeneous subscriptions."""

from __future__ import annotations

import uuid

from moldau.coordinator.assignors import (
    MemberSubscription,
    TopicMetadata,
    assign_range,
    assign_uniform,
)

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {A: TopicMetadata(A, "a", 7), B: TopicMetadata(B, "b", 2)}


def counts(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {member: sum(len(p) for p in parts.values()) for member, parts in assignment.items()}


def test_uniform_balances_within_one_and_assigns_everything() -> None:
    members = [MemberSubscription(f"m{i}", frozenset({A, B}), {}) for i in range(4)]
    result = assign_uniform(members, TOPICS)
    assert sorted(counts(result).values()) == [2, 2, 2, 3]
    assigned = [(t, p) for parts in result.values() for t, ps in parts.items() for p in ps]
    assert len(assigned) == len(set(assigned)) == 9


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = assign_uniform([MemberSubscription("m0", frozenset({A}), {})], TOPICS)
    members = [
        MemberSubscription("m0", frozenset({A}), before["m0"]),
        MemberSubscription("m1", frozenset({A}), {}),
    ]
    after = assign_uniform(members, TOPICS)
    assert after["m0"][A] <= before["m0"][A]
    assert sorted(counts(after).values()) == [3, 4]


def test_uniform_respects_heterogeneous_subscriptions() -> None:
    members = [
        MemberSubscription("m0", frozenset({A}), {}),
        MemberSubscription("m1", frozenset({B}), {}),
    ]
    result = assign_uniform(members, TOPICS)
    assert result["m0"] == {A: frozenset(range(7))}
    assert result["m1"] == {B: frozenset(range(2))}


def test_range_gives_leading_members_the_extra_partition() -> None:
    members = [MemberSubscription(f"m{i}", frozenset({A}), {}) for i in range(3)]
    result = assign_range(members, TOPICS)
    assert result["m0"][A] == frozenset({0, 1, 2})
    assert result["m1"][A] == frozenset({3, 4})
    assert result["m2"][A] == frozenset({5, 6})
