"""Record fields read record by record in Python: the decoder's fallback and its headers.

`arrow_records` reads fields column-wise; a segment holding a varint wider than three bytes (a
value over 1 MB, a timestamp delta over 17 minutes) is walked here instead, as are headers, which
have no fixed place in a record. Both produce the same Arrow arrays as the column-wise pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader, TimestampType

__all__ = [
    "ZIGZAG",
    "SegmentFields",
    "gather",
    "headers_column",
    "read_long_varint",
    "walk_records",
]

# The zig-zag value of every varint of one or two bytes, indexed by its 14 payload bits: one list
# lookup replaces the shifts and masks of a record length.
ZIGZAG: Final = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]
_HEADER_FIELDS: Final = [("key", pa.string()), ("value", pa.binary())]

BatchSpans = Sequence[tuple[int, int, BatchHeader]]  # (first record, end of records, header)


@dataclass(frozen=True, slots=True)
class SegmentFields:
    """The columns of one segment's records (timestamps in milliseconds)."""

    offsets: pa.Array
    timestamps: pa.Array
    timestamp_types: pa.Array
    keys: pa.Array
    values: pa.Array


def read_long_varint(data: bytes, position: int) -> tuple[int, int]:
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


def gather(data: bytes | pa.Buffer, spans: pa.Buffer, count: int) -> pa.BinaryArray:
    """The bytes `data[s[2i]:s[2i+1]]` for each i < count, where `spans` holds int32s s, packed
    into one binary array (null rows are empty spans; the caller sets their validity)."""
    if count == 0:
        return pa.array([], type=pa.binary())
    buffer = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    try:
        interleaved = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, spans, buffer])
        interleaved.validate(full=True)  # spans in order and inside the data
    except pa.ArrowInvalid:
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


def _binary(data: bytes, spans: list[int], nulls: list[int]) -> pa.Array:
    count = len(spans) // 2
    try:
        buffer = pa.array(spans, type=pa.int32()).buffers()[1]
    except (pa.ArrowInvalid, OverflowError):
        raise KafkaError(ErrorCode.corrupt_message, "record field overruns its batch") from None
    packed = gather(data, buffer, count)
    if not nulls:
        return packed
    valid = pc.invert(pc.is_in(pa.array(range(count)), value_set=pa.array(nulls)))
    return pc.if_else(valid, packed, pa.scalar(None, pa.binary()))


def walk_records(data: bytes, batches: BatchSpans) -> SegmentFields:
    """Every record's fields, one record at a time (any varint width)."""
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    keys: list[int] = []
    values: list[int] = []
    null_keys: list[int] = []
    null_values: list[int] = []
    read = read_long_varint
    for position, _end, header in batches:
        log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        for _ in range(header.records_count):
            _length, position = read(data, position)
            timestamp_delta, position = read(data, position + 1)  # past the attributes
            offset_delta, position = read(data, position)
            offsets.append(header.base_offset + offset_delta)
            timestamps.append(
                header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
            )
            for spans, nulls in ((keys, null_keys), (values, null_values)):
                length, position = read(data, position)
                if length < 0:
                    nulls.append(len(offsets) - 1)
                    length = 0
                spans += (position, position + length)
                position += length
            position = _skip_headers(data, position)
        types += [int(log_append_time)] * header.records_count
    return SegmentFields(
        offsets=pa.array(offsets, type=pa.int64()),
        timestamps=pa.array(timestamps, type=pa.int64()),
        timestamp_types=pa.array(types, type=pa.int32()),
        keys=_binary(data, keys, null_keys),
        values=_binary(data, values, null_values),
    )


def _skip_headers(data: bytes, position: int) -> int:
    count, position = read_long_varint(data, position)
    for _ in range(count):
        for _field in ("key", "value"):
            length, position = read_long_varint(data, position)
            position += max(length, 0)
    return position


def headers_column(segments: Sequence[tuple[bytes, BatchSpans]]) -> pa.Array:
    """`headers` as Arrow `list<struct<key: string, value: binary>>`, in a walk of its own (only
    when asked for). A record without headers has null there, not an empty list, as in Spark's
    Kafka source (`KafkaRecordToRowConverter`)."""
    list_offsets = [0]
    keys: list[pa.Array] = []
    values: list[pa.Array] = []
    for data, batches in segments:
        key_spans: list[int] = []
        value_spans: list[int] = []
        null_values: list[int] = []
        try:
            _walk_headers(data, batches, list_offsets, key_spans, value_spans, null_values)
        except IndexError:
            raise KafkaError(ErrorCode.corrupt_message, "header overruns its batch") from None
        keys.append(_header_keys(_binary(data, key_spans, [])))
        values.append(_binary(data, value_spans, null_values))
    structs = pa.StructArray.from_arrays(
        [_concat(keys, pa.string()), _concat(values, pa.binary())],
        fields=[pa.field(name, kind) for name, kind in _HEADER_FIELDS],
    )
    offsets = pa.array(list_offsets, type=pa.int32())
    counts = pc.subtract(offsets[1:], offsets[:-1])
    return pa.ListArray.from_arrays(offsets, structs, mask=pc.equal(counts, 0))


def _concat(parts: list[pa.Array], kind: pa.DataType) -> pa.Array:
    if not parts:
        return pa.array([], type=kind)
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _walk_headers(
    data: bytes,
    batches: BatchSpans,
    list_offsets: list[int],
    key_spans: list[int],
    value_spans: list[int],
    null_values: list[int],
) -> None:
    read = read_long_varint
    segment_headers = 0
    for position, _end, header in batches:
        for _ in range(header.records_count):
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
                    null_values.append(segment_headers)
                    length = 0
                value_spans += (position, position + length)
                position += length
                segment_headers += 1
            list_offsets.append(list_offsets[-1] + header_count)


def _header_keys(raw: pa.BinaryArray) -> pa.Array:
    """Header keys as strings; invalid UTF-8 is replaced, as the `Message` path decodes them."""
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [key.decode("utf-8", "replace") for key in raw.to_pylist()], type=pa.string()
        )
