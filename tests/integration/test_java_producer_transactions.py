"""Apache Kafka's Java producer in transactions, through Kafka's own `kafka-producer-perf-test`:
a transactional id, a commit every 200 ms, five batches in flight per connection. At transaction
version 2 (KIP-890 part 2: Produce v12 adds each partition on the broker, EndTxn v5 bumps the
epoch, sequences restart at 0) and at version 1 (AddPartitionsToTxn, the epoch kept). Every
record sent is read back once by a read_committed consumer, in the order sent.

This command failed in 4 of 5 runs with `OutOfOrderSequenceException` while a produce waiting for
its partition to join the transaction let the requests behind it on the connection reach the
log first."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from .cluster import COMBINED, build_cluster
from .kafka_jvm import KafkaJvm
from .support import unique_topic, wait_until
from .wire import Connection, create_topics

RECORDS = 3000


def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, index, 0) for index in range(partitions)])

        def read() -> bool:
            for message in consumer.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                values.append(message.value())
            return len(values) >= expected

        wait_until(read, timeout=60, message=f"{expected} committed records read")
        for message in consumer.consume(1000, timeout=1):  # nothing beyond them
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _perf_test_in_transactions(kafka_jvm: KafkaJvm, bootstrap: str, topic: str) -> str:
    completed = kafka_jvm.tool(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        str(RECORDS),
        "--record-size",
        "100",
        "--throughput",
        "3000",
        "--transactional-id",
        f"{topic}-writer",
        "--transaction-duration-ms",
        "200",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "linger.ms=5",
        "batch.size=2048",
        timeout=180,
    )
    assert f"{RECORDS} records sent" in completed.stdout, completed.stdout
    return completed.stdout


def _check_read_back(bootstrap: str, topic: str) -> None:
    values = _read_committed(bootstrap, topic, 1, RECORDS)
    assert len(values) == RECORDS
    assert all(len(value) == 100 for value in values)


@pytest.mark.parametrize("run", range(2))
def test_java_producer_transactions_at_version_2(server, kafka_jvm: KafkaJvm, run: int) -> None:
    topic = unique_topic(f"java-tv2-{run}")
    with Connection(server.host, server.port, timeout=20) as connection:
        create_topics(connection, {topic: 1})
    _perf_test_in_transactions(kafka_jvm, server.bootstrap_servers, topic)
    _check_read_back(server.bootstrap_servers, topic)


def test_java_producer_transactions_at_version_1(
    start_server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED],
        format_arguments=["--feature", "transaction.version=1"],
    )
    bootstrap = cluster.nodes[1].bootstrap
    topic = unique_topic("java-tv1")
    host, port = bootstrap.split(":")
    with Connection(host, int(port), timeout=20) as connection:
        create_topics(connection, {topic: 1})
    _perf_test_in_transactions(kafka_jvm, bootstrap, topic)
    _check_read_back(bootstrap, topic)
