"""Client quotas enforced on a real `moldau server` with confluent-kafka: a producer and a
consumer held to a byte rate by client id are throttled to about that rate, and librdkafka
reports the throttle times the broker answered with (KIP-219).

The server measures rates over 3 windows of 1 s (`quota.window.num`, Kafka's default is 11):
a fresh sensor lets 2 s of its quota through at once, so a few megabytes are enough to see
the rate held for several seconds.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from . import rdkafka
from .conftest import MoldauServer, ServerFactory
from .support import DEADLINE_S, unique_topic
from .wire import Connection

QUOTA = 500_000  # bytes/s
WINDOWS = 3
BURST = QUOTA * (WINDOWS - 1)  # what a fresh sensor lets through at once
TOTAL = 4_000_000
VALUE = b"q" * 10_000


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> MoldauServer:
    return module_server_factory(
        **{"quota.window.num": str(WINDOWS), "quota.window.size.seconds": "1"}
    )


def set_quota(server: MoldauServer, client_id: str, key: str, value: float | None) -> None:
    """AlterClientQuotas for one client id (None removes the quota)."""
    entry = {
        "entity": [{"entity_type": "client-id", "entity_name": client_id}],
        "ops": [{"key": key, "value": value or 0.0, "remove": value is None}],
    }
    with Connection(server.host, server.port) as wire:
        response = wire.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [entry]})
    assert [e.error_code for e in response.entries] == [ErrorCode.none]


class Throttles:
    """librdkafka's throttle events (`throttle_cb`): the broker's throttle times, in seconds."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def __call__(self, event: Any) -> None:
        self.seen.append(float(event.throttle_time))

    @property
    def positive(self) -> list[float]:
        return [t for t in self.seen if t > 0]


def test_a_producer_over_its_byte_rate_is_throttled_to_about_its_quota(
    server: MoldauServer,
) -> None:
    topic = unique_topic("quota-produce")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    client_id = unique_topic("throttled-producer")
    set_quota(server, client_id, "producer_byte_rate", QUOTA)
    throttles = Throttles()
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap_servers,
            "client.id": client_id,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 200_000,  # requests of ~200 KB: a smooth rate
            "queue.buffering.max.kbytes": 16 * 1024,
            "throttle_cb": throttles,
        }
    )
    delivered: list[float] = []

    def report(error: KafkaError | None, _message: Any) -> None:
        assert error is None, error
        delivered.append(time.monotonic())

    started = time.monotonic()
    for _ in range(TOTAL // len(VALUE)):
        producer.produce(topic, VALUE, on_delivery=report)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    elapsed = delivered[-1] - started
    producer.poll(0)  # the last throttle events

    # A free burst, then the quota: what remains at QUOTA takes (TOTAL - BURST) / QUOTA = 6 s.
    assert elapsed >= 4.0, f"{TOTAL} bytes in {elapsed:.2f} s: not held back"
    assert TOTAL / elapsed < 2 * QUOTA, f"{TOTAL / elapsed:.0f} bytes/s over {elapsed:.2f} s"
    assert throttles.positive, f"no throttle time reported: {throttles.seen}"
    # The broker answered at once with the throttle time and muted the connection meanwhile.
    assert max(throttles.positive) <= WINDOWS * 1.0 + 1.0


def test_a_consumer_over_its_byte_rate_is_throttled_to_about_its_quota(
    server: MoldauServer,
) -> None:
    topic = unique_topic("quota-consume")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    # Batches of ~100 KB: a fetch answers at least one batch (KIP-74), and one as large as
    # the burst a sensor allows would wait for the windows to empty before each answer.
    producer = Producer(
        {"bootstrap.servers": server.bootstrap_servers, "linger.ms": 5, "batch.size": 100_000}
    )
    count = TOTAL // len(VALUE)
    for _ in range(count):
        producer.produce(topic, VALUE)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0

    client_id = unique_topic("throttled-consumer")
    set_quota(server, client_id, "consumer_byte_rate", QUOTA)
    throttles = Throttles()
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap_servers,
            "client.id": client_id,
            "group.id": client_id,
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 200_000,
            "throttle_cb": throttles,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    received = 0
    first = last = 0.0  # when the first and the last record arrived
    deadline = time.monotonic() + DEADLINE_S
    try:
        while received < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            last = time.monotonic()
            first = first or last
            received += 1
        consumer.poll(0)
    finally:
        consumer.close()
    elapsed = last - first

    assert received == count
    size = count * len(VALUE)
    assert elapsed >= 4.0, f"{size} bytes in {elapsed:.2f} s: not held back"
    assert size / elapsed < 2 * QUOTA, f"{size / elapsed:.0f} bytes/s over {elapsed:.2f} s"
    assert throttles.positive, f"no throttle time reported: {throttles.seen}"


def test_removing_the_quota_lets_the_client_go_at_full_speed(server: MoldauServer) -> None:
    topic = unique_topic("quota-removed")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    client_id = unique_topic("freed-producer")
    set_quota(server, client_id, "producer_byte_rate", 1_000.0)
    set_quota(server, client_id, "producer_byte_rate", None)  # applies without a restart
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "client.id": client_id})
    started = time.monotonic()
    for _ in range(TOTAL // len(VALUE)):
        producer.produce(topic, VALUE)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert time.monotonic() - started < 4.0
