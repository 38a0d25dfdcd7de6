"""Reading one offset range on an executor, straight from the partition's leader.

`read_range` assigns a consumer (no group) to the range's topic-partition at its start offset and
yields Arrow record batches until the end offset, at the query's isolation level (transaction
markers and aborted records take offsets but yield no rows). Missing data follows
`failOnDataLoss`: raise, or skip to what is still there (Spark's `KafkaDataConsumer` does the same).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final

import pyarrow as pa

from moldau.client import Consumer, ErrorCode, KafkaException, Message
from moldau.client.sync import EventLoopThread
from moldau.spark.planning import OffsetRange
from moldau.spark.schema import records_to_arrow

__all__ = ["DataLossError", "read_range"]

log = logging.getLogger(__name__)

ROWS_PER_BATCH: Final = 20_000
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
    tp = offset_range.topic_partition
    settings = dict(client)
    settings.update({"auto.offset.reset": "error", "enable.auto.commit": False})
    settings.pop("group.id", None)
    loop = EventLoopThread("moldau-spark-reader")
    try:

        async def build() -> Consumer:
            consumer = Consumer(settings)
            consumer.assign([tp], {tp: offset_range.start})
            return consumer

        consumer = loop.run(build())
        try:
            yield from _read(
                loop,
                consumer,
                offset_range,
                include_headers,
                fail_on_data_loss,
                poll_timeout_ms / 1000,
            )
        finally:
            loop.run(consumer.close())
    finally:
        loop.stop()


def _read(
    loop: EventLoopThread,
    consumer: Consumer,
    offset_range: OffsetRange,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_s: float,
) -> Iterator[pa.RecordBatch]:
    tp = offset_range.topic_partition
    end = offset_range.end
    expected = offset_range.start
    last_progress = time.monotonic()
    while True:
        try:
            messages: list[Message] = loop.run(consumer.consume(ROWS_PER_BATCH, _POLL_S))
        except KafkaException as exc:
            if exc.code is not ErrorCode.offset_out_of_range:
                raise
            low, _high = loop.run(consumer.get_watermark_offsets(tp))
            _data_loss(
                f"{tp}: offsets {expected} to {min(low, end) - 1} are no longer available "
                f"(the log now starts at {low})",
                fail_on_data_loss,
            )
            if low >= end:
                return
            expected = low
            loop.run(_seek(consumer, tp, low))
            continue
        rows = [m for m in messages if m.offset() < end]
        if rows:
            last_progress = time.monotonic()
            expected = rows[-1].offset() + 1
            yield records_to_arrow(rows, include_headers=include_headers)
        position = consumer.position(tp)
        if len(rows) < len(messages) or (position is not None and position >= end):
            return
        stalled = time.monotonic() - last_progress
        if not messages and stalled >= _STALL_CHECK_S:
            _low, high = loop.run(consumer.get_watermark_offsets(tp))
            if high < end:
                _data_loss(
                    f"{tp}: the query expected offsets up to {end - 1} but the log ends at {high}",
                    fail_on_data_loss,
                )
                return
            if stalled >= poll_timeout_s:
                raise TimeoutError(
                    f"{tp}: no record at offset {expected} within {poll_timeout_s:.0f}s "
                    "(kafkaConsumer.pollTimeoutMs)"
                )


async def _seek(consumer: Consumer, tp: Any, offset: int) -> None:
    consumer.seek(tp, offset)
