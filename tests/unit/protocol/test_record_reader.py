"""Reading a batch's records: counts checked against the header, limits before work, records split
between decompressed pieces, and the two readers that build nothing."""

from __future__ import annotations

import time

import cramjam
import pytest

from moldau.protocol.compression import DECOMPRESSION_CHUNK, CompressionType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records, first_record_at_or_after, scan_records
from moldau.protocol.records import (
    BatchLimits,
    NewRecord,
    TimestampType,
    build_batch,
    validate_batches,
)
from tests.bombs import EMPTY_RECORD, PRODUCE_BOMB_RECORDS, claiming, empty_records_zstd, zstd_zeros


def test_limits_follow_max_message_bytes() -> None:
    limits = BatchLimits.for_max_batch_bytes(1048588)
    assert limits.max_records == 149_798  # what 1 MB of uncompressed 7-byte records holds
    assert limits.max_decoded_bytes == 16 * 1048588


def test_the_issues_bomb_is_refused_from_its_header_before_any_decompression() -> None:
    bomb = claiming(empty_records_zstd(EMPTY_RECORD, PRODUCE_BOMB_RECORDS), PRODUCE_BOMB_RECORDS)
    assert len(bomb) < 2000
    limits = BatchLimits.for_max_batch_bytes(1048588)
    with pytest.raises(KafkaError) as caught:
        validate_batches(bomb, max_records=limits.max_records)
    assert caught.value.code is ErrorCode.invalid_record
    started = time.perf_counter()
    for read in (decode_records, scan_records):
        with pytest.raises(KafkaError) as caught:
            read(bomb, max_size=limits.max_decoded_bytes, max_records=limits.max_records)
        assert caught.value.code is ErrorCode.invalid_record
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize("read", [decode_records, scan_records])
def test_a_bomb_declaring_one_record_stops_after_it(read) -> None:
    bomb = claiming(zstd_zeros(4 << 30), 1)  # zeros: a record of length 0 comes first
    started = time.perf_counter()
    with pytest.raises(KafkaError) as caught:
        read(bomb, max_size=64 << 20)
    assert caught.value.code is ErrorCode.corrupt_message
    assert time.perf_counter() - started < 0.5
    # one good record, then 4 GiB: refused by the first piece after the record
    payload = bytes(cramjam.zstd.compress(EMPTY_RECORD)) + zstd_zeros(4 << 30)
    started = time.perf_counter()
    with pytest.raises(KafkaError) as caught:
        read(claiming(payload, 1), max_size=64 << 20)
    assert "remain after the last record" in caught.value.message
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("read", [decode_records, scan_records])
def test_count_must_match_the_header(read) -> None:
    two = EMPTY_RECORD * 2
    with pytest.raises(KafkaError) as caught:
        read(claiming(two, 3, codec=CompressionType.NONE), max_size=1000)
    assert caught.value.code is ErrorCode.corrupt_message
    assert "missing 1" in caught.value.message
    with pytest.raises(KafkaError) as caught:
        read(claiming(two, 1, codec=CompressionType.NONE), max_size=1000)
    assert "remain after the last record" in caught.value.message
    read(claiming(two, 2, codec=CompressionType.NONE), max_size=1000)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_records_split_between_decompressed_pieces_are_read_whole(codec: CompressionType) -> None:
    records = [NewRecord(key=b"k%d" % i, value=b"v" * (i % 300), timestamp=i) for i in range(6000)]
    records.insert(3000, NewRecord(key=b"big", value=bytes(range(256)) * 3000, timestamp=1))
    batch = build_batch(records, compression=codec)
    assert sum(len(r.value or b"") for r in records) > 2 * DECOMPRESSION_CHUNK
    decoded = decode_records(batch)
    assert [(r.key, r.value) for r in decoded] == [(r.key, r.value) for r in records]
    assert [r.offset for r in decoded] == list(range(len(records)))
    size = scan_records(batch, max_size=1 << 30, require_keys=True)
    assert size > 2 * DECOMPRESSION_CHUNK


def test_scan_refuses_a_record_without_key_where_keys_are_required() -> None:
    batch = build_batch([NewRecord(key=b"k", value=b"1"), NewRecord(value=b"2")])
    scan_records(batch, max_size=1000)
    with pytest.raises(KafkaError) as caught:
        scan_records(batch, max_size=1000, require_keys=True)
    assert caught.value.code is ErrorCode.invalid_record
    empty_key = build_batch([NewRecord(key=b"", value=b"1")])
    scan_records(empty_key, max_size=1000, require_keys=True)  # empty is a key, as in Kafka


def test_scan_of_decompressed_pieces_counts_their_size() -> None:
    batch = build_batch([NewRecord(key=b"k%d" % i, value=b"v") for i in range(10)])
    payload = batch[61:]
    compressed = build_batch(
        [NewRecord(key=b"k%d" % i, value=b"v") for i in range(10)], compression=CompressionType.GZIP
    )
    assert scan_records(compressed, max_size=10_000, pieces=[payload]) == len(payload)


def test_first_record_at_or_after_a_timestamp() -> None:
    timestamps = [100, 300, 200, 400, 400]
    batch = build_batch(
        [NewRecord(key=b"k", value=b"v", timestamp=t) for t in timestamps], base_offset=50
    )
    assert first_record_at_or_after(batch, 150, max_size=1000) == (51, 300)
    assert first_record_at_or_after(batch, 400, max_size=1000) == (53, 400)
    assert first_record_at_or_after(batch, 401, max_size=1000) is None
    assert first_record_at_or_after(batch, 0, max_size=1000, min_offset=52) == (52, 200)
    appended = build_batch(
        [NewRecord(value=b"v", timestamp=t) for t in timestamps],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_offset=50,
    )
    assert first_record_at_or_after(appended, 150, max_size=1000) == (50, 400)


def test_first_record_reads_no_further_than_the_record_it_finds() -> None:
    # a first record at the target, then bytes that would expand to 4 GiB: never reached
    first = bytes(cramjam.zstd.compress(EMPTY_RECORD))
    bomb = claiming(first + zstd_zeros(4 << 30), 2)
    started = time.perf_counter()
    assert first_record_at_or_after(bomb, 1000, max_size=16 << 20) == (0, 1000)
    assert time.perf_counter() - started < 0.1


def test_invalid_record_lengths_are_corrupt() -> None:
    for payload in (b"\x00" * 20, b"\x0a" + b"\x00" * 5, b"\xff\xff\xff\xff\xff\xff"):
        with pytest.raises(KafkaError) as caught:
            decode_records(claiming(payload, 1, codec=CompressionType.NONE), max_size=1000)
        assert caught.value.code is ErrorCode.corrupt_message


@pytest.mark.parametrize(
    "record",
    [
        b"\x0c\x00" + b"\x80" * 5,  # a timestamp delta varint running to the record's end
        b"\x0c\x00\x00" + b"\x80" * 4,  # an offset delta varint doing the same
    ],
)
def test_a_key_scan_stays_inside_a_malformed_record(record: bytes) -> None:
    batch = claiming(record, 1, codec=CompressionType.NONE)
    with pytest.raises(KafkaError) as caught:
        scan_records(batch, max_size=1000, require_keys=True)
    assert caught.value.code is ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", list(CompressionType))
def test_an_empty_batch_left_by_compaction_reads_as_no_records(codec: CompressionType) -> None:
    batch = build_batch([], compression=codec, last_offset_delta=5)
    assert decode_records(batch) == []
    assert scan_records(batch, max_size=100, require_keys=True) == 0
    assert first_record_at_or_after(batch, 0, max_size=100) is None
