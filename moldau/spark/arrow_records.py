"""Fetched RecordBatch v2 bytes decoded straight into Arrow columns: the Spark source's hot path.

Building a `Message` per record and then Arrow arrays from Python values costs several Python
objects per record. Here one pass per batch walks the varint-framed records and keeps integers
only: each record's offset and timestamp, and where its key and value start and end inside the
batch bytes. Arrow then copies the key and value bytes in C: the interleaved (start, end) positions
of consecutive records are the offsets of one binary array over the batch bytes whose even elements
are the keys (or values) and whose odd elements are the bytes between them, and `take` of the even
elements packs them into a compact array. Which batches to decode (control batches, aborted
transactions under read_committed) is decided by `moldau.client.fetcher.readable_batches`, the
consumer's own filter.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.client.fetcher import readable_batches
from moldau.protocol.compression import CompressionType, decompress
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import (
    DEFAULT_MAX_RECORDS_SIZE,
    HEADER_SIZE,
    RecordBatch,
    TimestampType,
)
from moldau.spark.schema import arrow_schema

__all__ = ["ArrowFetch", "batches_to_arrow", "fetch_to_arrow"]

# The zig-zag value of every varint of one or two bytes, indexed by its 14 payload bits: one list
# lookup replaces the shifts and masks per field, which is most of the loop's cost.
_ZIGZAG: Final = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]
_TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")
_HEADER_FIELDS: Final = [("key", pa.string()), ("value", pa.binary())]


@dataclass(frozen=True, slots=True)
class ArrowFetch:
    """The rows of one fetched partition (None when it held none) and the offset to fetch next."""

    batch: pa.RecordBatch | None
    next_offset: int


@dataclass(slots=True)
class _Segment:
    """Spans of the records decoded from one buffer (the response, or one decompressed batch)."""

    data: bytes
    batches: list[tuple[int, int]] = field(default_factory=list)  # (first record, count)
    keys: list[int] = field(default_factory=list)
    values: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Rows:
    """Everything collected from the batches of one fetch, row by row, as plain ints."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    null_keys: list[int] = field(default_factory=list)
    null_values: list[int] = field(default_factory=list)
    segments: list[_Segment] = field(default_factory=list)


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
    rows = _Rows()
    for batch in batches:
        if batch.header.base_offset >= end_offset:
            break
        _decode_batch(rows, records, batch)
    first = bisect.bisect_left(rows.offsets, fetch_offset)
    last = bisect.bisect_left(rows.offsets, end_offset)
    if first == last:
        return None
    columns = _columns(rows, topic, partition, include_headers)
    table = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
    if first > 0 or last < len(rows.offsets):
        table = table.slice(first, last - first)
    return table


def _decode_batch(rows: _Rows, response: bytes, batch: RecordBatch) -> None:
    header = batch.header
    compression = header.compression
    count = header.records_count
    if count <= 0:
        return  # compaction may leave a batch without records
    if compression is CompressionType.NONE:
        data = response
        position = batch.position + HEADER_SIZE
        batch_end = batch.position + header.size
    else:
        data = decompress(compression, batch.data[HEADER_SIZE:], max_size=DEFAULT_MAX_RECORDS_SIZE)
        position = 0
        batch_end = len(data)
    segments = rows.segments
    if not segments or segments[-1].data is not data:
        segments.append(_Segment(data))
    segment = segments[-1]
    segment.batches.append((position, count))
    try:
        position = _decode_records(
            rows,
            segment,
            position,
            count,
            base_offset=header.base_offset,
            base_timestamp=header.base_timestamp,
            # deltas strictly increase, so a batch whose last delta is count - 1 has no gaps
            offsets_in_order=header.last_offset_delta == count - 1,
            # the base timestamp is the smallest and max the largest: equal, every delta is 0
            # (the common case at high rates, where a batch fills within a millisecond)
            one_timestamp=header.base_timestamp == header.max_timestamp,
        )
    except IndexError:
        position = -1
    if position != batch_end:
        raise KafkaError(ErrorCode.corrupt_message, "records do not fill their batch")
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        rows.timestamps[-count:] = [header.max_timestamp] * count
        rows.timestamp_types += [1] * count
    else:
        rows.timestamp_types += [0] * count


