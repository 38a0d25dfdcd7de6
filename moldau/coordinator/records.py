"""The records of `__consumer_offsets`, in Kafka's own key/value layouts.

Every key starts with an int16 that names the record type (Kafka's key "version"):

    0, 1  OffsetCommitKey        group string, topic string, partition int32
    2     GroupMetadataKey       group string
    3     ConsumerGroupMetadataKey                    group string
    4     ConsumerGroupPartitionMetadataKey           group string (read and ignored)
    5     ConsumerGroupMemberMetadataKey              group string, member string
    6     ConsumerGroupTargetAssignmentMetadataKey    group string
    7     ConsumerGroupTargetAssignmentMemberKey      group string, member string
    8     ConsumerGroupCurrentMemberAssignmentKey     group string, member string
    10    ShareGroupMemberMetadataKey                 group string, member string
    11    ShareGroupMetadataKey                       group string
    12    ShareGroupTargetAssignmentMetadataKey       group string
    13    ShareGroupTargetAssignmentMemberKey         group string, member string
    14    ShareGroupCurrentMemberAssignmentKey        group string, member string

Values start with an int16 version. Moldau writes OffsetCommitValue v3 (offset int64, leader
epoch int32, metadata string, commit timestamp int64), GroupMetadataValue v3 (see
`_encode_group_metadata`) and version 0 of the flexible KIP-848 and KIP-932 (share group)
values. Share groups' ShareGroupStatePartitionMetadata (15) belongs with the durable share-group
state (`__share_group_state`), which Moldau does not keep yet: it is not written, and skipped. A value of None is a
tombstone: the key's state is deleted on replay and compaction eventually drops it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from moldau.coordinator._wire import Reader, RecordFormatError, Writer

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""An assignment as stored: (topic id, sorted partitions) pairs, sorted by topic id."""


def to_topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> TopicPartitions:
    return tuple(
        (topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: item[0].bytes)
        if partitions
    )


def from_topic_partitions(stored: TopicPartitions) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: frozenset(partitions) for topic_id, partitions in stored if partitions}


# ---------------------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


ShareGroupKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
)

RecordKey = (
    OffsetCommitKey
    | GroupMetadataKey
    | ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ShareGroupKey
)

# -------------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int
    expire_timestamp: int = -1  # only stored by value version 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataValue:
    """Read for completeness and ignored: Moldau takes topic metadata from the metadata image."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # Moldau compares topic metadata itself and writes 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions


ShareGroupValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
)

RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ShareGroupValue
)


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One `__consumer_offsets` record; `value` None is a tombstone."""

    key: RecordKey
    value: RecordValue | None = None


# ------------------------------------------------------------------------------------ encoding


def encode_key(key: RecordKey) -> bytes:
    writer = Writer()
    if isinstance(key, OffsetCommitKey):
        return writer.int16(1).string(key.group_id).string(key.topic).int32(key.partition).build()
    if isinstance(key, GroupMetadataKey):
        return writer.int16(2).string(key.group_id).build()
    if isinstance(key, ConsumerGroupMetadataKey):
        return writer.int16(3).string(key.group_id).build()
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        return writer.int16(4).string(key.group_id).build()
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        return writer.int16(5).string(key.group_id).string(key.member_id).build()
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        return writer.int16(6).string(key.group_id).build()
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        return writer.int16(7).string(key.group_id).string(key.member_id).build()
    if isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        return writer.int16(8).string(key.group_id).string(key.member_id).build()
    writer.int16(_SHARE_KEY_TYPES[type(key)]).string(key.group_id)
    if isinstance(
        key,
        ShareGroupMemberMetadataKey
        | ShareGroupTargetAssignmentMemberKey
        | ShareGroupCurrentMemberAssignmentKey,
    ):
        writer.string(key.member_id)
    return writer.build()


_SHARE_KEY_TYPES: dict[type, int] = {
    ShareGroupMemberMetadataKey: 10,
    ShareGroupMetadataKey: 11,
    ShareGroupTargetAssignmentMetadataKey: 12,
    ShareGroupTargetAssignmentMemberKey: 13,
    ShareGroupCurrentMemberAssignmentKey: 14,
}


