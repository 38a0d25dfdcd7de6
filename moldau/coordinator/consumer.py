"""The KIP-848 consumer protocol: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

One heartbeat does, in order: validate the member epoch; update the member's subscription (a
change bumps the group epoch); recompute the target assignment when it lags the group epoch; move
the member one step towards its target (`reconcile.py`). Member epoch -1 leaves; -2 is a static
member's temporary leave that keeps its assignment for its return.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from moldau.clock import Clock, monotonic_ms
from moldau.coordinator.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSubscription,
    TopicMetadata,
)
from moldau.coordinator.classic_group import ClassicGroup, ClassicGroupState
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    compiled_regex,
    described_assignment,
    wire_assignment,
)
from moldau.coordinator.reconcile import next_assignment, normalized, without
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
    to_topic_partitions,
)
from moldau.coordinator.result import CoordinatorResult, Response
from moldau.coordinator.share_group import ShareGroup
from moldau.coordinator.store import GroupStore
from moldau.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


def heartbeat_error(code: ErrorCode, message: str | None = None) -> Response:
    """A ConsumerGroupHeartbeat response that refuses the request."""
    return {
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval": 0,
        "assignment": None,
    }


def _error(code: ErrorCode, message: str | None = None) -> CoordinatorResult:
    return CoordinatorResult(response=heartbeat_error(code, message))


class ConsumerGroupProtocol:
    def __init__(self, store: GroupStore, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    def _emit(self, result: CoordinatorResult, record: CoordinatorRecord) -> None:
        result.records.append(record)
        self._store.replay(record, self._clock.now_ms())

    # ---------------------------------------------------------------------------- heartbeat

    def heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> CoordinatorResult:
        group_id = request.group_id
        if not group_id:
            return _error(ErrorCode.invalid_request, "GroupId can't be empty.")
        if (
            request.member_epoch == 0
            and request.subscribed_topic_names is None
            and request.subscribed_topic_regex is None
        ):
            return _error(ErrorCode.invalid_request, "SubscribedTopicNames must be set.")
        if (
            request.subscribed_topic_regex
            and compiled_regex(request.subscribed_topic_regex) is None
        ):
            return _error(ErrorCode.invalid_regular_expression, request.subscribed_topic_regex)
        if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
            return _error(ErrorCode.unsupported_assignor, request.server_assignor)
        result = CoordinatorResult()
        existing = self._store.groups.get(group_id)
        if isinstance(existing, ShareGroup):
            return _error(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
        if isinstance(existing, ClassicGroup):
            if existing.members or not existing.is_in(ClassicGroupState.EMPTY):
                return _error(ErrorCode.group_id_not_found, f"{group_id} is not a consumer group.")
            self._emit(result, CoordinatorRecord(GroupMetadataKey(group_id=group_id)))
        group = self._store.consumer_group(group_id)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, request)
        if group is None:
            if request.member_epoch != 0:
                return _error(ErrorCode.group_id_not_found)
            self._emit(
                result,
                CoordinatorRecord(
                    ConsumerGroupMetadataKey(group_id=group_id), ConsumerGroupMetadataValue(epoch=0)
                ),
            )
            group = self._store.consumer_group(group_id)
            assert group is not None
        member_or_error = self._member_for(group, request, result)
        if isinstance(member_or_error, CoordinatorResult):
            return member_or_error
        member = member_or_error
        bump = self._update_member(group, member, request, result)
        if self._subscription_metadata_changed(group, topics):
            bump = True
        if bump:
            self._emit(
                result,
                CoordinatorRecord(
                    ConsumerGroupMetadataKey(group_id=group_id),
                    ConsumerGroupMetadataValue(epoch=group.group_epoch + 1),
                ),
            )
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, topics, result)
        changed = self._reconcile(group, group.members[member.member_id], request, result)
        member = group.members[member.member_id]
        self._store.timers.schedule(
            ("consumer-session", group_id, member.member_id),
            monotonic_ms(self._clock) + self._config.group_consumer_session_timeout_ms,
        )
        send_assignment = (
            changed
            or request.member_epoch == 0
            or (
                request.owned_partitions is not None
                and normalized(request.owned_partitions) != normalized(member.assigned)
            )
        )
        result.response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval": self._config.group_consumer_heartbeat_interval_ms,
            "assignment": wire_assignment(member.assigned) if send_assignment else None,
        }
        return result

    def _member_for(
        self,
        group: ConsumerGroup,
        request: ConsumerGroupHeartbeatRequest,
        result: CoordinatorResult,
    ) -> ConsumerMember | CoordinatorResult:
        member = group.members.get(request.member_id) if request.member_id else None
        if request.member_epoch == 0:
            if request.instance_id is not None:
                static = group.member_by_instance(request.instance_id)
                if static is not None and static.member_id != request.member_id:
                    if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        return _error(ErrorCode.unreleased_instance_id, request.instance_id)
                    return self._replace_static_member(group, static, request, result)
            if member is None:
                if len(group.members) >= self._config.group_max_size:
                    return _error(ErrorCode.group_max_size_reached)
                return ConsumerMember(request.member_id or str(uuid.uuid4()))
            if member.assigned or member.pending_revocation or member.member_epoch != 0:
                self._write_current_assignment(
                    group, member, 0, -1, MemberState.STABLE, {}, {}, result
                )
            return member
        if member is None:
            return _error(ErrorCode.unknown_member_id)
        if request.member_epoch > member.member_epoch:
            return _error(ErrorCode.fenced_member_epoch)
        if request.member_epoch < member.member_epoch:
            owned = normalized(request.owned_partitions or {})
            lost_response = request.member_epoch == member.previous_member_epoch and (
                without(owned, member.assigned) == {}
            )
            if not lost_response:
                return _error(ErrorCode.fenced_member_epoch)
        return member

    def _replace_static_member(
        self,
        group: ConsumerGroup,
        old: ConsumerMember,
        request: ConsumerGroupHeartbeatRequest,
        result: CoordinatorResult,
    ) -> ConsumerMember:
        """A static member came back: its new member id takes over the old assignment."""
        new_id = request.member_id or str(uuid.uuid4())
        epoch, previous = old.previous_member_epoch, old.previous_member_epoch
        assigned, target = dict(old.assigned), group.target.get(old.member_id, {})
        for record in self._member_tombstones(group.group_id, old.member_id):
            self._emit(result, record)
        replacement = ConsumerMember(
            new_id,
            instance_id=old.instance_id,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
        )
        self._write_member_metadata(group, replacement, result)
        member = group.members[new_id]
        self._emit(
            result,
            CoordinatorRecord(
                ConsumerGroupTargetAssignmentMemberKey(group_id=group.group_id, member_id=new_id),
                ConsumerGroupTargetAssignmentMemberValue(
                    topic_partitions=to_topic_partitions(target)
                ),
            ),
        )
        self._write_current_assignment(
            group, member, max(epoch, 0), previous, MemberState.STABLE, assigned, {}, result
        )
        return member

    def _write_member_metadata(
        self, group: ConsumerGroup, member: ConsumerMember, result: CoordinatorResult
    ) -> None:
        self._emit(
            result,
            CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(group_id=group.group_id, member_id=member.member_id),
                ConsumerGroupMemberMetadataValue(
                    instance_id=member.instance_id,
                    rack_id=member.rack_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    subscribed_topic_names=member.subscribed_topic_names,
                    subscribed_topic_regex=member.subscribed_topic_regex,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    server_assignor=member.server_assignor,
                ),
            ),
        )

    def _update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        request: ConsumerGroupHeartbeatRequest,
        result: CoordinatorResult,
    ) -> bool:
        """Write the member's metadata if it changed; True if the group epoch must grow."""
        is_new = member.member_id not in group.members
        updated = ConsumerMember(
            member.member_id,
            instance_id=request.instance_id
            if request.instance_id is not None
            else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id or member.client_id,
            client_host=request.client_host or member.client_host,
            subscribed_topic_names=(
                tuple(sorted(request.subscribed_topic_names))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                request.subscribed_topic_regex
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms > 0
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                request.server_assignor
                if request.server_assignor is not None
                else member.server_assignor
            ),
        )
        fields = (
            "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
            "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor",
        )  # fmt: skip
        if is_new or any(getattr(updated, f) != getattr(member, f) for f in fields):
            self._write_member_metadata(group, updated, result)
        return is_new or (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or updated.server_assignor != member.server_assignor
        )

    def _subscription_metadata_changed(
        self, group: ConsumerGroup, topics: Mapping[str, TopicMetadata]
    ) -> bool:
        seen = tuple(
            (name, str(topics[name].topic_id), topics[name].num_partitions)
            for name in sorted(group.subscribed_topic_names(topics))
            if name in topics
        )
        previous, group.subscription_metadata = group.subscription_metadata, seen
        return previous is not None and seen != previous

    def _compute_target(
        self, group: ConsumerGroup, topics: Mapping[str, TopicMetadata], result: CoordinatorResult
    ) -> None:
        by_id = {metadata.topic_id: metadata for metadata in topics.values()}
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        group.assignor_name = votes.most_common(1)[0][0] if votes else DEFAULT_ASSIGNOR
        subscriptions = [
            MemberSubscription(
                member.member_id,
                frozenset(topics[n].topic_id for n in member.topics_in(topics) if n in topics),
                group.target.get(member.member_id, {}),
            )
            for member in group.members.values()
        ]
        target = ASSIGNORS[group.assignor_name](subscriptions, by_id)
        for member_id, assignment in target.items():
            if normalized(group.target.get(member_id, {})) != normalized(assignment):
                self._emit(
                    result,
                    CoordinatorRecord(
                        ConsumerGroupTargetAssignmentMemberKey(
                            group_id=group.group_id, member_id=member_id
                        ),
                        ConsumerGroupTargetAssignmentMemberValue(
                            topic_partitions=to_topic_partitions(assignment)
                        ),
                    ),
                )
        self._emit(
            result,
            CoordinatorRecord(
                ConsumerGroupTargetAssignmentMetadataKey(group_id=group.group_id),
                ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.group_epoch),
            ),
        )

    def _write_current_assignment(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        epoch: int,
        previous_epoch: int,
        state: MemberState,
        assigned: Assignment,
        pending_revocation: Assignment,
        result: CoordinatorResult,
    ) -> None:
        self._emit(
            result,
            CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(
                    group_id=group.group_id, member_id=member.member_id
                ),
                ConsumerGroupCurrentMemberAssignmentValue(
                    member_epoch=epoch,
                    previous_member_epoch=previous_epoch,
                    state=int(state),
                    assigned_partitions=to_topic_partitions(assigned),
                    partitions_pending_revocation=to_topic_partitions(pending_revocation),
                ),
            ),
        )
        revocation_timer = ("consumer-revocation", group.group_id, member.member_id)
        if state == MemberState.UNREVOKED_PARTITIONS:
            if self._store.timers.deadline(revocation_timer) is None:
                timeout = max(member.rebalance_timeout_ms, 0)
                self._store.timers.schedule(revocation_timer, monotonic_ms(self._clock) + timeout)
        else:
            self._store.timers.cancel(revocation_timer)

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        request: ConsumerGroupHeartbeatRequest,
        result: CoordinatorResult,
    ) -> bool:
        """Move the member one step towards its target; True if its assignment changed."""
        step = next_assignment(
            member,
            target=group.target.get(member.member_id, {}),
            target_epoch=group.assignment_epoch,
            owned=request.owned_partitions,
            owners=group.owners(),
        )
        if step is None:
            return False
        changed = step.assigned != normalized(member.assigned) or (
            step.member_epoch != member.member_epoch
        )
        self._write_current_assignment(
            group,
            member,
            step.member_epoch,
            step.previous_member_epoch,
            step.state,
            step.assigned,
            step.pending_revocation,
            result,
        )
        return changed or step.state == MemberState.UNREVOKED_PARTITIONS

    # -------------------------------------------------------------------------------- leave

    def _member_tombstones(self, group_id: str, member_id: str) -> list[CoordinatorRecord]:
        return [
            CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id)
            ),
            CoordinatorRecord(
                ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id)
            ),
            CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id)
            ),
        ]

    def remove_member(self, group: ConsumerGroup, member_id: str) -> CoordinatorResult:
        result = CoordinatorResult()
        if member_id not in group.members:
            return result
        for record in self._member_tombstones(group.group_id, member_id):
            self._emit(result, record)
        self._emit(
            result,
            CoordinatorRecord(
                ConsumerGroupMetadataKey(group_id=group.group_id),
                ConsumerGroupMetadataValue(epoch=group.group_epoch + 1),
            ),
        )
        return result

    def _leave(
        self, group: ConsumerGroup | None, request: ConsumerGroupHeartbeatRequest
    ) -> CoordinatorResult:
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            return _error(ErrorCode.unknown_member_id)
        result = CoordinatorResult()
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id:
            self._write_current_assignment(
                group,
                member,
                LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                member.member_epoch,
                member.state,
                member.assigned,
                member.pending_revocation,
                result,
            )
        else:
            self._store.timers.cancel(("consumer-session", group.group_id, member.member_id))
            result.merge(self.remove_member(group, member.member_id))
        result.response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": request.member_id,
            "member_epoch": request.member_epoch,
            "heartbeat_interval": 0,
            "assignment": None,
        }
        return result

    def on_timer(self, key: Hashable) -> CoordinatorResult:
        """A member missed its session timeout or did not revoke in time: fence it."""
        assert isinstance(key, tuple)
        group = self._store.consumer_group(key[1])
        if group is None:
            return CoordinatorResult()
        self._store.timers.cancel(("consumer-session", key[1], key[2]))
        self._store.timers.cancel(("consumer-revocation", key[1], key[2]))
        return self.remove_member(group, key[2])

    # ----------------------------------------------------------------------------- describe

    def describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> Response:
        group = self._store.consumer_group(group_id)
        if group is None:
            return {
                "error_code": ErrorCode.group_id_not_found,
                "error_message": f"Group {group_id} not found.",
                "group_id": group_id,
                "group_state": "Dead",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
            }

        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state(),
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor_name,
            "members": [
                {
                    "member_id": member.member_id,
                    "instance_id": member.instance_id,
                    "rack_id": member.rack_id,
                    "member_epoch": member.member_epoch,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                    "subscribed_topic_names": list(member.subscribed_topic_names),
                    "subscribed_topic_regex": member.subscribed_topic_regex,
                    "assignment": described_assignment(member.assigned, topic_names),
                    "target_assignment": described_assignment(
                        group.target.get(member.member_id, {}), topic_names
                    ),
                    "member_type": 1,
                }
                for member in group.members.values()
            ],
        }
