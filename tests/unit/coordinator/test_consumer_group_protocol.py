"""KIP-848 consumer groups: epochs, server-side assignment, incremental reconciliation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.consumer import ConsumerGroupHeartbeatRequest
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import Harness

TOPIC_ID = uuid.UUID(int=1)
TOPICS = {"t": TopicMetadata(TOPIC_ID, "t", 6)}


def heartbeat(harness: Harness, member_id: str, epoch: int, **fields: Any) -> dict[str, Any]:
    owned = fields.pop("owned", None)
    request = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 30_000),
        subscribed_topic_names=fields.pop("topics", ("t",) if epoch == 0 else None),
        owned_partitions=None if owned is None else {TOPIC_ID: frozenset(owned)},
        **fields,
    )
    result = harness.run(harness.coordinator.consumer_group_heartbeat(request, TOPICS))
    assert result.response is not None
    return result.response


def partitions(response: dict[str, Any]) -> set[int]:
    assignment = response["assignment"]
    assert assignment is not None
    return {p for entry in assignment["topic_partitions"] for p in entry["partitions"]}


def test_first_member_gets_every_partition() -> None:
    harness = Harness()
    joined = heartbeat(harness, "a", 0)
    assert joined["error_code"] == ErrorCode.none
    assert joined["member_epoch"] == 1
    assert partitions(joined) == set(range(6))


def test_second_member_waits_for_revocation_then_gets_half() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    second = heartbeat(harness, "b", 0)
    assert second["member_epoch"] == 2
    assert partitions(second) == set()  # still owned by a
    first = heartbeat(harness, "a", 1, owned=range(6))
    kept = partitions(first)
    assert len(kept) == 3 and first["member_epoch"] == 1  # revoke first, epoch later
    first = heartbeat(harness, "a", 1, owned=kept)
    assert first["member_epoch"] == 2
    second = heartbeat(harness, "b", 2, owned=[])
    assert partitions(second) == set(range(6)) - kept
    described = harness.coordinator.consumer_group_describe("g", {TOPIC_ID: "t"})
    assert described["group_state"] == "Stable"
    assert described["group_epoch"] == described["assignment_epoch"] == 2


def test_epoch_checks_fence_stale_and_unknown_members() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    assert heartbeat(harness, "a", 5)["error_code"] == ErrorCode.fenced_member_epoch
    assert heartbeat(harness, "ghost", 3)["error_code"] == ErrorCode.unknown_member_id


def test_leaving_member_frees_its_partitions() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    heartbeat(harness, "b", 0)
    heartbeat(harness, "a", 1, owned=range(6))
    left = heartbeat(harness, "a", -1)
    assert left["member_epoch"] == -1
    remaining = heartbeat(harness, "b", 2, owned=[])
    assert partitions(remaining) == set(range(6))


def test_session_timeout_removes_member() -> None:
    harness = Harness(group_consumer_session_timeout_ms=10_000)
    heartbeat(harness, "a", 0)
    heartbeat(harness, "b", 0)
    harness.advance(6_000)
    heartbeat(harness, "b", 2, owned=[])
    harness.advance(6_000)
    described = harness.coordinator.consumer_group_describe("g", {})
    assert [m["member_id"] for m in described["members"]] == ["b"]
    taken = heartbeat(harness, "b", 2, owned=[])
    assert partitions(taken) == set(range(6))


@pytest.mark.parametrize("jump_ms", [7_200_000, -7_200_000])
def test_session_timeouts_run_on_monotonic_time_not_the_wall_clock(jump_ms: int) -> None:
    harness = Harness(group_consumer_session_timeout_ms=10_000)
    heartbeat(harness, "a", 0)
    harness.jump_wall(jump_ms)  # neither expires the session nor pushes its deadline away
    described = harness.coordinator.consumer_group_describe("g", {})
    assert [m["member_id"] for m in described["members"]] == ["a"]
    harness.advance(10_001)
    assert harness.coordinator.consumer_group_describe("g", {})["members"] == []


def test_range_assignor_gives_contiguous_runs() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0, server_assignor="range")
    heartbeat(harness, "b", 0, server_assignor="range")
    first = heartbeat(harness, "a", 1, owned=range(6))
    assert partitions(first) == {0, 1, 2}


def test_unknown_assignor_is_refused() -> None:
    harness = Harness()
    assert heartbeat(harness, "a", 0, server_assignor="magic")["error_code"] == (
        ErrorCode.unsupported_assignor
    )


def test_consumer_group_state_survives_reload() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    harness.reload()
    described = harness.coordinator.consumer_group_describe("g", {TOPIC_ID: "t"})
    member = described["members"][0]
    assert (member["member_id"], member["member_epoch"]) == ("a", 1)
    assert member["assignment"]["topic_partitions"][0]["partitions"] == list(range(6))
    again = heartbeat(harness, "a", 1, owned=range(6))
    assert again["error_code"] == ErrorCode.none and again["assignment"] is None


def test_offset_commit_uses_member_epoch_in_consumer_groups() -> None:
    from moldau.coordinator.offsets import PartitionCommit

    harness = Harness()
    heartbeat(harness, "a", 0)

    def commit(epoch: int) -> Any:
        result = harness.coordinator.commit_offsets(
            group_id="g",
            generation_id=epoch,
            member_id="a",
            group_instance_id=None,
            commits=[PartitionCommit(topic="t", partition=0, offset=1)],
        )
        assert result.response is not None
        return result.response["topics"][0]["partitions"][0]["error_code"]

    assert commit(1) == ErrorCode.none
    assert commit(0) == ErrorCode.stale_member_epoch


def test_members_loaded_from_the_log_still_expire() -> None:
    harness = Harness(group_consumer_session_timeout_ms=10_000)
    heartbeat(harness, "a", 0)
    harness.reload()
    harness.advance(11_000)
    assert harness.coordinator.consumer_group_describe("g", {})["members"] == []


def test_new_partitions_of_a_subscribed_topic_are_assigned() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    grown = {"t": TopicMetadata(TOPIC_ID, "t", 8)}
    request = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="a",
        member_epoch=1,
        owned_partitions={TOPIC_ID: frozenset(range(6))},
    )
    result = harness.run(harness.coordinator.consumer_group_heartbeat(request, grown))
    assert result.response is not None
    assert result.response["member_epoch"] == 2
    assert partitions(result.response) == set(range(8))


def test_regex_subscription_matches_topic_names() -> None:
    harness = Harness()
    other = uuid.UUID(int=2)
    topics = {
        "orders-eu": TopicMetadata(TOPIC_ID, "orders-eu", 2),
        "orders-us": TopicMetadata(other, "orders-us", 1),
        "payments": TopicMetadata(uuid.UUID(int=3), "payments", 4),
    }
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="a", member_epoch=0, subscribed_topic_regex="orders-.*"
    )
    result = harness.run(harness.coordinator.consumer_group_heartbeat(request, topics))
    assert result.response is not None
    assignment = result.response["assignment"]["topic_partitions"]
    assert {(e["topic_id"], tuple(e["partitions"])) for e in assignment} == {
        (TOPIC_ID, (0, 1)),
        (other, (0,)),
    }
    bad = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="b", member_epoch=0, subscribed_topic_regex="("
    )
    refused = harness.coordinator.consumer_group_heartbeat(bad, topics).response
    assert refused is not None
    assert refused["error_code"] == ErrorCode.invalid_regular_expression
