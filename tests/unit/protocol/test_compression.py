"""Codecs round-trip, read Java's framed snappy, and refuse decompression bombs piece by piece."""

from __future__ import annotations

import gzip
import tracemalloc

import cramjam
import pytest

from moldau.protocol.compression import (
    DECOMPRESSION_CHUNK,
    XERIAL_MAGIC,
    CompressionType,
    compress,
    decompress,
    decompress_chunks,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from tests.bombs import zstd_zeros

ALL_CODECS = list(CompressionType)
DATA = b"".join(b"record-%06d;" % i for i in range(5000))


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_every_codec(codec: CompressionType) -> None:
    packed = compress(codec, DATA)
    if codec is not CompressionType.NONE:
        assert len(packed) < len(DATA)
    assert decompress(codec, packed, max_size=len(DATA)) == DATA


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_output_larger_than_cap_is_refused(codec: CompressionType) -> None:
    packed = compress(codec, DATA)
    with pytest.raises(KafkaError) as caught:
        decompress(codec, packed, max_size=len(DATA) - 1)
    assert caught.value.code is ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c is not CompressionType.NONE])
def test_bomb_of_a_gigabyte_is_refused_without_allocating_it(codec: CompressionType) -> None:
    # 1 GiB of zeros compresses to a few hundred KB at most; the cap refuses it early.
    zeros = bytes(64 * 1024 * 1024)
    packed = compress(codec, zeros)
    with pytest.raises(KafkaError):
        decompress(codec, packed, max_size=1024 * 1024)


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c is not CompressionType.NONE])
def test_garbage_is_corrupt_message(codec: CompressionType) -> None:
    with pytest.raises(KafkaError) as caught:
        decompress(codec, b"\x00\x01garbage-that-is-not-compressed" * 3, max_size=10_000)
    assert caught.value.code is ErrorCode.corrupt_message


def test_snappy_is_written_with_xerial_framing_and_plain_snappy_is_read() -> None:
    assert compress(CompressionType.SNAPPY, DATA).startswith(XERIAL_MAGIC)
    plain = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(CompressionType.SNAPPY, plain, max_size=len(DATA)) == DATA


def test_gzip_from_the_standard_library_is_read() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(DATA), max_size=len(DATA)) == DATA


def test_truncated_gzip_is_corrupt() -> None:
    packed = compress(CompressionType.GZIP, DATA)
    with pytest.raises(KafkaError):
        decompress(CompressionType.GZIP, packed[: len(packed) // 2], max_size=len(DATA))


def test_codec_from_config_name() -> None:
    assert CompressionType.from_name("zstd") is CompressionType.ZSTD
    with pytest.raises(ValueError):
        CompressionType.from_name("brotli")


def test_lz4_frames_are_written_like_kafkas_java_client() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = DATA * 10  # several 64 KB blocks
    packed = compress(CompressionType.LZ4, data)
    info = lz4_frame.get_frame_info(packed)  # also checks the header checksum
    assert not info["block_linked"] and not info["content_checksum"] and not info["block_checksum"]
    assert info["block_size"] == 64 * 1024
    assert lz4_frame.decompress(packed) == data
    incompressible = bytes(range(256)) * 3
    assert lz4_frame.decompress(compress(CompressionType.LZ4, incompressible)) == incompressible


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD])
def test_output_buffer_grows_to_fit_highly_compressible_data(codec: CompressionType) -> None:
    data = bytes(3 * 1024 * 1024)  # compresses over 100x: needs several buffer growths
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=64 * 1024 * 1024) == data
    with pytest.raises(KafkaError):
        decompress(codec, packed, max_size=len(data) - 1)
    assert decompress(codec, packed, max_size=len(data)) == data  # exactly at the cap


