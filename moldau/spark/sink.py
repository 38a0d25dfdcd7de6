"""Writing DataFrames to Moldau: `df.write.format("moldau")` and `df.writeStream.format("moldau")`.

Each task sends its rows through one producer and reports how many it wrote. Without
transactions this is at-least-once, like Spark's own Kafka sink: a retried task or replayed
micro-batch writes its rows again. Streaming queries with `exactlyOnce=true` write each
micro-batch inside transactions that Spark's commit protocol commits (`transactional_sink.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from moldau.spark.framed_sink import WriterSchema, encoded_batches
from moldau.spark.options import SinkOptions
from moldau.spark.record_writer import RecordWriter

__all__ = ["MoldauBatchWriter", "MoldauStreamWriter", "WrittenRecords"]


@dataclass(frozen=True)
class WrittenRecords(WriterCommitMessage):
    records: int


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WrittenRecords:
    with RecordWriter(options.client, topic=options.topic) as writer:
        for batch in batches:
            writer.write(batch)
        writer.flush()
    return WrittenRecords(writer.records)


class MoldauBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, writers: Sequence[WriterSchema] = ()) -> None:
        self.options = options
        self.writers = tuple(writers)  # columns in the schema registry's wire format

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return write_batches(self.options, encoded_batches(self.writers, iterator))


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once streaming writes (the default, as with Spark's Kafka sink)."""

    def __init__(self, options: SinkOptions, writers: Sequence[WriterSchema] = ()) -> None:
        self.options = options
        self.writers = tuple(writers)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return write_batches(self.options, encoded_batches(self.writers, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
