"""Reading the records of one batch, as Kafka's `DefaultRecordBatch` iterators do: decompressed
piece by piece (`compression.decompress_chunks`), the count checked against the header.

A batch must hold exactly the `recordsCount` its header declares: a record that overruns the
data, fewer records, or bytes left after the last one are CORRUPT_MESSAGE (Kafka: "Incorrect
declared batch size"). A header declaring more than `max_records` is INVALID_RECORD before any
byte is decompressed, and bytes past `max_size` stop the decompression where they start, so what
a batch costs to read is bounded by those two limits however far its data would expand.

Three readers share one `_RecordReader`: `decode_records` (every record, as `Record` tuples),
`scan_records` (framing, count and keys, building nothing: produce validation) and
`first_record_at_or_after` (the first timestamp at or after a target: ListOffsets). Records
are parsed where they lie in a piece; only a record split between pieces is joined.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from moldau.protocol.batch_layout import (
    COMPRESSION_MASK,
    DEFAULT_MAX_RECORDS_SIZE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    TimestampType,
)
from moldau.protocol.compression import CompressionType, decompress_chunks
from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = ["decode_records", "first_record_at_or_after", "scan_records"]

_new_tuple = tuple.__new__
_MIN_RECORD_BODY = 6  # attributes, timestamp and offset deltas, key and value lengths, headers
_MAX_LENGTH_VARINT = 5  # an int32 zig-zag varint


def decode_records(
    batch: bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_RECORDS_SIZE,
    max_records: int | None = None,
) -> list[Record]:
    """Every record of one batch (decompressing at most `max_size` bytes)."""
    header = BatchHeader.parse(batch)
    reader = _RecordReader.of_batch(header, batch, max_size=max_size, max_records=max_records)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    records: list[Record] = []
    append = records.append
    while reader.fill():
        data = reader.data
        position = reader.position
        remaining = reader.remaining
        while remaining:
            bounds = _record_bounds(data, position)
            if bounds is None:
                break
            position, end = bounds
            position += 1  # attributes, unused
            timestamp_delta, position = _read_varint(data, position)
            offset_delta, position = _read_varint(data, position)
            key, position = _read_bytes(data, position, end)
            value, position = _read_bytes(data, position, end)
            header_count, position = _read_varint(data, position)
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(header_count):
                header_key, position = _read_bytes(data, position, end)
                header_value, position = _read_bytes(data, position, end)
                if header_key is None:
                    raise KafkaError(ErrorCode.corrupt_message, "null header key")
                headers.append((header_key.decode("utf-8", "replace"), header_value))
            if position != end:
                raise KafkaError(ErrorCode.corrupt_message, "record length mismatch")
            timestamp = (
                header.max_timestamp if log_append_time else base_timestamp + timestamp_delta
            )
            append(
                _new_tuple(
                    Record, (base_offset + offset_delta, timestamp, key, value, tuple(headers))
                )
            )
            remaining -= 1
        reader.advance(position, remaining)
    reader.finish()
    return records


def scan_records(
    batch: bytes | bytearray | memoryview,
    *,
    max_size: int,
    max_records: int | None = None,
    require_keys: bool = False,
    pieces: Iterable[bytes | bytearray | memoryview] | None = None,
) -> int:
    """Check a batch's records without building them: framing, count and, with `require_keys`,
    that every record has a key (INVALID_RECORD otherwise, as Kafka answers for compacted
    topics). Returns the decompressed size. `pieces`, if given, are the batch's records already
    decompressed (recompression has them)."""
    header = BatchHeader.parse(batch)
    if pieces is None:
        reader = _RecordReader.of_batch(header, batch, max_size=max_size, max_records=max_records)
    else:
        reader = _RecordReader(header, iter(pieces), max_records=max_records)
    while reader.fill():
        data = reader.data
        position = reader.position
        remaining = reader.remaining
        size = len(data)
        while remaining:
            # the common record, under 64 bytes, inline; any other through _record_bounds
            byte = data[position] if position < size else 0x80
            if 12 <= byte < 0x80 and not byte & 1 and position + 1 + (byte >> 1) <= size:
                start = position + 1
                end = start + (byte >> 1)
            else:
                bounds = _record_bounds(data, position)
                if bounds is None:
                    break
                start, end = bounds
            if require_keys:
                # attributes (1 byte), timestamp delta, offset delta, then the key length
                key_at = start + 1
                while key_at < end and data[key_at] & 0x80:
                    key_at += 1
                key_at += 1
                while key_at < end and data[key_at] & 0x80:
                    key_at += 1
                key_at += 1
                if key_at >= end:
                    raise KafkaError(ErrorCode.corrupt_message, "record length mismatch")
                if data[key_at] == 0x01:  # zig-zag -1: a null key
                    raise KafkaError(
                        ErrorCode.invalid_record,
                        "a compacted topic does not accept records without a key",
                    )
            position = end
            remaining -= 1
        reader.advance(position, remaining)
    reader.finish()
    return reader.decoded


def first_record_at_or_after(
    batch: bytes | bytearray | memoryview,
    timestamp: int,
    *,
    max_size: int,
    max_records: int | None = None,
    min_offset: int = 0,
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record, in offset order, with a timestamp at or after
    `timestamp` and an offset at or after `min_offset`; None if no record of the batch has one.
    Reads no further than that record."""
    header = BatchHeader.parse(batch)
    reader = _RecordReader.of_batch(header, batch, max_size=max_size, max_records=max_records)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    max_timestamp = header.max_timestamp
    log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    try:
        while reader.fill():
            data = reader.data
            position = reader.position
            remaining = reader.remaining
            size = len(data)
            while remaining:
                byte = data[position] if position < size else 0x80  # as in scan_records
                if 12 <= byte < 0x80 and not byte & 1 and position + 1 + (byte >> 1) <= size:
                    start = position + 1
                    end = start + (byte >> 1)
                else:
                    bounds = _record_bounds(data, position)
                    if bounds is None:
                        break
                    start, end = bounds
                byte = data[start + 1]
                if byte < 0x80:
                    found = (
                        max_timestamp
                        if log_append_time
                        else base_timestamp + ((byte >> 1) ^ -(byte & 1))
                    )
                    at = start + 2
                else:
                    delta, at = _read_varint(data, start + 1)
                    found = max_timestamp if log_append_time else base_timestamp + delta
                if found >= timestamp:
                    offset_delta, _ = _read_varint(data, at)
                    if base_offset + offset_delta >= min_offset:
                        return base_offset + offset_delta, found
                position = end
                remaining -= 1
            reader.advance(position, remaining)
        reader.finish()
    finally:
        reader.close()
    return None


