"""Structured Streaming reads: `spark.readStream.format("moldau")` (Spark's KafkaMicroBatchStream).

Offsets are `{topic: {partition: offset}}` JSON in Spark's checkpoint, so a restarted query
resumes exactly where its last committed micro-batch ended. Each trigger lists the subscribed
partitions again (new partitions and pattern matches start at their earliest offset), reads the
latest offsets at the query's isolation level and applies the read limits: `maxOffsetsPerTrigger`,
`minOffsetsPerTrigger` with `maxTriggerDelay`, and `Trigger.AvailableNow`'s fixed target.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from moldau.spark.batch_source import plan_partitions, read_partition
from moldau.spark.cluster_offsets import OffsetReader
from moldau.spark.framed_source import ReaderSchema
from moldau.spark.offsets import PartitionOffsets, offsets_from_json, offsets_to_json
from moldau.spark.options import SourceOptions
from moldau.spark.partition_reader import DataLossError
from moldau.spark.planning import apply_max_offsets, offset_ranges

__all__ = ["MoldauStreamReader"]


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, readers: Sequence[ReaderSchema] = ()) -> None:
        self.options = options
        self.readers = tuple(readers)
        self._offset_reader: OffsetReader | None = None
        self._available_now_target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_trigger = time.monotonic()
        self._committed: PartitionOffsets = {}

    # Spark ships the reader to executors for read(); the cluster connection stays behind.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offset_reader"] = None
        return state

    @property
    def offset_reader(self) -> OffsetReader:
        if self._offset_reader is None:
            self._offset_reader = OffsetReader(
                self.options.client,
                self.options.subscription,
                read_committed=self.options.read_committed,
            )
        return self._offset_reader

    # --- offsets -----------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        reader = self.offset_reader
        starts = reader.resolve(
            self.options.starting,
            reader.partitions(),
            when_no_timestamp_match=self.options.starting_timestamp_strategy,
        )
        return offsets_to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        reader = self.offset_reader
        self._available_now_target = reader.latest(reader.partitions())

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        starts = offsets_from_json(start)
        # Spark asks for the next batch only once the previous one ended at `start`.
        self._commit_to_group(starts)
        reader = self.offset_reader
        partitions = reader.partitions()
        latest = reader.latest(partitions)
        self._latest = latest
        self._check_vanished(starts, latest)
        new_partitions = [tp for tp in latest if tp not in starts]
        starts_all = {**reader.earliest(new_partitions), **starts}
        ends = {}
        for tp, end in latest.items():
            start_offset = starts_all[tp]
            if end < start_offset:
                self._report_loss(f"{tp}: the log ends at {end}, before offset {start_offset}")
                end = start_offset
            ends[tp] = end
        target = self._available_now_target
        if target is not None:
            ends = {tp: min(end, target[tp]) for tp, end in ends.items() if tp in target}
        if isinstance(limit, ReadAllAvailable):
            return self._advance(start, starts, ends)
        max_rows = self.options.max_offsets_per_trigger
        min_rows = self.options.min_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        elif isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        if min_rows and target is None:
            backlog = sum(end - starts_all[tp] for tp, end in ends.items())
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            if backlog < min_rows and waited_ms < self.options.max_trigger_delay_ms:
                return start
        if max_rows:
            ends = apply_max_offsets(starts_all, ends, max_rows)
        return self._advance(start, starts, ends)

    def _advance(
        self, start: dict[str, Any], starts: PartitionOffsets, ends: PartitionOffsets
    ) -> dict[str, Any]:
        merged = {**starts, **ends}
        if merged == starts:
            return start
        self._last_trigger = time.monotonic()
        return offsets_to_json(merged)

    def _check_vanished(self, starts: PartitionOffsets, latest: PartitionOffsets) -> None:
        gone = [tp for tp in starts if tp not in latest]
        if gone:
            self._report_loss(f"partitions {', '.join(map(str, gone))} no longer exist")
            for tp in gone:
                starts.pop(tp)

    def _report_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(
                message + ". Some data may have been lost. If you want your query to continue "
                "in that case, set the source option 'failOnDataLoss' to 'false'."
            )

    # --- planning and reading ----------------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts = offsets_from_json(start)
        ends = offsets_from_json(end)
        new_partitions = [tp for tp in ends if tp not in starts]
        if new_partitions:
            starts.update(self.offset_reader.earliest(new_partitions))
        return plan_partitions(self.options, offset_ranges(starts, ends))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition, self.readers)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_to_group(offsets_from_json(end))

    def _commit_to_group(self, offsets: PartitionOffsets) -> None:
        """Record processed offsets under `kafka.group.id`, for lag in Kafka tools."""
        if self.options.commit_group and offsets and offsets != self._committed:
            self.offset_reader.commit_to_group(self.options.commit_group, offsets)
            self._committed = dict(offsets)

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None
