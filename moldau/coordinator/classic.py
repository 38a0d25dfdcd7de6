"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Mirrors the classic-group half of Kafka's GroupMetadataManager: required member ids (KIP-394),
static membership (KIP-345), `group.initial.rebalance.delay.ms`, session and rebalance timeouts,
`group.max.size`. JoinGroup and SyncGroup park their responders until the rebalance step they
wait for completes; completed responses leave as `deliveries` of whichever operation or timer
completed them. See `classic_group.py` for the state machine.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass

from moldau.clock import Clock, monotonic_ms
from moldau.coordinator.classic_group import ClassicGroup, ClassicGroupState, ClassicMember
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.result import CoordinatorResult, Responder, Response
from moldau.coordinator.store import GroupStore, group_metadata_record, heartbeat_timer
from moldau.protocol.errors import ErrorCode

S = ClassicGroupState


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True


def join_error(code: ErrorCode, member_id: str = "") -> Response:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_response(code: ErrorCode, group: ClassicGroup | None, assignment: bytes = b"") -> Response:
    return {
        "error_code": code,
        "protocol_type": group.protocol_type if group and code == ErrorCode.none else None,
        "protocol_name": group.protocol_name if group and code == ErrorCode.none else None,
        "assignment": assignment,
    }


def _immediate(response: Response) -> CoordinatorResult:
    return CoordinatorResult(response=response)


