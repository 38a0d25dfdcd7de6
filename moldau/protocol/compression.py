"""Compression codecs of record batches: gzip, snappy, lz4 and zstd (Kafka's `CompressionType`).

The codec of a batch is in bits 0-2 of its attributes. Snappy data written by Java clients uses
xerial's stream framing; we read both framed and plain snappy and write the framed form:

    xerial snappy stream
      magic:   8 bytes  0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00
      version: int32    (1)
      compat:  int32    (1)
      then blocks: length int32, raw snappy block of that length

lz4 uses the lz4 frame format. We write frames as Kafka's `KafkaLZ4BlockOutputStream` does, which
Java consumers need: independent 64 KB blocks, no block or content checksums:

    magic 0x184D2204 (LE), FLG 0x60 (version 1, independent blocks), BD 0x40 (64 KB blocks),
    HC = (xxHash32(FLG BD) >> 8) & 0xFF, then blocks: size uint32 LE (high bit: stored raw),
    data; end mark uint32 0
Every decompression takes `max_size`: output beyond it is refused with CORRUPT_MESSAGE before it is
allocated, so a small batch cannot expand into gigabytes (a decompression bomb).
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import cramjam

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = ["CompressionType", "compress", "decompress"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024
_INITIAL_OUTPUT = 64 * 1024


class CompressionType(enum.IntEnum):
    """The codec id stored in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Map a `compression.type` value ("gzip", "none", ...) to the codec."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


def compress(codec: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress `data` with `codec`; NONE returns the data unchanged."""
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(bytes(data))
    if codec is CompressionType.LZ4:
        return _lz4_frame(bytes(data))
    return bytes(cramjam.zstd.compress(bytes(data)))


def decompress(
    codec: CompressionType | int, data: bytes | bytearray | memoryview, *, max_size: int
) -> bytes:
    """Decompress `data`; raise CORRUPT_MESSAGE if it is invalid or would exceed `max_size` bytes."""
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        if len(data) > max_size:
            raise _too_large(max_size)
        return bytes(data)
    try:
        if codec is CompressionType.GZIP:
            return _gzip_decompress(data, max_size)
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec is CompressionType.LZ4:
            return _bounded_into(cramjam.lz4.decompress_into, bytes(data), max_size)
        return _bounded_into(cramjam.zstd.decompress_into, bytes(data), max_size)
    except (cramjam.DecompressionError, zlib.error, ValueError) as error:
        raise KafkaError(
            ErrorCode.corrupt_message, f"cannot decompress {codec.name}: {error}"
        ) from None


def _too_large(max_size: int) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"decompressed size exceeds {max_size} bytes")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    decompressor = zlib.decompressobj(47)  # gzip or zlib header, detected
    output = decompressor.decompress(data, max_size + 1)
    if len(output) > max_size or decompressor.unconsumed_tail:
        raise _too_large(max_size)
    if not decompressor.eof:
        raise KafkaError(ErrorCode.corrupt_message, "truncated gzip data")
    return output


def _bounded_into(function: Callable[[bytes, bytearray], int], data: bytes, max_size: int) -> bytes:
    """Decompress into a buffer that grows (x4) from 8x the input up to `max_size + 1` bytes;
    still full at that size means the data expands beyond `max_size`: refused."""
    capacity = min(max_size + 1, max(_INITIAL_OUTPUT, 8 * len(data)))
    while True:
        output = bytearray(capacity)
        try:
            written = int(function(data, output))
        except cramjam.DecompressionError as error:
            if "buffer" not in str(error):
                raise
            if capacity > max_size:
                raise _too_large(max_size) from None
            capacity = min(max_size + 1, capacity * 4)
            continue
        if written > max_size:
            raise _too_large(max_size)
        return bytes(memoryview(output)[:written])


def _snappy_block(block: bytes, max_size: int) -> bytes:
    if int(cramjam.snappy.decompress_raw_len(block)) > max_size:
        raise _too_large(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, max_size)
    if len(data) < _XERIAL_HEADER.size:
        raise ValueError("truncated xerial header")
    position = _XERIAL_HEADER.size
    parts: list[bytes] = []
    remaining = max_size
    while position < len(data):
        if position + 4 > len(data):
            raise ValueError("truncated xerial block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise ValueError("truncated xerial block")
        part = _snappy_block(data[position : position + length], remaining)
        remaining -= len(part)
        parts.append(part)
        position += length
    return b"".join(parts)


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_SIZE = 64 * 1024
_UINT32_LE = struct.Struct("<I")


def _lz4_frame(data: bytes) -> bytes:
    descriptor = b"\x60\x40"
    parts = [_LZ4_MAGIC, descriptor, bytes([(_xxhash32(descriptor) >> 8) & 0xFF])]
    for start in range(0, len(data), _LZ4_BLOCK_SIZE):
        chunk = data[start : start + _LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            parts += [_UINT32_LE.pack(len(chunk) | 0x80000000), chunk]
        else:
            parts += [_UINT32_LE.pack(len(block)), block]
    parts.append(_UINT32_LE.pack(0))
    return b"".join(parts)


_PRIME32 = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1)


def _xxhash32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a short input (under 16 bytes: the frame descriptor's header checksum)."""
    if len(data) >= 16:
        raise ValueError("only short inputs are supported")
    mask = 0xFFFFFFFF

    def rotate(value: int, bits: int) -> int:
        return ((value << bits) | (value >> (32 - bits))) & mask

    value = (seed + _PRIME32[4] + len(data)) & mask
    position = 0
    while position + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, position)
        value = (rotate((value + word * _PRIME32[2]) & mask, 17) * _PRIME32[3]) & mask
        position += 4
    for byte in data[position:]:
        value = (rotate((value + byte * _PRIME32[4]) & mask, 11) * _PRIME32[0]) & mask
    value ^= value >> 15
    value = (value * _PRIME32[1]) & mask
    value ^= value >> 13
    value = (value * _PRIME32[2]) & mask
    value ^= value >> 16
    return value


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)
