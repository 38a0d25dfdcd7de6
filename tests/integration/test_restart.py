"""A clean restart keeps every topic, config and record, and offsets continue where they ended."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from . import rdkafka
from .support import (
    BIG_TOPIC_CONFIG,
    DEADLINE_S,
    PARTITIONS,
    Record,
    assert_same_records,
    count_by_partition,
    now_ms,
    record_mix,
    unique_topic,
)


def topic_partition_counts(bootstrap: str) -> dict[str, int]:
    metadata = rdkafka.admin_client(bootstrap).list_topics(timeout=DEADLINE_S)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = rdkafka.admin_client(bootstrap)
    futures = admin.describe_configs([resource])
    entries = futures[resource].result(timeout=DEADLINE_S)
    return {name: entry.value for name, entry in entries.items()}


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    client = rdkafka.consumer(bootstrap)
    try:
        return {
            p: client.get_watermark_offsets(TopicPartition(topic, p), timeout=DEADLINE_S)
            for p in range(partitions)
        }
    finally:
        client.close()


def test_topics_configs_and_records_survive_restarts(start_server):
    server = start_server()
    mixed, small = unique_topic("restart-mixed"), unique_topic("restart-small")
    configs = {**BIG_TOPIC_CONFIG, "retention.ms": "987654321", "cleanup.policy": "delete"}
    rdkafka.create_topic(server.bootstrap_servers, mixed, partitions=PARTITIONS, config=configs)
    rdkafka.create_topic(server.bootstrap_servers, small, partitions=1)
    sent_mixed = rdkafka.produce(
        server.bootstrap_servers, mixed, record_mix(seed=90), compression="lz4"
    )
    sent_small = rdkafka.produce(
        server.bootstrap_servers,
        small,
        [Record(key=b"k", value=b"before %d" % i, timestamp_ms=now_ms()) for i in range(5)],
    )
    marks_before = watermarks(server.bootstrap_servers, mixed, PARTITIONS)

    server.restart()

    counts = topic_partition_counts(server.bootstrap_servers)
    assert counts.get(mixed) == PARTITIONS and counts.get(small) == 1, counts
    config = topic_config(server.bootstrap_servers, mixed)
    assert config["retention.ms"] == "987654321"
    assert config["max.message.bytes"] == BIG_TOPIC_CONFIG["max.message.bytes"]
    assert watermarks(server.bootstrap_servers, mixed, PARTITIONS) == marks_before
    assert_same_records(
        sent_mixed,
        rdkafka.consume_all(server.bootstrap_servers, mixed, sent_mixed, partitions=PARTITIONS),
    )

    # Offsets continue after the restart, and a second restart keeps both generations.
    more = rdkafka.produce(
        server.bootstrap_servers,
        small,
        [
            Record(key=None, value=b"after %d" % i, timestamp_ms=now_ms(), partition=0)
            for i in range(3)
        ],
    )
    assert [r.offset for r in more] == [5, 6, 7]

    server.restart()

    everything = sent_small + more
    consumed = rdkafka.consume(
        server.bootstrap_servers, small, {0: 0}, count_by_partition(everything)
    )
    assert_same_records(everything, consumed, check_timestamps=True)
    assert_same_records(
        sent_mixed,
        rdkafka.consume_all(server.bootstrap_servers, mixed, sent_mixed, partitions=PARTITIONS),
    )
