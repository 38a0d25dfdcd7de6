"""confluent-kafka (librdkafka) against a real `moldau server`: produce, consume, look up offsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition

from . import rdkafka
from .support import (
    BIG_TOPIC_CONFIG,
    CLIENT_MAX_BYTES,
    CODECS,
    DEADLINE_S,
    PARTITIONS,
    Record,
    assert_same_records,
    count_by_partition,
    now_ms,
    record_mix,
    unique_topic,
)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_for_byte_under_default_read_committed(server, codec):
    topic = unique_topic(f"rdkafka-{codec}")
    rdkafka.create_topic(
        server.bootstrap_servers, topic, partitions=PARTITIONS, config=BIG_TOPIC_CONFIG
    )
    sent = rdkafka.produce(
        server.bootstrap_servers, topic, record_mix(seed=CODECS.index(codec)), compression=codec
    )

    # No isolation.level set: librdkafka's default is read_committed, bounded by the last stable
    # offset, which must equal the high watermark when there are no transactions.
    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, sent, partitions=PARTITIONS)

    assert_same_records(sent, consumed)


def test_default_partitioner_places_equal_keys_on_one_partition(server):
    topic = unique_topic("rdkafka-partitioner")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    records = [
        Record(key=b"same-key", value=b"value %d" % index, timestamp_ms=now_ms())
        for index in range(10)
    ]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records)

    assert len({record.partition for record in sent}) == 1
    offsets = [record.offset for record in sent]
    assert offsets == list(range(offsets[0], offsets[0] + 10))
    consumed = rdkafka.consume_all(
        server.bootstrap_servers,
        topic,
        sent,
        partitions=PARTITIONS,
        **{"isolation.level": "read_uncommitted"},
    )
    assert_same_records(sent, consumed)


def test_consume_from_given_offsets_returns_the_rest_of_each_partition(server):
    topic = unique_topic("rdkafka-offsets")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    sent = rdkafka.produce(server.bootstrap_servers, topic, record_mix(seed=7, big=False))
    starts = {0: 0, 1: 3, 2: 5}
    expected = [r for r in sent if r.offset >= starts[r.partition]]

    consumed = rdkafka.consume(
        server.bootstrap_servers, topic, starts, count_by_partition(expected)
    )

    assert_same_records(expected, consumed)
    assert next(r.offset for r in consumed if r.partition == 2) == 5


def test_watermarks_span_the_produced_offsets(server):
    topic = unique_topic("rdkafka-watermarks")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    sent = rdkafka.produce(server.bootstrap_servers, topic, record_mix(seed=8, big=False))
    counts = count_by_partition(sent)

    client = rdkafka.consumer(server.bootstrap_servers)
    try:
        for partition in range(PARTITIONS):
            low, high = client.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=DEADLINE_S
            )
            assert (low, high) == (0, counts.get(partition, 0)), f"partition {partition}"
    finally:
        client.close()


def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(server):
    topic = unique_topic("rdkafka-times")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=2)
    base = now_ms() - 3_600_000
    records = [
        Record(key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=base + 1000 * i, partition=0)
        for i in range(10)
    ]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records)
    assert [r.offset for r in sent] == list(range(10))

    client: Consumer = rdkafka.consumer(server.bootstrap_servers)
    try:
        queries = {
            base - 5: 0,  # before everything: the first record
            base + 4000: 4,  # an exact timestamp: that record
            base + 4500: 5,  # between two records: the later one
            base + 9000: 9,
            base + 9001: OFFSET_END,  # after the last record: no offset (-1)
        }
        for timestamp, expected_offset in queries.items():
            [result] = client.offsets_for_times(
                [TopicPartition(topic, 0, timestamp)], timeout=DEADLINE_S
            )
            assert result.error is None, f"timestamp {timestamp}: {result.error}"
            assert result.offset == expected_offset, f"timestamp {timestamp - base} after base"
        # The empty partition has no offset for any timestamp.
        [empty] = client.offsets_for_times([TopicPartition(topic, 1, base)], timeout=DEADLINE_S)
        assert empty.offset == OFFSET_END
        [found] = client.offsets_for_times(
            [TopicPartition(topic, 0, base + 6500)], timeout=DEADLINE_S
        )
    finally:
        client.close()
    consumed = rdkafka.consume(server.bootstrap_servers, topic, {0: found.offset}, {0: 3})
    assert_same_records(sent[7:], consumed)


def test_record_larger_than_the_topic_limit_is_refused_with_message_too_large(server):
    topic = unique_topic("rdkafka-too-large")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)  # Kafka's default limit
    producer = Producer(
        {"bootstrap.servers": server.bootstrap_servers, "message.max.bytes": CLIENT_MAX_BYTES}
    )
    reports = []
    producer.produce(
        topic,
        value=b"x" * (1024 * 1024 + 100),
        partition=0,
        on_delivery=lambda error, message: reports.append(error),
    )
    assert producer.flush(DEADLINE_S) == 0

    [error] = reports
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    client = rdkafka.consumer(server.bootstrap_servers)
    try:
        assert client.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE_S) == (0, 0)
    finally:
        client.close()


def test_a_waiting_fetch_is_answered_as_soon_as_a_record_arrives(server):
    topic = unique_topic("rdkafka-long-poll")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    first = rdkafka.produce(
        server.bootstrap_servers, topic, [Record(key=None, value=b"first", timestamp_ms=now_ms())]
    )
    # The broker may hold each fetch for up to 6 s (the empty fetch that reports the end of the
    # partition is held that long); a new record must end such a wait at once.
    client = rdkafka.consumer(
        server.bootstrap_servers, **{"fetch.wait.max.ms": 6_000, "enable.partition.eof": True}
    )
    client.assign([TopicPartition(topic, 0, 0)])
    try:
        events = []
        while not events or events[-1] != KafkaError._PARTITION_EOF:
            event = client.poll(DEADLINE_S)
            assert event is not None, f"no end of partition after {events}"
            events.append(event.value() if event.error() is None else event.error().code())
        assert events == [b"first", KafkaError._PARTITION_EOF]
        second = rdkafka.produce(
            server.bootstrap_servers,
            topic,
            [Record(key=None, value=b"wake", timestamp_ms=now_ms())],
        )
        produced_at = time.monotonic()
        message = client.poll(DEADLINE_S)
        waited = time.monotonic() - produced_at
    finally:
        client.close()
    assert message is not None and message.error() is None, message and message.error()
    assert (message.offset(), message.value()) == (second[0].offset, b"wake")
    assert second[0].offset == first[0].offset + 1
    assert waited < 3, f"record delivered {waited:.1f}s after it was written"


def test_idempotent_producer_writes_each_record_once(server):
    topic = unique_topic("rdkafka-idempotent")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    records = record_mix(seed=9, big=False)

    sent = rdkafka.produce(
        server.bootstrap_servers,
        topic,
        records,
        compression="lz4",
        extra={"enable.idempotence": True, "max.in.flight.requests.per.connection": 5},
    )

    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, sent, partitions=PARTITIONS)
    assert_same_records(sent, consumed)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_reading_past_the_log_end_applies_auto_offset_reset(server, reset):
    """OFFSET_OUT_OF_RANGE comes with an empty record set, never a null one: librdkafka 2.0
    refuses a whole Fetch response with a null one, and its auto.offset.reset then never fires.
    Every Fetch version librdkafka may pick is covered by its own negotiation."""
    topic = unique_topic(f"rdkafka-reset-{reset}")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    rdkafka.produce(
        server.bootstrap_servers,
        topic,
        [Record(key=None, value=b"old-%d" % i, timestamp_ms=now_ms()) for i in range(3)],
    )
    consumer = rdkafka.consumer(server.bootstrap_servers, **{"auto.offset.reset": reset})
    consumer.assign([TopicPartition(topic, 0, 1000)])  # far past the log end (3)
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    first = None
    deadline = time.monotonic() + DEADLINE_S
    try:
        while first is None and time.monotonic() < deadline:
            if reset == "latest":  # something new to read once the reset moved to the end
                producer.produce(topic, value=b"new", partition=0)
                producer.flush(DEADLINE_S)
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                first = (message.offset(), message.value())
    finally:
        consumer.close()
    assert first is not None, f"auto.offset.reset={reset} never applied"
    assert first == ((0, b"old-0") if reset == "earliest" else (first[0], b"new"))
    assert first[0] >= (0 if reset == "earliest" else 3)


def test_every_fetch_version_answers_errors_with_an_empty_record_set(server):
    """On the wire, for each Fetch version served: a partition past its log end
    (OFFSET_OUT_OF_RANGE) and one of an unknown topic carry records of length 0, not null."""
    import uuid

    from .wire import Connection

    topic = unique_topic("fetch-errors")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    with Connection(server.host, server.port) as connection:
        metadata = connection.request(
            3,
            12,
            {"topics": [{"topic_id": None, "name": topic}], "allow_auto_topic_creation": False},
        )
        topic_id = metadata.topics[0].topic_id
        for version in range(4, 18):
            by_id = version >= 13
            answer = connection.request(
                1,
                version,
                {
                    "max_wait": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic": name,
                            "topic_id": ident,
                            "partitions": [
                                {"partition": 0, "fetch_offset": 1000, "partition_max_bytes": 1024}
                            ],
                        }
                        for name, ident in ((topic, topic_id), ("no-such-topic", uuid.uuid4()))
                    ],
                },
            )
            [past_end], [unknown] = (t.partitions for t in answer.responses)
            assert past_end.error_code == KafkaError.OFFSET_OUT_OF_RANGE, version
            assert unknown.error_code == (
                KafkaError.UNKNOWN_TOPIC_ID if by_id else KafkaError.UNKNOWN_TOPIC_OR_PART
            ), version
            for partition in (past_end, unknown):
                assert partition.records is not None and len(partition.records) == 0, version
