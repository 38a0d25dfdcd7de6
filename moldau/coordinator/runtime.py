"""The asyncio shell around the pure coordinators: one `GroupCoordinator` per `__consumer_offsets`
partition (Kafka's CoordinatorRuntime).

It is the only coordinator module that awaits. It loads a partition by replaying
`read_records(tp)`, runs each operation on the partition's core, writes the returned records
through `append(tp, pairs)` (one writer task per partition, so records land in order and
concurrent operations share one append), and only then sends the response and the responses of
the requests the operation completed. Parked JoinGroup/SyncGroup requests wait on futures; timers
run with `loop.call_later` at the core's `next_deadline()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.coordinator._wire import RecordFormatError
from moldau.coordinator.assignors import TopicMetadata
from moldau.coordinator.classic import JoinGroupRequest
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.consumer import ConsumerGroupHeartbeatRequest
from moldau.coordinator.coordinator import GroupCoordinator
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.partitioned_runtime import PartitionedRuntime, append_error_code
from moldau.coordinator.records import CoordinatorRecord, decode_record, encode_record
from moldau.coordinator.result import CoordinatorResult, Responder, Response
from moldau.coordinator.share import ShareGroupHeartbeatRequest
from moldau.coordinator.store import CommittedOffset
from moldau.coordinator.transactional_offsets import TransactionalRecord, TransactionMarker
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

RecordPairs = list[tuple[bytes | None, bytes | None]]
AppendRecords = Callable[[TopicPartition, RecordPairs], Awaitable[int]]
AppendTransactional = Callable[[TopicPartition, RecordPairs, int, int], Awaitable[int]]
"""Appends records in a transactional batch of (producer id, producer epoch): TxnOffsetCommit."""
LoadedItem = tuple[bytes | None, bytes | None] | TransactionalRecord | TransactionMarker
ReadRecords = Callable[[TopicPartition], Iterable[LoadedItem]]
Write = RecordPairs | Callable[[], Awaitable[object]]
"""A queued write: plain records, or a write of its own (transactional batch, marker)."""

_LOAD_YIELD_EVERY = 1000


def java_string_hash_code(text: str) -> int:
    """Java's `String.hashCode()` over UTF-16 code units, as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


