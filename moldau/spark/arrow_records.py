"""Fetched RecordBatch v2 bytes decoded straight into Arrow columns: the Spark source's hot path.

Building a `Message` per record and then Arrow arrays from Python values costs several Python
objects per record. Here the batches of one fetch are grouped into segments, each one buffer (the
response itself for uncompressed batches; consecutive compressed batches decompressed into one),
and decoded in two passes:

1. a Python loop per record notes where each record starts (records are varint-framed, so this
   walk is sequential) and nothing else;
2. Arrow compute reads every field of every record column-wise from those positions
   (`arrow_varints`), and copies key and value bytes in C: the interleaved (start, end) positions
   are the offsets of one binary array over the buffer whose even elements are the keys (or
   values) and whose odd elements are the bytes between them; `take` of the even elements packs
   them.

A segment with a varint wider than three bytes is decoded by the record-by-record loop of
`record_fields` instead. Which batches to decode (control batches, aborted transactions under
read_committed) is decided by `moldau.client.fetcher.readable_batches`, the consumer's filter.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.client.fetcher import readable_batches
from moldau.protocol.batch_layout import DEFAULT_MAX_RECORDS_SIZE, HEADER_SIZE
from moldau.protocol.compression import CompressionType, decompress
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader, RecordBatch, TimestampType
from moldau.spark.arrow_varints import (
    ONE,
    ZERO,
    bytes_of,
    decode_runs,
    int64_scalar,
    interleave,
    read_varints,
)
from moldau.spark.record_fields import (
    ZIGZAG,
    SegmentFields,
    gather,
    headers_column,
    read_long_varint,
    walk_records,
)
from moldau.spark.schema import arrow_schema

__all__ = ["ArrowFetch", "batches_to_arrow", "fetch_to_arrow"]

_TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")
# The int64 pairs of `interleave` are two int32s in order only on little-endian machines.
_COLUMN_WISE: Final = sys.byteorder == "little"
_THOUSAND: Final = int64_scalar(1000)
_LOG_APPEND_TIME: Final = pa.scalar(1, pa.int32())
_NULL_BINARY: Final = pa.scalar(None, pa.binary())


@dataclass(frozen=True, slots=True)
class ArrowFetch:
    """The rows of one fetched partition (None when it held none) and the offset to fetch next."""

    batch: pa.RecordBatch | None
    next_offset: int


@dataclass(slots=True)
class Segment:
    """Batches whose records lie in one buffer, and what the first pass found per record."""

    data: bytes
    # (first record, end of the records, header) per batch
    batches: list[tuple[int, int, BatchHeader]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # of each record
    # per batch: the number of records up to its end, and constants of its records
    run_ends: list[int] = field(default_factory=list)
    base_offsets: list[int] = field(default_factory=list)
    base_timestamps: list[int] = field(default_factory=list)  # LogAppendTime: the batch's
    timestamp_types: list[int] = field(default_factory=list)


def fetch_to_arrow(
    records: bytes | None,
    *,
    topic: str,
    partition: int,
    fetch_offset: int,
    end_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
    include_headers: bool = False,
) -> ArrowFetch:
    """The readable records of `records` with offsets in `[fetch_offset, end_offset)`.

    `records` is one partition's record data from a Fetch response; `aborted_transactions` are
    its (producer_id, first_offset) pairs. Raises CORRUPT_MESSAGE for malformed records.
    """
    data = records or b""
    readable = readable_batches(
        data,
        fetch_offset=fetch_offset,
        aborted_transactions=aborted_transactions,
        read_committed=read_committed,
    )
    batch = batches_to_arrow(
        data,
        readable.batches,
        topic=topic,
        partition=partition,
        fetch_offset=fetch_offset,
        end_offset=end_offset,
        include_headers=include_headers,
    )
    return ArrowFetch(batch, readable.next_offset)


def batches_to_arrow(
    records: bytes,
    batches: Sequence[RecordBatch],
    *,
    topic: str,
    partition: int,
    fetch_offset: int,
    end_offset: int,
    include_headers: bool = False,
) -> pa.RecordBatch | None:
    """The records of `batches` (picked from `records` by `readable_batches`) with offsets in
    `[fetch_offset, end_offset)` as one Arrow record batch; None if there are none."""
    segments = _segments(records, [b for b in batches if b.header.base_offset < end_offset])
    for segment in segments:
        _scan_segment(segment)
    fields = [_segment_fields(segment) for segment in segments if segment.starts]
    if not fields:
        return None
    offsets = _concat([f.offsets for f in fields])
    count = len(offsets)
    first = pc.sum(pc.less(offsets, int64_scalar(fetch_offset))).as_py() or 0
    last = count - (pc.sum(pc.greater_equal(offsets, int64_scalar(end_offset))).as_py() or 0)
    if first >= last:
        return None
    timestamps = _concat([f.timestamps for f in fields])
    columns = [
        _concat([f.keys for f in fields]),
        _concat([f.values for f in fields]),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        pa.Array.from_buffers(
            _TIMESTAMP_US, count, [None, pc.multiply(timestamps, _THOUSAND).buffers()[1]]
        ),
        _concat([f.timestamp_types for f in fields]),
    ]
    if include_headers:
        columns.append(headers_column([(s.data, s.batches) for s in segments]))
    table = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
    if first > 0 or last < count:
        table = table.slice(first, last - first)
    return table


def _concat(parts: list[pa.Array]) -> pa.Array:
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _segments(records: bytes, batches: Sequence[RecordBatch]) -> list[Segment]:
    """Runs of batches sharing a buffer: uncompressed ones point into `records`, consecutive
    compressed ones are decompressed and joined (one buffer, so one column-wise pass)."""
    segments: list[Segment] = []
    compressed: list[tuple[BatchHeader, bytes]] = []
    for batch in batches:
        header = batch.header
        if header.records_count <= 0:
            continue  # compaction may leave a batch without records
        if header.compression is CompressionType.NONE:
            _add_compressed(segments, compressed)
            if not segments or segments[-1].data is not records:
                segments.append(Segment(records))
            start = batch.position + HEADER_SIZE
            segments[-1].batches.append((start, batch.position + header.size, header))
        else:
            payload = decompress(
                header.compression, batch.data[HEADER_SIZE:], max_size=DEFAULT_MAX_RECORDS_SIZE
            )
            compressed.append((header, payload))
    _add_compressed(segments, compressed)
    return segments


def _add_compressed(segments: list[Segment], compressed: list[tuple[BatchHeader, bytes]]) -> None:
    if not compressed:
        return
    segment = Segment(b"".join(payload for _header, payload in compressed))
    position = 0
    for header, payload in compressed:
        segment.batches.append((position, position + len(payload), header))
        position += len(payload)
    segments.append(segment)
    compressed.clear()


def _scan_segment(segment: Segment) -> None:
    """First pass: where each record starts, and its batch's constants."""
    for start, end, header in segment.batches:
        count = header.records_count
        try:
            position = _scan_records(segment, start, count)
        except IndexError:
            position = -1
        if position != end:
            raise KafkaError(ErrorCode.corrupt_message, "records do not fill their batch")
        segment.run_ends.append(len(segment.starts))
        segment.base_offsets.append(header.base_offset)
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            segment.base_timestamps.append(header.max_timestamp)
            segment.timestamp_types.append(1)
        else:
            segment.base_timestamps.append(header.base_timestamp)
            segment.timestamp_types.append(0)