class _RecordReader:
    """The decompressed records of one batch, a piece at a time: `data[position:]` holds the
    records not read yet (`remaining` of them) as far as they have been decompressed.

    A reading loop calls `fill()`, which makes sure the next record is whole in `data`, parses
    the records it finds there, and reports where it stopped with `advance()`; then `finish()`
    checks that no record is missing and no byte is left over.
    """

    __slots__ = ("data", "decoded", "pieces", "position", "remaining")

    def __init__(
        self,
        header: BatchHeader,
        pieces: Iterator[bytes | bytearray | memoryview],
        *,
        max_records: int | None,
    ) -> None:
        count = header.records_count
        if count < 0:
            raise KafkaError(ErrorCode.corrupt_message, f"invalid record count {count}")
        if max_records is not None and count > max_records:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"batch declares {count} records, more than the {max_records} allowed",
            )
        self.pieces = pieces
        self.data: bytes = b""
        self.position = 0
        self.remaining = count
        self.decoded = 0

    @classmethod
    def of_batch(
        cls,
        header: BatchHeader,
        batch: bytes | bytearray | memoryview,
        *,
        max_size: int,
        max_records: int | None,
    ) -> _RecordReader:
        view = memoryview(batch)[HEADER_SIZE : header.batch_length + LOG_OVERHEAD]
        codec = header.attributes & COMPRESSION_MASK
        if codec > int(CompressionType.ZSTD):  # a batch read back, never validated
            raise KafkaError(ErrorCode.corrupt_message, f"unknown compression codec {codec}")
        if codec:
            pieces = decompress_chunks(header.compression, view, max_size=max_size)
        elif len(view) > max_size:
            raise KafkaError(ErrorCode.corrupt_message, f"batch exceeds {max_size} bytes")
        else:  # uncompressed: no generator to step through
            pieces = iter((bytes(view),))
        return cls(header, pieces, max_records=max_records)

    def fill(self) -> bool:
        """Make the next record whole in `data` (decompressing more pieces as needed): True if
        it is; False if no record is left to read or the data ended first (`finish()` then
        says which)."""
        if not self.remaining:
            return False
        data, position = self.data, self.position
        parts: list[bytes | bytearray | memoryview] = (
            [data[position:]] if position < len(data) else []
        )
        have = len(data) - position
        needed = None  # bytes from the record's start to its end, once its length is in
        while True:
            if needed is None and parts:
                bounds = _record_bounds(_head(parts), 0, complete=False)
                needed = None if bounds is None else bounds[1]
            if needed is not None and have >= needed:
                break
            piece = next(self.pieces, None)
            if piece is None:
                break
            self.decoded += len(piece)
            parts.append(piece)
            have += len(piece)
        if not parts:
            return False
        only = parts[0]
        self.data = only if len(parts) == 1 and isinstance(only, bytes) else b"".join(parts)
        self.position = 0
        return needed is not None and have >= needed

    def advance(self, position: int, remaining: int) -> None:
        self.position = position
        self.remaining = remaining

    def finish(self) -> None:
        """Every declared record read, nothing after the last: else CORRUPT_MESSAGE."""
        if self.remaining:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"batch is missing {self.remaining} of its declared records",
            )
        leftover = len(self.data) - self.position
        if not leftover:
            for piece in self.pieces:
                if piece:
                    leftover = len(piece)
                    break
        if leftover:
            raise KafkaError(
                ErrorCode.corrupt_message,
                "incorrect declared batch size: bytes remain after the last record",
            )

    def close(self) -> None:
        close = getattr(self.pieces, "close", None)
        if close is not None:
            close()


