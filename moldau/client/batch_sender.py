"""`BatchSender`: pre-built record batches sent to partition leaders, several Produce requests
in flight per partition (behind `Producer.send_batch`).

A batch is opaque RecordBatch v2 bytes whose header and CRC are final: the caller encoded the
records, compressed them and, for a transactional producer, stamped the producer id, epoch and
base sequence (`TransactionManager.next_sequence`) in the order it hands the batches over. Each
Produce request carries at most one batch per partition (Kafka refuses more since v3) and the
next batch of every partition waiting for the same leader.

Order: up to `max.in.flight.requests.per.connection` requests per partition are in flight on the
leader's one connection, written in the order the batches were given, and the broker appends
them in that order. A sequenced partition (transactional) keeps one request in flight until its
first batch is acknowledged, so the broker has verified the partition's transaction before
batches queue up behind it. A retriable failure puts the partition in recovery: nothing new is
sent until its requests in flight are back, then the failed batches go again in their order,
after the backoff. A sequenced batch refused with OUT_OF_ORDER_SEQUENCE_NUMBER behind a failed
one is retried with it; a DUPLICATE_SEQUENCE_NUMBER answer means the broker already has it.
Unsequenced batches behind a failed one may land before its retry, as with Kafka's
non-idempotent producer and several requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moldau.client.cluster import Cluster
from moldau.client.errors import ErrorCode, KafkaException, error_code_of
from moldau.client.tasks import stop_task
from moldau.client.transactions import TransactionManager, produce_version
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["BatchSender"]

# baseSequence in the batch header (records.py: HEADER)
_BASE_SEQUENCE = slice(53, 57)


@dataclass(slots=True, eq=False)
class _QueuedBatch:
    tp: TopicPartition
    data: bytes | memoryview
    order: int  # position among the batches given, kept across retries
    future: asyncio.Future[int]
    attempts: int = 0
    queued_at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _PartitionBatches:
    waiting: deque[_QueuedBatch] = field(default_factory=deque)
    in_flight: int = 0
    sequenced: bool = False
    acknowledged: bool = False  # a batch came back written (sequenced partitions pipeline then)
    failed: list[_QueuedBatch] = field(default_factory=list)  # to send again after the backoff

    @property
    def recovering(self) -> bool:
        return bool(self.failed)


class BatchSender:
    """Sends the batches of one producer; `send()` queues, `idle` is set when none is pending."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        acks: int,
        request_timeout_ms: int,
        max_in_flight: int,
        retries: int,
        message_timeout_s: float,
        backoff: Callable[[int], float],
        transactions: TransactionManager | None,
        failed: Callable[[KafkaException], KafkaException],
    ) -> None:
        self.cluster = cluster
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max(1, max_in_flight)
        self.retries = retries
        self.message_timeout_s = message_timeout_s
        self._backoff = backoff
        self._transactions = transactions
        self._failed = failed  # the producer's view of a failure (transaction state, fatality)
        self._partitions: dict[TopicPartition, _PartitionBatches] = defaultdict(_PartitionBatches)
        self._orders = itertools.count()
        self._requests: set[asyncio.Task[None]] = set()
        self._pump_scheduled = False
        self._closed = False
        self.pending = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def send(self, tp: TopicPartition, data: bytes | memoryview) -> asyncio.Future[int]:
        """Queue one batch; the future resolves to its base offset (-1 with acks=0 or when the
        broker already had it) or fails with the partition's error."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        partition = self._partitions[tp]
        partition.sequenced = int.from_bytes(data[_BASE_SEQUENCE], "big", signed=True) >= 0
        partition.waiting.append(_QueuedBatch(tp, data, next(self._orders), future))
        self.pending += 1
        self.idle.clear()
        self._schedule_pump()
        return future

    async def close(self) -> None:
        self._closed = True
        for task in list(self._requests):
            task.cancel()
        for task in list(self._requests):
            await stop_task(task)
        failure = KafkaException(ErrorCode.unknown_server_error, "the producer is closed")
        for partition in self._partitions.values():
            for batch in [*partition.waiting, *partition.failed]:
                self._complete(batch, failure)
            partition.waiting.clear()
            partition.failed.clear()

    # --- sending ---------------------------------------------------------------------------

    def _schedule_pump(self) -> None:
        """Pump once the loop is free: batches given in the same turn share requests."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        """Start the requests that may go now: per leader, request i carries the i-th sendable
        batch of every partition it leads (tasks start in creation order, so each partition's
        requests are written in its order)."""
        self._pump_scheduled = False
        if self._closed:
            return
        by_leader: dict[int, list[list[_QueuedBatch]]] = defaultdict(list)
        for tp, partition in self._partitions.items():
            if partition.recovering or not partition.waiting:
                continue
            limit = self.max_in_flight
            if partition.sequenced and not partition.acknowledged:
                limit = 1
            requests = by_leader[self._leader(tp)]
            index = 0
            while partition.waiting and partition.in_flight < limit:
                if index == len(requests):
                    requests.append([])
                requests[index].append(partition.waiting.popleft())
                partition.in_flight += 1
                index += 1
        for leader, requests in by_leader.items():
            for batches in requests:
                task = asyncio.create_task(self._send_request(leader, batches))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)

    def _leader(self, tp: TopicPartition) -> int:
        info = self.cluster.metadata.topics.get(tp.topic)
        partition = info.partitions.get(tp.partition) if info else None
        return partition.leader if partition else -1

    async def _send_request(self, leader: int, batches: list[_QueuedBatch]) -> None:
        try:
            outcomes = await self._produce(leader, batches)
        except asyncio.CancelledError:  # the producer is closing
            closed = KafkaException(ErrorCode.unknown_server_error, "the producer is closed")
            for batch in batches:
                self._partitions[batch.tp].in_flight -= 1
                self._complete(batch, closed)
            raise
        for batch in batches:
            outcome = outcomes.get(batch.tp)
            if isinstance(outcome, KafkaException):
                self._settle(batch, outcome)
            elif outcome is None:  # acks=0: no answer is due
                self._settle(batch, None, -1)
            else:
                self._settle(batch, None, outcome)
        await self._recover({batch.tp for batch in batches})
        self._pump()

    async def _produce(
        self, leader: int, batches: list[_QueuedBatch]
    ) -> dict[TopicPartition, KafkaException | int]:
        """One Produce request; per partition its base offset or its error (none with acks=0)."""
        try:
            if leader < 0:
                raise KafkaException(ErrorCode.leader_not_available, "no leader known")
            transactions = self._transactions
            if transactions is not None:
                await transactions.add_partitions(batch.tp for batch in batches)
            connection = await self.cluster.connection(leader)
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for batch in batches:
                topics[batch.tp.topic].append({"index": batch.tp.partition, "records": batch.data})
            response = await connection.request(
                ApiKey.PRODUCE,
                {
                    "transactional_id": None
                    if transactions is None
                    else transactions.transactional_id,
                    "acks": self.acks,
                    "timeout": self.request_timeout_ms,
                    "topic_data": [
                        {"name": name, "partition_data": parts} for name, parts in topics.items()
                    ],
                },
                version=produce_version(connection, transactions),
                expect_response=self.acks != 0,
            )
        except KafkaException as exc:
            return {batch.tp: exc for batch in batches}
        except Exception as exc:  # a bug must fail the batches, not leave them pending forever
            failure = KafkaException(ErrorCode.unknown_server_error, f"produce failed: {exc!r}")
            return {batch.tp: failure for batch in batches}
        if response is None:  # acks=0
            return {}
        outcomes: dict[TopicPartition, KafkaException | int] = {
            batch.tp: KafkaException(ErrorCode.unknown_server_error, f"no answer for {batch.tp}")
            for batch in batches
        }
        for topic in response.responses:
            for result in topic.partition_responses:
                code = error_code_of(result.error_code)
                tp = TopicPartition(topic.name, int(result.index))
                if code is ErrorCode.none:
                    outcomes[tp] = int(result.base_offset)
                else:
                    message = getattr(result, "error_message", None)
                    outcomes[tp] = KafkaException(code, message or str(tp))
        return outcomes

    def _settle(self, batch: _QueuedBatch, error: KafkaException | None, offset: int = -1) -> None:
        partition = self._partitions[batch.tp]
        partition.in_flight -= 1
        if error is None or error.code is ErrorCode.duplicate_sequence_number:
            partition.acknowledged = True
            self._complete(batch, None, offset if error is None else -1)
            return
        behind_a_failure = (
            error.code is ErrorCode.out_of_order_sequence_number and partition.recovering
        )
        retriable = (error.retriable and not error.fatal) or behind_a_failure
        if (
            retriable
            and batch.attempts < self.retries
            and time.monotonic() - batch.queued_at < self.message_timeout_s
        ):
            batch.attempts += 1
            partition.failed.append(batch)
            return
        self._complete(batch, error)

    async def _recover(self, partitions: set[TopicPartition]) -> None:
        """Send the failed batches of `partitions` again, once nothing of theirs is in flight:
        after the backoff (the partition stays in recovery meanwhile, so nothing overtakes
        them) and fresh metadata (the leader may have moved)."""
        ready = [
            tp
            for tp in partitions
            if self._partitions[tp].recovering and self._partitions[tp].in_flight == 0
        ]
        if not ready:
            return
        for tp in ready:
            self._partitions[tp].in_flight += 1  # held while backing off
        attempts = max(b.attempts for tp in ready for b in self._partitions[tp].failed)
        try:
            await asyncio.sleep(self._backoff(attempts))
            with contextlib.suppress(KafkaException):
                await self.cluster.refresh_metadata(sorted({tp.topic for tp in ready}))
        finally:
            for tp in ready:
                partition = self._partitions[tp]
                partition.in_flight -= 1
                partition.waiting.extendleft(
                    sorted(partition.failed, key=lambda b: b.order, reverse=True)
                )
                partition.failed.clear()

    def _complete(
        self, batch: _QueuedBatch, error: KafkaException | None, offset: int = -1
    ) -> None:
        if not batch.future.done():
            if error is None:
                batch.future.set_result(offset)
            else:
                batch.future.set_exception(self._failed(error))
                batch.future.exception()  # a caller may not await every batch
        self.pending -= 1
        if self.pending == 0:
            self.idle.set()