def _scan_records(segment: Segment, position: int, count: int) -> int:
    """The only loop over records on the common path: note where each record starts and skip
    it, reading its length varint inline (a call per record would cost more than the rest)."""
    data = segment.data
    zigzag = ZIGZAG
    add_start = segment.starts.append
    for _ in range(count):
        add_start(position)
        byte = data[position]
        if byte < 128:
            position += 1 + zigzag[byte]
        elif data[position + 1] < 128:
            position += 2 + zigzag[(byte & 127) | (data[position + 1] << 7)]
        else:
            length, position = read_long_varint(data, position)
            position += length
    return position


def _segment_fields(segment: Segment) -> SegmentFields:
    """Second pass: every field of the segment's records, column-wise when the varints allow."""
    if _COLUMN_WISE:
        fields = _read_columns(segment)
        if fields is not None:
            return fields
    return walk_records(segment.data, segment.batches)


def _read_columns(segment: Segment) -> SegmentFields | None:
    data = bytes_of(segment.data)
    # length varint, attributes int8, timestampDelta, offsetDelta, keyLength, key, valueLength,
    # value, headers
    lengths = read_varints(data, pa.array(segment.starts, type=pa.int64()))
    if lengths is None:
        return None
    ends = pc.add(lengths[1], lengths[0])
    timestamp_deltas = read_varints(data, pc.add(lengths[1], ONE))
    if timestamp_deltas is None:
        return None
    offset_deltas = read_varints(data, timestamp_deltas[1])
    if offset_deltas is None:
        return None
    key_lengths = read_varints(data, offset_deltas[1])
    if key_lengths is None:
        return None
    key_starts = key_lengths[1]
    key_ends = pc.add(key_starts, pc.max_element_wise(key_lengths[0], ZERO))
    value_lengths = read_varints(data, key_ends)
    if value_lengths is None:
        return None
    value_starts = value_lengths[1]
    value_ends = pc.add(value_starts, pc.max_element_wise(value_lengths[0], ZERO))
    if not pc.all(pc.less(value_ends, ends)).as_py():  # the header count follows the value
        raise KafkaError(ErrorCode.corrupt_message, "record fields overrun their record")
    types = _per_record(segment, segment.timestamp_types, pa.int32())
    return SegmentFields(
        offsets=pc.add(_per_record(segment, segment.base_offsets, pa.int64()), offset_deltas[0]),
        timestamps=pc.add(
            _per_record(segment, segment.base_timestamps, pa.int64()),
            pc.if_else(
                pc.equal(types, _LOG_APPEND_TIME), ZERO, timestamp_deltas[0]
            ),  # LogAppendTime: no delta
        ),
        timestamp_types=types,
        keys=_binary(segment.data, key_starts, key_ends, key_lengths[0]),
        values=_binary(segment.data, value_starts, value_ends, value_lengths[0]),
    )


def _per_record(segment: Segment, per_batch: list[int], kind: pa.DataType) -> pa.Array:
    """A value per batch repeated for each of its records."""
    return decode_runs(segment.run_ends, per_batch, kind)


def _binary(data: bytes, starts: pa.Array, ends: pa.Array, lengths: pa.Array) -> pa.Array:
    """Binary column of `data[starts[i]:ends[i]]`, null where the length is -1."""
    packed = gather(data, interleave(starts, ends), len(starts))
    valid = pc.greater_equal(lengths, ZERO)
    if pc.all(valid).as_py():
        return packed
    return pc.if_else(valid, packed, _NULL_BINARY)
