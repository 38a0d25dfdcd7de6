"""The asyncio shell around the pure transaction coordinators: one `TransactionCoordinator` per
`__transaction_state` partition this node leads (Kafka's TransactionCoordinator wiring, its
TransactionStateManager loading and its TransactionMarkerChannelManager).

A partition is loaded by replaying `read_records(tp)`. An operation runs on the partition's core
and its records go to `append(tp, pairs)`, which must append before its first await (so the log
keeps the order in which the cores changed state) and return once they are durable; only then is
the response sent. Markers of a Prepare* transaction are written afterwards by a task per
transaction through `write_markers`, retried until every partition took them, and the
transaction is then completed. Timers run with `loop.call_later` at the core's `next_deadline()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.coordinator.partitioned_runtime import PartitionedRuntime, append_error_code
from moldau.coordinator.runtime import partition_for_group
from moldau.coordinator.transaction_coordinator import TransactionCoordinator
from moldau.coordinator.transaction_metadata import (
    MarkerRequest,
    TransactionCoordinatorConfig,
    TransactionResult,
)
from moldau.coordinator.transaction_records import (
    TransactionState,
    decode_transaction_record,
    encode_transaction_record,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"

RecordPairs = list[tuple[bytes | None, bytes | None]]
AppendRecords = Callable[[TopicPartition, RecordPairs], Awaitable[int]]
ReadRecords = Callable[[TopicPartition], Iterable[tuple[bytes | None, bytes | None]]]
AllocateProducerId = Callable[[], Awaitable[int]]
WriteMarkers = Callable[[MarkerRequest, int], Awaitable[dict[TopicPartition, int]]]
"""Writes the markers of a transaction (with a coordinator epoch); error code per partition."""

_GIVE_UP_CODES = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id})
_MARKER_RETRY_S = 0.1
_LOAD_YIELD_EVERY = 1000


@dataclass(slots=True)
class _Partition:
    index: int
    coordinator: TransactionCoordinator
    coordinator_epoch: int
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None
    markers: set[asyncio.Task[None]] = field(default_factory=set)


class TransactionCoordinatorRuntime(PartitionedRuntime[_Partition]):
    def __init__(
        self,
        config: TransactionCoordinatorConfig,
        *,
        append: AppendRecords,
        read_records: ReadRecords,
        allocate_producer_id: AllocateProducerId,
        write_markers: WriteMarkers,
        coordinator_epoch: Callable[[int], int] = lambda _index: 0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._append = append
        self._read_records = read_records
        self._allocate_producer_id = allocate_producer_id
        self._write_markers = write_markers
        self._coordinator_epoch = coordinator_epoch

    # --------------------------------------------------------------------------- lifecycle

    async def start(self, partitions: Iterable[int] | None = None) -> None:
        count = self.config.transaction_state_log_num_partitions
        for index in range(count) if partitions is None else partitions:
            await self.load_partition(index)

    async def load_partition(self, index: int) -> None:
        if index in self._partitions:
            return
        coordinator = TransactionCoordinator(self.config, self._clock)
        partition = _Partition(index, coordinator, self._coordinator_epoch(index))
        self._partitions[index] = partition  # COORDINATOR_LOAD_IN_PROGRESS meanwhile
        records = self._read_records(TopicPartition(TRANSACTION_STATE_TOPIC, index))
        for count, (key, value) in enumerate(records, start=1):
            decoded = decode_transaction_record(key, value)
            if decoded is not None:
                coordinator.replay(*decoded)
            if count % _LOAD_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        if self._partitions.get(index) is not partition:
            return
        for markers in coordinator.finish_loading():
            self._start_markers(partition, markers)
        self._reschedule(partition)

    async def unload_partition(self, index: int) -> None:
        partition = self._partitions.pop(index, None)
        if partition is None:
            return
        if partition.timer is not None:
            partition.timer.cancel()
        for task in list(partition.markers):
            task.cancel()
        for task in list(partition.markers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ----------------------------------------------------------------------------- routing

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_group(
            transactional_id, self.config.transaction_state_log_num_partitions
        )

    def is_coordinator_for(self, transactional_id: str) -> bool:
        return self.partition_for(transactional_id) in self._partitions

    def _partition(self, transactional_id: str) -> _Partition:
        partition = self._partitions.get(self.partition_for(transactional_id))
        if partition is None:
            raise KafkaError(ErrorCode.not_coordinator)
        return partition

    # ------------------------------------------------------------------------ write, send

    async def _complete(self, partition: _Partition, result: TransactionResult) -> dict[str, Any]:
        self._reschedule(partition)
        if result.records:
            pairs: RecordPairs = [encode_transaction_record(k, v) for k, v in result.records]
            try:
                await self._append(TopicPartition(TRANSACTION_STATE_TOPIC, partition.index), pairs)
            except Exception as exc:  # the log refused: the core is ahead of it, so reload
                logger.warning(
                    "append to %s-%d failed: %r", TRANSACTION_STATE_TOPIC, partition.index, exc
                )
                if self._partitions.get(partition.index) is partition:
                    self._spawn(self._reload(partition.index))
                raise KafkaError(append_error_code(exc)) from exc
        if self._partitions.get(partition.index) is partition:
            for markers in result.markers:
                self._start_markers(partition, markers)
        return result.response

    def _start_markers(self, partition: _Partition, markers: MarkerRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._send_markers(partition, markers))
        partition.markers.add(task)
        task.add_done_callback(partition.markers.discard)

    async def _send_markers(self, partition: _Partition, markers: MarkerRequest) -> None:
        remaining = markers
        while remaining.partitions:
            try:
                errors = await self._write_markers(remaining, partition.coordinator_epoch)
            except Exception as exc:  # keep retrying: the transaction must complete
                logger.warning("writing markers of %s: %r", markers.transactional_id, exc)
                errors = dict.fromkeys(remaining.partitions, int(ErrorCode.unknown_server_error))
            retry = tuple(
                tp
                for tp in remaining.partitions
                if errors.get(tp, 0) != ErrorCode.none and errors.get(tp) not in _GIVE_UP_CODES
            )
            if not retry:
                break
            logger.debug("retrying markers of %s on %s", markers.transactional_id, retry)
            remaining = MarkerRequest(
                transactional_id=markers.transactional_id,
                producer_id=markers.producer_id,
                producer_epoch=markers.producer_epoch,
                committed=markers.committed,
                partitions=retry,
                transaction_version=markers.transaction_version,
            )
            await asyncio.sleep(_MARKER_RETRY_S)
        if self._partitions.get(partition.index) is not partition:
            return
        result = partition.coordinator.complete_transaction(markers)
        with contextlib.suppress(KafkaError):
            await self._complete(partition, result)

    # -------------------------------------------------------------------------- operations

    async def init_producer_id(
        self,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> dict[str, Any]:
        return await self._with_producer_id(
            transactional_id,
            lambda coordinator, new_producer_id: coordinator.init_producer_id(
                transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                new_producer_id=new_producer_id,
            ),
        )

    async def _with_producer_id(
        self,
        transactional_id: str,
        operation: Callable[[TransactionCoordinator, int | None], TransactionResult],
    ) -> dict[str, Any]:
        """Run `operation` on the id's coordinator; when it needs a new producer id (a first
        InitProducerId, an epoch that ran out), allocate one and run it again with it."""
        partition = self._partition(transactional_id)
        new_producer_id: int | None = None
        while True:
            result = operation(partition.coordinator, new_producer_id)
            if not result.needs_producer_id:
                return await self._complete(partition, result)
            new_producer_id = await self._allocate_producer_id()
            partition = self._partition(transactional_id)

    async def add_partitions(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        verify_only: bool = False,
    ) -> dict[str, Any]:
        partition = self._partition(transactional_id)
        result = partition.coordinator.add_partitions(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=partitions,
            verify_only=verify_only,
        )
        return await self._complete(partition, result)

    def verify_partition(
        self, *, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """KIP-890 part 1: is `tp` in the producer's ongoing transaction? (No records.)"""
        partition = self._partitions.get(self.partition_for(transactional_id))
        if partition is None:
            return ErrorCode.none  # coordinated elsewhere: not verified here
        result = partition.coordinator.add_partitions(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=[tp],
            verify_only=True,
        )
        code = result.response["error_code"]
        if code != ErrorCode.none:
            return ErrorCode(code)
        return ErrorCode(result.response["partitions"][tp])

    async def end_transaction(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        transaction_version: int = 0,
    ) -> dict[str, Any]:
        return await self._with_producer_id(
            transactional_id,
            lambda coordinator, new_producer_id: coordinator.end_transaction(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                committed=committed,
                transaction_version=transaction_version,
                new_producer_id=new_producer_id,
            ),
        )

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[dict[str, Any]]:
        described = []
        for transactional_id in transactional_ids:
            partition = self._partitions.get(self.partition_for(transactional_id))
            if partition is None:
                described.append(
                    {"error_code": ErrorCode.not_coordinator, "transactional_id": transactional_id}
                )
            else:
                described.append(partition.coordinator.describe(transactional_id))
        return described

    def list_transactions(
        self,
        *,
        states: set[TransactionState] | None = None,
        producer_ids: set[int] | None = None,
        min_duration_ms: int = -1,
        pattern: str | None = None,
    ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        listed: list[dict[str, Any]] = []
        code = ErrorCode.none
        for partition in self._partitions.values():
            if partition.coordinator.loading:
                code = ErrorCode.coordinator_load_in_progress
                continue
            listed.extend(
                partition.coordinator.list_transactions(
                    states=states,
                    producer_ids=producer_ids,
                    min_duration_ms=min_duration_ms,
                    pattern=pattern,
                )
            )
        return code, listed
