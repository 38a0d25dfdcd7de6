"""Writing Spark rows to Moldau: the sink's input columns and the writer that encodes and sends them.

The sink takes Spark's Kafka sink columns: `value` (required, string or binary), `key` (string or
binary), `headers` (array<struct<key:string,value:binary>>), `topic` (string) and `partition`
(int). `check_sink_schema` validates them on the driver. In a task, `RecordWriter` gathers the
Arrow batches Spark hands over into chunks of CHUNK_ROWS rows, decides partitions and batches
(`sink_partitioning`), encodes whole Kafka record batches column-wise (`arrow_batches`) and hands
them to the producer's `send_batch` on a private event loop, several requests in flight per
partition, while it encodes the next chunk; at most UNACKNOWLEDGED_BYTES wait for the broker.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from moldau.client import ConfigResource, ErrorCode, KafkaException, Producer, ResourceType
from moldau.client.admin import describe_configs
from moldau.client.sync import EventLoopThread
from moldau.protocol.compression import CompressionType
from moldau.spark.arrow_batches import (
    LITTLE_ENDIAN,
    MAX_BATCH_RECORDS,
    RecordColumns,
    encode_batches,
    seal,
)
from moldau.spark.sink_partitioning import StickyPartitions, plan_batches
from moldau.types import TopicPartition

__all__ = ["CHUNK_ROWS", "UNACKNOWLEDGED_BYTES", "RecordWriter", "check_sink_schema"]

# Rows encoded together: Arrow compute costs a few microseconds a call whatever the rows, so
# several of Spark's batches (10,000 rows by default) are gathered first.
CHUNK_ROWS: Final = 65_536
_CHUNK_BYTES: Final = 32 * 1024 * 1024
# Encoded batches given to the producer and not yet acknowledged, at most (then `write` waits).
UNACKNOWLEDGED_BYTES: Final = 32 * 1024 * 1024

_CANCELLED: Final = KafkaException(ErrorCode.unknown_server_error, "the send was cancelled")
_BYTES_TYPES = (StringType, BinaryType)
# A topic's compression.type and the codec the sink writes then (`producer`: the sink's own).
_TOPIC_CODECS: Final[Mapping[str, CompressionType]] = {
    "uncompressed": CompressionType.NONE,
    **{codec.name.lower(): codec for codec in CompressionType if codec is not CompressionType.NONE},
}


def check_sink_schema(
    schema: StructType, *, topic_option: str | None, encoded: Collection[str] = ()
) -> None:
    """Raise ValueError if the columns cannot be written (Spark's Kafka sink rules). `encoded`:
    the columns written in the schema registry's wire format, which may have any type."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found (the sink writes column 'value')")
    for name in ("value", "key"):
        if name in fields and name not in encoded and not isinstance(fields[name], _BYTES_TYPES):
            raise ValueError(f"{name} attribute type must be a string or binary")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ValueError("topic attribute type must be a string")
    if "topic" not in fields and not topic_option:
        raise ValueError(
            "topic option required when no 'topic' attribute is present "
            "(set .option('topic', ...) or add a 'topic' column)"
        )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError("partition attribute type must be an int")
    headers = fields.get("headers")
    if headers is not None:
        element = headers.elementType if isinstance(headers, ArrayType) else None
        if not (
            isinstance(element, StructType)
            and [(f.name, type(f.dataType)) for f in element.fields]
            == [("key", StringType), ("value", BinaryType)]
        ):
            raise ValueError(
                "headers attribute type must be array<struct<key:string,value:binary>>"
            )


@dataclass(frozen=True, slots=True)
class _Topic:
    partition_count: int
    compression: CompressionType


class _Acknowledgements:
    """Bytes given to the producer and not yet acknowledged, the partitions written and the
    first failure; updated on the event loop's thread, waited on by the task's."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._unacknowledged = 0
        self.error: KafkaException | None = None
        self.partitions: set[tuple[str, int]] = set()

    def sent(self, size: int) -> None:
        with self._condition:
            self._unacknowledged += size

    def done(self, topic: str, partition: int, size: int, error: BaseException | None) -> None:
        with self._condition:
            self._unacknowledged -= size
            if error is None:
                self.partitions.add((topic, partition))
            elif self.error is None:
                self.error = (
                    error
                    if isinstance(error, KafkaException)
                    else KafkaException(
                        ErrorCode.unknown_server_error, f"produce failed: {error!r}"
                    )
                )
            self._condition.notify_all()

    def wait_for_room(self, limit: int) -> None:
        """Until at most `limit` bytes are unacknowledged (or something failed)."""
        with self._condition:
            while self._unacknowledged > limit and self.error is None:
                self._condition.wait()


def _acknowledged(
    acknowledgements: _Acknowledgements,
    topic: str,
    partition: int,
    size: int,
    done: asyncio.Future[int],
) -> None:
    error = _CANCELLED if done.cancelled() else done.exception()
    acknowledgements.done(topic, partition, size, error)


class RecordWriter:
    """Encodes and sends rows through one producer; `flush()` waits until the broker has them
    and, like `close()`, raises the first failure."""

    def __init__(
        self,
        client: Mapping[str, Any],
        *,
        topic: str | None,
        loop: EventLoopThread | None = None,
        producer: Producer | None = None,
    ) -> None:
        if not LITTLE_ENDIAN:
            raise RuntimeError("the moldau sink encodes records on little-endian machines only")
        self.topic = topic
        self.records = 0
        self._owns_loop = loop is None
        self._loop = loop or EventLoopThread("moldau-spark-writer")
        if producer is None:
            settings = {k: v for k, v in client.items() if k != "isolation.level"}

            async def build() -> Producer:
                return Producer(settings)

            producer = self._loop.run(build())
        self.producer = producer
        # None: the topic's compression.type decides
        chosen = any(name in client for name in ("compression.type", "compression.codec"))
        self._compression = producer.compression if chosen else None
        self._transactional = producer.config.get_optional_str("transactional.id") is not None
        self._batch_bytes = producer.batch_bytes
        self._batch_records = max(1, min(producer.batch_records, MAX_BATCH_RECORDS))
        self._topics: dict[str, _Topic] = {}
        self._sticky = StickyPartitions()
        self._acknowledgements = _Acknowledgements()
        self._chunk: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._chunk_bytes = 0

    @property
    def partitions(self) -> set[tuple[str, int]]:
        """(topic, partition) pairs with a batch the broker acknowledged."""
        return self._acknowledgements.partitions

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def write(self, batch: pa.RecordBatch) -> None:
        """Take the rows of `batch`; they are encoded and sent once a chunk is full."""
        if batch.num_rows == 0:
            return
        self._chunk.append(batch)
        self._chunk_rows += batch.num_rows
        self._chunk_bytes += batch.nbytes
        if self._chunk_rows >= CHUNK_ROWS or self._chunk_bytes >= _CHUNK_BYTES:
            self._write_chunk()

    def flush(self) -> None:
        """Send what is gathered and wait until the broker acknowledged every batch."""
        self._write_chunk()
        self._acknowledgements.wait_for_room(0)
        self._raise_if_failed()

    def close(self) -> None:
        try:
            self._loop.run(self.producer.close())
        finally:
            if self._owns_loop:
                self._loop.stop()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        error = self._acknowledgements.error
        if error is not None:
            raise RuntimeError(f"writing to Moldau failed: {error}") from error

    # --- encoding ----------------------------------------------------------------------------

    def _write_chunk(self) -> None:
        if not self._chunk:
            return
        table = pa.Table.from_batches(self._chunk)
        self._chunk, self._chunk_rows, self._chunk_bytes = [], 0, 0
        # values stay in Spark's batches (the layout copies them once); the rest is joined
        columns = {
            name.lower(): column if name.lower() == "value" else column.combine_chunks()
            for name, column in zip(table.column_names, table.columns, strict=True)
        }
        if self.topic:
            self._write_rows(self.topic, columns)
        else:
            topics = columns["topic"]
            names = pc.unique(topics).to_pylist()
            if None in names or "" in names:
                raise ValueError("null topic present in the data (set the 'topic' option)")
            if len(names) == 1:
                self._write_rows(names[0], columns)
            for name in names if len(names) > 1 else ():
                rows = pc.equal(topics, pa.scalar(name, topics.type))
                self._write_rows(name, {k: pc.filter(v, rows) for k, v in columns.items()})
        self._raise_if_failed()

    def _write_rows(self, topic: str, columns: Mapping[str, pa.Array | pa.ChunkedArray]) -> None:
        target = self._topic(topic)
        keys = columns.get("key")
        fields = RecordColumns.of(
            values=columns["value"], keys=keys, headers=columns.get("headers")
        )
        largest_delta = min(self._batch_records, fields.count) - 1
        plan = plan_batches(
            topic=topic,
            partition_count=target.partition_count,
            partitions=columns.get("partition"),
            keys=keys,
            sizes=fields.sizes(largest_offset_delta=largest_delta),
            batch_bytes=self._batch_bytes,
            batch_records=self._batch_records,
            sticky=self._sticky,
        )
        encoded = encode_batches(
            fields, order=plan.order, batches=[(start, end) for start, end, _p in plan.batches]
        )
        timestamp = int(time.time() * 1000)
        sealed = [
            (
                partition,
                seal(
                    encoded.batch(index),
                    records=end - start,
                    timestamp=timestamp,
                    compression=target.compression,
                    **self._producer_fields(topic, partition, end - start),
                ),
            )
            for index, (start, end, partition) in enumerate(plan.batches)
        ]
        self._send(topic, sealed)
        self.records += fields.count

    def _producer_fields(self, topic: str, partition: int, records: int) -> dict[str, Any]:
        """A transactional producer's id, epoch and the batch's base sequence. Sequences are
        taken here, on the task's thread, in the order the batches are handed over; the
        producer's loop only reads them from the batches."""
        if not self._transactional:
            return {}
        transactions = self.producer.transactions
        return {
            "producer_id": transactions.producer_id,
            "producer_epoch": transactions.producer_epoch,
            "base_sequence": transactions.next_sequence(TopicPartition(topic, partition), records),
            "transactional": True,
        }

    # --- sending -----------------------------------------------------------------------------

    def _send(self, topic: str, batches: list[tuple[int, bytes | memoryview]]) -> None:
        """Hand `batches` (partition, batch) to the producer's loop in one call (a wake-up of
        the loop thread per batch costs more than the call), once there is room for them."""
        acknowledgements = self._acknowledgements
        size = sum(len(batch) for _partition, batch in batches)
        acknowledgements.wait_for_room(max(0, UNACKNOWLEDGED_BYTES - size))
        self._raise_if_failed()
        acknowledgements.sent(size)

        def send_on_loop() -> None:
            for partition, batch in batches:
                try:
                    future = self.producer.send_batch(topic, partition, batch)
                except KafkaException as exc:
                    acknowledgements.done(topic, partition, len(batch), exc)
                    continue
                future.add_done_callback(
                    functools.partial(_acknowledged, acknowledgements, topic, partition, len(batch))
                )

        self._loop.loop.call_soon_threadsafe(send_on_loop)

    def _topic(self, topic: str) -> _Topic:
        """The topic's partition count and the codec to write it with (looked up once; a
        missing topic is created if the broker allows it, as Kafka producers do)."""
        known = self._topics.get(topic)
        if known is None:
            known = self._topics[topic] = self._loop.run(self._describe(topic))
        return known

    async def _describe(self, topic: str) -> _Topic:
        cluster = self.producer.cluster
        info = await cluster.topic(topic, allow_auto_create=True)
        compression = self._compression
        if compression is None:
            try:
                configs = await describe_configs(
                    cluster, ConfigResource(ResourceType.TOPIC, topic), keys=["compression.type"]
                )
            except KafkaException:  # not allowed to look: the producer's codec
                configs = {}
            entry = configs.get("compression.type")
            compression = _TOPIC_CODECS.get(str(entry.value) if entry else "", None)
        return _Topic(len(info.partitions), compression or self.producer.compression)
