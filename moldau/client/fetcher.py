"""Fetch requests for assigned partitions and the decoding of what they return.

`build_fetch_request` asks one leader for its partitions from their positions; `records_from_fetch`
turns one partition's record batches into `Message`s, skipping control batches and, under
read_committed, batches of aborted transactions (Kafka's `CompletedFetch` does the same with the
response's aborted-transaction list), and reports the offset to fetch next.
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
from moldau.protocol.records import (
    ControlRecordType,
    TimestampType,
    decode_records,
    iter_batches,
    parse_control_record,
)
from moldau.types import TopicPartition

__all__ = ["FetchedPartition", "build_fetch_request", "records_from_fetch"]


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
        "rack_id": "",
    }


def records_from_fetch(
    tp: TopicPartition,
    records: bytes | None,
    *,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
) -> FetchedPartition:
    """Messages at or after `fetch_offset`; `aborted_transactions` are (producer_id, first_offset)."""
    messages: list[Message] = []
    next_offset = fetch_offset
    aborted = list((first, producer) for producer, first in aborted_transactions)
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
    return FetchedPartition(messages, next_offset)
