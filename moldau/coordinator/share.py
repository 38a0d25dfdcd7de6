"""The share group protocol's coordinator side (KIP-932): ShareGroupHeartbeat and
ShareGroupDescribe.

One heartbeat does, in order: validate the member and its epoch (0 joins, -1 leaves, any other
must be the member's current epoch: FENCED_MEMBER_EPOCH otherwise, and the client joins again);
record the member's metadata (a new member or a changed subscription bumps the group epoch, and
so does a change in the subscribed topics' partitions); recompute the target assignment when it
lags the group epoch; give the member its target at the assignment epoch. The member's session
(`share.session.timeout.ms`, per group, or `group.share.session.timeout.ms`) restarts with every
heartbeat; a member whose session ends is removed, as one that leaves.

The assignor is Moldau's `simple`: every member is assigned every partition of the topics it
subscribes to, the partition leaders spreading the records among them. Every state change is a
`__consumer_offsets` record in Kafka's layouts (ShareGroupMetadata, ShareGroupMemberMetadata,
ShareGroupTargetAssignmentMetadata/Member, ShareGroupCurrentMemberAssignment), replayed by
`GroupStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from moldau.clock import Clock, monotonic_ms
from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.consumer_group import (
    MemberState,
    described_assignment,
    wire_assignment,
)
from moldau.coordinator.reconcile import normalized
from moldau.coordinator.records import (
    CoordinatorRecord,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    to_topic_partitions,
)
from moldau.coordinator.result import CoordinatorResult, Response
from moldau.coordinator.share_group import SIMPLE_ASSIGNOR, ShareGroup, ShareMember
from moldau.coordinator.store import GroupStore
from moldau.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
SESSION_TIMER = "share-session"


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""
    # The group's effective settings: its group configs over the broker's group.share.* ones.
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


def share_heartbeat_error(code: ErrorCode, message: str | None = None) -> Response:
    return {
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval": 0,
        "assignment": None,
    }


def _error(code: ErrorCode, message: str | None = None) -> CoordinatorResult:
    return CoordinatorResult(response=share_heartbeat_error(code, message))


def simple_assignment(
    member: ShareMember, topics: Mapping[str, TopicMetadata]
) -> dict[uuid.UUID, frozenset[int]]:
    """Every partition of every topic the member subscribes to that exists."""
    return {
        topics[name].topic_id: frozenset(range(topics[name].num_partitions))
        for name in member.subscribed_topic_names
        if name in topics and topics[name].num_partitions > 0
    }


class ShareGroupProtocol:
    def __init__(self, store: GroupStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def _emit(self, result: CoordinatorResult, record: CoordinatorRecord) -> None:
        result.records.append(record)
        self._store.replay(record, self._clock.now_ms())

    # ---------------------------------------------------------------------------- heartbeat

    def heartbeat(
        self, request: ShareGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> CoordinatorResult:
        group_id = request.group_id
        if not group_id:
            return _error(ErrorCode.invalid_request, "GroupId can't be empty.")
        if not request.member_id:
            return _error(ErrorCode.invalid_request, "MemberId can't be empty.")
        if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return _error(ErrorCode.invalid_request, "MemberEpoch is invalid.")
        if request.member_epoch == 0 and not request.subscribed_topic_names:
            return _error(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
        existing = self._store.groups.get(group_id)
        if existing is not None and not isinstance(existing, ShareGroup):
            return _error(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(existing, request)
        result = CoordinatorResult()
        group = existing
        if group is None:
            if request.member_epoch != 0:
                return _error(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
            self._emit(
                result,
                CoordinatorRecord(
                    ShareGroupMetadataKey(group_id=group_id), ShareGroupMetadataValue(epoch=0)
                ),
            )
            group = self._store.share_group(group_id)
            assert group is not None
        member = group.members.get(request.member_id)
        if request.member_epoch == 0:
            if member is None:
                if len(group.members) >= request.max_size:
                    return _error(
                        ErrorCode.group_max_size_reached,
                        f"The share group has reached its maximum capacity of "
                        f"{request.max_size} members.",
                    )
                member = ShareMember(request.member_id)
        elif member is None:
            return _error(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {group_id}.",
            )
        elif request.member_epoch != member.member_epoch:
            return _error(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({request.member_epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}).",
            )
        bump = self._update_member(group, member, request, result)
        if self._subscription_metadata_changed(group, topics):
            bump = True
        if bump:
            self._emit(
                result,
                CoordinatorRecord(
                    ShareGroupMetadataKey(group_id=group_id),
                    ShareGroupMetadataValue(epoch=group.group_epoch + 1),
                ),
            )
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, topics, result)
        member = group.members[request.member_id]
        changed = self._reconcile(group, member, result)
        self._store.timers.schedule(
            (SESSION_TIMER, group_id, member.member_id),
            monotonic_ms(self._clock) + request.session_timeout_ms,
        )
        send_assignment = changed or request.member_epoch == 0
        result.response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval": request.heartbeat_interval_ms,
            "assignment": wire_assignment(member.assigned) if send_assignment else None,
        }
        return result

    def _update_member(
        self,
        group: ShareGroup,
        member: ShareMember,
        request: ShareGroupHeartbeatRequest,
        result: CoordinatorResult,
    ) -> bool:
        """Write the member's metadata if it is new or changed; True if the group epoch grows."""
        is_new = member.member_id not in group.members
        subscribed = (
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        )
        stored = ShareGroupMemberMetadataValue(
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
        )
        updated = ShareGroupMemberMetadataValue(
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id or member.client_id,
            client_host=request.client_host or member.client_host,
            subscribed_topic_names=subscribed,
        )
        if is_new or updated != stored:
            key = ShareGroupMemberMetadataKey(group_id=group.group_id, member_id=member.member_id)
            self._emit(result, CoordinatorRecord(key, updated))
        return is_new or subscribed != member.subscribed_topic_names

    def _subscription_metadata_changed(
        self, group: ShareGroup, topics: Mapping[str, TopicMetadata]
    ) -> bool:
        seen = tuple(
            (name, str(topics[name].topic_id), topics[name].num_partitions)
            for name in sorted(group.subscribed_topic_names(topics))
        )
        previous, group.subscription_metadata = group.subscription_metadata, seen
        return previous is not None and seen != previous

    def _compute_target(
        self, group: ShareGroup, topics: Mapping[str, TopicMetadata], result: CoordinatorResult
    ) -> None:
        for member_id, member in group.members.items():
            target = simple_assignment(member, topics)
            if normalized(group.target.get(member_id, {})) != normalized(target):
                self._emit(
                    result,
                    CoordinatorRecord(
                        ShareGroupTargetAssignmentMemberKey(
                            group_id=group.group_id, member_id=member_id
                        ),
                        ShareGroupTargetAssignmentMemberValue(
                            topic_partitions=to_topic_partitions(target)
                        ),
                    ),
                )
        self._emit(
            result,
            CoordinatorRecord(
                ShareGroupTargetAssignmentMetadataKey(group_id=group.group_id),
                ShareGroupTargetAssignmentMetadataValue(assignment_epoch=group.group_epoch),
            ),
        )

    def _reconcile(self, group: ShareGroup, member: ShareMember, result: CoordinatorResult) -> bool:
        """Give the member its target at the assignment epoch; True if its assignment changed."""
        target = group.target.get(member.member_id, {})
        if member.member_epoch == group.assignment_epoch and normalized(
            member.assigned
        ) == normalized(target):
            return False
        changed = normalized(member.assigned) != normalized(target)
        self._emit(
            result,
            CoordinatorRecord(
                ShareGroupCurrentMemberAssignmentKey(
                    group_id=group.group_id, member_id=member.member_id
                ),
                ShareGroupCurrentMemberAssignmentValue(
                    member_epoch=group.assignment_epoch,
                    previous_member_epoch=member.member_epoch,
                    state=int(MemberState.STABLE),
                    assigned_partitions=to_topic_partitions(target),
                ),
            ),
        )
        return changed

    # -------------------------------------------------------------------------------- leave

    def remove_member(self, group: ShareGroup, member_id: str) -> CoordinatorResult:
        result = CoordinatorResult()
        if member_id not in group.members:
            return result
        self._store.timers.cancel((SESSION_TIMER, group.group_id, member_id))
        for key in (
            ShareGroupCurrentMemberAssignmentKey(group_id=group.group_id, member_id=member_id),
            ShareGroupTargetAssignmentMemberKey(group_id=group.group_id, member_id=member_id),
            ShareGroupMemberMetadataKey(group_id=group.group_id, member_id=member_id),
        ):
            self._emit(result, CoordinatorRecord(key))
        self._emit(
            result,
            CoordinatorRecord(
                ShareGroupMetadataKey(group_id=group.group_id),
                ShareGroupMetadataValue(epoch=group.group_epoch + 1),
            ),
        )
        return result

    def _leave(
        self, group: ShareGroup | None, request: ShareGroupHeartbeatRequest
    ) -> CoordinatorResult:
        if group is None or request.member_id not in group.members:
            return _error(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        result = self.remove_member(group, request.member_id)
        result.response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": request.member_id,
            "member_epoch": LEAVE_GROUP_MEMBER_EPOCH,
            "heartbeat_interval": 0,
            "assignment": None,
        }
        return result

    def on_timer(self, key: Hashable) -> CoordinatorResult:
        """A member's session ended: it leaves the group."""
        assert isinstance(key, tuple)
        group = self._store.share_group(key[1])
        if group is None:
            return CoordinatorResult()
        return self.remove_member(group, key[2])

    # ----------------------------------------------------------------------------- describe

    def describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> Response:
        group = self._store.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            message = (
                f"Group {group_id} not found."
                if group is None
                else f"Group {group_id} is not a share group."
            )
            return {
                "error_code": ErrorCode.group_id_not_found,
                "error_message": message,
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
            "assignor_name": SIMPLE_ASSIGNOR,
            "members": [
                {
                    "member_id": member.member_id,
                    "rack_id": member.rack_id,
                    "member_epoch": member.member_epoch,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                    "subscribed_topic_names": list(member.subscribed_topic_names),
                    "assignment": described_assignment(member.assigned, topic_names),
                }
                for member in group.members.values()
            ],
        }
