"""Fetch requests for assigned partitions and the decoding of what they return.

`build_fetch_request` asks one leader for its partitions from their positions; `readable_batches`
picks one partition's batches to deliver, skipping control batches and, under read_committed,
batches of aborted transactions (Kafka's `CompletedFetch` does the same with the response's
aborted-transaction list), and reports the offset to fetch next; `records_from_fetch` turns those
batches into `Message`s.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moldau.client.message import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Message,
)
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import (
    ControlRecordType,
    RecordBatch,
    TimestampType,
    iter_batches,
    parse_control_record,
)
from moldau.types import TopicPartition

__all__ = [
    "FetchedPartition",
    "ReadableBatches",
    "build_fetch_request",
    "readable_batches",
    "records_from_fetch",
]


@dataclass(frozen=True, slots=True)
class ReadableBatches:
    """The batches to deliver from one fetched partition, and the offset to fetch next."""

    batches: list[RecordBatch]
    next_offset: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    messages: list[Message]
    next_offset: int


def build_fetch_request(
    positions: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int,
    rack_id: str = "",
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, offset in positions.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition": tp.partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": rack_id,
    }


def readable_batches(
    records: bytes | bytearray | memoryview | None,
    *,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
) -> ReadableBatches:
    """The data batches of one fetched partition a consumer may return, without decoding them.

    Batches ending before `fetch_offset` are skipped (a fetch may start inside a batch). Control
    batches never hold data; under read_committed, transactional batches of a producer listed in
    `aborted_transactions` (producer_id, first_offset) are dropped from that transaction's first
    offset until its ABORT marker. Both the `Message` path and bulk decoders share this filter.
    """
    delivered: list[RecordBatch] = []
    next_offset = fetch_offset
    aborted = [(first, producer) for producer, first in aborted_transactions]
    heapq.heapify(aborted)
    aborting: set[int] = set()
    for batch in iter_batches(records or b""):
        header = batch.header
        if header.last_offset < fetch_offset:
            continue
        next_offset = max(next_offset, header.last_offset + 1)
        if read_committed:
            while aborted and aborted[0][0] <= header.last_offset:
                aborting.add(heapq.heappop(aborted)[1])
        if header.is_control:
            if read_committed and header.producer_id in aborting:
                for record in decode_records(batch.data):
                    kind, _epoch = parse_control_record(record)
                    if kind is ControlRecordType.ABORT:
                        aborting.discard(header.producer_id)
            continue
        if read_committed and header.is_transactional and header.producer_id in aborting:
            continue
        delivered.append(batch)
    return ReadableBatches(delivered, next_offset)


def records_from_fetch(
    tp: TopicPartition,
    records: bytes | None,
    *,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
) -> FetchedPartition:
    """Messages at or after `fetch_offset`; `aborted_transactions` are (producer_id, first_offset)."""
    readable = readable_batches(
        records,
        fetch_offset=fetch_offset,
        aborted_transactions=aborted_transactions,
        read_committed=read_committed,
    )
    messages: list[Message] = []
    for batch in readable.batches:
        header = batch.header
        timestamp_type = (
            TIMESTAMP_LOG_APPEND_TIME
            if header.timestamp_type is TimestampType.LOG_APPEND_TIME
            else TIMESTAMP_CREATE_TIME
        )
        for record in decode_records(batch.data):
            if record.offset < fetch_offset:
                continue
            messages.append(
                Message(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=record.offset,
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                    timestamp=record.timestamp,
                    timestamp_type=timestamp_type,
                    leader_epoch=header.partition_leader_epoch,
                )
            )
    return FetchedPartition(messages, readable.next_offset)
