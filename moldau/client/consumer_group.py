"""Consumer-group membership with the KIP-848 protocol (`group.protocol=consumer`).

The member heartbeats (ConsumerGroupHeartbeat v1) with its subscription; the coordinator assigns
the partitions (its server-side assignor, `group.remote.assignor` to choose one) and answers
each heartbeat with the member's assignment when it changes. The member takes the new
assignment at the consumer's next poll and acknowledges it by sending its owned partitions in
the following heartbeat, which lets the coordinator hand revoked partitions to others. The
member id is the client's own (KIP-1082); a fenced or forgotten member joins again with epoch 0
and no partitions. Leaving is a heartbeat with epoch -1 (-2 for a static member, which keeps
its partitions for its session).

`ConsumerGroupMembership` has the interface of the classic `GroupMembership` the consumer
drives: `join`, `needs_rejoin`, `commit`, `leave`, `generation_id` (the member epoch).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.errors import ErrorCode, KafkaException, check_error, error_code_of
from moldau.client.group import COORDINATOR_ERRORS, commit_offsets
from moldau.client.tasks import stop_task
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["ConsumerGroupMembership"]

_HEARTBEAT_VERSION: Final = 1
_LEAVE_EPOCH: Final = -1
_LEAVE_STATIC_EPOCH: Final = -2
# The member lost its membership: it joins again with epoch 0 and gives up its partitions.
_FENCED: Final = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})


class ConsumerGroupMembership:
    """One consumer's membership in a KIP-848 consumer group."""

    def __init__(self, cluster: Cluster, config: ClientConfig, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = str(uuid.uuid4())
        self.generation_id = -1  # the member epoch once joined (what OffsetCommit carries)
        self.group_instance_id = config.get_optional_str("group.instance.id")
        self.rebalance_timeout_ms = config.get_int("max.poll.interval.ms")
        self.assignor = config.get_optional_str("group.remote.assignor")
        self.retry_backoff = config.get_int("retry.backoff.ms") / 1000
        self.heartbeat_interval = 5.0  # until the coordinator says (its heartbeat interval)
        self.assignment: list[TopicPartition] = []
        self.needs_rejoin = True
        self._topics: list[str] = []
        self._received: list[TopicPartition] | None = None  # an assignment not yet taken
        self._names: dict[uuid.UUID, str] = {}
        self._heartbeat_task: asyncio.Task[None] | None = None

    async def join(self, topics: Sequence[str], *, deadline: float) -> list[TopicPartition]:
        """The assignment to consume now: the coordinator's latest. A member not in the group
        (first join, or fenced) heartbeats with epoch 0 until the coordinator answers with its
        assignment; a member whose subscription changed sends it at once."""
        changed = list(topics) != self._topics
        self._topics = list(topics)
        if self.generation_id > 0 and self._heartbeat_task is not None:
            if changed:
                with contextlib.suppress(KafkaException):
                    await self._heartbeat_and_keep()
            if self.generation_id > 0:
                return self._take()
        await self.stop_heartbeats()
        loop = asyncio.get_running_loop()
        last_error: KafkaException | None = None
        while True:
            if loop.time() >= deadline:
                raise last_error or KafkaException(
                    ErrorCode.rebalance_in_progress, f"could not join group '{self.group_id}'"
                )
            try:
                received = await self._heartbeat()
            except KafkaException as exc:
                if exc.code not in COORDINATOR_ERRORS and exc.code not in _FENCED:
                    raise
                last_error = exc
                await asyncio.sleep(self.retry_backoff)
                continue
            if received is not None:  # (a joining member is always answered with one)
                self._received = received
                break
        self._heartbeat_task = asyncio.create_task(
            self._heartbeat_loop(), name="consumer-group-heartbeat"
        )
        return self._take()

    def _take(self) -> list[TopicPartition]:
        if self._received is not None:
            self.assignment, self._received = self._received, None
        self.needs_rejoin = False
        return list(self.assignment)

    def _request(self) -> dict[str, Any]:
        joining = self.generation_id <= 0
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": max(self.generation_id, 0),
            "instance_id": self.group_instance_id,
            "rack_id": None,
            "rebalance_timeout": self.rebalance_timeout_ms if joining else -1,
            "subscribed_topic_names": list(self._topics),
            "server_assignor": self.assignor,
            "topic_partitions": self._owned(),
        }

    def _owned(self) -> list[dict[str, Any]]:
        """What the member consumes now, by topic id: its acknowledgement of an assignment."""
        ids = {name: topic_id for topic_id, name in self._names.items()}
        by_topic: dict[str, list[int]] = {}
        for tp in self.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return [
            {"topic_id": ids[name], "partitions": sorted(partitions)}
            for name, partitions in sorted(by_topic.items())
            if name in ids
        ]

    async def _heartbeat(self) -> list[TopicPartition] | None:
        """One ConsumerGroupHeartbeat: the assignment it answered with, if it did."""
        response = await self.cluster.coordinator_request(
            self.group_id,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            self._request(),
            version=_HEARTBEAT_VERSION,
            errors=lambda r: [r.error_code],
        )
        error = error_code_of(response.error_code)
        if error in _FENCED:
            self._fenced()
            raise KafkaException(error, response.error_message or f"group '{self.group_id}'")
        check_error(error, context=f"ConsumerGroupHeartbeat '{self.group_id}'")
        self.generation_id = int(response.member_epoch)
        interval = response.heartbeat_interval  # (kio: a timedelta)
        seconds = (
            interval.total_seconds() if hasattr(interval, "total_seconds") else interval / 1000
        )
        if seconds > 0:
            self.heartbeat_interval = seconds
        if response.assignment is None:
            return None
        return await self._partitions(response.assignment.topic_partitions)

    async def _heartbeat_and_keep(self) -> None:
        """A heartbeat of a member in the group: a new assignment waits for the next poll."""
        received = await self._heartbeat()
        if received is None:
            return
        if received == self.assignment:
            self._received = None  # (back to what it owns: an assignment not taken is void)
        else:
            self._received = received
            self.needs_rejoin = True

    def _fenced(self) -> None:
        """Out of the group: join again with epoch 0, owning nothing (the same member id)."""
        self.generation_id = -1
        self.assignment = []
        self._received = None
        self.needs_rejoin = True

    async def _partitions(self, assigned: Sequence[Any]) -> list[TopicPartition]:
        unknown = [entry.topic_id for entry in assigned if entry.topic_id not in self._names]
        if unknown:
            metadata = await self.cluster.refresh_metadata(list(self._topics))
            for name, info in metadata.topics.items():
                if info.topic_id is not None:
                    self._names[info.topic_id] = name
        return sorted(
            TopicPartition(self._names[entry.topic_id], int(partition))
            for entry in assigned
            if entry.topic_id in self._names
            for partition in entry.partitions
        )

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await self._heartbeat_and_keep()
            except KafkaException as exc:
                if exc.code in _FENCED:
                    self._heartbeat_task = None
                    return
                await asyncio.sleep(self.retry_backoff)

    async def stop_heartbeats(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None and task is not asyncio.current_task():
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
            if exc.code in (ErrorCode.stale_member_epoch, *_FENCED):
                self.needs_rejoin = True
            raise

    async def leave(self) -> None:
        await self.stop_heartbeats()
        if self.generation_id > 0:
            request = self._request()
            request["member_epoch"] = (
                _LEAVE_STATIC_EPOCH if self.group_instance_id is not None else _LEAVE_EPOCH
            )
            with contextlib.suppress(KafkaException):
                await self.cluster.coordinator_request(
                    self.group_id,
                    ApiKey.CONSUMER_GROUP_HEARTBEAT,
                    request,
                    version=_HEARTBEAT_VERSION,
                    errors=lambda r: [r.error_code],
                    timeout=5,
                )
        self.generation_id = -1
        self.assignment = []
        self._received = None
