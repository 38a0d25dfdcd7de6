"""The classic group protocol, driven by a manual clock."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import Harness, subscription


def test_first_join_without_member_id_answers_member_id_required() -> None:
    harness = Harness()
    first = harness.join("g")
    assert first.response["error_code"] == ErrorCode.member_id_required
    assert first.response["member_id"].startswith("client-")


def test_single_member_becomes_leader_and_syncs_its_assignment() -> None:
    harness = Harness()
    joined = harness.join_with_id("g").response
    assert joined["error_code"] == ErrorCode.none
    assert joined["generation_id"] == 1
    assert joined["leader"] == joined["member_id"]
    assert joined["protocol_name"] == "range"
    assert [m["member_id"] for m in joined["members"]] == [joined["member_id"]]
    synced = harness.sync("g", joined["member_id"], 1, {joined["member_id"]: b"A"})
    assert synced.response == {
        "error_code": ErrorCode.none,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignment": b"A",
    }
    assert harness.coordinator.describe_group("g")["group_state"] == "Stable"


def test_second_member_triggers_rebalance_and_followers_get_leader_assignment() -> None:
    harness = Harness()
    first = harness.join_with_id("g").response
    harness.sync("g", first["member_id"], 1, {first["member_id"]: b"all"})
    second = harness.join_with_id("g")
    assert not second.done  # parked until the first member rejoins
    assert harness.heartbeat("g", first["member_id"], 1) == ErrorCode.rebalance_in_progress
    rejoined = harness.join("g", first["member_id"])
    assert rejoined.response["generation_id"] == 2
    assert second.response["generation_id"] == 2
    assert second.response["members"] == []
    leader = rejoined.response["member_id"]
    assert rejoined.response["leader"] == leader
    follower = second.response["member_id"]
    follower_sync = harness.sync("g", follower, 2)
    assert not follower_sync.done
    harness.sync("g", leader, 2, {leader: b"L", follower: b"F"})
    assert follower_sync.response["assignment"] == b"F"


def test_session_timeout_removes_silent_member_and_rebalances() -> None:
    harness = Harness()
    first = harness.join_with_id("g", session_timeout_ms=10_000).response
    harness.sync("g", first["member_id"], 1, {})
    second = harness.join_with_id("g")
    rejoin = harness.join("g", first["member_id"])
    leader, follower = rejoin.response["member_id"], second.response["member_id"]
    harness.sync("g", leader, 2, {leader: b"x", follower: b"y"})
    harness.sync("g", follower, 2)
    harness.advance(6_000)
    assert harness.heartbeat("g", leader, 2) == ErrorCode.none
    harness.advance(6_000)  # the follower is now silent for 12 s > 10 s
    assert harness.heartbeat("g", leader, 2) == ErrorCode.rebalance_in_progress
    again = harness.join("g", leader)
    assert again.response["generation_id"] == 3
    assert [m["member_id"] for m in again.response["members"]] == [leader]


@pytest.mark.parametrize("jump_ms", [7_200_000, -7_200_000])
def test_session_timeouts_run_on_monotonic_time_not_the_wall_clock(jump_ms: int) -> None:
    harness = Harness()
    joined = harness.join_with_id("g", session_timeout_ms=10_000).response
    member = joined["member_id"]
    harness.sync("g", member, 1, {member: b"x"})
    harness.jump_wall(jump_ms)  # neither expires the session nor pushes its deadline away
    assert [m["member_id"] for m in harness.coordinator.describe_group("g")["members"]] == [member]
    harness.advance(10_001)
    assert harness.coordinator.describe_group("g")["members"] == []


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    harness = Harness()
    first = harness.join_with_id("g", rebalance_timeout_ms=5_000).response
    harness.sync("g", first["member_id"], 1)
    newcomer = harness.join_with_id("g", rebalance_timeout_ms=5_000)
    harness.advance(4_000)
    assert not newcomer.done
    harness.advance(1_000)
    assert newcomer.response["generation_id"] == 2
    assert [m["member_id"] for m in newcomer.response["members"]] == [
        newcomer.response["member_id"]
    ]
    assert harness.heartbeat("g", first["member_id"], 2) == ErrorCode.unknown_member_id


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    harness = Harness(group_initial_rebalance_delay_ms=3_000)
    one = harness.join_with_id("g")
    harness.advance(2_000)
    two = harness.join_with_id("g")
    harness.advance(1_000)  # first delay over, but a member came: extended by another delay
    assert not one.done and not two.done
    harness.advance(3_000)
    assert one.response["generation_id"] == two.response["generation_id"] == 1
    leader_view = one.response if one.response["members"] else two.response
    assert len(leader_view["members"]) == 2


def test_leave_group_batch_removes_members_and_answers_each() -> None:
    harness = Harness()
    first = harness.join_with_id("g").response
    harness.sync("g", first["member_id"], 1)
    result = harness.run(
        harness.coordinator.leave_group(
            group_id="g", members=[(first["member_id"], None), ("ghost", None)]
        )
    )
    assert [m["error_code"] for m in result.response["members"]] == [
        ErrorCode.none,
        ErrorCode.unknown_member_id,
    ]
    assert harness.coordinator.describe_group("g")["group_state"] == "Empty"


def test_errors_for_unknown_member_and_old_generation() -> None:
    harness = Harness()
    first = harness.join_with_id("g").response
    harness.sync("g", first["member_id"], 1)
    assert harness.heartbeat("g", "nobody", 1) == ErrorCode.unknown_member_id
    assert harness.heartbeat("g", first["member_id"], 0) == ErrorCode.illegal_generation
    stale = harness.sync("g", first["member_id"], 7)
    assert stale.response["error_code"] == ErrorCode.illegal_generation
    assert harness.join("g", "nobody").response["error_code"] == ErrorCode.unknown_member_id


def test_inconsistent_protocols_are_refused() -> None:
    harness = Harness()
    harness.join_with_id("g", protocols=[("range", b"")])
    other = harness.join("g", protocols=[("roundrobin", b"")])
    assert other.response["error_code"] == ErrorCode.inconsistent_group_protocol


def test_protocol_selection_prefers_what_most_members_vote_for() -> None:
    harness = Harness()
    one = harness.join_with_id("g", protocols=[("cooperative-sticky", b"1"), ("range", b"1")])
    harness.sync("g", one.response["member_id"], 1)
    two = harness.join_with_id("g", protocols=[("range", b"2"), ("cooperative-sticky", b"2")])
    three = harness.join_with_id("g", protocols=[("range", b"3")])
    rejoin = harness.join(
        "g", one.response["member_id"], protocols=[("cooperative-sticky", b"1"), ("range", b"1")]
    )
    assert rejoin.response["protocol_name"] == "range"
    assert two.response["protocol_name"] == three.response["protocol_name"] == "range"


def test_group_max_size_refuses_new_members() -> None:
    harness = Harness(group_max_size=1)
    harness.join_with_id("g")
    assert harness.join("g").response["error_code"] == ErrorCode.group_max_size_reached


def test_session_timeout_outside_bounds_is_refused() -> None:
    harness = Harness()
    parked = harness.join("g", session_timeout_ms=10)
    assert parked.response["error_code"] == ErrorCode.invalid_session_timeout


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    harness = Harness()
    joined = harness.join("g", instance_id="i-1").response
    assert joined["error_code"] == ErrorCode.none
    old_id = joined["member_id"]
    harness.sync("g", old_id, 1, {old_id: b"mine"}, instance_id="i-1")
    restarted = harness.join("g", instance_id="i-1").response
    assert restarted["error_code"] == ErrorCode.none
    assert restarted["generation_id"] == 1
    assert restarted["member_id"] != old_id
    synced = harness.sync("g", restarted["member_id"], 1, instance_id="i-1")
    assert synced.response["assignment"] == b"mine"
    fenced = harness.sync("g", old_id, 1, instance_id="i-1")
    assert fenced.response["error_code"] == ErrorCode.fenced_instance_id


def test_group_state_survives_reload_from_the_log() -> None:
    harness = Harness()
    joined = harness.join_with_id("g").response
    member_id = joined["member_id"]
    harness.sync("g", member_id, 1, {member_id: b"A"})
    fresh = harness.reload()
    described = fresh.describe_group("g")
    assert described["group_state"] == "Stable"
    assert described["members"][0]["member_id"] == member_id
    assert described["members"][0]["member_assignment"] == b"A"
    assert described["members"][0]["member_metadata"] == subscription("t")
    assert harness.heartbeat("g", member_id, 1) == ErrorCode.none


def test_a_member_loaded_from_the_log_that_never_comes_back_expires() -> None:
    """A coordinator that took the group over (its broker failed) gives every member it loaded
    a session, as Kafka's onGroupLoaded does: a member whose client rejoined under a new id
    (or died meanwhile) leaves when its session ends, so the rebalance its successor started
    completes, instead of waiting for it until the rebalance timeout."""
    harness = Harness()
    old = harness.join_with_id("g", session_timeout_ms=10_000).response["member_id"]
    harness.sync("g", old, 1, {old: b"A"})
    harness.reload()
    new = harness.join_with_id("g", session_timeout_ms=30_000, rebalance_timeout_ms=300_000)
    assert not new.done  # waits for the loaded member to rejoin
    harness.advance(10_001)
    assert new.done, "the loaded member never expired: the rebalance waits for it"
    assert new.response["error_code"] == ErrorCode.none
    described = harness.coordinator.describe_group("g")
    assert [m["member_id"] for m in described["members"]] == [new.response["member_id"]]


def test_loading_coordinator_answers_load_in_progress() -> None:
    harness = Harness()
    harness.coordinator.loading = True
    assert harness.join("g").response["error_code"] == ErrorCode.coordinator_load_in_progress
    assert harness.heartbeat("g", "m", 1) == ErrorCode.coordinator_load_in_progress


def test_leader_that_never_syncs_is_dropped_and_followers_rejoin() -> None:
    harness = Harness()
    first = harness.join_with_id("g", rebalance_timeout_ms=5_000).response
    harness.sync("g", first["member_id"], 1)
    second = harness.join_with_id("g", rebalance_timeout_ms=5_000)
    rejoined = harness.join("g", first["member_id"], rebalance_timeout_ms=5_000)
    leader = rejoined.response["member_id"]
    follower = second.response["member_id"]
    follower_sync = harness.sync("g", follower, 2)
    harness.advance(5_000)
    assert follower_sync.response["error_code"] == ErrorCode.rebalance_in_progress
    assert harness.heartbeat("g", leader, 2) == ErrorCode.unknown_member_id
    again = harness.join("g", follower, rebalance_timeout_ms=5_000)
    assert again.response["generation_id"] == 3
    assert again.response["leader"] == follower


def test_member_that_never_returns_with_its_id_does_not_block_the_group() -> None:
    harness = Harness()
    abandoned = harness.join("g", session_timeout_ms=10_000)
    assert abandoned.response["error_code"] == ErrorCode.member_id_required
    joined = harness.join_with_id("g", session_timeout_ms=10_000)
    assert not joined.done  # waits for the member that was given an id
    harness.advance(10_000)
    assert joined.response["generation_id"] == 1
    assert len(joined.response["members"]) == 1


def test_static_member_with_a_stale_member_id_is_fenced() -> None:
    harness = Harness()
    old = harness.join("g", instance_id="i").response["member_id"]
    harness.sync("g", old, 1, instance_id="i")
    harness.join("g", instance_id="i")  # restart: a new member id for the instance
    result = harness.run(
        harness.coordinator.heartbeat(
            group_id="g", generation_id=1, member_id=old, group_instance_id="i"
        )
    )
    assert result.response == {"error_code": ErrorCode.fenced_instance_id}
