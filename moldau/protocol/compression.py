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
Every decompression takes `max_size` and is incremental: `decompress_chunks` yields the output in
pieces of about DECOMPRESSION_CHUNK bytes (a snappy block or an lz4 block may be larger, never
beyond `max_size`) and refuses with CORRUPT_MESSAGE the piece that takes the running total past
`max_size`, so a small batch that would expand into gigabytes (a decompression bomb) costs one
piece of memory and at most `max_size` bytes of work. A caller that stops reading stops the work.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable, Iterator

import cramjam
import lz4.block
import zstandard

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = ["DECOMPRESSION_CHUNK", "CompressionType", "compress", "decompress", "decompress_chunks"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024
_INITIAL_OUTPUT = 64 * 1024
DECOMPRESSION_CHUNK = 256 * 1024


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


# Each codec's level when none is given, as Kafka's (KIP-390): zlib's default, lz4's fast mode
# (Kafka's "9"), zstd 3.
DEFAULT_LEVELS: dict[CompressionType, int] = {
    CompressionType.GZIP: -1,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}


def compress(
    codec: CompressionType | int, data: bytes | bytearray | memoryview, level: int | None = None
) -> bytes:
    """Compress `data` with `codec` at `level` (KIP-390's: gzip -1 or 1-9, lz4 1-17, zstd
    -131072 to 22; None: the codec's default; snappy has none); NONE returns the data
    unchanged. As Kafka, lz4 at its default 9 uses lz4's fast mode and any other level LZ4HC."""
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        compressor = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(bytes(data))
    if codec is CompressionType.LZ4:
        return _lz4_frame(bytes(data), DEFAULT_LEVELS[codec] if level is None else level)
    return bytes(cramjam.zstd.compress(bytes(data), level=3 if level is None else level))


def decompress(
    codec: CompressionType | int, data: bytes | bytearray | memoryview, *, max_size: int
) -> bytes:
    """Decompress `data`; raise CORRUPT_MESSAGE if it is invalid or would exceed `max_size` bytes."""
    if CompressionType(codec) is CompressionType.NONE:
        if len(data) > max_size:
            raise _too_large(max_size)
        return bytes(data)
    return b"".join(decompress_chunks(codec, data, max_size=max_size))


def decompress_chunks(
    codec: CompressionType | int, data: bytes | bytearray | memoryview, *, max_size: int
) -> Iterator[bytes | bytearray | memoryview]:
    """The decompressed bytes of `data`, piece by piece (see the module docstring); raises
    CORRUPT_MESSAGE for invalid data and for the piece that would take the total past
    `max_size`. NONE yields `data` itself, in one piece."""
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        if len(data) > max_size:
            raise _too_large(max_size)
        yield data
        return
    produced = 0
    pieces: Iterator[bytes | memoryview]
    try:
        if codec is CompressionType.GZIP:
            pieces = _gzip_chunks(data)
        elif codec is CompressionType.SNAPPY:
            pieces = _snappy_chunks(bytes(data), max_size)
        elif codec is CompressionType.LZ4:
            pieces = _lz4_chunks(bytes(data), max_size)
        else:
            pieces = _zstd_chunks(data)
        for piece in pieces:
            produced += len(piece)
            if produced > max_size:
                raise _too_large(max_size)
            yield piece
    except (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, ValueError) as error:
        raise KafkaError(
            ErrorCode.corrupt_message, f"cannot decompress {codec.name}: {error}"
        ) from None


def _too_large(max_size: int) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"decompressed size exceeds {max_size} bytes")


def _gzip_chunks(data: bytes | bytearray | memoryview) -> Iterator[bytes]:
    decompressor = zlib.decompressobj(47)  # gzip or zlib header, detected
    pending: bytes | bytearray | memoryview = data
    while True:
        piece = decompressor.decompress(pending, DECOMPRESSION_CHUNK)
        if piece:
            yield piece
        if decompressor.eof:
            return
        pending = decompressor.unconsumed_tail
        if not pending and not piece:
            raise ValueError("truncated gzip data")


def _zstd_chunks(data: bytes | bytearray | memoryview) -> Iterator[bytes]:
    # Frames one after another are read as one stream (as Kafka's ZstdInputStream does). The
    # decoder's window is allocated as the frame declares (zstd refuses more than 128 MB) but its
    # pages are touched only as output is written, which the running cap stops.
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while piece := reader.read(DECOMPRESSION_CHUNK):
        yield piece


def _bounded_into(function: Callable[[bytes, bytearray], int], data: bytes, max_size: int) -> bytes:
    """Decompress into a buffer that grows (x4) from 8x the input up to `max_size + 1` bytes;
    still full at that size means the data expands beyond `max_size`: refused. (Only for lz4
    frames of linked blocks, which cannot be decoded block by block.)"""
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


