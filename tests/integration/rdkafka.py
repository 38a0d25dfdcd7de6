"""confluent-kafka (librdkafka) helpers shared by the tests: create topics, produce, consume."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from .support import CLIENT_MAX_BYTES, DEADLINE_S, Record, check_acknowledged, placed


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int,
    config: Mapping[str, str] | None = None,
) -> None:
    admin = admin_client(bootstrap)  # must outlive the future: dropping it cancels the request
    futures = admin.create_topics(
        [
            NewTopic(
                topic, num_partitions=partitions, replication_factor=1, config=dict(config or {})
            )
        ],
        operation_timeout=DEADLINE_S,
    )
    futures[topic].result(timeout=DEADLINE_S)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Record],
    *,
    compression: str = "none",
    extra: Mapping[str, Any] | None = None,
) -> list[Record]:
    """Send the records (in order) and return them with the partition and offset acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "message.max.bytes": CLIENT_MAX_BYTES,
            "acks": "all",
            "linger.ms": 20,
            **(extra or {}),
        }
    )
    reports: dict[int, tuple[KafkaError | None, Message]] = {}

    def on_delivery(index: int):
        def report(error: KafkaError | None, message: Message) -> None:
            reports[index] = (error, message)

        return report

    for index, record in enumerate(records):
        arguments: dict[str, Any] = {
            "key": record.key,
            "value": record.value,
            "timestamp": record.timestamp_ms,
            "on_delivery": on_delivery(index),
        }
        if record.headers:
            arguments["headers"] = list(record.headers)
        if record.partition is not None:
            arguments["partition"] = record.partition
        producer.produce(topic, **arguments)
        producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    assert remaining == 0, f"{remaining} records not acknowledged within {DEADLINE_S:.0f}s"

    acknowledged = []
    for index, record in enumerate(records):
        error, message = reports[index]
        assert error is None, f"record {index} ({record.describe()}) failed: {error}"
        acknowledged.append(placed(record, partition=message.partition(), offset=message.offset()))
    check_acknowledged(acknowledged)
    return acknowledged


def consumer(bootstrap: str, **config: Any) -> Consumer:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "moldau-integration",
        "enable.auto.commit": False,
        "fetch.max.bytes": CLIENT_MAX_BYTES,
        "max.partition.fetch.bytes": CLIENT_MAX_BYTES,
        "receive.message.max.bytes": 2 * CLIENT_MAX_BYTES,
    }
    settings.update(config)
    return Consumer(settings)


def as_record(message: Message) -> Record:
    _timestamp_type, timestamp = message.timestamp()
    return Record(
        key=message.key(),
        value=message.value(),
        headers=tuple(message.headers() or ()),
        timestamp_ms=timestamp,
        partition=message.partition(),
        offset=message.offset(),
    )


def consume(
    bootstrap: str,
    topic: str,
    starts: Mapping[int, int],
    expected_counts: Mapping[int, int],
    **config: Any,
) -> list[Record]:
    """Assign partitions at the given start offsets and read until each has its expected count.

    After the expected counts arrive, keep reading until every partition reports end of partition,
    so that extra records would be caught as well.
    """
    client = consumer(bootstrap, **{"enable.partition.eof": True, **config})
    client.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    received: list[Record] = []
    counts = dict.fromkeys(starts, 0)
    at_end: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            done = all(counts[p] >= expected_counts.get(p, 0) for p in starts)
            if done and at_end >= set(starts):
                break
            message = client.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(error)
            at_end.discard(message.partition())
            received.append(as_record(message))
            counts[message.partition()] += 1
    finally:
        client.close()
    missing = {
        p: (counts[p], expected_counts.get(p, 0))
        for p in starts
        if counts[p] < expected_counts.get(p, 0)
    }
    assert not missing, f"{topic}: partitions with too few records (got, expected): {missing}"
    return received


def consume_all(
    bootstrap: str, topic: str, acknowledged: Iterable[Record], *, partitions: int, **config: Any
) -> list[Record]:
    """Read every partition of `topic` from the beginning; the acknowledged records must be all."""
    counts = dict.fromkeys(range(partitions), 0)
    for record in acknowledged:
        assert record.partition is not None
        counts[record.partition] += 1
    return consume(bootstrap, topic, dict.fromkeys(counts, OFFSET_BEGINNING), counts, **config)
