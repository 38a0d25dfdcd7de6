"""`__consumer_offsets` key/value layouts round-trip, and match Kafka's bytes."""

from __future__ import annotations

import struct
import uuid

from moldau.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    encode_record,
)


def roundtrip(record: CoordinatorRecord) -> CoordinatorRecord | None:
    return decode_record(*encode_record(record))


def test_offset_commit_bytes_are_kafkas_layout() -> None:
    record = CoordinatorRecord(
        OffsetCommitKey(group_id="g", topic="t", partition=3),
        OffsetCommitValue(offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000),
    )
    key, value = encode_record(record)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert value == struct.pack(">hqih1sq", 3, 42, 7, 1, b"m", 1000)
    assert roundtrip(record) == record


def test_offset_commit_value_v1_with_expire_timestamp_is_read() -> None:
    key = struct.pack(">hh1sh1si", 0, 1, b"g", 1, b"t", 0)
    value = struct.pack(">hqhqq", 1, 5, 0, 10, 20)
    decoded = decode_record(key, value)
    assert decoded is not None
    assert decoded.value == OffsetCommitValue(
        offset=5, leader_epoch=-1, metadata="", commit_timestamp=10, expire_timestamp=20
    )


def test_group_metadata_roundtrip_and_tombstone() -> None:
    member = MemberMetadata(
        member_id="m-1",
        group_instance_id="i",
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout=300,
        session_timeout=100,
        subscription=b"sub",
        assignment=b"asg",
    )
    record = CoordinatorRecord(
        GroupMetadataKey(group_id="g"),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=4,
            protocol="range",
            leader="m-1",
            current_state_timestamp=99,
            members=(member,),
        ),
    )
    assert roundtrip(record) == record
    tombstone = CoordinatorRecord(GroupMetadataKey(group_id="g"))
    assert encode_record(tombstone)[1] is None
    assert roundtrip(tombstone) == tombstone


def test_consumer_group_records_roundtrip() -> None:
    topic = uuid.UUID(int=5)
    records = [
        CoordinatorRecord(
            ConsumerGroupMemberMetadataKey(group_id="g", member_id="m"),
            ConsumerGroupMemberMetadataValue(
                instance_id=None,
                rack_id="r",
                client_id="c",
                client_host="h",
                subscribed_topic_names=("a", "b"),
                subscribed_topic_regex=None,
                rebalance_timeout_ms=5000,
                server_assignor="uniform",
            ),
        ),
        CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m"),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=3,
                previous_member_epoch=2,
                state=2,
                assigned_partitions=((topic, (0, 1)),),
                partitions_pending_revocation=((topic, (2,)),),
            ),
        ),
    ]
    for record in records:
        assert roundtrip(record) == record


def test_unknown_record_types_are_skipped() -> None:
    assert decode_record(struct.pack(">hh1s", 9, 1, b"g"), b"") is None
