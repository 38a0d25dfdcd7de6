"""The message browser and the test producer: records read from one partition by offset or by
time, and one record written.

A browse reads with a consumer of its own (no group, nothing committed, read_committed) from the
start offset up to the partition's last stable offset or `limit` records, whichever comes
first, and gives up waiting after `READ_TIMEOUT_S`. `latest` means the last `limit` records; a
timestamp is resolved with ListOffsets (the first record at or after it), as Kafka's
`offsetsForTimes`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from moldau.client.admin import AdminClient
from moldau.client.consumer import Consumer
from moldau.client.message import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Message,
)
from moldau.client.offsets import EARLIEST, LATEST, READ_COMMITTED
from moldau.client.producer import Producer
from moldau.console.model import (
    BrowsedMessage,
    BrowseRequest,
    BrowseResult,
    Produced,
    ProduceRequest,
)
from moldau.console.rendering import RecordFormat, render_bytes
from moldau.console.validation import InvalidInput
from moldau.types import TopicPartition

__all__ = ["PRODUCE_TIMEOUT_S", "READ_TIMEOUT_S", "browse", "produce"]

READ_TIMEOUT_S: Final = 5.0
PRODUCE_TIMEOUT_S: Final = 20.0
_TIMESTAMP_TYPES: Final = {
    TIMESTAMP_CREATE_TIME: "CreateTime",
    TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime",
}


async def _partition_of(
    admin: AdminClient, topic: str, partition: int
) -> tuple[TopicPartition, int]:
    """The partition, checked against the topic's partition count (which is returned too)."""
    info = await admin.describe_topic(topic)
    count = len(info.partitions)
    if partition not in info.partitions:
        raise InvalidInput(
            "partition", f"topic {topic} has partitions 0 to {count - 1}, not {partition}"
        )
    return TopicPartition(topic, partition), count


async def browse(
    admin: AdminClient, consumer_settings: Mapping[str, Any], request: BrowseRequest
) -> BrowseResult:
    tp, count = await _partition_of(admin, request.topic, request.partition)
    low = (await admin.list_offsets({tp: EARLIEST}))[tp].offset
    high = (await admin.list_offsets({tp: LATEST}, isolation_level=READ_COMMITTED))[tp].offset
    start = await _start_offset(admin, tp, request, low=low, high=high)
    messages: list[Message] = []
    if 0 <= start < high:
        messages = await _read(consumer_settings, tp, start=start, end=high, limit=request.limit)
    return BrowseResult(
        request=request,
        partitions=count,
        log_start_offset=low,
        high_watermark=high,
        start_offset=start,
        messages=tuple(_browsed(message, request.format) for message in messages),
    )


async def _start_offset(
    admin: AdminClient, tp: TopicPartition, request: BrowseRequest, *, low: int, high: int
) -> int:
    start = request.start
    if start.kind == "earliest":
        return low
    if start.kind == "latest":
        return max(low, high - request.limit)
    assert start.value is not None
    if start.kind == "timestamp":
        found = (await admin.list_offsets({tp: start.value}, isolation_level=READ_COMMITTED))[tp]
        return found.offset  # -1: no record at or after that time
    return min(max(start.value, low), high)


async def _read(
    settings: Mapping[str, Any], tp: TopicPartition, *, start: int, end: int, limit: int
) -> list[Message]:
    messages: list[Message] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READ_TIMEOUT_S
    async with Consumer(settings) as consumer:
        consumer.assign([tp], {tp: start})
        while len(messages) < limit:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            for message in await consumer.consume(limit - len(messages), min(remaining, 1.0)):
                error = message.error()
                if error is not None:
                    raise error
                if message.offset() < end:
                    messages.append(message)
            position = consumer.position(tp)
            if position is not None and position >= end:
                break
    return messages[:limit]


def _browsed(message: Message, wanted: RecordFormat) -> BrowsedMessage:
    timestamp_type, timestamp = message.timestamp()
    return BrowsedMessage(
        partition=message.partition(),
        offset=message.offset(),
        timestamp_ms=timestamp,
        timestamp_type=_TIMESTAMP_TYPES.get(timestamp_type, "none"),
        key=render_bytes(message.key(), wanted),
        value=render_bytes(message.value(), wanted),
        headers=tuple(
            (name, render_bytes(value, RecordFormat.auto)) for name, value in message.headers()
        ),
    )


async def produce(admin: AdminClient, producer: Producer, request: ProduceRequest) -> Produced:
    """Write one record and wait for the cluster to acknowledge it (acks=all)."""
    if request.partition is not None:
        await _partition_of(admin, request.topic, request.partition)
    else:
        await admin.describe_topic(request.topic)  # an unknown topic fails now, not at timeout
    delivered = producer.produce(
        request.topic,
        request.value,
        request.key,
        partition=-1 if request.partition is None else request.partition,
        headers=list(request.headers),
    )
    async with asyncio.timeout(PRODUCE_TIMEOUT_S):
        metadata = await delivered
    return Produced(topic=metadata.topic, partition=metadata.partition, offset=metadata.offset)
