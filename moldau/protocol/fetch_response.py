"""A hand-written encoder of Fetch responses (v4-17) whose record data stays in files.

kio would need the record bytes in memory; here each partition's `records` is either bytes or a
list of file regions (objects with a `length`), and the encoder yields a list of chunks — bytes
for the framing, regions as they are — so the network layer can `sendfile` the record data.

Layout per partition: partition_index int32, error_code int16, high_watermark int64,
last_stable_offset int64, log_start_offset int64 (v5+), aborted_transactions nullable array of
(producer_id int64, first_offset int64), preferred_read_replica int32 (v11+), records nullable
bytes; flexible versions (v12+) use compact arrays/strings/bytes and tagged fields. Topics are
named up to v12 and identified by topic id from v13.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.wire import tagged_fields, uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")


@dataclass(slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Any = b""  # bytes, or a list of file regions
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch) tag for NOT_LEADER
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset) tag for followers


@dataclass(slots=True)
class FetchTopicData:
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartitionData] = field(default_factory=list)


def _records_size(records: Any) -> int:
    if records is None:
        return -1
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    return sum(region.length for region in records)


def encode_fetch_response(
    version: int,
    *,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
    topics: Sequence[FetchTopicData],
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> list[Any]:
    """The response body as chunks (no size prefix or response header). `node_endpoints`
    (node id, host, port, rack) go out from v16 (KIP-951)."""
    flexible = version >= 12
    chunks: list[Any] = []
    head = bytearray(_I32.pack(throttle_time_ms))
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for topic in topics:
        if version >= 13:
            head += topic.topic_id.bytes
        else:
            name = topic.name.encode()
            head += uvarint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name
        partitions = topic.partitions
        head += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for partition in partitions:
            head += _PARTITION_HEAD.pack(
                partition.partition_index,
                partition.error_code,
                partition.high_watermark,
                partition.last_stable_offset,
            )
            if version >= 5:
                head += _I64.pack(partition.log_start_offset)
            aborted = partition.aborted_transactions
            if aborted is None:
                head += b"\x00" if flexible else _I32.pack(-1)
            else:
                head += uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    head += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(partition.preferred_read_replica)
            size = _records_size(partition.records)
            if flexible:
                head += uvarint(size + 1)  # null is 0
            else:
                head += _I32.pack(size)
            if size > 0:
                if isinstance(partition.records, bytes | bytearray | memoryview):
                    head += partition.records
                else:
                    chunks.append(bytes(head))
                    head = bytearray()
                    chunks.extend(partition.records)
            if flexible:
                tags: list[tuple[int, bytes]] = []
                if partition.diverging_epoch is not None:
                    epoch, end_offset = partition.diverging_epoch
                    tags.append((0, _I32.pack(epoch) + _I64.pack(end_offset) + b"\x00"))
                if partition.current_leader is not None:
                    leader_id, leader_epoch = partition.current_leader
                    tags.append((1, _I32.pack(leader_id) + _I32.pack(leader_epoch) + b"\x00"))
                head += tagged_fields(tags)
        if flexible:
            head += b"\x00"
    if flexible:
        if node_endpoints and version >= 16:
            nodes = bytearray(uvarint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                encoded_host = host.encode()
                nodes += _I32.pack(node_id) + uvarint(len(encoded_host) + 1) + encoded_host
                nodes += _I32.pack(port)
                if rack is None:
                    nodes += b"\x00"
                else:
                    encoded_rack = rack.encode()
                    nodes += uvarint(len(encoded_rack) + 1) + encoded_rack
                nodes += b"\x00"
            head += tagged_fields([(0, bytes(nodes))])
        else:
            head += b"\x00"
    chunks.append(bytes(head))
    return chunks
