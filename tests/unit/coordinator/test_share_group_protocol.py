"""KIP-932 share groups at the coordinator: membership, epochs, the simple assignor, sessions,
the records they write (in Kafka's bytes) and how they sit beside classic and consumer groups."""

from __future__ import annotations

import uuid
from typing import Any

from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.consumer import ConsumerGroupHeartbeatRequest
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.records import (
    CoordinatorRecord,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataKey,
    decode_record,
    encode_record,
)
from moldau.coordinator.share import ShareGroupHeartbeatRequest
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import Harness

TOPIC_ID = uuid.UUID(int=1)
OTHER_ID = uuid.UUID(int=2)
TOPICS = {"t": TopicMetadata(TOPIC_ID, "t", 3), "u": TopicMetadata(OTHER_ID, "u", 1)}


def heartbeat(
    harness: Harness,
    member_id: str,
    epoch: int,
    topics: dict[str, TopicMetadata] = TOPICS,
    **fields: Any,
) -> dict[str, Any]:
    request = ShareGroupHeartbeatRequest(
        group_id=fields.pop("group_id", "g"),
        member_id=member_id,
        member_epoch=epoch,
        subscribed_topic_names=fields.pop("subscribe", ("t",) if epoch == 0 else None),
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=fields.pop("session_timeout_ms", 45_000),
        heartbeat_interval_ms=5_000,
        max_size=fields.pop("max_size", 200),
    )
    result = harness.run(harness.coordinator.share_group_heartbeat(request, topics))
    assert result.response is not None
    return result.response


def assigned(response: dict[str, Any]) -> dict[uuid.UUID, set[int]]:
    assert response["assignment"] is not None
    return {
        entry["topic_id"]: set(entry["partitions"])
        for entry in response["assignment"]["topic_partitions"]
    }


def test_every_member_is_assigned_every_partition_of_its_topics() -> None:
    harness = Harness()
    first = heartbeat(harness, "a", 0)
    assert first["error_code"] == ErrorCode.none
    assert first["member_epoch"] == 1 and first["heartbeat_interval"] == 5_000
    assert assigned(first) == {TOPIC_ID: {0, 1, 2}}
    second = heartbeat(harness, "b", 0, subscribe=("t", "u"))
    assert second["member_epoch"] == 2
    assert assigned(second) == {TOPIC_ID: {0, 1, 2}, OTHER_ID: {0}}
    again = heartbeat(harness, "a", 1)  # same partitions, the new epoch
    assert again["member_epoch"] == 2 and again["assignment"] is None
    described = harness.coordinator.share_group_describe("g", {TOPIC_ID: "t", OTHER_ID: "u"})
    assert described["group_state"] == "Stable" and described["assignor_name"] == "simple"
    assert described["group_epoch"] == described["assignment_epoch"] == 2
    members = {m["member_id"]: m for m in described["members"]}
    assert members["b"]["subscribed_topic_names"] == ["t", "u"]
    assert [e["topic_name"] for e in members["b"]["assignment"]["topic_partitions"]] == ["t", "u"]


def test_epoch_checks_fence_stale_and_refuse_unknown_members() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    heartbeat(harness, "b", 0)
    assert heartbeat(harness, "a", 7)["error_code"] == ErrorCode.fenced_member_epoch
    assert heartbeat(harness, "z", 1)["error_code"] == ErrorCode.unknown_member_id
    assert heartbeat(harness, "z", -1)["error_code"] == ErrorCode.unknown_member_id
    rejoined = heartbeat(harness, "a", 0)  # a fenced member joins again under its id
    assert rejoined["error_code"] == ErrorCode.none and rejoined["member_epoch"] == 2


def test_requests_without_ids_or_topics_are_invalid() -> None:
    harness = Harness()
    assert heartbeat(harness, "", 0)["error_code"] == ErrorCode.invalid_request
    assert heartbeat(harness, "a", 0, subscribe=())["error_code"] == ErrorCode.invalid_request
    assert heartbeat(harness, "a", -2)["error_code"] == ErrorCode.invalid_request
    assert heartbeat(harness, "a", 0, group_id="")["error_code"] == ErrorCode.invalid_request
    assert heartbeat(harness, "a", 3)["error_code"] == ErrorCode.group_id_not_found


def test_the_group_size_is_bounded() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0, max_size=1)
    assert heartbeat(harness, "b", 0, max_size=1)["error_code"] == ErrorCode.group_max_size_reached
    assert heartbeat(harness, "a", 0, max_size=1)["error_code"] == ErrorCode.none  # a rejoin


