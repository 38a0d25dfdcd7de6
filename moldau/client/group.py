"""Classic consumer-group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit.

Mirrors Kafka's `ConsumerCoordinator` for the "consumer" protocol with the range assignor:
`join()` loops JoinGroup (KIP-394: a first join answered MEMBER_ID_REQUIRED is repeated with the
given member id), the leader computes the assignment, SyncGroup hands it out, and a heartbeat task
keeps the membership alive and flags `needs_rejoin` when the coordinator starts a rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.consumer_protocol import (
    PROTOCOL_TYPE,
    RANGE,
    assign_range,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from moldau.client.errors import ErrorCode, KafkaException, check_error, error_code_of
from moldau.client.tasks import stop_task
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["COORDINATOR_ERRORS", "GroupMembership", "commit_offsets", "fetch_committed_offsets"]


_REJOIN_ERRORS: Final = frozenset(
    {
        ErrorCode.rebalance_in_progress,
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.fenced_instance_id,
    }
)
COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    }
)


class GroupMembership:
    """One consumer's membership in a classic group."""

    def __init__(self, cluster: Cluster, config: ClientConfig, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = ""
        self.generation_id = -1
        self.group_instance_id = config.get_optional_str("group.instance.id")
        self.session_timeout_ms = config.get_int("session.timeout.ms")
        self.rebalance_timeout_ms = config.get_int("max.poll.interval.ms")
        self.heartbeat_interval = config.get_int("heartbeat.interval.ms") / 1000
        self.retry_backoff = config.get_int("retry.backoff.ms") / 1000
        self.assignment: list[TopicPartition] = []
        self.needs_rejoin = True
        self._heartbeat_task: asyncio.Task[None] | None = None

    async def _coordinator_request(
        self, api_key: int, data: Mapping[str, Any], **kwargs: Any
    ) -> Any:
        return await self.cluster.coordinator_request(
            self.group_id, api_key, data, errors=lambda r: [r.error_code], **kwargs
        )

    async def join(self, topics: Sequence[str], *, deadline: float) -> list[TopicPartition]:
        """(Re)join the group until an assignment arrives or `deadline` (loop time) passes."""
        await self.stop_heartbeats()
        loop = asyncio.get_running_loop()
        last_error: KafkaException | None = None
        while loop.time() < deadline:
            try:
                assignment = await self._join_once(topics)
            except KafkaException as exc:
                last_error = exc
                if exc.code is ErrorCode.unknown_member_id:
                    self.member_id = ""
                elif exc.code in COORDINATOR_ERRORS:
                    self.cluster.forget_coordinator(self.group_id)
                elif (
                    exc.code not in _REJOIN_ERRORS and exc.code is not ErrorCode.member_id_required
                ):
                    raise
                await asyncio.sleep(self.retry_backoff)
                continue
            self.assignment = assignment
            self.needs_rejoin = False
            self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
            return assignment
        raise last_error or KafkaException(
            ErrorCode.rebalance_in_progress, f"could not join group '{self.group_id}' in time"
        )

    async def _join_once(self, topics: Sequence[str]) -> list[TopicPartition]:
        timeout = (self.rebalance_timeout_ms + self.session_timeout_ms) / 1000 + 5
        response = await self._coordinator_request(
            ApiKey.JOIN_GROUP,
            {
                "group_id": self.group_id,
                "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.rebalance_timeout_ms,
                "member_id": self.member_id,
                "group_instance_id": self.group_instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": RANGE, "metadata": encode_subscription(topics)}],
                "reason": None,
            },
            timeout=timeout,
        )
        error = error_code_of(response.error_code)
        if error is ErrorCode.member_id_required:
            self.member_id = response.member_id
            raise KafkaException(error, "rejoining with the assigned member id")
        check_error(error, context=f"JoinGroup '{self.group_id}'")
        self.member_id = response.member_id
        self.generation_id = int(response.generation_id)
        assignments: list[dict[str, Any]] = []
        if response.leader == self.member_id and not getattr(response, "skip_assignment", False):
            assignments = await self._assign(response.members)
        sync = await self._coordinator_request(
            ApiKey.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": self.group_instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": RANGE,
                "assignments": assignments,
            },
            timeout=timeout,
        )
        check_error(sync.error_code, context=f"SyncGroup '{self.group_id}'")
        return decode_assignment(sync.assignment)

    async def _assign(self, members: Sequence[Any]) -> list[dict[str, Any]]:
        subscriptions = {m.member_id: decode_subscription(m.metadata).topics for m in members}
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        metadata = await self.cluster.refresh_metadata(wanted)
        counts = {name: len(info.partitions) for name, info in metadata.topics.items()}
        plan = assign_range(subscriptions, counts)
        return [
            {"member_id": member, "assignment": encode_assignment(partitions)}
            for member, partitions in plan.items()
        ]

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                response = await self._coordinator_request(
                    ApiKey.HEARTBEAT,
                    {
                        "group_id": self.group_id,
                        "generation_id": self.generation_id,
                        "member_id": self.member_id,
                        "group_instance_id": self.group_instance_id,
                    },
                )
            except KafkaException:
                continue
            error = error_code_of(response.error_code)
            if error in _REJOIN_ERRORS:
                if error is not ErrorCode.rebalance_in_progress:
                    self.member_id = "" if error is ErrorCode.unknown_member_id else self.member_id
                self.needs_rejoin = True
                return

    async def stop_heartbeats(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            await stop_task(task)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            await commit_offsets(
                self.cluster,
                self.group_id,
                offsets,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self.group_instance_id,
            )
        except KafkaException as exc:
            if exc.code in _REJOIN_ERRORS:
                self.needs_rejoin = True
            if exc.code in COORDINATOR_ERRORS:
                self.cluster.forget_coordinator(self.group_id)
            raise

    async def leave(self) -> None:
        await self.stop_heartbeats()
        if not self.member_id or self.group_instance_id is not None:
            return
        with contextlib.suppress(KafkaException):
            await self._coordinator_request(
                ApiKey.LEAVE_GROUP,
                {
                    "group_id": self.group_id,
                    "member_id": self.member_id,
                    "members": [
                        {"member_id": self.member_id, "group_instance_id": None, "reason": None}
                    ],
                },
                timeout=5,
            )
        self.member_id = ""
        self.generation_id = -1
        self.assignment = []


async def commit_offsets(
    cluster: Cluster,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> None:
    """OffsetCommit; generation -1 with no member id commits for a group without members."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for tp, offset in sorted(offsets.items()):
        grouped[tp.topic].append(
            {
                "partition_index": tp.partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    response = await cluster.coordinator_request(
        group_id,
        ApiKey.OFFSET_COMMIT,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": generation_id,
            "member_id": member_id,
            "group_instance_id": group_instance_id,
            "retention_time": -1,
            "topics": [{"name": n, "partitions": p} for n, p in grouped.items()],
        },
        errors=lambda r: [p.error_code for t in r.topics for p in t.partitions],
    )
    for topic in response.topics:
        for partition in topic.partitions:
            check_error(
                partition.error_code,
                context=f"group '{group_id}' {topic.name}-{partition.partition_index}",
            )


async def fetch_committed_offsets(
    cluster: Cluster, group_id: str, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """OffsetFetch: committed offsets of a group (-1 where nothing is committed)."""
    connection = await cluster.coordinator(group_id)
    topics: list[dict[str, Any]] | None = None
    if partitions is not None:
        grouped: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            grouped[tp.topic].append(tp.partition)
        topics = [{"name": n, "partition_indexes": p} for n, p in grouped.items()]
    version = connection.versions.pick(ApiKey.OFFSET_FETCH)
    if version >= 8:
        response = await cluster.coordinator_request(
            group_id,
            ApiKey.OFFSET_FETCH,
            {"groups": [{"group_id": group_id, "topics": topics}], "require_stable": True},
            version=version,
            errors=lambda r: [g.error_code for g in r.groups],
        )
        answer = response.groups[0]
    else:
        answer = await cluster.coordinator_request(
            group_id,
            ApiKey.OFFSET_FETCH,
            {"group_id": group_id, "topics": topics, "require_stable": True},
            version=version,
            errors=lambda r: [r.error_code],
        )
    check_error(answer.error_code, context=f"group '{group_id}'")
    offsets = {}
    for topic in answer.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, int(partition.partition_index))
            check_error(partition.error_code, context=f"group '{group_id}' {tp}")
            offsets[tp] = int(partition.committed_offset)
    return dict(sorted(offsets.items()))