def _decode_records(
    rows: _Rows,
    segment: _Segment,
    position: int,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    offsets_in_order: bool,
    one_timestamp: bool,
) -> int:
    """Walk `count` records from `position`, appending their offsets, timestamps and spans;
    returns the position after the last record.

    The varint reads are written out in place, not called: a call per field would cost more than
    the rest of the loop. Varints of one or two bytes (every length under 8 KB, offset deltas under
    8192) take the table lookup; longer ones go through `_read_long_varint`.
    """
    data = segment.data
    zigzag = _ZIGZAG
    add_offset = rows.offsets.append
    add_timestamp = rows.timestamps.append
    add_key = segment.keys.append
    add_value = segment.values.append
    add_null_key = rows.null_keys.append
    add_null_value = rows.null_values.append
    first_row = len(rows.offsets)
    for row in range(first_row, first_row + count):
        byte = data[position]
        if byte < 128:
            length = zigzag[byte]
            position += 1
        elif data[position + 1] < 128:
            length = zigzag[(byte & 127) | (data[position + 1] << 7)]
            position += 2
        else:
            length, position = _read_long_varint(data, position)
        end = position + length
        position += 1  # attributes: unused by magic 2
        if one_timestamp:  # every delta is 0: skip it, add them all below
            while data[position] > 127:
                position += 1
            position += 1
        elif (byte := data[position]) < 128:
            add_timestamp(base_timestamp + zigzag[byte])
            position += 1
        elif data[position + 1] < 128:
            add_timestamp(base_timestamp + zigzag[(byte & 127) | (data[position + 1] << 7)])
            position += 2
        else:
            delta, position = _read_long_varint(data, position)
            add_timestamp(base_timestamp + delta)
        if offsets_in_order:  # the delta is the record's index: skip it, add them all below
            while data[position] > 127:
                position += 1
            position += 1
        elif (byte := data[position]) < 128:
            add_offset(base_offset + zigzag[byte])
            position += 1
        elif data[position + 1] < 128:
            add_offset(base_offset + zigzag[(byte & 127) | (data[position + 1] << 7)])
            position += 2
        else:
            delta, position = _read_long_varint(data, position)
            add_offset(base_offset + delta)
        byte = data[position]
        if byte < 128:
            length = zigzag[byte]
            position += 1
        elif data[position + 1] < 128:
            length = zigzag[(byte & 127) | (data[position + 1] << 7)]
            position += 2
        else:
            length, position = _read_long_varint(data, position)
        if length < 0:
            add_null_key(row)
        else:
            add_key(position)
            position += length
            add_key(position)
        byte = data[position]
        if byte < 128:
            length = zigzag[byte]
            position += 1
        elif data[position + 1] < 128:
            length = zigzag[(byte & 127) | (data[position + 1] << 7)]
            position += 2
        else:
            length, position = _read_long_varint(data, position)
        if length < 0:
            add_null_value(row)
        else:
            add_value(position)
            position += length
            add_value(position)
        position = end  # past the headers, decoded separately when asked for
    if offsets_in_order:
        rows.offsets += range(base_offset, base_offset + count)
    if one_timestamp:
        rows.timestamps += [base_timestamp] * count
    return position


def _read_long_varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint of any length (Kafka's `ByteUtils.readVarlong`)."""
    result = 0
    shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 128:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.corrupt_message, "varint too long")


# -- columns ---------------------------------------------------------------------------------


def _columns(rows: _Rows, topic: str, partition: int, include_headers: bool) -> list[pa.Array]:
    count = len(rows.offsets)
    keys = _binary_column([(s.data, s.keys) for s in rows.segments], count, rows.null_keys)
    values = _binary_column([(s.data, s.values) for s in rows.segments], count, rows.null_values)
    timestamps = pa.array(rows.timestamps, type=pa.int64())
    columns = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(rows.offsets, type=pa.int64()),
        pa.Array.from_buffers(
            _TIMESTAMP_US, count, [None, pc.multiply(timestamps, 1000).buffers()[1]]
        ),
        pa.array(rows.timestamp_types, type=pa.int32()),
    ]
    if include_headers:
        columns.append(_headers_column(rows))
    return columns


def _binary_column(
    spans_by_buffer: list[tuple[bytes, list[int]]], count: int, nulls: list[int]
) -> pa.Array:
    """One binary column of `count` rows: the spans of each buffer fill the rows not in `nulls`
    (row numbers), in order. Null rows have no span, which saves the decoding loop two appends
    per record on topics without keys."""
    if len(nulls) == count:
        return pa.nulls(count, pa.binary())
    parts = [_gather(data, spans) for data, spans in spans_by_buffer if spans]
    packed = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    if not nulls:
        return packed
    valid = pa.Array.from_buffers(pa.bool_(), count, [None, _validity(count, nulls)])
    return pc.replace_with_mask(pa.nulls(count, pa.binary()), valid, packed)