def _write_topic_partitions(writer: Writer, stored: TopicPartitions) -> None:
    writer.compact_array_length(len(stored))
    for topic_id, partitions in stored:
        writer.uuid(topic_id).compact_array_length(len(partitions))
        for partition in partitions:
            writer.int32(partition)
        writer.no_tagged_fields()


def _encode_group_metadata(value: GroupMetadataValue) -> bytes:
    writer = Writer().int16(3)
    writer.string(value.protocol_type).int32(value.generation)
    writer.string(value.protocol).string(value.leader).int64(value.current_state_timestamp)
    writer.int32(len(value.members))
    for member in value.members:
        writer.string(member.member_id).string(member.group_instance_id)
        writer.string(member.client_id).string(member.client_host)
        writer.int32(member.rebalance_timeout).int32(member.session_timeout)
        writer.bytes_(member.subscription).bytes_(member.assignment)
    return writer.build()


def encode_value(value: RecordValue) -> bytes:
    writer = Writer()
    if isinstance(value, OffsetCommitValue):
        writer.int16(3).int64(value.offset).int32(value.leader_epoch)
        return writer.string(value.metadata).int64(value.commit_timestamp).build()
    if isinstance(value, GroupMetadataValue):
        return _encode_group_metadata(value)
    writer.int16(0)
    if isinstance(value, ConsumerGroupMetadataValue):
        writer.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        writer.compact_array_length(0)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        writer.compact_string(value.instance_id).compact_string(value.rack_id)
        writer.compact_string(value.client_id).compact_string(value.client_host)
        writer.compact_array_length(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            writer.compact_string(name)
        writer.compact_string(value.subscribed_topic_regex).int32(value.rebalance_timeout_ms)
        writer.compact_string(value.server_assignor)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        writer.int32(value.assignment_epoch)
    elif isinstance(
        value, ConsumerGroupTargetAssignmentMemberValue | ShareGroupTargetAssignmentMemberValue
    ):
        _write_topic_partitions(writer, value.topic_partitions)
    elif isinstance(value, ShareGroupMemberMetadataValue):
        writer.compact_string(value.rack_id).compact_string(value.client_id)
        writer.compact_string(value.client_host)
        writer.compact_array_length(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            writer.compact_string(name)
    elif isinstance(value, ShareGroupMetadataValue):
        writer.int32(value.epoch).int64(value.metadata_hash)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        writer.int32(value.assignment_epoch)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        writer.int32(value.member_epoch).int32(value.previous_member_epoch).int8(value.state)
        _write_topic_partitions(writer, value.assigned_partitions)
    else:
        writer.int32(value.member_epoch).int32(value.previous_member_epoch).int8(value.state)
        _write_topic_partitions(writer, value.assigned_partitions)
        _write_topic_partitions(writer, value.partitions_pending_revocation)
    return writer.no_tagged_fields().build()


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    value = None if record.value is None else encode_value(record.value)
    return encode_key(record.key), value


# ------------------------------------------------------------------------------------ decoding


def decode_key(data: bytes) -> RecordKey | None:
    """The key, or None for a record type this coordinator does not own (share groups, ...)."""
    reader = Reader(data)
    record_type = reader.int16()
    if record_type in (0, 1):
        return OffsetCommitKey(
            group_id=reader.string(), topic=reader.string(), partition=reader.int32()
        )
    if record_type == 2:
        return GroupMetadataKey(group_id=reader.string())
    if record_type == 3:
        return ConsumerGroupMetadataKey(group_id=reader.string())
    if record_type == 4:
        return ConsumerGroupPartitionMetadataKey(group_id=reader.string())
    if record_type == 5:
        return ConsumerGroupMemberMetadataKey(group_id=reader.string(), member_id=reader.string())
    if record_type == 6:
        return ConsumerGroupTargetAssignmentMetadataKey(group_id=reader.string())
    if record_type == 7:
        return ConsumerGroupTargetAssignmentMemberKey(
            group_id=reader.string(), member_id=reader.string()
        )
    if record_type == 8:
        return ConsumerGroupCurrentMemberAssignmentKey(
            group_id=reader.string(), member_id=reader.string()
        )
    if record_type == 10:
        return ShareGroupMemberMetadataKey(group_id=reader.string(), member_id=reader.string())
    if record_type == 11:
        return ShareGroupMetadataKey(group_id=reader.string())
    if record_type == 12:
        return ShareGroupTargetAssignmentMetadataKey(group_id=reader.string())
    if record_type == 13:
        return ShareGroupTargetAssignmentMemberKey(
            group_id=reader.string(), member_id=reader.string()
        )
    if record_type == 14:
        return ShareGroupCurrentMemberAssignmentKey(
            group_id=reader.string(), member_id=reader.string()
        )
    return None


def _decode_offset_commit(reader: Reader) -> OffsetCommitValue:
    version = reader.int16()
    if version >= 4:  # flexible: compact metadata string, tagged fields
        offset = reader.int64()
        leader_epoch = reader.int32()
        metadata = reader.compact_string()
        commit_timestamp = reader.int64()
        return OffsetCommitValue(
            offset=offset,
            leader_epoch=leader_epoch,
            metadata=metadata,
            commit_timestamp=commit_timestamp,
        )
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    return OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    )


def _decode_group_metadata(reader: Reader) -> GroupMetadataValue:
    version = reader.int16()
    if version > 3:
        raise RecordFormatError(f"GroupMetadataValue version {version} is not supported")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.int32()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else -1
        session_timeout = reader.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadata(
                member_id=member_id,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout=rebalance_timeout,
                session_timeout=session_timeout,
                subscription=reader.bytes_(),
                assignment=reader.bytes_(),
            )
        )
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=tuple(members),
    )