def partition_for_group(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`."""
    code = java_string_hash_code(group_id)
    code = 0 if code == -(1 << 31) else abs(code)  # Utils.abs maps MIN_VALUE to 0
    return code % partitions


@dataclass(slots=True)
class _Partition:
    index: int
    coordinator: GroupCoordinator
    pending: list[tuple[Write, asyncio.Future[None]]] = field(default_factory=list)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None
    parked: set[asyncio.Future[Response]] = field(default_factory=set)
    # The waiter of the newest queued write: an answer computed from the core's state waits for
    # it, since that state may include records not yet durable (or that will never be).
    last_write: asyncio.Future[None] | None = None


class GroupCoordinatorRuntime(PartitionedRuntime[_Partition]):
    """Owns the group coordinators of the `__consumer_offsets` partitions this node leads."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        *,
        append: AppendRecords,
        read_records: ReadRecords,
        append_transactional: AppendTransactional | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._append = append
        self._append_transactional = append_transactional
        self._read_records = read_records

    # --------------------------------------------------------------------------- lifecycle

    async def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load the given partitions (all of them by default: a single node leads them all)."""
        wanted = (
            range(self.config.offsets_topic_num_partitions) if partitions is None else partitions
        )
        for index in wanted:
            await self.load_partition(index)

    async def load_partition(self, index: int) -> None:
        """Become the coordinator of one partition: replay it, then serve (KIP: on leadership)."""
        if index in self._partitions:
            return
        coordinator = GroupCoordinator(self.config, self._clock)
        partition = _Partition(index, coordinator)
        self._partitions[index] = partition  # answers COORDINATOR_LOAD_IN_PROGRESS meanwhile
        count = 0
        for item in self._read_records(TopicPartition(OFFSETS_TOPIC, index)):
            if isinstance(item, TransactionMarker):
                coordinator.complete_transaction(item.producer_id, item.committed)
            elif isinstance(item, TransactionalRecord):
                record = _readable(index, item.key, item.value)
                if record is not None:
                    coordinator.replay_transactional(item.producer_id, record)
            else:
                record = _readable(index, *item)
                if record is not None:
                    coordinator.replay(record)
            count += 1
            if count % _LOAD_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        if self._partitions.get(index) is not partition:
            return  # unloaded while loading
        coordinator.finish_loading()
        partition.writer = asyncio.get_running_loop().create_task(self._write_loop(partition))
        self._reschedule(partition)
        logger.debug("loaded %s-%d (%d records)", OFFSETS_TOPIC, index, count)

    async def unload_partition(self, index: int) -> None:
        """Stop coordinating a partition (its leadership moved elsewhere)."""
        partition = self._partitions.pop(index, None)
        if partition is None:
            return
        if partition.timer is not None:
            partition.timer.cancel()
        for future in partition.parked:
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.not_coordinator))
        for _, waiter in partition.pending:
            if not waiter.done():
                waiter.set_exception(KafkaError(ErrorCode.not_coordinator))
        if partition.writer is not None:
            partition.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await partition.writer

    async def __aenter__(self) -> GroupCoordinatorRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.offsets_topic_num_partitions)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._partitions

    def coordinator_for(self, group_id: str) -> GroupCoordinator:
        """The core of the group's partition; raises NOT_COORDINATOR if not led here."""
        partition = self._partitions.get(self.partition_for(group_id))
        if partition is None:
            raise KafkaError(ErrorCode.not_coordinator)
        return partition.coordinator

    def _partition(self, group_id: str) -> _Partition:
        partition = self._partitions.get(self.partition_for(group_id))
        if partition is None:
            raise KafkaError(ErrorCode.not_coordinator)
        return partition

    # ----------------------------------------------------------------------- write and send

    async def _write_loop(self, partition: _Partition) -> None:
        topic_partition = TopicPartition(OFFSETS_TOPIC, partition.index)
        while True:
            await partition.wakeup.wait()
            partition.wakeup.clear()
            batch, partition.pending = partition.pending, []
            if not batch:
                continue
            try:
                await self._write_in_order(topic_partition, [write for write, _ in batch])
            except asyncio.CancelledError:  # unloaded mid-write: nobody waits for ever
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(KafkaError(ErrorCode.not_coordinator))
                raise
            except Exception as exc:  # the log refused: state is ahead of it, so reload
                logger.warning("append to %s failed: %r; reloading", topic_partition, exc)
                code = append_error_code(exc)
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(KafkaError(code))
                self._spawn(self._reload(partition.index))
                return
            for _, waiter in batch:
                if not waiter.done():
                    waiter.set_result(None)

    async def _write_in_order(self, topic_partition: TopicPartition, writes: list[Write]) -> None:
        """Runs of plain records share one append; other writes go alone, in queue order."""
        pairs: RecordPairs = []
        for write in writes:
            if isinstance(write, list):
                pairs.extend(write)
                continue
            if pairs:
                await self._append(topic_partition, pairs)
                pairs = []
            await write()
        if pairs:
            await self._append(topic_partition, pairs)

    async def _write(
        self,
        partition: _Partition,
        records: list[CoordinatorRecord],
        producer: tuple[int, int] | None = None,
    ) -> None:
        pairs: RecordPairs = [encode_record(record) for record in records]
        write: Write = pairs
        if producer is not None:
            append_transactional = self._append_transactional
            if append_transactional is None:
                raise KafkaError(ErrorCode.unsupported_version, "no transactional writes")
            topic_partition = TopicPartition(OFFSETS_TOPIC, partition.index)
            producer_id, producer_epoch = producer

            def write_transactional() -> Awaitable[int]:
                return append_transactional(topic_partition, pairs, producer_id, producer_epoch)

            write = write_transactional

        await self._enqueue(partition, write)

    async def _enqueue(self, partition: _Partition, write: Write) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        partition.pending.append((write, waiter))
        partition.last_write = waiter
        partition.wakeup.set()
        await asyncio.shield(waiter)  # (a caller that goes away must not cancel it for others)

    async def _complete(self, partition: _Partition, result: CoordinatorResult) -> Response | None:
        """Make the records durable, then answer everybody the operation answered.

        An operation that writes nothing still waits for the writes queued before it, as
        Kafka's CoordinatorRuntime holds such a response until the last written offset
        commits: a follower's SyncGroup that finds the group Stable must not get an assignment
        whose write is still in flight (and fails with it if the write fails)."""
        self._reschedule(partition)
        if result.records:
            await self._write(partition, result.records, result.producer)
        elif partition.last_write is not None and not partition.last_write.done():
            await asyncio.shield(partition.last_write)
        for respond, response in result.deliveries:
            respond(response)
        return result.response

    # -------------------------------------------------------------------------- operations

    async def _park(
        self, group_id: str, operation: Callable[[Responder], CoordinatorResult]
    ) -> Response | asyncio.Future[Response]:
        """Apply `operation` and make what it wrote durable; then its response, or a future of
        the response when the member waits for others (a rebalance, the leader's assignment)."""
        partition = self._partition(group_id)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

        def respond(response: Response) -> None:
            if not future.done():
                future.set_result(response)

        result = operation(respond)
        partition.parked.add(future)
        future.add_done_callback(partition.parked.discard)
        try:
            immediate = await self._complete(partition, result)
        except BaseException:
            partition.parked.discard(future)
            raise
        if immediate is not None:
            partition.parked.discard(future)
            return immediate
        return future

    async def join_group(self, request: JoinGroupRequest) -> Response:
        return await _answer_of(await self.apply_join_group(request))

    async def apply_join_group(
        self, request: JoinGroupRequest
    ) -> Response | asyncio.Future[Response]:
        """`join_group` that does not wait for the rebalance: a waiting member's answer is a
        future (its connection serves its next requests meanwhile)."""
        coordinator = self.coordinator_for(request.group_id)
        return await self._park(
            request.group_id, lambda respond: coordinator.join_group(request, respond)
        )

    async def sync_group(self, **request: Any) -> Response:
        """`apply_sync_group`, waiting for the answer."""
        return await _answer_of(await self.apply_sync_group(**request))

    async def apply_sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Response | asyncio.Future[Response]:
        """SyncGroup; a follower's answer, which waits for the leader's assignment, is a
        future."""
        coordinator = self.coordinator_for(group_id)
        return await self._park(
            group_id,
            lambda respond: coordinator.sync_group(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments,
                respond=respond,
            ),
        )

    async def _immediate(self, group_id: str, result: CoordinatorResult) -> Response:
        response = await self._complete(self._partition(group_id), result)
        assert response is not None
        return response

    async def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> Response:
        result = self.coordinator_for(group_id).heartbeat(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )
        return await self._immediate(group_id, result)

    async def leave_group(
        self, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> Response:
        result = self.coordinator_for(group_id).leave_group(group_id=group_id, members=members)
        return await self._immediate(group_id, result)

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> Response:
        result = self.coordinator_for(group_id).commit_offsets(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            commits=commits,
        )
        return await self._immediate(group_id, result)

    async def txn_commit_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> Response:
        result = self.coordinator_for(group_id).txn_commit_offsets(
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            commits=commits,
        )
        return await self._immediate(group_id, result)

    async def complete_transaction(
        self,
        index: int,
        *,
        producer_id: int,
        committed: bool,
        write_marker: Callable[[], Awaitable[object]],
    ) -> None:
        """A transaction marker for partition `index`: the producer's pending offsets take
        effect (or are dropped) now, and the marker is written after every earlier write."""
        partition = self._partitions.get(index)
        if partition is None or partition.coordinator.loading:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        partition.coordinator.complete_transaction(producer_id, committed)
        await self._enqueue(partition, write_marker)

    def fetch_offsets(
        self,
        *,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> Response:
        return self.coordinator_for(group_id).fetch_offsets(
            group_id=group_id,
            topics=topics,
            member_id=member_id,
            member_epoch=member_epoch,
            require_stable=require_stable,
        )

    async def delete_offsets(
        self, *, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> Response:
        result = self.coordinator_for(group_id).delete_offsets(group_id=group_id, topics=topics)
        return await self._immediate(group_id, result)

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Deleted topics: every partition led here drops their committed offsets (and the
        groups left with neither members nor offsets), written in the background."""
        for partition in list(self._partitions.values()):
            result = partition.coordinator.on_topics_deleted(topics)
            if result.records:
                self._spawn(self._complete_quietly(partition, result))

    async def _complete_quietly(self, partition: _Partition, result: CoordinatorResult) -> None:
        await self._complete(partition, result)

    def describe_group(self, group_id: str) -> Response:
        return self.coordinator_for(group_id).describe_group(group_id)

    def committed_offsets(self) -> Iterator[CommittedOffset]:
        """Every committed offset of the groups coordinated here (the node's metrics)."""
        for partition in list(self._partitions.values()):
            yield from partition.coordinator.committed_offsets()

    def list_groups(
        self, *, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> Response:
        listed: list[Response] = []
        error = ErrorCode.none
        for partition in self._partitions.values():
            answer = partition.coordinator.list_groups(
                states_filter=states_filter, types_filter=types_filter
            )
            if answer["error_code"] != ErrorCode.none:
                error = answer["error_code"]
            listed.extend(answer["groups"])
        return {"error_code": error, "groups": listed}

    async def delete_groups(self, group_ids: list[str]) -> list[Response]:
        answers: list[Response] = []
        for group_id in group_ids:
            try:
                result = self.coordinator_for(group_id).delete_groups([group_id])
                response = await self._immediate(group_id, result)
                answers.extend(response["results"])
            except KafkaError as error:
                answers.append({"group_id": group_id, "error_code": error.code})
        return answers

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> Response:
        result = self.coordinator_for(request.group_id).consumer_group_heartbeat(request, topics)
        return await self._immediate(request.group_id, result)

    def consumer_group_describe(
        self, group_id: str, topic_names: Mapping[uuid.UUID, str]
    ) -> Response:
        return self.coordinator_for(group_id).consumer_group_describe(group_id, topic_names)

    async def share_group_heartbeat(
        self, request: ShareGroupHeartbeatRequest, topics: Mapping[str, TopicMetadata]
    ) -> Response:
        result = self.coordinator_for(request.group_id).share_group_heartbeat(request, topics)
        return await self._immediate(request.group_id, result)

    def share_group_describe(self, group_id: str, topic_names: Mapping[uuid.UUID, str]) -> Response:
        return self.coordinator_for(group_id).share_group_describe(group_id, topic_names)


def _readable(index: int, key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """The record, or None (and a warning) for one no coordinator wrote: a load goes on past it
    rather than leave the partition loading for ever."""
    try:
        return decode_record(key, value)
    except RecordFormatError as error:
        logger.warning("skipping an unreadable record in %s-%d: %s", OFFSETS_TOPIC, index, error)
        return None


async def _answer_of(outcome: Response | asyncio.Future[Response]) -> Response:
    if isinstance(outcome, asyncio.Future):
        return await outcome
    return outcome