def _gather(data: bytes, spans: list[int]) -> pa.BinaryArray:
    """The bytes `data[spans[2i]:spans[2i+1]]` for each i, packed into one binary array."""
    count = len(spans) // 2
    try:
        positions = pa.array(spans, type=pa.int32())
        interleaved = pa.Array.from_buffers(
            pa.binary(), 2 * count - 1, [None, positions.buffers()[1], pa.py_buffer(data)]
        )
        interleaved.validate(full=True)  # spans in order and inside the data
    except (pa.ArrowInvalid, OverflowError):
        raise KafkaError(ErrorCode.corrupt_message, "record field overruns its batch") from None
    return interleaved.take(_even_indices(count))


_even_cache: list[pa.Array] = [pa.array([], type=pa.int32())]


def _even_indices(count: int) -> pa.Array:
    """0, 2, 4, ... (count values), sliced from a cached array grown on demand."""
    cached = _even_cache[0]
    if len(cached) < count:
        cached = pa.array(range(0, 2 * max(count, 65_536), 2), type=pa.int32())
        _even_cache[0] = cached
    return cached.slice(0, count)


def _validity(count: int, nulls: list[int]) -> pa.Buffer:
    """An Arrow validity bitmap with the bits of `nulls` cleared."""
    size = (count + 7) // 8
    if len(nulls) == count:
        return pa.py_buffer(bytes(size))
    bitmap = bytearray(b"\xff") * size
    for row in nulls:
        bitmap[row >> 3] &= ~(1 << (row & 7)) & 0xFF
    return pa.py_buffer(bitmap)


def _headers_column(rows: _Rows) -> pa.Array:
    """`headers` as Arrow `list<struct<key: string, value: binary>>`, decoded after the values."""
    list_offsets = [0]
    null_values: list[int] = []
    key_spans: list[tuple[bytes, list[int]]] = []
    value_spans: list[tuple[bytes, list[int]]] = []
    for segment in rows.segments:
        keys: list[int] = []
        values: list[int] = []
        try:
            _decode_headers(segment, list_offsets, keys, values, null_values)
        except IndexError:
            raise KafkaError(ErrorCode.corrupt_message, "header overruns its batch") from None
        key_spans.append((segment.data, keys))
        value_spans.append((segment.data, values))
    header_count = list_offsets[-1]
    structs = pa.StructArray.from_arrays(
        [
            _header_keys(_binary_column(key_spans, header_count, [])),
            _binary_column(value_spans, header_count, null_values),
        ],
        fields=[pa.field(name, kind) for name, kind in _HEADER_FIELDS],
    )
    return pa.ListArray.from_arrays(pa.array(list_offsets, type=pa.int32()), structs)


def _decode_headers(
    segment: _Segment,
    list_offsets: list[int],
    key_spans: list[int],
    value_spans: list[int],
    null_values: list[int],
) -> None:
    """Each record's headers: a second walk over the segment's records (only when asked for)."""
    data = segment.data
    read = _read_long_varint
    header_index = list_offsets[-1]
    for position, count in segment.batches:
        for _ in range(count):
            _length, position = read(data, position)
            _timestamp_delta, position = read(data, position + 1)  # past the attributes
            _offset_delta, position = read(data, position)
            for _field in ("key", "value"):
                length, position = read(data, position)
                position += max(length, 0)
            header_count, position = read(data, position)
            for _ in range(header_count):
                length, position = read(data, position)
                if length < 0:
                    raise KafkaError(ErrorCode.corrupt_message, "null header key")
                key_spans += (position, position + length)
                length, position = read(data, position + length)
                if length < 0:
                    null_values.append(header_index)
                else:
                    value_spans += (position, position + length)
                    position += length
                header_index += 1
            list_offsets.append(header_index)


def _header_keys(raw: pa.BinaryArray) -> pa.Array:
    """Header keys as strings; invalid UTF-8 is replaced, as the `Message` path decodes them."""
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [key.decode("utf-8", "replace") for key in raw.to_pylist()], type=pa.string()
        )
