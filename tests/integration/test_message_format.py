"""Bytes a client sends are the bytes in the partition's `.log` file and the bytes a consumer gets.

Record batches are built by kafka-python's independent RecordBatch v2 writer; the segment file
`<log.dirs>/<topic>-<partition>/00000000000000000000.log` is read back with kafka-python's reader.
The broker may only rewrite a batch's base offset and partition leader epoch (bytes 0-7 and 12-15,
both outside the CRC); every other byte must be stored and served as it was sent.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, TopicPartition
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from . import rdkafka
from .support import DEADLINE_S, Record, assert_same_records, now_ms, unique_topic, wait_until
from .wire import Connection, fetch, produce

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def segment_path(data_dir: Path, topic: str, partition: int) -> Path:
    return data_dir / f"{topic}-{partition}" / "00000000000000000000.log"


def build_batch(codec: str, records: list[Record]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_IDS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=16 * 1024 * 1024,
    )
    for index, record in enumerate(records):
        builder.append(
            index,
            timestamp=record.timestamp_ms,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
        )
    return bytes(builder.build())


def parse_segment(data: bytes) -> list[tuple[DefaultRecordBatch, list[Record]]]:
    """Every batch of a segment with its records, via kafka-python's reader (checks CRCs)."""
    reader = MemoryRecords(data)
    batches = []
    while reader.has_next():
        batch = reader.next_batch()
        assert batch.validate_crc(), f"bad CRC in the batch at offset {batch.base_offset}"
        records = [
            Record(
                key=r.key,
                value=r.value,
                headers=tuple(r.headers),
                timestamp_ms=r.timestamp,
                offset=r.offset,
                partition=0,
            )
            for r in batch
        ]
        batches.append((batch, records))
    assert reader.valid_bytes() == len(data), "segment ends with a partial batch"
    return batches


def test_sent_batches_are_stored_and_fetched_byte_for_byte(server):
    topic = unique_topic("format-raw")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    # Text, so that every codec shrinks the batch (kafka-python sends a batch uncompressed
    # when compression does not pay off).
    mix = [
        Record(
            key=None if i % 3 == 0 else b"key %d" % (i % 4),
            value=None if i % 7 == 6 else b"format check %d; " % i * (i + 5),
            headers=(("h", b"v%d" % i), ("empty", b""), ("null", None)) if i % 2 else (),
            timestamp_ms=now_ms() - 5000 + i,
        )
        for i in range(40)
    ]
    sent_batches: list[bytes] = []
    expected: list[Record] = []

    with Connection(server.host, server.port) as connection:
        next_offset = 0
        for codec in CODEC_IDS:
            records = mix[len(sent_batches) * 8 : len(sent_batches) * 8 + 8]
            batch = build_batch(codec, records)
            attributes = struct.unpack(">h", batch[21:23])[0]
            assert attributes & 0x07 == CODEC_IDS[codec], f"{codec}: batch not compressed"
            answer = produce(connection, topic, 0, batch)
            assert answer.error_code == 0, f"{codec}: produce failed with {answer.error_code}"
            assert answer.base_offset == next_offset, codec
            sent_batches.append(batch)
            expected += [
                Record(
                    key=r.key,
                    value=r.value,
                    headers=r.headers,
                    timestamp_ms=r.timestamp_ms,
                    partition=0,
                    offset=next_offset + i,
                )
                for i, r in enumerate(records)
            ]
            next_offset += len(records)

        path = segment_path(server.data_dir, topic, 0)
        stored = path.read_bytes()
        assert len(stored) == sum(len(b) for b in sent_batches)
        position = 0
        offset = 0
        for codec, batch in zip(CODEC_IDS, sent_batches, strict=True):
            on_disk = stored[position : position + len(batch)]
            assert struct.unpack(">q", on_disk[:8])[0] == offset, f"{codec}: base offset"
            assert on_disk[8:12] == batch[8:12], f"{codec}: batch length"
            assert on_disk[16:] == batch[16:], f"{codec}: batch bytes changed in the log"
            position += len(batch)
            offset += struct.unpack(">i", batch[57:61])[0]

        fetched = fetch(connection, topic, 0, 0, max_bytes=64 * 1024 * 1024)
        assert fetched.error_code == 0
        assert fetched.high_watermark == next_offset
        assert bytes(fetched.records) == stored, "a fetch must return the segment's bytes as is"

    segment = parse_segment(stored)
    assert [b.compression_type for b, _ in segment] == list(CODEC_IDS.values())
    assert_same_records(expected, [r for _, records in segment for r in records])
    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, expected, partitions=1)
    assert_same_records(expected, consumed)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_records_from_librdkafka_are_in_the_log_file_as_sent(server, codec):
    topic = unique_topic(f"format-rdkafka-{codec}")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=2)
    records = [
        Record(
            key=None if i % 4 == 0 else b"key %d" % i,
            value=None if i % 5 == 0 else bytes(range(256)) * (i + 1),
            headers=(("index", str(i).encode()),) if i % 2 else (),
            timestamp_ms=now_ms() - 1000 + i,
            partition=i % 2,
        )
        for i in range(20)
    ]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records, compression=codec)

    for partition in (0, 1):
        expected = [r for r in sent if r.partition == partition]
        path = segment_path(server.data_dir, topic, partition)
        wait_until(path.exists, message=f"{path} does not exist")
        segment = parse_segment(path.read_bytes())
        assert {b.compression_type for b, _ in segment} == {CODEC_IDS[codec]}
        from_log = [
            Record(
                key=r.key,
                value=r.value,
                headers=r.headers,
                timestamp_ms=r.timestamp_ms,
                partition=partition,
                offset=r.offset,
            )
            for _, batch_records in segment
            for r in batch_records
        ]
        assert_same_records(expected, from_log)

    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, sent, partitions=2)
    assert_same_records(sent, consumed)


def test_log_append_time_topic_stamps_batches_with_the_broker_time(server):
    topic = unique_topic("format-append-time")
    rdkafka.create_topic(
        server.bootstrap_servers,
        topic,
        partitions=1,
        config={"message.timestamp.type": "LogAppendTime"},
    )
    an_hour_ago = now_ms() - 3_600_000
    records = [
        Record(key=b"k", value=b"v%d" % i, timestamp_ms=an_hour_ago + i, partition=0)
        for i in range(5)
    ]
    before = now_ms()
    sent = rdkafka.produce(server.bootstrap_servers, topic, records, compression="gzip")
    after = now_ms()

    segment = parse_segment(segment_path(server.data_dir, topic, 0).read_bytes())
    append_times = set()
    for batch, stored in segment:
        assert batch.timestamp_type == 1, "batch not marked LogAppendTime"
        assert before <= batch.max_timestamp <= after
        append_times.add(batch.max_timestamp)
        assert {r.timestamp_ms for r in stored} == {batch.max_timestamp}

    consumer = rdkafka.consumer(server.bootstrap_servers, **{"enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = []
    try:
        while len(received) < len(sent):
            message = consumer.poll(DEADLINE_S)
            assert message is not None, f"only {len(received)} of {len(sent)} records arrived"
            if message.error() is None:
                received.append(message)
    finally:
        consumer.close()
    for message, original in zip(received, sent, strict=True):
        kind, timestamp = message.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert timestamp in append_times
        assert (message.offset(), message.value()) == (original.offset, original.value)
