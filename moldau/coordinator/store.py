"""The groups and committed offsets of one `__consumer_offsets` partition, and `replay`.

`replay(record)` is the only way durable state changes: loading replays the partition from its
start, and operations replay the records they return. The exception, as in Kafka, is a classic
group's rebalance in progress (who has rejoined, parked responses): that lives in memory only and
is written as a GroupMetadata record when a generation is synced or the group becomes empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from moldau.coordinator.classic_group import ClassicGroup, ClassicGroupState, ClassicMember
from moldau.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from moldau.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    from_topic_partitions,
)
from moldau.coordinator.result import Timers
from moldau.coordinator.share_group import ShareGroup, ShareMember
from moldau.coordinator.transactional_offsets import PendingTransactionalOffsets

Group = ClassicGroup | ConsumerGroup | ShareGroup


def heartbeat_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, order=True)
class CommittedOffset:
    """A group's committed offset of one partition, as the node's metrics list them."""

    group_id: str
    topic: str
    partition: int
    offset: int


class GroupStore:
    """Groups by id, offsets by group, and the timers of both, for one coordinator partition."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[OffsetKey, OffsetCommitValue]] = {}
        self.transactional = PendingTransactionalOffsets()
        self.timers = Timers()

    def committed_offsets(self) -> Iterator[CommittedOffset]:
        """Every committed offset (transactional ones once their transaction committed)."""
        for group_id, offsets in self.offsets.items():
            for where, value in offsets.items():
                yield CommittedOffset(group_id, where.topic, where.partition, value.offset)

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def share_group(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def ensure_share_group(self, group_id: str, now_ms: int) -> ShareGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            group = ShareGroup(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        return group

    def ensure_classic_group(self, group_id: str, now_ms: int) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        return group

    def ensure_consumer_group(self, group_id: str, now_ms: int) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            group = ConsumerGroup(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        return group

    def drop_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup):
            group.state = ClassicGroupState.DEAD
            for member_id in list(group.members) + list(group.pending_members):
                self.timers.cancel(heartbeat_timer(group_id, member_id))
            self.timers.cancel(("join", group_id))
            self.timers.cancel(("sync", group_id))
        elif isinstance(group, ConsumerGroup):
            for member_id in group.members:
                self.timers.cancel(("consumer-session", group_id, member_id))
                self.timers.cancel(("consumer-revocation", group_id, member_id))
        elif isinstance(group, ShareGroup):
            for member_id in group.members:
                self.timers.cancel(("share-session", group_id, member_id))

    # ------------------------------------------------------------------------------- replay

    def replay_transactional(self, producer_id: int, record: CoordinatorRecord) -> None:
        """An offset written by TxnOffsetCommit: pending until its transaction's marker."""
        if isinstance(record.key, OffsetCommitKey):
            self.transactional.add(producer_id, record)

    def replay_marker(self, producer_id: int, committed: bool, now_ms: int) -> None:
        for record in self.transactional.complete(producer_id, committed):
            self.replay(record, now_ms)

    def replay(self, record: CoordinatorRecord, now_ms: int) -> None:
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            self._replay_offset(key, value, now_ms)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                if isinstance(self.groups.get(key.group_id), ClassicGroup):
                    self.drop_group(key.group_id)
            else:
                assert isinstance(value, GroupMetadataValue)
                self._replay_group_metadata(key.group_id, value, now_ms)
        elif isinstance(key, ShareGroupKey):
            self._replay_share_group(key, value, now_ms)
        else:
            self._replay_consumer_group(record, now_ms)

    def _replay_offset(self, key: OffsetCommitKey, value: object | None, now_ms: int) -> None:
        offsets = self.offsets.setdefault(key.group_id, {})
        where = OffsetKey(key.topic, key.partition)
        if value is None:
            offsets.pop(where, None)
            if not offsets:
                del self.offsets[key.group_id]
            return
        assert isinstance(value, OffsetCommitValue)
        offsets[where] = value
        self.ensure_classic_group(key.group_id, now_ms)

    def _replay_group_metadata(self, group_id: str, value: GroupMetadataValue, now_ms: int) -> None:
        """Rebuild a classic group as stored: Stable with members, Empty without."""
        self.drop_group(group_id)
        group = ClassicGroup(
            group_id,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            state_timestamp_ms=value.current_state_timestamp,
        )
        for stored in value.members:
            group.add_member(_member_from_record(stored, value))
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = ClassicGroupState.STABLE if group.members else ClassicGroupState.EMPTY
        if not group.members:
            group.leader_id = None
        for member in group.members.values():
            self.timers.schedule(
                heartbeat_timer(group_id, member.member_id), now_ms + member.session_timeout_ms
            )
        self.groups[group_id] = group

    def _replay_consumer_group(self, record: CoordinatorRecord, now_ms: int) -> None:
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                if isinstance(self.groups.get(key.group_id), ConsumerGroup):
                    self.drop_group(key.group_id)
                return
            assert isinstance(value, ConsumerGroupMetadataValue)
            self.ensure_consumer_group(key.group_id, now_ms).group_epoch = value.epoch
            return
        group_id = key.group_id
        if value is None:
            group = self.consumer_group(group_id)
            if group is None:
                return
        else:
            group = self.ensure_consumer_group(group_id, now_ms)
        if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                group.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                group.target[key.member_id] = from_topic_partitions(value.topic_partitions)
            else:
                group.target.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if isinstance(value, ConsumerGroupMemberMetadataValue):
                member = group.members.setdefault(key.member_id, ConsumerMember(key.member_id))
                member.instance_id = value.instance_id
                member.rack_id = value.rack_id
                member.client_id = value.client_id
                member.client_host = value.client_host
                member.subscribed_topic_names = value.subscribed_topic_names
                member.subscribed_topic_regex = value.subscribed_topic_regex
                member.rebalance_timeout_ms = value.rebalance_timeout_ms
                member.server_assignor = value.server_assignor
            else:
                group.members.pop(key.member_id, None)
                self.timers.cancel(("consumer-session", group_id, key.member_id))
                self.timers.cancel(("consumer-revocation", group_id, key.member_id))
                if not group.members:
                    group.state_timestamp_ms = now_ms
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            current = group.members.get(key.member_id)
            if current is not None and isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                member = current
                member.member_epoch = value.member_epoch
                member.previous_member_epoch = value.previous_member_epoch
                member.state = MemberState(value.state)
                member.assigned = from_topic_partitions(value.assigned_partitions)
                member.pending_revocation = from_topic_partitions(
                    value.partitions_pending_revocation
                )

    def _replay_share_group(self, key: ShareGroupKey, value: object | None, now_ms: int) -> None:
        group_id = key.group_id
        if isinstance(key, ShareGroupMetadataKey):
            if value is None:
                if isinstance(self.groups.get(group_id), ShareGroup):
                    self.drop_group(group_id)
            else:
                assert isinstance(value, ShareGroupMetadataValue)
                self.ensure_share_group(group_id, now_ms).group_epoch = value.epoch
            return
        group = self.share_group(group_id)
        if group is None:
            if value is None:
                return
            group = self.ensure_share_group(group_id, now_ms)
        if isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
                group.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if isinstance(value, ShareGroupTargetAssignmentMemberValue):
                group.target[key.member_id] = from_topic_partitions(value.topic_partitions)
            else:
                group.target.pop(key.member_id, None)
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if isinstance(value, ShareGroupMemberMetadataValue):
                member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
                member.rack_id = value.rack_id
                member.client_id = value.client_id
                member.client_host = value.client_host
                member.subscribed_topic_names = value.subscribed_topic_names
            else:
                group.members.pop(key.member_id, None)
                self.timers.cancel(("share-session", group_id, key.member_id))
                if not group.members:
                    group.state_timestamp_ms = now_ms
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            member_now = group.members.get(key.member_id)
            if member_now is not None and isinstance(value, ShareGroupCurrentMemberAssignmentValue):
                member_now.member_epoch = value.member_epoch
                member_now.previous_member_epoch = value.previous_member_epoch
                member_now.assigned = from_topic_partitions(value.assigned_partitions)


def _member_from_record(stored: MemberMetadata, value: GroupMetadataValue) -> ClassicMember:
    protocols = [(value.protocol, stored.subscription)] if value.protocol else []
    return ClassicMember(
        member_id=stored.member_id,
        group_instance_id=stored.group_instance_id,
        client_id=stored.client_id,
        client_host=stored.client_host,
        rebalance_timeout_ms=stored.rebalance_timeout,
        session_timeout_ms=stored.session_timeout,
        protocol_type=value.protocol_type,
        protocols=protocols,
        assignment=stored.assignment,
    )


def group_metadata_record(group: ClassicGroup) -> CoordinatorRecord:
    """The GroupMetadata record of a classic group's current generation."""
    members = tuple(
        MemberMetadata(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata_for(group.protocol_name),
            assignment=member.assignment,
        )
        for member in group.members.values()
    )
    return CoordinatorRecord(
        GroupMetadataKey(group_id=group.group_id),
        GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp_ms,
            members=members,
        ),
    )
