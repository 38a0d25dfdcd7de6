"""Dynamic broker configs (AlterConfigs on a broker resource) reach the logs that exist already,
as Kafka applies a changed broker default to every log that does not override it."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from . import rdkafka
from .support import DEADLINE_S, now_ms, unique_topic
from .wire import Connection


def _earliest_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE_S)
    finally:
        consumer.close()
    return int(low)


def _set_cluster_default(server, name: str, value: str) -> None:
    """IncrementalAlterConfigs on the broker resource "" (kafka-configs --entity-default); the
    Python clients refuse an empty resource name, so the request goes on the wire as it is."""
    with Connection(server.host, server.port) as connection:
        response = connection.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configs": [{"name": name, "config_operation": 0, "value": value}],
                    }
                ],
                "validate_only": False,
            },
        )
    [result] = response.responses
    assert result.error_code == 0, result


def test_a_cluster_wide_retention_default_applies_to_existing_logs(start_server) -> None:
    server = start_server(log_retention_check_interval_ms="200", log_segment_bytes="2048")
    topic = unique_topic("dynamic-retention")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "linger.ms": 0})
    hour_ago = now_ms() - 3_600_000
    for index in range(60):
        producer.produce(topic, value=b"v" * 200, partition=0, timestamp=hour_ago + index)
        producer.flush(DEADLINE_S)  # one small batch each: many closed segments
    assert producer.flush(DEADLINE_S) == 0
    assert _earliest_offset(server.bootstrap_servers, topic) == 0

    _set_cluster_default(server, "log.retention.ms", "60000")

    deadline = time.monotonic() + DEADLINE_S
    while _earliest_offset(server.bootstrap_servers, topic) == 0:
        assert time.monotonic() < deadline, "the new default never reached the existing log"
        time.sleep(0.2)