def _snappy_chunks(data: bytes, max_size: int) -> Iterator[bytes]:
    """Plain snappy (one block, as librdkafka writes) or xerial's stream of blocks (Java's); each
    block's size is read from its header and checked against what is left of `max_size` first."""
    if not data.startswith(XERIAL_MAGIC):
        yield _snappy_block(data, max_size)
        return
    if len(data) < _XERIAL_HEADER.size:
        raise ValueError("truncated xerial header")
    position = _XERIAL_HEADER.size
    remaining = max_size
    while position < len(data):
        if position + 4 > len(data):
            raise ValueError("truncated xerial block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise ValueError("truncated xerial block")
        piece = _snappy_block(data[position : position + length], remaining)
        remaining -= len(piece)
        position += length
        yield piece


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_SIZE = 64 * 1024
_UINT32_LE = struct.Struct("<I")
_LZ4_INDEPENDENT_BLOCKS = 0x20
_LZ4_BLOCK_CHECKSUM = 0x10
_LZ4_CONTENT_SIZE = 0x08
_LZ4_CONTENT_CHECKSUM = 0x04
_LZ4_DICTIONARY_ID = 0x01
_LZ4_STORED = 0x80000000


def _lz4_chunks(data: bytes, max_size: int) -> Iterator[bytes | memoryview]:
    """An lz4 frame block by block, as Kafka's `Lz4BlockInputStream` reads it: each block is at
    most the frame's declared block size (64 KB to 4 MB). Block and content checksums are
    skipped (the batch's CRC32C already covers these bytes). Frames of linked blocks (Kafka
    writes none and reads none) are decoded whole, within `max_size`."""
    position = 0
    while position < len(data):
        if data[position : position + 4] != _LZ4_MAGIC or position + 7 > len(data):
            raise ValueError("not an lz4 frame")
        flags, descriptor = data[position + 4], data[position + 5]
        if flags >> 6 != 1:
            raise ValueError(f"unsupported lz4 frame version {flags >> 6}")
        if not flags & _LZ4_INDEPENDENT_BLOCKS:
            yield _bounded_into(cramjam.lz4.decompress_into, data[position:], max_size)
            return
        header_end = position + 6
        header_end += 8 if flags & _LZ4_CONTENT_SIZE else 0
        header_end += 4 if flags & _LZ4_DICTIONARY_ID else 0
        if header_end >= len(data):
            raise ValueError("truncated lz4 frame header")
        if (_xxhash32(data[position + 4 : header_end]) >> 8) & 0xFF != data[header_end]:
            raise ValueError("lz4 frame header checksum mismatch")
        block_max = 1 << (8 + 2 * ((descriptor >> 4) & 0x07))  # 4 -> 64 KB ... 7 -> 4 MB
        if block_max < _LZ4_BLOCK_SIZE:
            raise ValueError("invalid lz4 block size")
        output = bytearray(block_max)
        block_checksum = 4 if flags & _LZ4_BLOCK_CHECKSUM else 0
        position = header_end + 1
        while True:
            if position + 4 > len(data):
                raise ValueError("truncated lz4 frame")
            (size,) = _UINT32_LE.unpack_from(data, position)
            position += 4
            if size == 0:  # end mark
                position += 4 if flags & _LZ4_CONTENT_CHECKSUM else 0
                break
            stored = size & _LZ4_STORED
            size &= ~_LZ4_STORED
            if size > block_max or position + size + block_checksum > len(data):
                raise ValueError("truncated or oversized lz4 block")
            block = data[position : position + size]
            position += size + block_checksum
            if stored:
                yield block
                continue
            written = int(cramjam.lz4.decompress_block_into(block, output, output_len=block_max))
            yield bytes(memoryview(output)[:written])
        if position > len(data):
            raise ValueError("truncated lz4 content checksum")


def _lz4_frame(data: bytes, level: int) -> bytes:
    descriptor = b"\x60\x40"
    parts = [_LZ4_MAGIC, descriptor, bytes([(_xxhash32(descriptor) >> 8) & 0xFF])]
    for start in range(0, len(data), _LZ4_BLOCK_SIZE):
        chunk = data[start : start + _LZ4_BLOCK_SIZE]
        if level == DEFAULT_LEVELS[CompressionType.LZ4]:
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        else:  # (cramjam's block compressor has no LZ4HC mode)
            block = lz4.block.compress(
                chunk, mode="high_compression", compression=level, store_size=False
            )
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