def _head(parts: list[bytes | bytearray | memoryview]) -> bytes:
    """The first bytes (as many as a length varint takes) of `parts` joined."""
    head = b""
    for part in parts:
        head += bytes(part[: _MAX_LENGTH_VARINT - len(head)])
        if len(head) >= _MAX_LENGTH_VARINT:
            break
    return head


# -- varints (zig-zag, as Kafka's ByteUtils) --


def _record_bounds(data: bytes, position: int, *, complete: bool = True) -> tuple[int, int] | None:
    """(start of the body, end) of the record at `position`, or None if it is not whole in
    `data` (with `complete=False`, only the length varint has to be)."""
    size = len(data)
    if position >= size:
        return None
    byte = data[position]
    if byte < 0x80:  # one byte: every record under 64 bytes
        length = (byte >> 1) ^ -(byte & 1)
        start = position + 1
    else:
        shift = result = 0
        start = position
        while True:
            if start >= size:
                return None
            byte = data[start]
            start += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 28:
                raise KafkaError(ErrorCode.corrupt_message, "record length varint too long")
        length = (result >> 1) ^ -(result & 1)
    if length < _MIN_RECORD_BODY:
        raise KafkaError(ErrorCode.corrupt_message, f"invalid record length {length}")
    end = start + length
    if complete and end > size:
        return None
    return start, end


def _skip_varint(data: bytes, position: int) -> int:
    while position < len(data) and data[position] & 0x80:
        position += 1
    return position + 1


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    if position < len(data) and data[position] < 0x80:  # one byte: most lengths and deltas
        byte = data[position]
        return (byte >> 1) ^ -(byte & 1), position + 1
    result = 0
    shift = 0
    while True:
        if position >= len(data):
            raise KafkaError(ErrorCode.corrupt_message, "truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.corrupt_message, "varint too long")
    return (result >> 1) ^ -(result & 1), position


def _read_bytes(data: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position)
    if length < 0:
        return None, position
    if position + length > end:
        raise KafkaError(ErrorCode.corrupt_message, "record field overruns its record")
    return data[position : position + length], position + length
