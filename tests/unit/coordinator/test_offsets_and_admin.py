"""OffsetCommit/OffsetFetch/OffsetDelete, retention, DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from typing import Any

from moldau.coordinator.coordinator import GroupCoordinator
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.store import CommittedOffset
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import Harness


def commit(
    harness: Harness,
    group_id: str,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    metadata: str = "",
) -> dict[tuple[str, int], Any]:
    result = harness.run(
        harness.coordinator.commit_offsets(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            commits=[
                PartitionCommit(topic=t, partition=p, offset=o, metadata=metadata)
                for (t, p), o in offsets.items()
            ],
        )
    )
    assert result.response is not None
    return {
        (topic["name"], partition["partition_index"]): partition["error_code"]
        for topic in result.response["topics"]
        for partition in topic["partitions"]
    }


def fetched(harness: Harness, group_id: str, topics: Any = None) -> dict[tuple[str, int], int]:
    answer = harness.coordinator.fetch_offsets(group_id=group_id, topics=topics)
    assert answer["error_code"] == ErrorCode.none
    return {
        (topic["name"], partition["partition_index"]): partition["committed_offset"]
        for topic in answer["topics"]
        for partition in topic["partitions"]
    }


def stable_member(harness: Harness, group_id: str) -> str:
    joined = harness.join_with_id(group_id).response
    harness.sync(group_id, joined["member_id"], joined["generation_id"])
    return str(joined["member_id"])


def test_simple_consumer_commits_without_membership_and_fetches_back() -> None:
    harness = Harness()
    codes = commit(harness, "simple", {("t", 0): 5, ("t", 1): 7})
    assert set(codes.values()) == {ErrorCode.none}
    assert fetched(harness, "simple", [("t", [0, 1, 2])]) == {
        ("t", 0): 5,
        ("t", 1): 7,
        ("t", 2): -1,
    }
    assert fetched(harness, "simple") == {("t", 0): 5, ("t", 1): 7}


def test_fetch_for_unknown_group_answers_minus_one_without_error() -> None:
    harness = Harness()
    assert fetched(harness, "nobody", [("t", [0])]) == {("t", 0): -1}
    assert fetched(harness, "nobody") == {}


def test_commit_checks_generation_and_member() -> None:
    harness = Harness()
    member_id = stable_member(harness, "g")
    ok = commit(harness, "g", {("t", 0): 1}, generation=1, member_id=member_id)
    assert ok[("t", 0)] == ErrorCode.none
    stale = commit(harness, "g", {("t", 0): 2}, generation=0, member_id=member_id)
    assert stale[("t", 0)] == ErrorCode.illegal_generation
    stranger = commit(harness, "g", {("t", 0): 3}, generation=1, member_id="stranger")
    assert stranger[("t", 0)] == ErrorCode.unknown_member_id
    simple = commit(harness, "g", {("t", 0): 4})
    assert simple[("t", 0)] == ErrorCode.unknown_member_id  # the group has members
    assert fetched(harness, "g", [("t", [0])]) == {("t", 0): 1}


def test_oversized_metadata_is_refused_per_partition() -> None:
    harness = Harness(offset_metadata_max_bytes=4)
    codes = commit(harness, "g", {("t", 0): 1}, metadata="too long")
    assert codes[("t", 0)] == ErrorCode.offset_metadata_too_large
    assert fetched(harness, "g", [("t", [0])]) == {("t", 0): -1}


def test_offsets_and_metadata_survive_reload() -> None:
    harness = Harness()
    commit(harness, "g", {("t", 0): 11}, metadata="m")
    fresh = harness.reload()
    answer = fresh.fetch_offsets(group_id="g", topics=[("t", [0])])
    partition = answer["topics"][0]["partitions"][0]
    assert (partition["committed_offset"], partition["metadata"]) == (11, "m")


def test_empty_group_offsets_expire_after_retention() -> None:
    harness = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1_000)
    commit(harness, "g", {("t", 0): 1})
    harness.advance(30_000)
    assert fetched(harness, "g") == {("t", 0): 1}
    harness.advance(31_000)
    assert fetched(harness, "g") == {}
    assert harness.coordinator.list_groups()["groups"] == []
    harness.reload()
    assert fetched(harness, "g") == {}


def test_offset_delete_refuses_subscribed_topics() -> None:
    harness = Harness()
    member_id = stable_member(harness, "g")
    commit(harness, "g", {("t", 0): 1, ("other", 0): 2}, generation=1, member_id=member_id)
    result = harness.run(
        harness.coordinator.delete_offsets(group_id="g", topics=[("t", [0]), ("other", [0])])
    )
    assert result.response is not None
    codes = {
        topic["name"]: topic["partitions"][0]["error_code"] for topic in result.response["topics"]
    }
    assert codes == {"t": ErrorCode.group_subscribed_to_topic, "other": ErrorCode.none}
    assert fetched(harness, "g") == {("t", 0): 1}
    missing = harness.coordinator.delete_offsets(group_id="nope", topics=[("t", [0])])
    assert missing.response is not None
    assert missing.response["error_code"] == ErrorCode.group_id_not_found


def test_delete_groups_needs_empty_group_and_drops_offsets() -> None:
    harness = Harness()
    member_id = stable_member(harness, "busy")
    commit(harness, "idle", {("t", 0): 3})
    result = harness.run(harness.coordinator.delete_groups(["busy", "idle", "ghost"]))
    assert result.response is not None
    assert [r["error_code"] for r in result.response["results"]] == [
        ErrorCode.non_empty_group,
        ErrorCode.none,
        ErrorCode.group_id_not_found,
    ]
    assert fetched(harness, "idle") == {}
    harness.reload()
    assert [g["group_id"] for g in harness.coordinator.list_groups()["groups"]] == ["busy"]
    assert member_id


def test_list_groups_filters_by_state_and_type() -> None:
    harness = Harness()
    stable_member(harness, "active")
    commit(harness, "parked", {("t", 0): 1})
    everything = harness.coordinator.list_groups()["groups"]
    assert {(g["group_id"], g["group_state"], g["group_type"]) for g in everything} == {
        ("active", "Stable", "classic"),
        ("parked", "Empty", "classic"),
    }
    only_empty = harness.coordinator.list_groups(states_filter=["empty"])["groups"]
    assert [g["group_id"] for g in only_empty] == ["parked"]
    assert harness.coordinator.list_groups(types_filter=["consumer"])["groups"] == []


def test_describe_unknown_group_is_dead_with_group_id_not_found() -> None:
    harness = Harness()
    described = harness.coordinator.describe_group("ghost")
    assert (described["group_state"], described["error_code"]) == (
        "Dead",
        ErrorCode.group_id_not_found,
    )


def test_simple_group_offsets_age_from_their_commit_even_after_reload() -> None:
    harness = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1_000)
    commit(harness, "simple", {("t", 0): 1})
    harness.advance(40_000)
    harness.reload()  # loading must not restart the retention period
    harness.advance(21_000)
    assert fetched(harness, "simple") == {}


def test_deleted_topics_lose_their_offsets_and_groups_left_with_none_are_deleted() -> None:
    harness = Harness()
    commit(harness, "only-gone", {("gone", 0): 5, ("gone", 1): 6})
    commit(harness, "mixed", {("gone", 0): 1, ("kept", 0): 2})
    member = stable_member(harness, "active")
    commit(harness, "active", {("gone", 0): 3}, generation=1, member_id=member)
    harness.run(harness.coordinator.on_topics_deleted({"gone"}))
    for _ in ("now", "after a reload from the log"):
        groups = {g["group_id"] for g in harness.coordinator.list_groups()["groups"]}
        assert groups == {"mixed", "active"}  # "active" has a member: kept, without offsets
        assert fetched(harness, "mixed") == {("kept", 0): 2}
        assert fetched(harness, "active") == {}
        harness.reload()


def test_committed_offsets_list_every_group_partition_and_none_while_loading() -> None:
    harness = Harness()
    commit(harness, "a", {("t", 0): 5, ("t", 1): 7})
    commit(harness, "b", {("u", 0): 1})
    commit(harness, "a", {("t", 0): 6})
    assert sorted(harness.coordinator.committed_offsets()) == [
        CommittedOffset("a", "t", 0, 6),
        CommittedOffset("a", "t", 1, 7),
        CommittedOffset("b", "u", 0, 1),
    ]
    loading = GroupCoordinator(harness.config, harness.clock)  # (not loaded yet)
    assert list(loading.committed_offsets()) == []
