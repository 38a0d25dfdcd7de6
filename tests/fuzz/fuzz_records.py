"""Fuzz target: record batches as a producer or a segment file hands them over, through
`validate_batches`, `iter_batches`, `scan_records`, `decode_records` (with decompression) and
`parse_control_record`.

Invariant: only `KafkaError` escapes (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE);
decoded records never hold more than the `max_size` given for decompression, so memory stays
bounded whatever a batch claims (libFuzzer's -rss_limit_mb enforces the rest).

The first byte of an input picks a mode, so mutations are not all lost on the CRC check:
    0  the bytes as they came (the CRC protects them)
    1  the bytes with each complete batch's CRC recomputed
    2  the bytes as the records section of one batch: header built around them (codec and
       record count from the next two bytes), CRC right
"""

from __future__ import annotations

import struct

import crc32c

from moldau.protocol.batch_layout import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD
from moldau.protocol.compression import CompressionType, decompress
from moldau.protocol.errors import KafkaError
from moldau.protocol.record_reader import decode_records, scan_records
from moldau.protocol.records import iter_batches, parse_control_record, validate_batches

MAX_SIZE = 256 * 1024  # the decompression cap given to every decode


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 3, data[1:]
    if mode == 1:
        body = _with_crcs(body)
    elif mode == 2:
        body = _batch_around(body)
    check_batches(body)
    if body:
        check_decompress(body[0] % 5, body[1:])


def check_batches(buffer: bytes) -> None:
    try:
        validated = validate_batches(buffer, max_batch_size=4 * MAX_SIZE)
    except KafkaError:
        validated = []
    for position, header in validated:
        _check_records(buffer[position : position + header.size], header.is_control)
    for batch in iter_batches(buffer):
        if batch.is_valid():
            _check_records(batch.data, batch.header.is_control)


def _check_records(batch: bytes | memoryview, control: bool) -> None:
    try:
        scan_records(batch, max_size=MAX_SIZE, require_keys=True)
    except KafkaError:
        pass
    try:
        records = decode_records(batch, max_size=MAX_SIZE)
    except KafkaError:
        return
    held = sum(len(r.key or b"") + len(r.value or b"") for r in records)
    held += sum(len(k) + len(v or b"") for r in records for k, v in r.headers)
    assert held <= MAX_SIZE, f"{held} bytes decoded under a cap of {MAX_SIZE}"
    if control:
        for record in records:
            try:
                parse_control_record(record)
            except KafkaError:
                pass


def check_decompress(codec: int, data: bytes) -> None:
    try:
        output = decompress(CompressionType(codec), data, max_size=MAX_SIZE)
    except KafkaError:
        return
    assert len(output) <= MAX_SIZE, f"{len(output)} bytes out of a cap of {MAX_SIZE}"


def _with_crcs(buffer: bytes) -> bytes:
    fixed = bytearray(buffer)
    for batch in iter_batches(buffer):
        start = batch.position
        crc = crc32c.crc32c(fixed[start + CRC_START : start + batch.header.size])
        struct.pack_into(">I", fixed, start + 17, crc)
    return bytes(fixed)


def _batch_around(data: bytes) -> bytes:
    codec, count, records = (data[0] if data else 0), (data[1] if len(data) > 1 else 1), data[2:]
    attributes = (codec % 5) | (codec & 0x38)  # codec, timestamp type, transactional, control
    batch = bytearray(HEADER_SIZE) + records
    HEADER.pack_into(
        batch, 0, 0, len(batch) - LOG_OVERHEAD, -1, 2, 0, attributes, max(count - 1, 0),
        0, 0, -1, -1, -1, count,
    )  # fmt: skip
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)
