"""The decompression bombs of the hardening issue (items 5 and 6), built byte by byte, for the
tests and for `bench/bombs.py`."""

from __future__ import annotations

import struct

import cramjam

from moldau.protocol.compression import CompressionType
from moldau.protocol.records import BatchHeader, batch_with_payload

# A record of length 6: attributes, timestamp and offset deltas 0, null key and value, no headers.
EMPTY_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"
# The same with an empty key (a key all the same: compacted topics accept it).
KEYED_EMPTY_RECORD = b"\x0c\x00\x00\x00\x00\x01\x00"
# 2,396,000 of them are 16.8 MB, just under 16 x max.message.bytes; 9,580,000 just under 64 MiB.
PRODUCE_BOMB_RECORDS = 2_396_000
LOOKUP_BOMB_RECORDS = 9_580_000


def claiming(
    payload: bytes,
    records: int,
    *,
    codec: CompressionType = CompressionType.ZSTD,
    timestamp: int = 1000,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch around `payload` (already compressed with `codec`) whose header declares `records`
    records, with consistent last offset delta and a valid CRC."""
    if max_timestamp is None:
        max_timestamp = timestamp
    header = BatchHeader(
        0, 0, -1, 2, 0, 0, records - 1, timestamp, max_timestamp, -1, -1, -1, records
    )
    return batch_with_payload(header, payload, compression=codec)


def empty_records_zstd(record: bytes, count: int) -> bytes:
    """`count` copies of `record`, zstd-compressed as small as zstd goes (~1.5 KB for 2.4 M)."""
    return bytes(cramjam.zstd.compress(record * count, level=19))


def zstd_zeros(total: int, block: int = 128 * 1024) -> bytes:
    """A zstd frame of `total` zero bytes made of RLE blocks: 4 bytes per 128 KB, so 4 GiB of
    zeros is 128 KB."""
    frame = bytearray(struct.pack("<IBB", 0xFD2FB528, 0x00, (17 - 10) << 3))
    count = total // block
    for index in range(count):
        last = 1 if index == count - 1 else 0
        frame += (last | (1 << 1) | (block << 3)).to_bytes(3, "little") + b"\x00"
    return bytes(frame)