class ClassicGroupProtocol:
    def __init__(self, store: GroupStore, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    # ---------------------------------------------------------------------------- JoinGroup

    def join_group(self, request: JoinGroupRequest, respond: Responder) -> CoordinatorResult:
        config = self._config
        if not request.group_id:
            return _immediate(join_error(ErrorCode.invalid_group_id, request.member_id))
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            return _immediate(join_error(ErrorCode.invalid_session_timeout, request.member_id))
        existing = self._store.groups.get(request.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            return _immediate(join_error(ErrorCode.inconsistent_group_protocol, request.member_id))
        if existing is None and request.member_id:
            return _immediate(join_error(ErrorCode.unknown_member_id, request.member_id))
        names = [name for name, _ in request.protocols]
        probe = existing or ClassicGroup(request.group_id)
        if not probe.supports_protocols(request.protocol_type, names):
            return _immediate(join_error(ErrorCode.inconsistent_group_protocol, request.member_id))
        now = self._clock.now_ms()
        group = self._store.ensure_classic_group(request.group_id, now)
        assert isinstance(group, ClassicGroup)
        if group.state is S.DEAD:
            return _immediate(join_error(ErrorCode.coordinator_not_available, request.member_id))
        if not request.member_id:
            return self._join_unknown_member(group, request, respond)
        return self._join_known_member(group, request, respond)

    def _join_unknown_member(
        self, group: ClassicGroup, request: JoinGroupRequest, respond: Responder
    ) -> CoordinatorResult:
        instance_id = request.group_instance_id
        if instance_id is not None:
            new_member_id = f"{instance_id}-{uuid.uuid4()}"
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                return self._replace_static_member(
                    group, old_member_id, new_member_id, request, respond
                )
            if len(group.members) + len(group.pending_members) >= self._config.group_max_size:
                return _immediate(join_error(ErrorCode.group_max_size_reached))
            return self._add_member_and_rebalance(group, new_member_id, request, respond)
        new_member_id = f"{request.client_id}-{uuid.uuid4()}"
        if len(group.members) + len(group.pending_members) >= self._config.group_max_size:
            return _immediate(join_error(ErrorCode.group_max_size_reached))
        if request.require_known_member_id:
            group.pending_members.add(new_member_id)
            self._store.timers.schedule(
                heartbeat_timer(group.group_id, new_member_id),
                monotonic_ms(self._clock) + request.session_timeout_ms,
            )
            return _immediate(join_error(ErrorCode.member_id_required, new_member_id))
        return self._add_member_and_rebalance(group, new_member_id, request, respond)

    def _join_known_member(
        self, group: ClassicGroup, request: JoinGroupRequest, respond: Responder
    ) -> CoordinatorResult:
        member_id = request.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._store.timers.cancel(heartbeat_timer(group.group_id, member_id))
            if len(group.members) >= self._config.group_max_size:
                return _immediate(join_error(ErrorCode.group_max_size_reached, member_id))
            return self._add_member_and_rebalance(group, member_id, request, respond)
        fenced = self._fencing_error(group, member_id, request.group_instance_id)
        if fenced is not None:
            return _immediate(join_error(fenced, member_id))
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            result = CoordinatorResult()
            if member.awaiting_join is not None:
                result.deliveries.append(
                    (member.awaiting_join, join_error(ErrorCode.rebalance_in_progress, member_id))
                )
            self._update_member(member, request, respond)
            result.merge(self._try_complete_join(group))
            return result
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.same_protocols(request.protocols):
                return _immediate(self._join_response(group, member))
            self._update_member(member, request, respond)
            return self._prepare_rebalance(group)
        if group.is_in(S.STABLE):
            if member_id == group.leader_id or not member.same_protocols(request.protocols):
                self._update_member(member, request, respond)
                return self._prepare_rebalance(group)
            return _immediate(self._join_response(group, member))
        return _immediate(join_error(ErrorCode.unknown_member_id, member_id))

    def _update_member(
        self, member: ClassicMember, request: JoinGroupRequest, respond: Responder
    ) -> None:
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.awaiting_join = respond

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, request: JoinGroupRequest, respond: Responder
    ) -> CoordinatorResult:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=list(request.protocols),
            awaiting_join=respond,
            is_new=True,
        )
        group.add_member(member)
        group.new_member_added = True
        self._store.timers.schedule(
            heartbeat_timer(group.group_id, member_id),
            monotonic_ms(self._clock) + request.session_timeout_ms,
        )
        if group.is_in(S.PREPARING_REBALANCE):
            return self._try_complete_join(group)
        return self._prepare_rebalance(group)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        request: JoinGroupRequest,
        respond: Responder,
    ) -> CoordinatorResult:
        """A static member restarted: it takes over its old member id's place (KIP-345)."""
        result = CoordinatorResult()
        old = group.members[old_member_id]
        if old.awaiting_join is not None:
            fenced = join_error(ErrorCode.fenced_instance_id, old_member_id)
            result.deliveries.append((old.awaiting_join, fenced))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            result.deliveries.append(
                (old.awaiting_sync, sync_response(ErrorCode.fenced_instance_id, None))
            )
            old.awaiting_sync = None
        assert request.group_instance_id is not None
        self._store.timers.cancel(heartbeat_timer(group.group_id, old_member_id))
        group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        member = group.members[new_member_id]
        protocols_changed = not member.same_protocols(request.protocols)
        self._store.timers.schedule(
            heartbeat_timer(group.group_id, new_member_id),
            monotonic_ms(self._clock) + request.session_timeout_ms,
        )
        if group.is_in(S.STABLE) and not protocols_changed:
            member.session_timeout_ms = request.session_timeout_ms
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            member.client_id, member.client_host = request.client_id, request.client_host
            # No rebalance: persist the new member id and answer with the current generation.
            result.records.append(group_metadata_record(group))
            response = self._join_response(group, member)
            response["skip_assignment"] = new_member_id == group.leader_id
            result.response = response
            return result
        self._update_member(member, request, respond)
        if group.is_in(S.PREPARING_REBALANCE):
            result.merge(self._try_complete_join(group))
        else:
            result.merge(self._prepare_rebalance(group))
        return result

    def _join_response(self, group: ClassicGroup, member: ClassicMember) -> Response:
        members = []
        if member.member_id == group.leader_id:
            members = [
                {
                    "member_id": other.member_id,
                    "group_instance_id": other.group_instance_id,
                    "metadata": other.metadata_for(group.protocol_name),
                }
                for other in group.members.values()
            ]
        return {
            "error_code": ErrorCode.none,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id or "",
            "skip_assignment": False,
            "member_id": member.member_id,
            "members": members,
        }

    def _fencing_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    # ------------------------------------------------------------------------ rebalancing

    def _prepare_rebalance(self, group: ClassicGroup) -> CoordinatorResult:
        result = CoordinatorResult()
        now = self._clock.now_ms()
        timers_now = monotonic_ms(self._clock)
        if group.is_in(S.COMPLETING_REBALANCE):
            self._store.timers.cancel(("sync", group.group_id))
            for member in group.members.values():
                if member.awaiting_sync is not None:
                    response = sync_response(ErrorCode.rebalance_in_progress, None)
                    result.deliveries.append((member.awaiting_sync, response))
                    member.awaiting_sync = None
        rebalance_timeout = group.rebalance_timeout_ms()
        initial_delay = self._config.group_initial_rebalance_delay_ms
        if group.is_in(S.EMPTY) and initial_delay > 0:
            delay = min(initial_delay, rebalance_timeout)
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            self._store.timers.schedule(("join", group.group_id), timers_now + delay)
        else:
            group.in_initial_delay = False
            self._store.timers.schedule(("join", group.group_id), timers_now + rebalance_timeout)
        group.transition_to(S.PREPARING_REBALANCE, now)
        result.merge(self._try_complete_join(group))
        return result

    def _try_complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        if (
            group.is_in(S.PREPARING_REBALANCE)
            and not group.in_initial_delay
            and group.all_members_joined()
        ):
            return self._complete_join(group)
        return CoordinatorResult()

    def _on_join_timer(self, group: ClassicGroup) -> CoordinatorResult:
        if not group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult()
        if group.in_initial_delay:
            remaining = group.initial_delay_remaining_ms
            if group.new_member_added and remaining > 0:
                delay = min(self._config.group_initial_rebalance_delay_ms, remaining)
                group.new_member_added = False
                group.initial_delay_remaining_ms = remaining - delay
                self._store.timers.schedule(
                    ("join", group.group_id), monotonic_ms(self._clock) + delay
                )
                return CoordinatorResult()
            group.in_initial_delay = False
        return self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        result = CoordinatorResult()
        now = self._clock.now_ms()
        timers_now = monotonic_ms(self._clock)
        self._store.timers.cancel(("join", group.group_id))
        group.in_initial_delay = False
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            result.merge(self._remove_member(group, member.member_id))
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(S.EMPTY, now)
            result.records.append(group_metadata_record(group))
            return result
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition_to(S.COMPLETING_REBALANCE, now)
        self._store.timers.schedule(
            ("sync", group.group_id), timers_now + group.rebalance_timeout_ms()
        )
        for member in group.members.values():
            assert member.awaiting_join is not None
            result.deliveries.append((member.awaiting_join, self._join_response(group, member)))
            member.awaiting_join = None
            member.is_new = False
            self._store.timers.schedule(
                heartbeat_timer(group.group_id, member.member_id),
                timers_now + member.session_timeout_ms,
            )
        return result

    def _on_sync_timer(self, group: ClassicGroup) -> CoordinatorResult:
        """The leader did not send its assignment in time: drop who did not sync, rebalance."""
        result = CoordinatorResult()
        if not group.is_in(S.COMPLETING_REBALANCE):
            return result
        for member in [m for m in group.members.values() if m.awaiting_sync is None]:
            result.merge(self._remove_member(group, member.member_id))
        result.merge(self._prepare_rebalance(group))
        return result

    def _remove_member(self, group: ClassicGroup, member_id: str) -> CoordinatorResult:
        result = CoordinatorResult()
        self._store.timers.cancel(heartbeat_timer(group.group_id, member_id))
        member = group.remove_member(member_id)
        if member is None:
            return result
        if member.awaiting_join is not None:
            result.deliveries.append(
                (member.awaiting_join, join_error(ErrorCode.unknown_member_id, member_id))
            )
        if member.awaiting_sync is not None:
            result.deliveries.append(
                (member.awaiting_sync, sync_response(ErrorCode.unknown_member_id, None))
            )
        return result

    def _after_members_removed(self, group: ClassicGroup) -> CoordinatorResult:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(group)
        if group.is_in(S.PREPARING_REBALANCE):
            return self._try_complete_join(group)
        return CoordinatorResult()

    # ---------------------------------------------------------------------------- SyncGroup

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
        group = self._store.classic_group(group_id)
        if group is None:
            return _immediate(sync_response(ErrorCode.unknown_member_id, None))
        if group.is_in(S.DEAD):
            return _immediate(sync_response(ErrorCode.coordinator_not_available, None))
        fenced = self._fencing_error(group, member_id, group_instance_id)
        if fenced is not None:
            return _immediate(sync_response(fenced, None))
        if generation_id != group.generation:
            return _immediate(sync_response(ErrorCode.illegal_generation, None))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return _immediate(sync_response(ErrorCode.inconsistent_group_protocol, None))
        if group.is_in(S.PREPARING_REBALANCE):
            return _immediate(sync_response(ErrorCode.rebalance_in_progress, None))
        member = group.members[member_id]
        self._store.timers.schedule(
            heartbeat_timer(group_id, member_id),
            monotonic_ms(self._clock) + member.session_timeout_ms,
        )
        if group.is_in(S.STABLE):
            return _immediate(sync_response(ErrorCode.none, group, member.assignment))
        if not group.is_in(S.COMPLETING_REBALANCE):
            return _immediate(sync_response(ErrorCode.unknown_member_id, None))
        result = CoordinatorResult()
        if member.awaiting_sync is not None:
            response = sync_response(ErrorCode.rebalance_in_progress, None)
            result.deliveries.append((member.awaiting_sync, response))
        member.awaiting_sync = respond
        if member_id != group.leader_id:
            return result
        for each in group.members.values():
            each.assignment = assignments.get(each.member_id, b"")
        self._store.timers.cancel(("sync", group_id))
        group.transition_to(S.STABLE, self._clock.now_ms())
        result.records.append(group_metadata_record(group))
        for each in group.members.values():
            if each.awaiting_sync is not None:
                response = sync_response(ErrorCode.none, group, each.assignment)
                result.deliveries.append((each.awaiting_sync, response))
                each.awaiting_sync = None
        return result

    # ---------------------------------------------------------------------------- Heartbeat

    def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> CoordinatorResult:
        def answer(code: ErrorCode) -> CoordinatorResult:
            return _immediate({"error_code": code})

        group = self._store.classic_group(group_id)
        if group is None or group.is_in(S.EMPTY):
            return answer(ErrorCode.unknown_member_id)
        if group.is_in(S.DEAD):
            return answer(ErrorCode.coordinator_not_available)
        fenced = self._fencing_error(group, member_id, group_instance_id)
        if fenced is not None:
            return answer(fenced)
        if generation_id != group.generation:
            return answer(ErrorCode.illegal_generation)
        member = group.members[member_id]
        self._store.timers.schedule(
            heartbeat_timer(group_id, member_id),
            monotonic_ms(self._clock) + member.session_timeout_ms,
        )
        if group.is_in(S.PREPARING_REBALANCE):
            return answer(ErrorCode.rebalance_in_progress)
        return answer(ErrorCode.none)

    # --------------------------------------------------------------------------- LeaveGroup

    def leave_group(
        self, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> CoordinatorResult:
        """Remove members given as (member id, group instance id); batched since KIP-345."""
        group = self._store.classic_group(group_id)
        if group is None:
            return _immediate({"error_code": ErrorCode.unknown_member_id, "members": []})
        if group.is_in(S.DEAD):
            return _immediate({"error_code": ErrorCode.coordinator_not_available, "members": []})
        result = CoordinatorResult()
        answers = []
        removed_any = False
        for member_id, instance_id in members:
            code = ErrorCode.none
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    code = ErrorCode.unknown_member_id
                elif member_id and known != member_id:
                    code = ErrorCode.fenced_instance_id
                else:
                    result.merge(self._remove_member(group, known))
                    removed_any = True
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._store.timers.cancel(heartbeat_timer(group_id, member_id))
                removed_any = True
            elif member_id in group.members:
                result.merge(self._remove_member(group, member_id))
                removed_any = True
            else:
                code = ErrorCode.unknown_member_id
            answers.append(
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            )
        if removed_any:
            result.merge(self._after_members_removed(group))
        result.response = {"error_code": ErrorCode.none, "members": answers}
        return result

    # ------------------------------------------------------------------------------- timers

    def on_timer(self, key: Hashable) -> CoordinatorResult:
        assert isinstance(key, tuple)
        kind, group_id = key[0], key[1]
        group = self._store.classic_group(group_id)
        if group is None:
            return CoordinatorResult()
        if kind == "join":
            return self._on_join_timer(group)
        if kind == "sync":
            return self._on_sync_timer(group)
        member_id = key[2]
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            return self._try_complete_join(group)
        member = group.members.get(member_id)
        if member is None or member.awaiting_join is not None or member.awaiting_sync is not None:
            return CoordinatorResult()  # a parked request counts as a heartbeat
        result = self._remove_member(group, member_id)
        result.merge(self._after_members_removed(group))
        return result
