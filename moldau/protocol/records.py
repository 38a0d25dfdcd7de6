"""RecordBatch v2 (magic 2): parse, validate and build Kafka's record batches. The byte layout, its
constants and the parsed header and record types are in `batch_layout.py`; `record_reader.py` reads
a batch's records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import crc32c

from moldau.protocol.batch_layout import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    DEFAULT_MAX_RECORDS_SIZE,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAX_EXPANSION,
    MIN_RECORD_SIZE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    ControlRecordType,
    Record,
    TimestampType,
)
from moldau.protocol.compression import CompressionType, compress
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records

_MAX_CODEC = int(CompressionType.ZSTD)
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_CONTROL_TYPES = frozenset(ControlRecordType)

__all__ = [
    "HEADER_SIZE",
    "BatchHeader",
    "BatchLimits",
    "ControlRecordType",
    "NewRecord",
    "Record",
    "RecordBatch",
    "TimestampType",
    "batch_with_payload",
    "build_batch",
    "build_control_batch",
    "iter_batches",
    "parse_control_record",
    "rebuild_batch",
    "seal_batch",
    "validate_batches",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRecord:
    """A record to build: missing timestamp means the batch's; missing offset delta means its index."""

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A batch inside a buffer: its position, parsed header and the bytes of the whole batch."""

    position: int
    header: BatchHeader
    data: memoryview

    def is_valid(self) -> bool:
        return (
            self.header.magic == MAGIC and crc32c.crc32c(self.data[CRC_START:]) == self.header.crc
        )

    def records(
        self, *, max_size: int = DEFAULT_MAX_RECORDS_SIZE, max_records: int | None = None
    ) -> list[Record]:
        """Every record (`record_reader.decode_records`)."""
        return decode_records(self.data, max_size=max_size, max_records=max_records)


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch of a topic may cost to read, from its `max.message.bytes`: no more records
    than that many bytes hold uncompressed (compression buys bytes, not records), and no more
    than MAX_EXPANSION times that many decoded bytes."""

    max_records: int
    max_decoded_bytes: int

    @classmethod
    def for_max_batch_bytes(cls, max_batch_bytes: int) -> BatchLimits:
        return cls(
            max_records=max(1, max_batch_bytes // MIN_RECORD_SIZE),
            max_decoded_bytes=MAX_EXPANSION * max(max_batch_bytes, 1),
        )


def iter_batches(buffer: bytes | bytearray | memoryview) -> Iterator[RecordBatch]:
    """Yield the complete batches in `buffer` (a trailing partial batch is skipped, as clients do).

    Headers are not validated beyond their length; call `validate_batches` for that.
    """
    view = memoryview(buffer)
    position = 0
    end = len(view)
    while position + HEADER_SIZE <= end:
        header = BatchHeader._make(HEADER.unpack_from(view, position))
        size = header.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            return
        yield RecordBatch(position, header, view[position : position + size])
        position += size


def validate_batches(
    buffer: bytes | bytearray | memoryview,
    *,
    max_batch_size: int | None = None,
    max_records: int | None = None,
    check_counts: bool = True,
) -> list[tuple[int, BatchHeader]]:
    """Check every batch of a produce buffer from its header: lengths, magic, CRC, counts.

    Returns `(position, header)` per batch. Raises CORRUPT_MESSAGE (bad framing, magic, CRC),
    MESSAGE_TOO_LARGE (a batch over `max_batch_size`) or INVALID_RECORD (a record count below 1,
    above `max_records` or not matching the last offset delta; not checked with
    `check_counts=False`, for compacted batches copied from a leader).
    """
    most_records = max_records if max_records is not None else 2**31
    view = memoryview(buffer)
    end = len(view)
    if end == 0:
        raise KafkaError(ErrorCode.corrupt_message, "no record batch")
    batches: list[tuple[int, BatchHeader]] = []
    position = 0
    unpack_from = HEADER.unpack_from
    crc_of = crc32c.crc32c
    while position < end:
        if position + HEADER_SIZE > end:
            raise KafkaError(ErrorCode.corrupt_message, "truncated batch header")
        values = unpack_from(view, position)
        # locals, not attribute lookups: this runs once per produced batch
        _base, batch_length, _epoch, magic, crc, attributes, last_delta = values[:7]
        records_count = values[12]
        size = batch_length + LOG_OVERHEAD
        if magic != MAGIC:
            raise KafkaError(ErrorCode.corrupt_message, f"unsupported magic {magic}")
        if size < HEADER_SIZE or position + size > end:
            raise KafkaError(ErrorCode.corrupt_message, f"bad batch length {batch_length}")
        if max_batch_size is not None and size > max_batch_size:
            raise KafkaError(
                ErrorCode.message_too_large, f"batch of {size} bytes exceeds {max_batch_size}"
            )
        if crc_of(view[position + CRC_START : position + size]) != crc:
            raise KafkaError(ErrorCode.corrupt_message, "CRC32C mismatch")
        if attributes & COMPRESSION_MASK > _MAX_CODEC:
            raise KafkaError(ErrorCode.corrupt_message, "unknown compression codec")
        if check_counts and not (
            0 < records_count <= most_records and last_delta == records_count - 1
        ):
            if records_count > most_records:
                raise KafkaError(
                    ErrorCode.invalid_record,
                    f"batch declares {records_count} records, more than the {most_records} "
                    "a batch of this topic may hold",
                )
            raise KafkaError(
                ErrorCode.invalid_record,
                f"{records_count} records with last offset delta {last_delta}",
            )
        batches.append((position, tuple.__new__(BatchHeader, values)))
        position += size
    return batches


# -- varints (zig-zag, as Kafka's ByteUtils) --


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def _encode_record(
    out: bytearray, record: NewRecord, offset_delta: int, timestamp_delta: int
) -> None:
    body = bytearray(b"\x00")
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for header_key, header_value in record.headers:
        _write_bytes(body, header_key.encode("utf-8"))
        _write_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[NewRecord] | Iterable[NewRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    timestamp: int = 0,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode `records` into one batch. Records without a timestamp get `timestamp`.

    `last_offset_delta` may exceed the last record's delta (batches rewritten by compaction keep
    their original last offset).
    """
    items = list(records)
    if not items and last_offset_delta is None:
        raise ValueError("a batch needs at least one record")
    timestamps = [timestamp if r.timestamp is None else r.timestamp for r in items]
    base_timestamp = min(timestamps) if timestamps else timestamp
    max_timestamp = max(timestamps) if timestamps else timestamp
    body = bytearray()
    deltas: list[int] = []
    for index, (record, record_timestamp) in enumerate(zip(items, timestamps, strict=True)):
        delta = index if record.offset_delta is None else record.offset_delta
        deltas.append(delta)
        _encode_record(body, record, delta, record_timestamp - base_timestamp)
    if last_offset_delta is None:
        last_offset_delta = max(deltas)
    attributes = int(timestamp_type) << 3
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=0,
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC,
        crc=0,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(items),
    )
    return batch_with_payload(header, compress(compression, body), compression=compression)


def batch_with_payload(
    header: BatchHeader,
    payload: bytes | bytearray | memoryview,
    *,
    compression: CompressionType | int,
) -> bytes:
    """A batch with the fields of `header` around `payload`, records already encoded (and
    compressed with `compression`): batch length, codec bits and CRC are set to match."""
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(compression)
    head = bytearray(HEADER_SIZE)
    batch_length = HEADER_SIZE + len(payload) - LOG_OVERHEAD
    HEADER.pack_into(
        head, 0, *header._replace(batch_length=batch_length, crc=0, attributes=attributes)
    )
    # the CRC runs on from the header's fields into the payload: the payload is copied once
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(head)[CRC_START:]))
    struct.pack_into(">I", head, 17, crc)
    return b"".join((head, payload))


def seal_batch(batch: bytearray | memoryview, header: BatchHeader) -> None:
    """Write `header` over the first HEADER_SIZE bytes of `batch`, whose records (compressed as
    the header's attributes say) follow, with the batch length and CRC32C that match: a batch
    encoded in place, its bytes never copied."""
    HEADER.pack_into(batch, 0, *header._replace(batch_length=len(batch) - LOG_OVERHEAD, crc=0))
    struct.pack_into(">I", batch, 17, crc32c.crc32c(batch[CRC_START:]))


def rebuild_batch(
    header: BatchHeader,
    records: Sequence[Record],
    *,
    compression: CompressionType | int | None = None,
) -> bytes:
    """`records` (decoded from the batch of `header`) as a new batch with the same base and last
    offset, producer fields, epoch and timestamp type; the codec is kept unless given. Used by
    compaction (fewer records) and topic-level recompression."""
    return build_batch(
        [
            NewRecord(
                key=r.key,
                value=r.value,
                headers=r.headers,
                timestamp=r.timestamp,
                offset_delta=r.offset - header.base_offset,
            )
            for r in records
        ],
        base_offset=header.base_offset,
        compression=header.compression if compression is None else compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
    )


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker (COMMIT or ABORT) as Kafka's `EndTransactionMarker` writes it."""
    record = NewRecord(
        key=_CONTROL_KEY.pack(0, int(control_type)),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
        timestamp=timestamp,
    )


def parse_control_record(record: Record) -> tuple[ControlRecordType, int]:
    """The marker type and coordinator epoch of a control record."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise KafkaError(ErrorCode.corrupt_message, "control record without a key")
    _version, control_type = _CONTROL_KEY.unpack_from(record.key)
    coordinator_epoch = 0
    if record.value is not None and len(record.value) >= _CONTROL_VALUE.size:
        _value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
    if control_type not in _CONTROL_TYPES:
        raise KafkaError(ErrorCode.corrupt_message, f"unknown control record type {control_type}")
    return ControlRecordType(control_type), coordinator_epoch