def test_a_four_gibibyte_zstd_bomb_is_refused_at_the_cap_one_piece_at_a_time() -> None:
    bomb = zstd_zeros(4 << 30)
    assert len(bomb) < 140_000
    tracemalloc.start()
    try:
        largest = produced = 0
        with pytest.raises(KafkaError) as caught:
            for piece in decompress_chunks(CompressionType.ZSTD, bomb, max_size=16 << 20):
                largest = max(largest, len(piece))
                produced += len(piece)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.code is ErrorCode.corrupt_message
    assert "exceeds" in caught.value.message
    assert produced <= 16 << 20
    assert largest <= DECOMPRESSION_CHUNK
    assert peak < 4 * DECOMPRESSION_CHUNK, "pieces must not pile up"


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
def test_pieces_are_bounded_by_the_chunk_size(codec: CompressionType) -> None:
    data = DATA * 50  # ~3.4 MB
    pieces = list(decompress_chunks(codec, compress(codec, data), max_size=len(data)))
    assert b"".join(pieces) == data
    assert len(pieces) > 1
    assert max(len(piece) for piece in pieces) <= DECOMPRESSION_CHUNK


def test_a_reader_that_stops_early_stops_the_work() -> None:
    pieces = decompress_chunks(CompressionType.ZSTD, zstd_zeros(4 << 30), max_size=8 << 30)
    first = next(pieces)
    pieces.close()  # nothing past the first piece was decompressed
    assert len(first) <= DECOMPRESSION_CHUNK


def test_concatenated_zstd_frames_read_as_one_stream() -> None:
    packed = compress(CompressionType.ZSTD, b"a" * 1000) + compress(
        CompressionType.ZSTD, b"b" * 500
    )
    assert decompress(CompressionType.ZSTD, packed, max_size=1500) == b"a" * 1000 + b"b" * 500


@pytest.mark.parametrize(
    "options",
    [
        {"block_linked": False},
        {
            "block_linked": False,
            "block_checksum": True,
            "content_checksum": True,
            "store_size": True,
        },
        {"block_linked": False, "block_size": 0},  # the library's default: 64 KB blocks
        {"block_linked": True},  # python-lz4's default; decoded whole, still within the cap
    ],
)
def test_lz4_frames_of_other_writers_are_read(options: dict[str, object]) -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = DATA * 10
    packed = lz4_frame.compress(data, **options)
    assert decompress(CompressionType.LZ4, packed, max_size=len(data)) == data
    with pytest.raises(KafkaError):
        decompress(CompressionType.LZ4, packed, max_size=len(data) - 1)


def test_lz4_block_larger_than_the_frame_declares_is_corrupt() -> None:
    packed = bytearray(compress(CompressionType.LZ4, DATA))
    packed[7:11] = (70_000).to_bytes(4, "little")  # first block's size, over the 64 KB maximum
    with pytest.raises(KafkaError) as caught:
        decompress(CompressionType.LZ4, bytes(packed), max_size=10 * len(DATA))
    assert caught.value.code is ErrorCode.corrupt_message


def test_xerial_snappy_block_is_checked_against_the_cap_before_it_is_decoded() -> None:
    packed = compress(CompressionType.SNAPPY, bytes(200_000))  # 7 blocks of 32 KB
    with pytest.raises(KafkaError):
        list(decompress_chunks(CompressionType.SNAPPY, packed, max_size=100_000))


@pytest.mark.parametrize(
    ("codec", "low", "high"),
    [
        (CompressionType.GZIP, 1, 9),
        (CompressionType.LZ4, 1, 17),
        (CompressionType.ZSTD, -5, 19),
    ],
)
def test_levels_compress_harder_and_read_back(codec: CompressionType, low: int, high: int) -> None:
    """KIP-390: the higher level writes less, every level reads back with the same reader (lz4
    at a level other than its default 9 is LZ4HC, still a plain lz4 frame)."""
    data = b"".join(
        b"order-%d,customer-%d,amount-%d;" % (i, i % 97, i * 7 % 1000) for i in range(20_000)
    )
    small, large = compress(codec, data, high), compress(codec, data, low)
    assert len(small) < len(large)
    for compressed in (small, large, compress(codec, data)):
        assert decompress(codec, compressed, max_size=len(data)) == data
    if codec is CompressionType.LZ4:
        assert compress(codec, data, 9) == compress(codec, data)  # 9 is the fast mode
