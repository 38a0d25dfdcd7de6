"""`Producer`: batches records per partition, lingers, compresses and sends Produce requests.

Mirrors confluent-kafka's `Producer` shape: `produce(topic, value, key, partition=..., headers=...,
on_delivery=...)` queues a record and returns at once (here: an asyncio future of its
`RecordMetadata`); `flush()` waits until everything queued is acknowledged. Keyed records go to
Kafka's murmur2 partition; unkeyed ones stick to one random partition per batch (KIP-480). A
partition has at most one Produce request in flight, so records stay in order across retries.

With `transactional.id` set the producer is transactional (confluent-kafka's `init_transactions`,
`begin_transaction`, `send_offsets_to_transaction`, `commit_transaction`, `abort_transaction`):
batches carry the producer id, epoch and per-partition sequences, have the transactional
attribute bit, and each partition joins the transaction (AddPartitionsToTxn) before its first
Produce. The protocol state lives in `transactions.TransactionManager`.

`send_batch(topic, partition, batch)` sends a record batch its caller built whole (the Spark sink
encodes batches from Arrow columns), several requests in flight per partition (`batch_sender.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from moldau.client.base import ClientBase
from moldau.client.batch_sender import BatchSender
from moldau.client.config import ClientConfig
from moldau.client.conversions import epoch_millis
from moldau.client.errors import ConfigException, ErrorCode, KafkaException, error_code_of
from moldau.client.partitioner import partition_for_key
from moldau.client.sync import SyncFacade
from moldau.client.tasks import stop_task
from moldau.client.transactions import (
    FatalTransactionError,
    TransactionManager,
    TransactionState,
    produce_version,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, build_batch
from moldau.types import TopicPartition

__all__ = ["Producer", "RecordMetadata", "SyncProducer"]

_RECORD_OVERHEAD: Final = 24

Headers = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None]
DeliveryCallback = Callable[[KafkaException | None, "RecordMetadata"], None]


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record landed (offset -1 when acks=0 or when delivery failed)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None


@dataclass(slots=True)
class _PendingRecord:
    topic: str
    partition: int
    record: NewRecord
    size: int
    future: asyncio.Future[RecordMetadata]
    on_delivery: DeliveryCallback | None
    attempts: int = 0
    sequence: int = -1  # transactional producers: fixed at the first send, kept across retries
    queued_at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _PartitionQueue:
    records: list[_PendingRecord] = field(default_factory=list)
    bytes: int = 0
    first_queued: float = 0.0
    in_flight: bool = False


def _to_bytes(value: bytes | str | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")


def _acks(value: Any) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ConfigException(f"setting 'acks' must be 0, 1 or all, got {value!r}")


class Producer(ClientBase):
    """An asyncio producer; use as `async with Producer({...}) as producer:`."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(config)
        self.acks = _acks(self.config.get("acks"))
        try:
            self.compression = CompressionType.from_name(self.config.get_str("compression.type"))
        except ValueError:
            raise ConfigException(
                "setting 'compression.type' must be one of none, gzip, snappy, lz4, zstd"
            ) from None
        self.linger = self.config.get_int("linger.ms") / 1000
        self.batch_bytes = min(
            self.config.get_int("batch.size"), self.config.get_int("message.max.bytes")
        )
        self.batch_records = self.config.get_int("batch.num.messages")
        self.retries = self.config.get_int("retries")
        self.message_timeout = self.config.get_int("message.timeout.ms") / 1000
        self._unpartitioned: list[_PendingRecord] = []
        self._queues: dict[TopicPartition, _PartitionQueue] = defaultdict(_PartitionQueue)
        self._sticky: dict[str, int] = {}
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._wakeup = asyncio.Event()
        self._flushing = 0
        self._sender: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._closed = False
        self._transactions = self._transaction_manager()
        self._batch_sender: BatchSender | None = None

    def _transaction_manager(self) -> TransactionManager | None:
        transactional_id = self.config.get_optional_str("transactional.id")
        if transactional_id is None:
            return None
        if self.acks != -1:
            raise ConfigException("a transactional producer needs 'acks' all (it is the default)")
        return TransactionManager(
            self.cluster,
            transactional_id,
            timeout_ms=self.config.get_int("transaction.timeout.ms"),
        )

    @property
    def transactions(self) -> TransactionManager:
        """The transaction state (producer id, epoch); only with `transactional.id` set."""
        if self._transactions is None:
            raise KafkaException(
                ErrorCode.invalid_txn_state, "the producer has no 'transactional.id' setting"
            )
        return self._transactions

    # --- transactions (confluent-kafka's API) --------------------------------------------

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id: fences older producers with the same id and aborts
        the transaction they left open."""
        await self.transactions.init(timeout)

    def begin_transaction(self) -> None:
        self.transactions.begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: Any,
        timeout: float | None = None,
    ) -> None:
        """Commit `offsets` ({partition: next offset to read}) to the consumer group
        `group_metadata` (a group id, or an object with `group_id`) with the transaction."""
        group_id = getattr(group_metadata, "group_id", group_metadata)
        await self.transactions.add_offsets(str(group_id), offsets, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit; raises if a record of the transaction failed (abort then)."""
        transactions = self.transactions
        transactions.raise_if_abortable()
        if await self.flush(timeout):
            raise KafkaException(
                ErrorCode.request_timed_out, "records still unsent when the commit timed out"
            )
        transactions.raise_if_abortable()
        await transactions.end(committed=True, timeout=timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Wait for records in flight, then abort: none of the transaction's records is read
        by read_committed consumers."""
        transactions = self.transactions
        await self.flush(timeout)
        await transactions.end(committed=False, timeout=timeout)

    def __len__(self) -> int:
        """Records queued or in flight (confluent-kafka's `len(producer)`), plus batches given
        to `send_batch` and not yet acknowledged."""
        return self._pending + (self._batch_sender.pending if self._batch_sender else 0)

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        *,
        partition: int = -1,
        headers: Headers | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future resolves when the broker acknowledges it."""
        if self._closed:
            raise KafkaException(ErrorCode.unknown_server_error, "the producer is closed")
        if self._transactions is not None:
            self._transactions.check_can_produce()
        header_items = headers.items() if isinstance(headers, Mapping) else (headers or ())
        record = NewRecord(
            key=_to_bytes(key),
            value=_to_bytes(value),
            headers=tuple((str(k), _to_bytes(v)) for k, v in header_items),
            timestamp=int(time.time() * 1000) if timestamp is None else timestamp,
        )
        size = (
            _RECORD_OVERHEAD
            + len(record.key or b"")
            + len(record.value or b"")
            + sum(len(k) + len(v or b"") + 4 for k, v in record.headers)
        )
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        pending = _PendingRecord(topic, partition, record, size, future, on_delivery)
        self._pending += 1
        self._idle.clear()
        self._unpartitioned.append(pending)
        self._ensure_sender()
        self._wakeup.set()
        return future

    def send_batch(
        self, topic: str, partition: int, batch: bytes | memoryview
    ) -> asyncio.Future[int]:
        """Queue one whole RecordBatch v2 for `topic`-`partition`, sent as it is: its header and
        CRC are final (a transactional producer's batch carries `transactions.producer_id`,
        `producer_epoch` and a base sequence from `transactions.next_sequence`, taken in the
        order the batches are given). The future resolves to the batch's base offset (-1 with
        acks=0 or when the broker already had it). Several requests per partition are in flight
        (`max.in.flight.requests.per.connection`); see `batch_sender.py` for order and retries."""
        if self._closed:
            raise KafkaException(ErrorCode.unknown_server_error, "the producer is closed")
        if self._transactions is not None:
            self._transactions.check_can_produce()
        if self._batch_sender is None:
            self._batch_sender = BatchSender(
                self.cluster,
                acks=self.acks,
                request_timeout_ms=self.config.get_int("request.timeout.ms"),
                max_in_flight=self.config.get_int("max.in.flight.requests.per.connection"),
                retries=self.retries,
                message_timeout_s=self.message_timeout,
                backoff=self._backoff,
                transactions=self._transactions,
                failed=self._write_failed,
            )
        return self._batch_sender.send(TopicPartition(topic, partition), batch)

    def _write_failed(self, error: KafkaException) -> KafkaException:
        """A record or batch was not written: the transaction can only abort now (the error
        to report: fatal once the producer is fenced)."""
        if self._transactions is None:
            return error
        self._transactions.record_failed(error)
        if self._transactions.state is TransactionState.FATAL and not error.fatal:
            return FatalTransactionError(error.code, error.message)
        return error

    async def send(
        self, topic: str, value: bytes | str | None = None, **kwargs: Any
    ) -> RecordMetadata:
        """Produce one record and wait for its acknowledgement."""
        return await self.produce(topic, value, **kwargs)

    async def poll(self, timeout: float = 0.0) -> int:
        """Kept for confluent-kafka's shape: delivery callbacks already run as results arrive."""
        await asyncio.sleep(timeout)
        return 0

    async def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now and wait for it; returns the number still pending."""
        self._flushing += 1
        self._wakeup.set()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._idle.wait()
                    if self._batch_sender is not None:
                        await self._batch_sender.idle.wait()
        finally:
            self._flushing -= 1
        return len(self)

    async def close(self, timeout: float | None = None) -> None:
        if not self._closed:
            await self.flush(timeout)
        self._closed = True
        self._wakeup.set()
        if self._sender is not None:
            await stop_task(self._sender)
            self._sender = None
        for task in list(self._requests):
            task.cancel()
        for task in list(self._requests):
            await stop_task(task)
        if self._batch_sender is not None:
            await self._batch_sender.close()
        await self.cluster.close()

    # --- sending -----------------------------------------------------------------------------

    def _ensure_sender(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_loop(), name="producer sender")

    async def _send_loop(self) -> None:
        while True:
            timeout = None if self._pending == 0 else max(self.linger, 0.001)
            # asyncio.timeout, not wait_for: wait_for in 3.11 may swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
            self._wakeup.clear()
            if self._closed and self._pending == 0:
                return
            if self._unpartitioned:
                await self._assign_partitions()
            self._drain(time.monotonic())

    async def _assign_partitions(self) -> None:
        records, self._unpartitioned = self._unpartitioned, []
        counts: dict[str, int] = {}
        for pending in records:
            count = counts.get(pending.topic)
            if count is None:
                try:
                    info = self.cluster.metadata.topics.get(pending.topic)
                    if info is None:
                        info = await self.cluster.topic(pending.topic)
                    count = counts[pending.topic] = len(info.partitions)
                except KafkaException as exc:
                    self._complete(pending, exc, -1, -1)
                    continue
            if pending.partition < 0:
                if pending.record.key is not None:
                    pending.partition = partition_for_key(pending.record.key, count)
                else:
                    sticky = self._sticky.get(pending.topic)
                    if sticky is None or sticky >= count:
                        sticky = self._sticky[pending.topic] = random.randrange(count)
                    pending.partition = sticky
            elif pending.partition >= count:
                self._complete(
                    pending,
                    KafkaException(
                        ErrorCode.unknown_topic_or_partition,
                        f"topic '{pending.topic}' has no partition {pending.partition} "
                        f"(it has {count})",
                    ),
                    -1,
                    -1,
                )
                continue
            self._enqueue(pending)

    def _enqueue(self, pending: _PendingRecord) -> None:
        queue = self._queues[TopicPartition(pending.topic, pending.partition)]
        if not queue.records:
            queue.first_queued = time.monotonic()
        queue.records.append(pending)
        queue.bytes += pending.size

    def _drain(self, now: float) -> None:
        by_leader: dict[int, list[tuple[TopicPartition, list[_PendingRecord]]]] = defaultdict(list)
        for tp, queue in self._queues.items():
            if queue.in_flight or not queue.records:
                continue
            full = queue.bytes >= self.batch_bytes or len(queue.records) >= self.batch_records
            if not (
                full or self._flushing or self._closed or now - queue.first_queued >= self.linger
            ):
                continue
            batch: list[_PendingRecord] = []
            size = 0
            while queue.records and len(batch) < self.batch_records:
                following = queue.records[0]
                if batch and (
                    size + following.size > self.batch_bytes
                    # a retried batch keeps its sequences: never mix it with new records
                    or (following.sequence < 0) != (batch[0].sequence < 0)
                ):
                    break
                record = queue.records.pop(0)
                batch.append(record)
                size += record.size
            self._assign_sequences(tp, batch)
            queue.bytes -= size
            queue.first_queued = now
            queue.in_flight = True
            info = self.cluster.metadata.topics.get(tp.topic)
            partition = info.partitions.get(tp.partition) if info else None
            leader = partition.leader if partition else -1
            by_leader[leader].append((tp, batch))
            if tp.topic in self._sticky and batch[-1].record.key is None:
                self._sticky.pop(tp.topic)  # the next unkeyed batch picks a new partition
        for leader, batches in by_leader.items():
            task = asyncio.create_task(self._send_request(leader, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)

    def _assign_sequences(self, tp: TopicPartition, batch: list[_PendingRecord]) -> None:
        if self._transactions is None or not batch or batch[0].sequence >= 0:
            return
        base = self._transactions.next_sequence(tp, len(batch))
        for offset_delta, pending in enumerate(batch):
            pending.sequence = base + offset_delta

    def _build_batch(self, records: list[_PendingRecord]) -> bytes:
        new_records = [p.record for p in records]
        transactions = self._transactions
        if transactions is None:
            return build_batch(new_records, compression=self.compression)
        return build_batch(
            new_records,
            compression=self.compression,
            producer_id=transactions.producer_id,
            producer_epoch=transactions.producer_epoch,
            base_sequence=records[0].sequence,
            transactional=True,
        )

    async def _send_request(
        self, leader: int, batches: list[tuple[TopicPartition, list[_PendingRecord]]]
    ) -> None:
        retry: list[tuple[TopicPartition, list[_PendingRecord], KafkaException]] = []
        try:
            if leader < 0:
                raise KafkaException(ErrorCode.leader_not_available, "no leader known")
            if self._transactions is not None:
                await self._transactions.add_partitions(tp for tp, _records in batches)
            connection = await self.cluster.connection(leader)
            topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for tp, records in batches:
                payload = self._build_batch(records)
                topics[tp.topic].append({"index": tp.partition, "records": payload})
            transactions = self._transactions
            response = await connection.request(
                ApiKey.PRODUCE,
                {
                    "transactional_id": None
                    if transactions is None
                    else transactions.transactional_id,
                    "acks": self.acks,
                    "timeout": self.config.get_int("request.timeout.ms"),
                    "topic_data": [
                        {"name": name, "partition_data": parts} for name, parts in topics.items()
                    ],
                },
                version=produce_version(connection, transactions),
                expect_response=self.acks != 0,
            )
        except KafkaException as exc:
            retry = [(tp, records, exc) for tp, records in batches]
        except Exception as exc:  # a bug must fail the records, not leave them pending forever
            failure = KafkaException(ErrorCode.unknown_server_error, f"produce failed: {exc!r}")
            retry = [(tp, records, failure) for tp, records in batches]
        else:
            results: dict[TopicPartition, Any] = {}
            if response is not None:
                for topic in response.responses:
                    for partition in topic.partition_responses:
                        results[TopicPartition(topic.name, int(partition.index))] = partition
            for tp, records in batches:
                result = results.get(tp)
                if result is None:
                    for offset_delta, pending in enumerate(records):
                        self._complete(pending, None, -1 if self.acks == 0 else offset_delta, -1)
                    continue
                error = error_code_of(result.error_code)
                if error is ErrorCode.duplicate_sequence_number:
                    # A retry of a batch the broker already has: it is written, offsets unknown.
                    for pending in records:
                        self._complete(pending, None, -1, -1)
                    continue
                if error is not ErrorCode.none:
                    message = getattr(result, "error_message", None)
                    retry.append((tp, records, KafkaException(error, message or str(tp))))
                    continue
                base_offset = int(result.base_offset)
                append_time = epoch_millis(getattr(result, "log_append_time", None))
                for offset_delta, pending in enumerate(records):
                    self._complete(pending, None, base_offset + offset_delta, append_time)
        attempts = 0
        for tp, records, failed in retry:
            attempts = max(attempts, self._retry_or_fail(tp, records, failed))
        if attempts:
            # The partitions stay "in flight" while backing off, so nothing overtakes the retry.
            await asyncio.sleep(self._backoff(attempts))
            with contextlib.suppress(KafkaException):
                await self.cluster.refresh_metadata(list({tp.topic for tp, _ in batches}))
        for tp, _records in batches:
            self._queues[tp].in_flight = False
        self._wakeup.set()

    def _backoff(self, attempts: int) -> float:
        base = self.config.get_int("retry.backoff.ms") / 1000
        ceiling = self.config.get_int("retry.backoff.max.ms") / 1000
        return float(min(base * 2 ** min(attempts - 1, 16), ceiling))

    def _retry_or_fail(
        self, tp: TopicPartition, records: list[_PendingRecord], exc: KafkaException
    ) -> int:
        """Requeue what may still be retried (retriable error, under `retries` and
        `message.timeout.ms`), fail the rest; returns the attempts made so far (0: none left)."""
        queue = self._queues[tp]
        now = time.monotonic()
        retriable = [
            p
            for p in records
            if exc.retriable
            and not exc.fatal
            and p.attempts < self.retries
            and now - p.queued_at < self.message_timeout
        ]
        for pending in records:
            if pending not in retriable:
                self._complete(pending, exc, -1, -1)
        for pending in retriable:
            pending.attempts += 1
        queue.records[:0] = retriable
        queue.bytes += sum(p.size for p in retriable)
        return max((p.attempts for p in retriable), default=0)

    def _complete(
        self, pending: _PendingRecord, error: KafkaException | None, offset: int, append_time: int
    ) -> None:
        timestamp = append_time if append_time >= 0 else (pending.record.timestamp or -1)
        metadata = RecordMetadata(
            pending.topic,
            pending.partition,
            offset,
            timestamp,
            pending.record.key,
            pending.record.value,
        )
        if error is not None:
            error = self._write_failed(error)
        if not pending.future.done():
            if error is None:
                pending.future.set_result(metadata)
            else:
                pending.future.set_exception(error)
                # Nobody may await a fire-and-forget record; mark the exception as retrieved.
                pending.future.exception()
        if pending.on_delivery is not None:
            pending.on_delivery(error, metadata)
        self._pending -= 1
        if self._pending == 0:
            self._idle.set()


class SyncProducer(SyncFacade[Producer]):
    """`Producer` for synchronous code: `produce()` queues, `flush()` blocks until acknowledged.
    The futures `produce()` returns belong to the producer's loop; use `on_delivery` instead."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(lambda: Producer(config))

    def __len__(self) -> int:
        return len(self.target)
