"""Batch reads: `spark.read.format("moldau")` over a fixed offset range per partition.

The driver resolves `startingOffsets`/`endingOffsets` (or their timestamp forms) once, plans one
input partition per topic-partition range (split per `minPartitions`), and each task reads its
range from the partition leader as Arrow record batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from moldau.spark.cluster_offsets import OffsetReader
from moldau.spark.framed_source import FramedDecoder, ReaderSchema
from moldau.spark.options import SourceOptions
from moldau.spark.partition_reader import read_range
from moldau.spark.planning import OffsetRange, offset_ranges, split_ranges

__all__ = ["MoldauBatchReader", "OffsetRangePartition", "plan_partitions"]


class OffsetRangePartition(InputPartition):
    """One Spark input partition: the offsets `[start, end)` of one topic-partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def plan_partitions(
    options: SourceOptions, ranges: list[OffsetRange]
) -> list[OffsetRangePartition]:
    split = split_ranges(
        ranges,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    return [OffsetRangePartition(r) for r in split]


def read_partition(
    options: SourceOptions, partition: InputPartition, readers: Sequence[ReaderSchema] = ()
) -> Iterator[pa.RecordBatch]:
    """The rows of one input partition; with `readers`, their keys or values decoded from the
    schema registry's wire format."""
    assert isinstance(partition, OffsetRangePartition)
    batches = read_range(
        options.client,
        partition.offset_range,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
    )
    if options.registry is None or not readers:
        return batches
    return _decoded(FramedDecoder(options.registry, readers), batches)


def _decoded(decoder: FramedDecoder, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield decoder.decode(batch)


class MoldauBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, readers: Sequence[ReaderSchema] = ()) -> None:
        self.options = options
        self.readers = tuple(readers)

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        reader = OffsetReader(
            options.client, options.subscription, read_committed=options.read_committed
        )
        try:
            partitions = reader.partitions()
            starts = reader.resolve(
                options.starting,
                partitions,
                when_no_timestamp_match=options.starting_timestamp_strategy,
            )
            assert options.ending is not None
            ends = reader.resolve(options.ending, partitions)
        finally:
            reader.close()
        return plan_partitions(options, offset_ranges(starts, ends))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition, self.readers)
