"""`GroupCoordinator`: every group operation of one `__consumer_offsets` partition, without I/O.

The pure core behind the runtime (Kafka's GroupCoordinatorShard): operations return
`CoordinatorResult(records, response, deliveries)`; durable state changes by `replay(record)`;
time moves only through `tick()`, which fires the session, rebalance, initial-delay and
retention timers whose deadlines `next_deadline()` reports. While the partition is being loaded
every operation answers COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

from moldau.clock import Clock, monotonic_ms
from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.classic import (
    ClassicGroupProtocol,
    JoinGroupRequest,
    join_error,
    sync_response,
)
from moldau.coordinator.classic_group import ClassicGroup, ClassicGroupState
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupProtocol,
    heartbeat_error,
)
from moldau.coordinator.consumer_group import ConsumerGroup
from moldau.coordinator.offsets import OffsetManager, PartitionCommit
from moldau.coordinator.records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
)
from moldau.coordinator.result import CoordinatorResult, Responder, Response
from moldau.coordinator.share import (
    SESSION_TIMER,
    ShareGroupHeartbeatRequest,
    ShareGroupProtocol,
    share_heartbeat_error,
)
from moldau.coordinator.share_group import SHARE_PROTOCOL_TYPE, ShareGroup
from moldau.coordinator.store import CommittedOffset, GroupStore, heartbeat_timer
from moldau.protocol.errors import ErrorCode

RETENTION_TIMER = ("retention",)
LOADING = ErrorCode.coordinator_load_in_progress


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self.config = config
        self._clock = clock
        self._store = GroupStore()
        self._classic = ClassicGroupProtocol(self._store, config, clock)
        self._offsets = OffsetManager(self._store, config, clock)
        self._consumer = ConsumerGroupProtocol(self._store, config, clock)
        self._share = ShareGroupProtocol(self._store, clock)
        self.loading = True

    # ------------------------------------------------------------------------------ loading

    def replay(self, record: CoordinatorRecord) -> None:
        self._store.replay(record, self._clock.now_ms())

    def finish_loading(self) -> None:
        """Serve: start the retention check and give every loaded member a session, as
        Kafka's onGroupLoaded does (a member whose client went away, or came back under a new
        id, would otherwise stay in its group for good, and every rebalance would wait for it)."""
        self.loading = False
        now = monotonic_ms(self._clock)
        self._store.timers.schedule(
            RETENTION_TIMER, now + self.config.offsets_retention_check_interval_ms
        )
        session = self.config.group_consumer_session_timeout_ms
        for group_id, group in self._store.groups.items():
            if isinstance(group, ConsumerGroup):
                for member_id in group.members:
                    key = ("consumer-session", group_id, member_id)
                    self._store.timers.schedule(key, now + session)
            elif isinstance(group, ShareGroup):  # (a group's own share.session.timeout.ms
                for member_id in group.members:  # applies from the member's next heartbeat)
                    key = (SESSION_TIMER, group_id, member_id)
                    self._store.timers.schedule(
                        key, now + self.config.group_share_session_timeout_ms
                    )
            elif isinstance(group, ClassicGroup):
                for member_id, member in group.members.items():
                    self._store.timers.schedule(
                        heartbeat_timer(group_id, member_id), now + member.session_timeout_ms
                    )

    @property
    def store(self) -> GroupStore:
        return self._store

    # ------------------------------------------------------------------------ classic groups

    def join_group(self, request: JoinGroupRequest, respond: Responder) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response=join_error(LOADING, request.member_id))
        return self._classic.join_group(request, respond)

    def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        respond: Responder,
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response=sync_response(LOADING, None))
        return self._classic.sync_group(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            respond=respond,
        )

    def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response={"error_code": LOADING})
        return self._classic.heartbeat(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )

    def leave_group(
        self, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response={"error_code": LOADING, "members": []})
        return self._classic.leave_group(group_id=group_id, members=members)

    # ------------------------------------------------------------------------------ offsets

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> CoordinatorResult:
        if self.loading:
            return self._offsets.commit_offsets_refused(commits, LOADING)
        return self._offsets.commit_offsets(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            commits=commits,
        )

    def txn_commit_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> CoordinatorResult:
        if self.loading:
            return self._offsets.commit_offsets_refused(commits, LOADING)
        return self._offsets.txn_commit_offsets(
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            commits=commits,
        )

    def replay_transactional(self, producer_id: int, record: CoordinatorRecord) -> None:
        self._store.replay_transactional(producer_id, record)

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of the producer: its pending offsets take effect or go."""
        self._store.replay_marker(producer_id, committed, self._clock.now_ms())

    def fetch_offsets(
        self,
        *,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> Response:
        if self.loading:
            return {"group_id": group_id, "error_code": LOADING, "topics": []}
        return self._offsets.fetch_offsets(
            group_id=group_id,
            topics=topics,
            member_id=member_id,
            member_epoch=member_epoch,
            require_stable=require_stable,
        )

    def delete_offsets(
        self, *, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response={"error_code": LOADING, "topics": []})
        return self._offsets.delete_offsets(group_id=group_id, topics=topics)

    # ------------------------------------------------------------------------- admin views

    def describe_group(self, group_id: str) -> Response:
        """One DescribeGroups entry; an unknown group is Dead with GROUP_ID_NOT_FOUND."""
        group = self._store.groups.get(group_id)
        answer: Response = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": "Dead",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }
        if self.loading:
            answer["error_code"] = LOADING
            return answer
        if group is None:
            answer["error_code"] = ErrorCode.group_id_not_found
            answer["error_message"] = f"Group {group_id} not found."
            return answer
        if isinstance(group, ConsumerGroup | ShareGroup):
            answer["error_code"] = ErrorCode.group_id_not_found
            answer["error_message"] = f"Group {group_id} is not a classic group."
            answer["group_state"] = group.state()
            answer["protocol_type"] = (
                SHARE_PROTOCOL_TYPE if isinstance(group, ShareGroup) else "consumer"
            )
            return answer
        stable = group.is_in(ClassicGroupState.STABLE)
        answer["group_state"] = group.state.value
        answer["protocol_type"] = group.protocol_type or ""
        answer["protocol_data"] = (group.protocol_name or "") if stable else ""
        answer["members"] = [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_metadata": member.metadata_for(group.protocol_name) if stable else b"",
                "member_assignment": member.assignment if stable else b"",
            }
            for member in group.members.values()
        ]
        return answer

    def committed_offsets(self) -> Iterator[CommittedOffset]:
        """Every group's committed offsets (none while loading)."""
        if self.loading:
            return iter(())
        return self._store.committed_offsets()

    def list_groups(
        self, *, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> Response:
        if self.loading:
            return {"error_code": LOADING, "groups": []}
        states = {state.lower() for state in states_filter or []}
        types = {group_type.lower() for group_type in types_filter or []}
        listed = []
        for group_id, group in self._store.groups.items():
            if isinstance(group, ClassicGroup):
                state, group_type = group.state.value, "classic"
                protocol_type = group.protocol_type or ""
            elif isinstance(group, ShareGroup):
                state, group_type = group.state(), SHARE_PROTOCOL_TYPE
                protocol_type = SHARE_PROTOCOL_TYPE
            else:
                state, group_type, protocol_type = group.state(), "consumer", "consumer"
            if (states and state.lower() not in states) or (types and group_type not in types):
                continue
            listed.append(
                {
                    "group_id": group_id,
                    "protocol_type": protocol_type,
                    "group_state": state,
                    "group_type": group_type,
                }
            )
        return {"error_code": ErrorCode.none, "groups": listed}

    def delete_groups(self, group_ids: list[str]) -> CoordinatorResult:
        result = CoordinatorResult()
        answers = []
        for group_id in group_ids:
            code = LOADING if self.loading else self._delete_group(group_id, result)
            answers.append({"group_id": group_id, "error_code": code})
        result.response = {"results": answers}
        return result

    def on_topics_deleted(self, topics: set[str]) -> CoordinatorResult:
        """Topics were deleted: their committed offsets go (tombstones), and so does a group
        they leave with neither members nor offsets, as Kafka's coordinator does."""
        result = CoordinatorResult()
        if self.loading or not topics:
            return result
        records, emptied = self._offsets.delete_offsets_of_topics(topics)
        for record in records:
            self.replay(record)
        result.records.extend(records)
        for group_id in sorted(emptied):
            self._delete_group(group_id, result)  # (refused, and so kept, while it has members)
        return result

    def _delete_group(self, group_id: str, result: CoordinatorResult) -> ErrorCode:
        group = self._store.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        records = self._offsets.delete_all_offsets_records(group_id)
        if isinstance(group, ClassicGroup):
            if group.is_in(ClassicGroupState.DEAD):
                return ErrorCode.group_id_not_found
            if not group.is_in(ClassicGroupState.EMPTY):
                return ErrorCode.non_empty_group
            records.append(CoordinatorRecord(GroupMetadataKey(group_id=group_id)))
        elif isinstance(group, ShareGroup):
            if group.members:
                return ErrorCode.non_empty_group
            records.append(
                CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(group_id=group_id))
            )
            records.append(CoordinatorRecord(ShareGroupMetadataKey(group_id=group_id)))
        else:
            if group.members:
                return ErrorCode.non_empty_group
            records.append(
                CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id))
            )
            records.append(CoordinatorRecord(ConsumerGroupMetadataKey(group_id=group_id)))
        for record in records:
            self.replay(record)
        result.records.extend(records)
        return ErrorCode.none

    # ---------------------------------------------------------------------- KIP-848 groups

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response=heartbeat_error(LOADING))
        return self._consumer.heartbeat(request, topics)

    def consumer_group_describe(
        self, group_id: str, topic_names: Mapping[uuid.UUID, str]
    ) -> Response:
        answer = self._consumer.describe(group_id, topic_names)
        if self.loading:
            answer["error_code"] = LOADING
        return answer

    # ------------------------------------------------------------------------ share groups

    def share_group_heartbeat(
        self, request: ShareGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> CoordinatorResult:
        if self.loading:
            return CoordinatorResult(response=share_heartbeat_error(LOADING))
        return self._share.heartbeat(request, topics)

    def share_group_describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> Response:
        answer = self._share.describe(group_id, topic_names)
        if self.loading:
            answer["error_code"] = LOADING
        return answer

    # ------------------------------------------------------------------------------- timers

    def next_deadline(self) -> int | None:
        """The millisecond of `timers_now_ms` at which `tick` has work to do, if any."""
        return self._store.timers.next_deadline()

    def timers_now_ms(self) -> int:
        """The clock the timers run on: monotonic, as Kafka's timer wheel, so a wall-clock
        step neither expires every member's session at once nor keeps a silent one in its
        group (commit timestamps and offset retention stay on the wall clock, as Kafka's)."""
        return monotonic_ms(self._clock)

    def tick(self) -> CoordinatorResult:
        """Fire every timer due at the clock's current time."""
        result = CoordinatorResult()
        if self.loading:
            return result
        now = monotonic_ms(self._clock)
        for key in self._store.timers.pop_expired(now):
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == "retention":
                result.merge(self._offsets.expire_offsets())
                self._store.timers.schedule(
                    RETENTION_TIMER, now + self.config.offsets_retention_check_interval_ms
                )
            elif kind in ("consumer-session", "consumer-revocation"):
                result.merge(self._consumer.on_timer(key))
            elif kind == SESSION_TIMER:
                result.merge(self._share.on_timer(key))
            else:
                result.merge(self._classic.on_timer(key))
        return result
