"""Codecs round-trip, read Java's framed snappy, and refuse decompression bombs."""

from __future__ import annotations

import gzip

import cramjam
import pytest

from moldau.protocol.compression import XERIAL_MAGIC, CompressionType, compress, decompress
from moldau.protocol.errors import ErrorCode, KafkaError

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
