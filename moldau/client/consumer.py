"""`Consumer`: assign/seek/poll from offsets, or consume as a member of a classic group.

Mirrors confluent-kafka's `Consumer` shape: `subscribe(topics)` or `assign(partitions)`,
`await poll(timeout)` returning a `Message` or None, `consume(n)`, `commit()`, `committed()`,
`seek()`, `get_watermark_offsets()`, `offsets_for_times()`, `close()`. Positions may be logical:
`OFFSET_BEGINNING`, `OFFSET_END`, `OFFSET_STORED` (the group's committed offset). Fetching happens
inside `poll`, one Fetch per partition leader, all leaders at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from moldau.client.base import ClientBase
from moldau.client.cluster import Cluster
from moldau.client.config import DEFAULTS, ClientConfig
from moldau.client.consumer_group import ConsumerGroupMembership
from moldau.client.errors import ConfigException, ErrorCode, KafkaException, error_code_of
from moldau.client.fetcher import build_fetch_request, records_from_fetch
from moldau.client.group import GroupMembership, fetch_committed_offsets
from moldau.client.message import Message
from moldau.client.offsets import EARLIEST, LATEST, ListOffsetsResult, list_offsets
from moldau.client.read_replicas import ReadReplicas
from moldau.client.sync import SyncFacade
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["OFFSET_BEGINNING", "OFFSET_END", "OFFSET_STORED", "Consumer", "SyncConsumer"]

OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
OFFSET_STORED: Final = -1000

# Fetch errors that retrying cannot cure; the consumer retries every other one after a backoff.
_FATAL_FETCH_ERRORS: Final = frozenset(
    {
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.unsupported_version,
        ErrorCode.unsupported_compression_type,
    }
)


def _isolation_level(value: str) -> int:
    text = value.strip().lower()
    if text == "read_committed":
        return 1
    if text == "read_uncommitted":
        return 0
    raise ConfigException(
        f"setting 'isolation.level' must be read_committed or read_uncommitted, got {value!r}"
    )


def _reset_spec(value: str) -> int | None:
    text = value.strip().lower()
    if text in ("earliest", "smallest", "beginning"):
        return EARLIEST
    if text in ("latest", "largest", "end"):
        return LATEST
    if text in ("error", "none"):
        return None
    raise ConfigException(
        f"setting 'auto.offset.reset' must be earliest, latest or error, got {value!r}"
    )


# Settings of the classic protocol's client-side membership, which KIP-848 moves to the broker.
_CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def _membership(
    cluster: Cluster, config: ClientConfig, group_id: str
) -> GroupMembership | ConsumerGroupMembership:
    """The group protocol's membership (`group.protocol`: classic, or consumer for KIP-848)."""
    protocol = config.get_str("group.protocol").strip().lower()
    if protocol == "classic":
        if config.get_optional_str("group.remote.assignor"):
            raise ConfigException("group.remote.assignor needs group.protocol=consumer")
        return GroupMembership(cluster, config, group_id)
    if protocol != "consumer":
        raise ConfigException(f"group.protocol must be classic or consumer, not {protocol!r}")
    for name in _CLASSIC_ONLY:
        if str(config.get(name)) != str(DEFAULTS[name]):
            raise ConfigException(
                f"{name} is not used with group.protocol=consumer: the group coordinator "
                "decides it (group.consumer.* broker settings)"
            )
    return ConsumerGroupMembership(cluster, config, group_id)


