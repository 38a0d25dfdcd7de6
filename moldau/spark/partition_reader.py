"""Reading one offset range on an executor, straight from the partition's leader.

`read_range` fetches the range's topic-partition (no group) from its start offset and yields one
Arrow record batch per Fetch response until the end offset, decoded in bulk by `arrow_records`, at
the query's isolation level (transaction markers and aborted records take offsets but yield no
rows). Missing data follows `failOnDataLoss`: raise, or skip to what is still there (Spark's
`KafkaDataConsumer` does the same).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any, Final

import pyarrow as pa

from moldau.client import ErrorCode, KafkaException
from moldau.client.fetcher import readable_batches
from moldau.client.partition_fetcher import FetchedRecords, PartitionFetcher
from moldau.client.sync import EventLoopThread
from moldau.spark.arrow_records import batches_to_arrow
from moldau.spark.planning import OffsetRange

__all__ = ["DataLossError", "read_range"]

log = logging.getLogger(__name__)

# Larger than a consumer's 1 MiB default: each Fetch becomes one Arrow batch, and the decoder's
# per-call costs (Arrow compute calls, one round trip) spread over 4x the records (measured:
# ~1.1-1.4x records/s). `kafka.max.partition.fetch.bytes` still sets it.
FETCH_BYTES: Final = 4 * 1024 * 1024
_POLL_S: Final = 0.5
_STALL_CHECK_S: Final = 2.0


class DataLossError(RuntimeError):
    """Records the query expected are gone (deleted, or the partition was truncated)."""


def _data_loss(message: str, fail_on_data_loss: bool) -> None:
    hint = (
        " Some data may have been lost because it is no longer available in Moldau (deleted by"
        " retention or DeleteRecords). If you want your query to continue in that case, set the"
        " source option 'failOnDataLoss' to 'false'."
    )
    if fail_on_data_loss:
        raise DataLossError(message + hint)
    log.warning("%s; continuing because failOnDataLoss is false", message)


def read_range(
    client: Mapping[str, Any],
    offset_range: OffsetRange,
    *,
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
) -> Iterator[pa.RecordBatch]:
    """Record batches holding every readable record of `offset_range`, in offset order."""
    if offset_range.size == 0:
        return
    settings = dict(client)
    settings.pop("group.id", None)
    settings.setdefault("max.partition.fetch.bytes", FETCH_BYTES)
    loop = EventLoopThread("moldau-spark-reader")
    try:

        async def build() -> PartitionFetcher:
            return PartitionFetcher(settings, offset_range.topic_partition)

        fetcher = loop.run(build())
        try:
            reader = _RangeReader(
                loop,
                fetcher,
                offset_range,
                include_headers=include_headers,
                fail_on_data_loss=fail_on_data_loss,
                poll_timeout_s=poll_timeout_ms / 1000,
            )
            yield from reader.batches()
        finally:
            loop.run(fetcher.close())
    finally:
        loop.stop()


class _RangeReader:
    """Fetches one range ahead of decoding: while a response is turned into Arrow on this
    thread, the next Fetch is already in flight on the loop thread (its socket I/O does not need
    the GIL), so the broker's round trip overlaps the decoding."""

    def __init__(
        self,
        loop: EventLoopThread,
        fetcher: PartitionFetcher,
        offset_range: OffsetRange,
        *,
        include_headers: bool,
        fail_on_data_loss: bool,
        poll_timeout_s: float,
    ) -> None:
        self.loop = loop
        self.fetcher = fetcher
        self.range = offset_range
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_s = poll_timeout_s
        self.last_progress = time.monotonic()

    def _fetch(self, offset: int) -> Future[FetchedRecords | None]:
        return asyncio.run_coroutine_threadsafe(self.fetcher.fetch(offset, _POLL_S), self.loop.loop)

    def batches(self) -> Iterator[pa.RecordBatch]:
        tp = self.range.topic_partition
        end = self.range.end
        position = self.range.start
        pending = self._fetch(position)
        try:
            while True:
                try:
                    fetched = pending.result()
                except KafkaException as exc:
                    if exc.code is not ErrorCode.offset_out_of_range:
                        raise
                    position = self._skip_lost_offsets(position)
                    if position >= end:
                        return
                    pending = self._fetch(position)
                    continue
                readable = readable_batches(
                    fetched.records if fetched else b"",
                    fetch_offset=position,
                    aborted_transactions=fetched.aborted_transactions if fetched else (),
                    read_committed=self.fetcher.read_committed,
                )
                next_position = readable.next_offset
                if next_position < end:
                    pending = self._fetch(next_position)
                if fetched is not None and readable.batches:
                    batch = batches_to_arrow(
                        fetched.records,
                        readable.batches,
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=position,
                        end_offset=end,
                        include_headers=self.include_headers,
                    )
                    if batch is not None:
                        self.last_progress = time.monotonic()
                        yield batch
                if next_position >= end:
                    return
                if next_position == position and not self._still_expected(position):
                    return
                position = next_position
        finally:
            pending.cancel()

    def _skip_lost_offsets(self, position: int) -> int:
        """After OFFSET_OUT_OF_RANGE: where reading resumes (the range's end: stop), if
        `failOnDataLoss` allows. Either the log start moved past `position` (retention,
        DeleteRecords) or the log was truncated before it."""
        low, high = self.loop.run(self.fetcher.watermarks())
        tp = self.range.topic_partition
        end = self.range.end
        if low > position:
            _data_loss(
                f"{tp}: offsets {position} to {min(low, end) - 1} are no longer available "
                f"(the log now starts at {low})",
                self.fail_on_data_loss,
            )
            return low
        _data_loss(
            f"{tp}: the query expected offsets up to {end - 1} but the log ends at {high}",
            self.fail_on_data_loss,
        )
        return end

    def _still_expected(self, position: int) -> bool:
        """Whether to keep waiting for `position` after a fetch that brought nothing: False once
        the log ends before the range does (data loss), TimeoutError after the poll timeout."""
        stalled = time.monotonic() - self.last_progress
        if stalled < _STALL_CHECK_S:
            return True
        _low, high = self.loop.run(self.fetcher.watermarks())
        end = self.range.end
        if high < end:
            _data_loss(
                f"{self.range.topic_partition}: the query expected offsets up to {end - 1} but "
                f"the log ends at {high}",
                self.fail_on_data_loss,
            )
            return False
        if stalled >= self.poll_timeout_s:
            raise TimeoutError(
                f"{self.range.topic_partition}: no record at offset {position} within "
                f"{self.poll_timeout_s:.0f}s (kafkaConsumer.pollTimeoutMs)"
            )
        return True