def test_leaving_and_session_timeouts_remove_members() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0, session_timeout_ms=10_000)
    heartbeat(harness, "b", 0, session_timeout_ms=10_000)
    left = heartbeat(harness, "a", -1)
    assert left["error_code"] == ErrorCode.none and left["member_epoch"] == -1
    harness.advance(9_999)
    assert len(harness.coordinator.store.groups["g"].members) == 1
    harness.advance(1)
    group = harness.coordinator.store.groups["g"]
    assert not group.members and group.group_epoch == 4
    assert harness.coordinator.share_group_describe("g", {})["group_state"] == "Empty"


def test_partitions_added_to_a_topic_are_assigned_on_the_next_heartbeat() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    grown = {**TOPICS, "t": TopicMetadata(TOPIC_ID, "t", 5)}
    answer = heartbeat(harness, "a", 1, topics=grown)
    assert answer["member_epoch"] == 2 and assigned(answer) == {TOPIC_ID: set(range(5))}


def test_share_groups_survive_a_reload() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    heartbeat(harness, "b", 0, subscribe=("u",))
    harness.reload()
    described = harness.coordinator.share_group_describe("g", {})
    assert {m["member_id"]: m["member_epoch"] for m in described["members"]} == {"a": 1, "b": 2}
    assert heartbeat(harness, "a", 1)["error_code"] == ErrorCode.none
    harness.advance(45_000)  # loaded members have sessions too
    assert harness.coordinator.share_group_describe("g", {})["members"] == []


def test_group_types_do_not_mix() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    consumer = harness.coordinator.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="c", member_epoch=0, subscribed_topic_names=("t",)
        ),
        TOPICS,
    ).response
    assert consumer is not None and consumer["error_code"] == ErrorCode.group_id_not_found
    joined = harness.join("g")
    assert joined.response["error_code"] == ErrorCode.inconsistent_group_protocol
    described = harness.coordinator.describe_group("g")
    assert described["error_code"] == ErrorCode.group_id_not_found
    assert described["protocol_type"] == "share"
    listed = harness.coordinator.list_groups(types_filter=["share"])["groups"]
    assert listed == [
        {"group_id": "g", "protocol_type": "share", "group_state": "Stable", "group_type": "share"}
    ]
    assert harness.coordinator.list_groups(types_filter=["consumer"])["groups"] == []
    harness.join_with_id("classic")
    other = heartbeat(harness, "a", 0, group_id="classic")
    assert other["error_code"] == ErrorCode.group_id_not_found
    commit = harness.coordinator.commit_offsets(  # share groups commit no offsets
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[PartitionCommit(topic="t", partition=0, offset=5)],
    )
    assert commit.records == []
    assert commit.response is not None
    [topic] = commit.response["topics"]
    assert topic["partitions"][0]["error_code"] == ErrorCode.group_id_not_found


def test_an_empty_share_group_is_deleted_and_a_busy_one_is_not() -> None:
    harness = Harness()
    heartbeat(harness, "a", 0)
    result = harness.run(harness.coordinator.delete_groups(["g"]))
    assert result.response == {
        "results": [{"group_id": "g", "error_code": ErrorCode.non_empty_group}]
    }
    heartbeat(harness, "a", -1)
    result = harness.run(harness.coordinator.delete_groups(["g"]))
    assert result.response == {"results": [{"group_id": "g", "error_code": ErrorCode.none}]}
    assert "g" not in harness.coordinator.store.groups
    harness.reload()
    assert "g" not in harness.coordinator.store.groups


def test_share_group_records_are_kafkas_bytes() -> None:
    """Bytes written by Kafka 4.1.1's generated classes for the same values."""
    member = CoordinatorRecord(
        ShareGroupMemberMetadataKey(group_id="g", member_id="m"),
        ShareGroupMemberMetadataValue(
            rack_id=None, client_id="c", client_host="/h", subscribed_topic_names=("t",)
        ),
    )
    assert encode_record(member) == (
        bytes.fromhex("000a00016700016d"),
        bytes.fromhex("0000000263032f6802027400"),
    )
    metadata = CoordinatorRecord(
        ShareGroupMetadataKey(group_id="g"), ShareGroupMetadataValue(epoch=3)
    )
    assert encode_record(metadata)[1] == bytes.fromhex("000000000003000000000000000000")
    current = CoordinatorRecord(
        ShareGroupCurrentMemberAssignmentKey(group_id="g", member_id="m"),
        ShareGroupCurrentMemberAssignmentValue(
            member_epoch=2,
            previous_member_epoch=1,
            state=1,
            assigned_partitions=((TOPIC_ID, (0, 1)),),
        ),
    )
    assert encode_record(current)[1] == bytes.fromhex(
        "000000000002000000010102000000000000000000000000000000010300000000000000010000"
    )
    target = CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(group_id="g"))
    assert encode_record(target) == (bytes.fromhex("000c000167"), None)
    for record in (member, metadata, current, target):
        assert decode_record(*encode_record(record)) == record