class Consumer(ClientBase):
    """An asyncio consumer; use as `async with Consumer({...}) as consumer:`."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(config)
        self.isolation_level = _isolation_level(self.config.get_str("isolation.level"))
        self.auto_offset_reset = _reset_spec(self.config.get_str("auto.offset.reset"))
        self.enable_auto_commit = self.config.get_bool("enable.auto.commit")
        self.auto_commit_interval = self.config.get_int("auto.commit.interval.ms") / 1000
        group_id = self.config.get_optional_str("group.id")
        self.group = _membership(self.cluster, self.config, group_id) if group_id else None
        self._subscription: list[str] = []
        self._assignment: list[TopicPartition] = []
        self._fetch_positions: dict[TopicPartition, int] = {}
        self._pending_seeks: dict[TopicPartition, int] = {}
        self._consumed: dict[TopicPartition, int] = {}
        self._end_offsets: dict[TopicPartition, int] = {}
        self._buffer: deque[Message] = deque()
        self._last_commit = 0.0
        self._closed = False
        # Called with the error when fetching starts failing on retriable errors (a broker gone,
        # a leader moving), once until a fetch succeeds again: what librdkafka's error_cb hears.
        self.on_transport_error: Callable[[KafkaException], None] | None = None
        self._failing = False
        self._read_replicas = ReadReplicas(self.config.get_int("metadata.max.age.ms") / 1000)

    # --- assignment --------------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str]) -> None:
        """Consume `topics` as a member of the group named by `group.id`."""
        if self.group is None:
            raise ConfigException("subscribe() needs 'group.id' (or use assign())")
        self._subscription = list(topics)
        self.group.needs_rejoin = True

    def assign(
        self,
        partitions: Iterable[TopicPartition],
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Consume exactly these partitions, from `offsets` (default: the stored offset)."""
        self._assignment = list(partitions)
        self._fetch_positions.clear()
        self._consumed.clear()
        self._buffer.clear()
        self._pending_seeks = {
            tp: (offsets or {}).get(tp, OFFSET_STORED) for tp in self._assignment
        }

    def unassign(self) -> None:
        self.assign([])

    async def unsubscribe(self) -> None:
        """Leave the group and stop consuming its partitions."""
        self._subscription = []
        if self.group is not None:
            await self.group.leave()
        self.unassign()

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch `tp` from `offset` next (an absolute offset or OFFSET_BEGINNING / OFFSET_END)."""
        self._pending_seeks[tp] = offset
        self._fetch_positions.pop(tp, None)
        self._buffer = deque(m for m in self._buffer if (m.topic(), m.partition()) != tp)

    def position(self, tp: TopicPartition) -> int | None:
        """The offset of the next message `poll` returns for `tp` (None if not known yet)."""
        if tp in self._consumed:
            return self._consumed[tp]
        return self._fetch_positions.get(tp)

    def at_end(self, tp: TopicPartition) -> bool:
        """True once everything up to the end seen by the last fetch has been returned."""
        end = self._end_offsets.get(tp)
        position = self.position(tp)
        return end is not None and position is not None and position >= end

    def all_at_end(self) -> bool:
        return bool(self._assignment) and all(self.at_end(tp) for tp in self._assignment)

    # --- offsets -----------------------------------------------------------------------------

    async def get_watermark_offsets(self, tp: TopicPartition) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark of `tp`."""
        results = await list_offsets(self.cluster, {tp: EARLIEST})
        low = results[tp].offset
        results = await list_offsets(self.cluster, {tp: LATEST})
        return low, results[tp].offset

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """For each partition the first offset with a timestamp at or after the given one."""
        return await list_offsets(self.cluster, timestamps, isolation_level=self.isolation_level)

    async def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        if self.group is None:
            raise ConfigException("committed() needs 'group.id'")
        return await fetch_committed_offsets(self.cluster, self.group.group_id, partitions)

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit `offsets` (default: the position after every message returned so far)."""
        if self.group is None:
            raise ConfigException("commit() needs 'group.id'")
        offsets = dict(self._consumed if offsets is None else offsets)
        if offsets:
            await self.group.commit(offsets)
        self._last_commit = asyncio.get_running_loop().time()

    # --- polling -----------------------------------------------------------------------------

    async def poll(self, timeout: float = 1.0) -> Message | None:
        messages = await self.consume(1, timeout)
        return messages[0] if messages else None

    async def consume(self, num_messages: int = 1, timeout: float = 1.0) -> list[Message]:
        """Up to `num_messages` messages, waiting at most `timeout` seconds for the first."""
        if self._closed:
            raise KafkaException(ErrorCode.unknown_server_error, "the consumer is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await self._maintain_group(deadline)
            if self._buffer:
                return self._take(num_messages)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self._fetch(remaining)
            if not self._buffer and loop.time() >= deadline:
                return []

    def _take(self, count: int) -> list[Message]:
        taken: list[Message] = []
        while self._buffer and len(taken) < count:
            message = self._buffer.popleft()
            taken.append(message)
            self._consumed[TopicPartition(message.topic(), message.partition())] = (
                message.offset() + 1
            )
        return taken

    async def _maintain_group(self, deadline: float) -> None:
        if self.group is None or not self._subscription:
            return
        loop = asyncio.get_running_loop()
        if self.enable_auto_commit and self.group.generation_id >= 0:
            due = loop.time() - self._last_commit >= self.auto_commit_interval
            if (due or self.group.needs_rejoin) and self._consumed:
                with contextlib.suppress(KafkaException):
                    await self.commit()
        if not self.group.needs_rejoin:
            return
        join_deadline = max(deadline, loop.time() + self.config.request_timeout)
        assignment = await self.group.join(self._subscription, deadline=join_deadline)
        self.assign(assignment)

    async def _resolve_positions(self, timeout: float) -> None:
        """Turn pending seeks (stored, beginning, end) into absolute fetch positions. A seek
        that cannot be resolved yet (the leader moved, the coordinator is away) stays pending
        for the next poll, as Kafka's consumer keeps resetting positions; the poll is not held
        past `timeout` for it. Errors no retry cures are raised."""
        original, self._pending_seeks = self._pending_seeks, {}
        resolved: set[TopicPartition] = set()
        try:
            await self._resolve(dict(original), resolved, timeout)
        except KafkaException as exc:
            for tp, offset in original.items():
                if tp not in resolved:
                    self._pending_seeks.setdefault(tp, offset)
            if not exc.retriable:
                raise
            self._report(exc)

    async def _resolve(
        self, seeks: dict[TopicPartition, int], resolved: set[TopicPartition], timeout: float
    ) -> None:
        stored = [tp for tp, offset in seeks.items() if offset == OFFSET_STORED]
        if stored and self.group is not None:
            committed = await fetch_committed_offsets(self.cluster, self.group.group_id, stored)
            for tp in stored:
                if committed.get(tp, -1) >= 0:
                    seeks[tp] = committed[tp]
        specs: dict[TopicPartition, int] = {}
        for tp, offset in seeks.items():
            if offset >= 0:
                self._fetch_positions[tp] = offset
                resolved.add(tp)
            elif offset == OFFSET_STORED:
                if self.auto_offset_reset is None:
                    raise KafkaException(
                        ErrorCode.offset_out_of_range,
                        f"{tp} has no committed offset and auto.offset.reset is 'error'",
                    )
                specs[tp] = self.auto_offset_reset
            else:
                specs[tp] = offset
        if specs:
            results = await list_offsets(
                self.cluster, specs, isolation_level=self.isolation_level, timeout=timeout
            )
            for tp, result in results.items():
                self._fetch_positions[tp] = result.offset
                resolved.add(tp)

    async def _fetch(self, max_wait: float) -> None:
        if self._pending_seeks:
            await self._resolve_positions(max(max_wait, 0.1))
        positions = {  # (a partition whose seek is still pending waits for it)
            tp: self._fetch_positions[tp]
            for tp in self._assignment
            if tp in self._fetch_positions and tp not in self._pending_seeks
        }
        if not positions:
            await asyncio.sleep(min(max_wait, 0.1))
            return
        by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        leaderless = False
        for tp, offset in positions.items():
            try:
                leader = await self.cluster.leader_id(tp.topic, tp.partition)
            except KafkaException as exc:
                if not exc.retriable:
                    raise
                self._report(exc)
                leaderless = True
                continue
            node = self._read_replicas.node_for(tp, leader, self.cluster.metadata.brokers)
            by_leader[node][tp] = offset
        if not by_leader:
            await asyncio.sleep(min(max_wait, 0.1))
            return
        wait_ms = max(0, min(self.config.get_int("fetch.wait.max.ms"), int(max_wait * 1000)))
        results = await asyncio.gather(
            *(self._fetch_from(node_id, items, wait_ms) for node_id, items in by_leader.items()),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        for items, result in zip(by_leader.values(), results, strict=True):
            if isinstance(result, BaseException):
                self._read_replicas.failed(items)
        for failure in failures:
            if not (isinstance(failure, KafkaException) and failure.retriable):
                raise failure
            self._report(failure)
        if not failures and not leaderless:
            self._failing = False  # every partition fetched: report the next outage again
        if failures:
            # A leader went away or moved: learn the new leaders, back off, and fetch again.
            await asyncio.sleep(min(max_wait, self.config.get_int("retry.backoff.ms") / 1000))
            with contextlib.suppress(KafkaException):
                await self.cluster.refresh_metadata(list({tp.topic for tp in positions}))

    def _report(self, error: KafkaException) -> None:
        if not self._failing and self.on_transport_error is not None:
            self.on_transport_error(error)
        self._failing = True

    async def _fetch_from(
        self, node_id: int, positions: dict[TopicPartition, int], wait_ms: int
    ) -> None:
        """One Fetch from `node_id`: the leader of these partitions, or the replica a leader
        named for them (KIP-392, `moldau.client.read_replicas`)."""
        connection = await self.cluster.connection(node_id)
        request = build_fetch_request(
            positions,
            max_wait_ms=wait_ms,
            min_bytes=self.config.get_int("fetch.min.bytes"),
            max_bytes=self.config.get_int("fetch.max.bytes"),
            partition_max_bytes=self.config.get_int("max.partition.fetch.bytes"),
            isolation_level=self.isolation_level,
            rack_id=self.config.get_str("client.rack"),
        )
        response = await connection.request(
            ApiKey.FETCH, request, timeout=self.cluster.config.request_timeout + wait_ms / 1000
        )
        top_error = error_code_of(getattr(response, "error_code", 0))
        if top_error is not ErrorCode.none:
            if top_error in _FATAL_FETCH_ERRORS:
                raise KafkaException(top_error, f"Fetch from broker {node_id}")
            raise KafkaException(ErrorCode.network_exception, f"Fetch failed: {top_error.name}")
        refresh = False
        for topic in response.responses:
            for partition in topic.partitions:
                tp = TopicPartition(topic.topic, int(partition.partition_index))
                if self._fetch_positions.get(tp) != positions.get(tp):
                    continue  # seeked while the fetch was in flight
                error = error_code_of(partition.error_code)
                if self._read_replicas.preferred(tp) == node_id and error is not ErrorCode.none:
                    # (a replica that is behind may say OFFSET_OUT_OF_RANGE: ask the leader)
                    self._read_replicas.failed([tp])
                    refresh = True
                    continue
                if error is ErrorCode.offset_out_of_range:
                    if self.auto_offset_reset is None:
                        raise KafkaException(error, f"{tp} at offset {positions[tp]}")
                    self.seek(tp, self.auto_offset_reset)
                    continue
                if error is not ErrorCode.none:
                    if error in _FATAL_FETCH_ERRORS:
                        raise KafkaException(error, str(tp))
                    refresh = True  # like librdkafka: back off and fetch again
                    continue
                self._read_replicas.answered(
                    tp, node_id, int(getattr(partition, "preferred_read_replica", -1))
                )
                read_committed = self.isolation_level == 1
                end = int(
                    partition.last_stable_offset if read_committed else partition.high_watermark
                )
                if end < 0:
                    end = int(partition.high_watermark)
                self._end_offsets[tp] = end
                fetched = records_from_fetch(
                    tp,
                    partition.records,
                    fetch_offset=positions[tp],
                    aborted_transactions=[
                        (int(a.producer_id), int(a.first_offset))
                        for a in (getattr(partition, "aborted_transactions", None) or ())
                    ],
                    read_committed=read_committed,
                )
                self._fetch_positions[tp] = fetched.next_offset
                self._buffer.extend(fetched.messages)
                if not fetched.messages and tp not in self._consumed:
                    self._consumed[tp] = fetched.next_offset
                elif not fetched.messages:
                    self._consumed[tp] = max(self._consumed[tp], fetched.next_offset)
        if refresh:
            await asyncio.sleep(self.config.get_int("retry.backoff.ms") / 1000)
            with contextlib.suppress(KafkaException):
                await self.cluster.refresh_metadata(list({tp.topic for tp in positions}))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.group is not None and self.group.generation_id >= 0:
                if self.enable_auto_commit and self._consumed:
                    with contextlib.suppress(KafkaException):
                        await self.commit()
                await self.group.leave()
        finally:
            await self.cluster.close()


class SyncConsumer(SyncFacade[Consumer]):
    """`Consumer` for synchronous code: `poll()`, `consume()`, `commit()` block."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(lambda: Consumer(config))
