"""kafka-python against a real `moldau server`: admin, produce, consume, offsets, auto-create."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from .support import (
    BIG_TOPIC_CONFIG,
    CLIENT_MAX_BYTES,
    CODECS,
    DEADLINE_S,
    PARTITIONS,
    Record,
    assert_same_records,
    check_acknowledged,
    count_by_partition,
    now_ms,
    placed,
    record_mix,
    unique_topic,
)

# aiokafka's and kafka-python's test suites assume auto-created topics get 2 partitions.
AUTO_CREATE_PARTITIONS = 2


@pytest.fixture(scope="module")
def server(module_server_factory):
    return module_server_factory(num_partitions=str(AUTO_CREATE_PARTITIONS))


def kafka_python_records(*, seed: int, big: bool = True) -> list[Record]:
    # kafka-python refuses null header values when sending (they are legal on the wire).
    return record_mix(seed=seed, big=big, null_header_values=False)


def create_topic(bootstrap: str, topic: str, *, partitions: int, configs=None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            {
                topic: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs or {},
                }
            }
        )
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, records: Sequence[Record], **config: Any) -> list[Record]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, max_request_size=CLIENT_MAX_BYTES, linger_ms=20, **config
    )
    try:
        futures = [
            producer.send(
                topic,
                value=record.value,
                key=record.key,
                headers=list(record.headers),
                partition=record.partition,
                timestamp_ms=record.timestamp_ms,
            )
            for record in records
        ]
        producer.flush(timeout=DEADLINE_S)
        acknowledged = []
        for record, future in zip(records, futures, strict=True):
            metadata = future.get(timeout=DEADLINE_S)
            acknowledged.append(
                placed(record, partition=metadata.partition, offset=metadata.offset)
            )
    finally:
        producer.close(timeout=DEADLINE_S)
    check_acknowledged(acknowledged)
    return acknowledged


def new_consumer(bootstrap: str, **config: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=CLIENT_MAX_BYTES,
        max_partition_fetch_bytes=CLIENT_MAX_BYTES,
        **config,
    )


def consume(
    bootstrap: str, topic: str, starts: dict[int, int | None], expected: dict[int, int]
) -> list[Record]:
    """Read from each partition's start (None: the beginning) until the expected counts arrive,
    then until the consumer position reaches the end offset (so extra records are caught too)."""
    consumer = new_consumer(bootstrap)
    partitions = [TopicPartition(topic, p) for p in starts]
    consumer.assign(partitions)
    for tp in partitions:
        start = starts[tp.partition]
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
    received: list[Record] = []
    try:
        end_offsets = consumer.end_offsets(partitions)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            counts = count_by_partition(received)
            if all(counts.get(p, 0) >= n for p, n in expected.items()) and all(
                consumer.position(tp) >= end_offsets[tp] for tp in partitions
            ):
                break
            for batch in consumer.poll(timeout_ms=200).values():
                for message in batch:
                    received.append(
                        Record(
                            key=message.key,
                            value=message.value,
                            headers=tuple(message.headers),
                            timestamp_ms=message.timestamp,
                            partition=message.partition,
                            offset=message.offset,
                        )
                    )
    finally:
        consumer.close()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_for_byte(server, codec):
    topic = unique_topic(f"kafka-python-{codec}")
    create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS, configs=BIG_TOPIC_CONFIG)
    sent = produce(
        server.bootstrap_servers,
        topic,
        kafka_python_records(seed=20 + CODECS.index(codec)),
        compression_type=None if codec == "none" else codec,
        # Idempotence (kafka-python's default) has its own test below, so that a failure there
        # does not hide what these tests check.
        enable_idempotence=False,
    )

    consumed = consume(
        server.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS)), count_by_partition(sent)
    )

    assert_same_records(sent, consumed)


def test_default_producer_is_idempotent_and_its_records_arrive_once(server):
    topic = unique_topic("kafka-python-idempotent")
    create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    records = kafka_python_records(seed=30, big=False)

    sent = produce(server.bootstrap_servers, topic, records)  # all defaults: idempotent, acks=all

    consumed = consume(
        server.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS)), count_by_partition(sent)
    )
    assert_same_records(sent, consumed)


def test_default_config_auto_creates_topic_with_num_partitions(server):
    topic = unique_topic("kafka-python-auto")
    records = [Record(key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=now_ms()) for i in range(6)]

    sent = produce(server.bootstrap_servers, topic, records)

    consumer = new_consumer(server.bootstrap_servers)
    try:
        assert consumer.partitions_for_topic(topic) == set(range(AUTO_CREATE_PARTITIONS))
    finally:
        consumer.close()
    consumed = consume(
        server.bootstrap_servers,
        topic,
        dict.fromkeys(range(AUTO_CREATE_PARTITIONS)),
        count_by_partition(sent),
    )
    assert_same_records(sent, consumed)


def test_consume_from_given_offsets_returns_the_rest_of_each_partition(server):
    topic = unique_topic("kafka-python-offsets")
    create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    sent = produce(
        server.bootstrap_servers,
        topic,
        kafka_python_records(seed=31, big=False),
        enable_idempotence=False,
    )
    starts = {0: 2, 1: 0, 2: 6}
    expected = [r for r in sent if r.offset >= starts[r.partition]]

    consumed = consume(server.bootstrap_servers, topic, starts, count_by_partition(expected))

    assert_same_records(expected, consumed)


def test_offsets_for_times_and_beginning_and_end_offsets(server):
    topic = unique_topic("kafka-python-times")
    create_topic(server.bootstrap_servers, topic, partitions=2)
    base = now_ms() - 7_200_000
    records = [
        Record(key=None, value=b"at %d" % i, timestamp_ms=base + 100 * i, partition=1)
        for i in range(8)
    ]
    sent = produce(server.bootstrap_servers, topic, records, enable_idempotence=False)
    assert [r.offset for r in sent] == list(range(8))

    consumer = new_consumer(server.bootstrap_servers)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        found = consumer.offsets_for_times({tp1: base + 250})
        assert found[tp1] is not None
        assert (found[tp1].offset, found[tp1].timestamp) == (3, base + 300)
        assert consumer.offsets_for_times({tp1: base + 700})[tp1].offset == 7
        assert consumer.offsets_for_times({tp1: base + 701})[tp1] is None
        assert consumer.offsets_for_times({tp0: base})[tp0] is None
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 0, tp1: 8}
    finally:
        consumer.close()

    consumed = consume(server.bootstrap_servers, topic, {1: 3}, {1: 5})
    assert_same_records(sent[3:], consumed)