def _read_topic_partitions(reader: Reader) -> TopicPartitions:
    result = []
    for _ in range(reader.compact_array_length()):
        topic_id = reader.uuid()
        partitions = tuple(reader.int32() for _ in range(reader.compact_array_length()))
        reader.skip_tagged_fields()
        result.append((topic_id, partitions))
    return tuple(result)


def decode_value(key: RecordKey, data: bytes) -> RecordValue:
    reader = Reader(data)
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_commit(reader)
    if isinstance(key, GroupMetadataKey):
        return _decode_group_metadata(reader)
    reader.int16()  # version 0 is the only one
    value: RecordValue
    if isinstance(key, ConsumerGroupMetadataKey):
        value = ConsumerGroupMetadataValue(epoch=reader.int32())
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        return ConsumerGroupPartitionMetadataValue()
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id = reader.compact_nullable_string()
        rack_id = reader.compact_nullable_string()
        client_id = reader.compact_string()
        client_host = reader.compact_string()
        names = tuple(reader.compact_string() for _ in range(reader.compact_array_length()))
        value = ConsumerGroupMemberMetadataValue(
            instance_id=instance_id,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=names,
            subscribed_topic_regex=reader.compact_nullable_string(),
            rebalance_timeout_ms=reader.int32(),
            server_assignor=reader.compact_nullable_string(),
        )
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=reader.int32())
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=_read_topic_partitions(reader)
        )
    elif isinstance(key, ShareGroupMemberMetadataKey):
        rack_id = reader.compact_nullable_string()
        client_id = reader.compact_string()
        client_host = reader.compact_string()
        names = tuple(reader.compact_string() for _ in range(reader.compact_array_length()))
        value = ShareGroupMemberMetadataValue(
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=names,
        )
    elif isinstance(key, ShareGroupMetadataKey):
        value = ShareGroupMetadataValue(epoch=reader.int32(), metadata_hash=reader.int64())
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        value = ShareGroupTargetAssignmentMetadataValue(assignment_epoch=reader.int32())
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        value = ShareGroupTargetAssignmentMemberValue(
            topic_partitions=_read_topic_partitions(reader)
        )
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        value = ShareGroupCurrentMemberAssignmentValue(
            member_epoch=reader.int32(),
            previous_member_epoch=reader.int32(),
            state=reader.int8(),
            assigned_partitions=_read_topic_partitions(reader),
        )
    else:
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=reader.int32(),
            previous_member_epoch=reader.int32(),
            state=reader.int8(),
            assigned_partitions=_read_topic_partitions(reader),
            partitions_pending_revocation=_read_topic_partitions(reader),
        )
    reader.skip_tagged_fields()
    return value


def decode_record(key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """Decode a stored pair; None for a record this coordinator does not own."""
    if key is None:
        return None
    decoded_key = decode_key(key)
    if decoded_key is None:
        return None
    if value is None:
        return CoordinatorRecord(decoded_key, None)
    return CoordinatorRecord(decoded_key, decode_value(decoded_key, value))
