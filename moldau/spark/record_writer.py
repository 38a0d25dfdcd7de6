"""Writing Spark rows to Moldau: the sink's input columns and the producer that sends them.

The sink takes Spark's Kafka sink columns: `value` (required, string or binary), `key` (string or
binary), `headers` (array<struct<key:string,value:binary>>), `topic` (string) and `partition`
(int). `check_sink_schema` validates them on the driver; `RecordWriter` sends Arrow batches of
such rows from a task through one producer on a private event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from moldau.client import KafkaException, Producer
from moldau.client.producer import RecordMetadata
from moldau.client.sync import EventLoopThread

__all__ = ["RecordWriter", "check_sink_schema"]

_BYTES_TYPES = (StringType, BinaryType)


def check_sink_schema(schema: StructType, *, topic_option: str | None) -> None:
    """Raise ValueError if the columns cannot be written (Spark's Kafka sink rules)."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found (the sink writes column 'value')")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], _BYTES_TYPES):
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


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


class RecordWriter:
    """Sends rows through one producer; `close()` flushes and raises the first delivery error."""

    def __init__(
        self,
        client: Mapping[str, Any],
        *,
        topic: str | None,
        loop: EventLoopThread | None = None,
        producer: Producer | None = None,
    ) -> None:
        self.topic = topic
        self.records = 0
        self.partitions: set[tuple[str, int]] = set()
        self._owns_loop = loop is None
        self._loop = loop or EventLoopThread("moldau-spark-writer")
        self._error: KafkaException | None = None
        self._known_topics: set[str] = set()
        if producer is None:
            settings = {k: v for k, v in client.items() if k != "isolation.level"}

            async def build() -> Producer:
                return Producer(settings)

            producer = self._loop.run(build())
        self.producer = producer

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _delivered(self, error: KafkaException | None, metadata: RecordMetadata) -> None:
        if error is not None and self._error is None:
            self._error = error
        elif error is None:
            self.partitions.add((metadata.topic, metadata.partition))

    def write(self, batch: pa.RecordBatch) -> None:
        """Queue every row of `batch` (the producer batches and sends in the background)."""
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        count = batch.num_rows
        values = columns["value"].to_pylist()
        keys = columns["key"].to_pylist() if "key" in columns else [None] * count
        if self.topic:
            topics = [self.topic] * count
        else:
            topics = columns["topic"].to_pylist()
        partitions = columns["partition"].to_pylist() if "partition" in columns else None
        headers = columns["headers"].to_pylist() if "headers" in columns else None

        async def produce_all() -> None:
            for topic in set(topics) - self._known_topics:
                if topic:
                    # As Kafka producers do: a missing topic is created if the broker allows it.
                    await self.producer.cluster.topic(topic, allow_auto_create=True)
                    self._known_topics.add(topic)
            for row in range(count):
                topic = topics[row]
                if not topic:
                    raise ValueError("null topic present in the data (set the 'topic' option)")
                partition = partitions[row] if partitions is not None else None
                row_headers = headers[row] if headers is not None else None
                self.producer.produce(
                    topic,
                    _as_bytes(values[row]),
                    _as_bytes(keys[row]),
                    partition=-1 if partition is None else partition,
                    headers=[(h["key"], h["value"]) for h in row_headers or ()],
                    on_delivery=self._delivered,
                )

        self._loop.run(produce_all())
        self.records += count
        self._raise_if_failed()

    def flush(self) -> None:
        self._loop.run(self.producer.flush())
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"writing to Moldau failed: {self._error}") from self._error

    def close(self) -> None:
        try:
            self._loop.run(self.producer.close())
        finally:
            if self._owns_loop:
                self._loop.stop()
        self._raise_if_failed()
