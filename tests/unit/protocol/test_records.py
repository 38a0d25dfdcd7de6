"""RecordBatch v2: build, validate, decode, and agree byte-for-byte with kafka-python's codec."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.protocol.batch_layout import HEADER_SIZE
from moldau.protocol.compression import CompressionType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import (
    BatchHeader,
    ControlRecordType,
    NewRecord,
    Record,
    TimestampType,
    batch_with_payload,
    build_batch,
    build_control_batch,
    iter_batches,
    parse_control_record,
    seal_batch,
    validate_batches,
)

RECORDS = [
    NewRecord(key=b"k1", value=b"v1", timestamp=1000),
    NewRecord(key=None, value=b"v2" * 100, timestamp=1005, headers=(("h", b"x"), ("n", None))),
    NewRecord(key=b"k3", value=None, timestamp=999),
]


def test_header_fields_of_a_built_batch() -> None:
    batch = build_batch(RECORDS, base_offset=42, producer_id=7, producer_epoch=3, base_sequence=11)
    header = BatchHeader.parse(batch)
    assert header.base_offset == 42
    assert header.size == len(batch)
    assert header.magic == 2
    assert header.records_count == 3
    assert header.last_offset_delta == 2
    assert header.last_offset == 44
    assert header.base_timestamp == 999
    assert header.max_timestamp == 1005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.last_sequence == 13
    assert not header.is_control and not header.is_transactional


@pytest.mark.parametrize("codec", list(CompressionType))
def test_decode_returns_what_was_built(codec: CompressionType) -> None:
    batch = build_batch(RECORDS, base_offset=10, compression=codec)
    assert BatchHeader.parse(batch).compression is codec
    records = decode_records(batch)
    assert [r.offset for r in records] == [10, 11, 12]
    assert [r.key for r in records] == [b"k1", None, b"k3"]
    assert [r.value for r in records] == [b"v1", b"v2" * 100, None]
    assert [r.timestamp for r in records] == [1000, 1005, 999]
    assert records[1].headers == (("h", b"x"), ("n", None))


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_reads_our_batches(codec: CompressionType) -> None:
    buffer = build_batch(RECORDS, base_offset=5, compression=codec) + build_batch(
        [NewRecord(value=b"last", timestamp=2000)], base_offset=8, compression=codec
    )
    memory = MemoryRecords(buffer)
    seen = []
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc()
        seen.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
    assert seen == [
        (5, b"k1", b"v1", 1000),
        (6, None, b"v2" * 100, 1005),
        (7, b"k3", None, 999),
        (8, None, b"last", 2000),
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_we_read_kafka_python_batches(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, False, 99, 1, 0, 1 << 20)
    for index in range(20):
        builder.append(index, 1_700_000_000_000 + index, b"key%d" % index, b"value%d" % index, [])
    buffer = bytes(builder.build())
    (position, header), *_ = validate_batches(buffer)
    assert position == 0 and header.producer_id == 99 and header.records_count == 20
    records = decode_records(buffer)
    assert [r.value for r in records] == [b"value%d" % i for i in range(20)]
    assert records[-1].timestamp == 1_700_000_000_019


def test_validation_refuses_bad_crc_magic_length_and_counts() -> None:
    good = bytearray(build_batch(RECORDS))
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    truncated = bytes(good[:-3])
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 5)
    cases = {
        bytes(flipped): ErrorCode.corrupt_message,
        bytes(wrong_magic): ErrorCode.corrupt_message,
        truncated: ErrorCode.corrupt_message,
        bytes(good) + b"\x00" * 10: ErrorCode.corrupt_message,
    }
    for buffer, code in cases.items():
        with pytest.raises(KafkaError) as caught:
            validate_batches(buffer)
        assert caught.value.code is code
    # the count is covered by the CRC: fix the CRC to reach the count check
    import crc32c

    struct.pack_into(">I", wrong_count, 17, crc32c.crc32c(bytes(wrong_count[21:])))
    with pytest.raises(KafkaError) as caught:
        validate_batches(bytes(wrong_count))
    assert caught.value.code is ErrorCode.invalid_record
    with pytest.raises(KafkaError) as caught:
        validate_batches(bytes(good), max_batch_size=len(good) - 1)
    assert caught.value.code is ErrorCode.message_too_large


def test_rewriting_base_offset_and_leader_epoch_keeps_the_crc_valid() -> None:
    batch = bytearray(build_batch(RECORDS))
    struct.pack_into(">q", batch, 0, 123456)
    struct.pack_into(">i", batch, 12, 9)
    [(_, header)] = validate_batches(batch)
    assert header.base_offset == 123456 and header.partition_leader_epoch == 9


def test_iter_batches_skips_a_trailing_partial_batch() -> None:
    one = build_batch(RECORDS, base_offset=0)
    two = build_batch(RECORDS, base_offset=3)
    found = list(iter_batches(one + two[:-1]))
    assert [b.header.base_offset for b in found] == [0]
    assert found[0].is_valid()
    assert bytes(found[0].data) == one


def test_control_batch_round_trip() -> None:
    batch = build_control_batch(
        ControlRecordType.ABORT, producer_id=5, producer_epoch=2, coordinator_epoch=7, timestamp=10
    )
    header = BatchHeader.parse(batch)
    assert header.is_control and header.is_transactional
    [record] = decode_records(batch)
    assert parse_control_record(record) == (ControlRecordType.ABORT, 7)
    kafka_batch = MemoryRecords(batch).next_batch()
    assert kafka_batch.is_control_batch and kafka_batch.is_transactional


def test_log_append_time_records_take_the_max_timestamp() -> None:
    batch = build_batch(RECORDS, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert {r.timestamp for r in decode_records(batch)} == {1005}


def test_decode_caps_decompressed_size() -> None:
    batch = build_batch([NewRecord(value=bytes(100_000))], compression=CompressionType.ZSTD)
    assert len(batch) < 1000
    with pytest.raises(KafkaError):
        decode_records(batch, max_size=50_000)


def test_a_batch_with_an_unknown_codec_is_corrupt_when_decoded() -> None:
    """Found by fuzzing: a batch with a right CRC but codec 5-7 (one read from a segment, never
    validated as a produced one is) raised ValueError from the codec enum."""
    batch = bytearray(build_batch([NewRecord(value=b"v")]))
    struct.pack_into(">h", batch, 21, 5)  # attributes: codec 5
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    [read_back] = iter_batches(bytes(batch))
    assert read_back.is_valid()
    with pytest.raises(KafkaError) as error:
        read_back.records()
    assert error.value.code == ErrorCode.corrupt_message


def test_a_control_record_of_an_unknown_type_is_corrupt() -> None:
    """Found by fuzzing: type 129 raised ValueError from the enum instead of CORRUPT_MESSAGE."""
    record = Record(offset=0, timestamp=0, key=struct.pack(">hh", 0, 129), value=None)
    with pytest.raises(KafkaError) as error:
        parse_control_record(record)
    assert error.value.code == ErrorCode.corrupt_message


def test_corrupted_record_body_is_reported_not_crashing() -> None:
    batch = bytearray(build_batch(RECORDS))
    batch[HEADER_SIZE] = 0x7E  # record length varint now points past the end
    with pytest.raises(KafkaError):
        decode_records(bytes(batch))


record_strategy = st.builds(
    NewRecord,
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3
    ).map(tuple),
    timestamp=st.integers(min_value=0, max_value=2**40),
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(record_strategy, min_size=1, max_size=10),
    codec=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(min_value=0, max_value=2**40),
)
def test_property_build_then_decode_is_identity(
    records: list[NewRecord], codec: CompressionType, base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=codec)
    validate_batches(batch)
    decoded = decode_records(batch)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    kafka_values = [r.value for r in MemoryRecords(batch).next_batch()]
    assert kafka_values == [r.value for r in records]


def test_batch_with_payload_recodes_a_batch_around_new_bytes() -> None:
    batch = build_batch(RECORDS, base_offset=7, producer_id=3, compression=CompressionType.GZIP)
    header = BatchHeader.parse(batch)
    plain = build_batch(RECORDS, base_offset=7, producer_id=3)
    rewrapped = batch_with_payload(header, plain[HEADER_SIZE:], compression=CompressionType.NONE)
    validate_batches(rewrapped)
    assert BatchHeader.parse(rewrapped).compression is CompressionType.NONE
    assert BatchHeader.parse(rewrapped)._replace(
        attributes=0, crc=0, batch_length=0
    ) == header._replace(attributes=0, crc=0, batch_length=0)
    assert decode_records(rewrapped) == decode_records(batch)


def test_a_batch_sealed_in_place_is_the_batch_built_from_its_records() -> None:
    built = build_batch(
        RECORDS, producer_id=7, producer_epoch=2, base_sequence=5, transactional=True
    )
    header = BatchHeader.parse(built)
    in_place = bytearray(HEADER_SIZE) + built[HEADER_SIZE:]
    seal_batch(memoryview(in_place), header._replace(crc=123, batch_length=0))
    assert bytes(in_place) == built
